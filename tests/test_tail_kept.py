"""The end blocks a file's parse keeps for where its output stops (``parse.tail.Kept``): by
byte offset where the file can be read again, else as text (UTF-8 where not ASCII)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from ncclsleuth import api
from ncclsleuth.ingest.blocks import BlockReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse.tail import TAIL_CHARS, TAIL_CHARS_MULTI, Kept


def _job(path: Path, lines: int = 6000) -> None:
    """An interleaved file: 8 ranks' progress lines (tqdm's block characters in some), NCCL lines
    with no prefix, a burst of failures at the end, and a last line without a line end."""
    out = []
    for i in range(lines):
        r = i % 8
        out.append(f"[rank{r}]: step {i} loss 1.0" if i % 3 else f"[rank{r}]:  47%|\u2588\u2588\u258c | {i}/9000 [00:10<00:11]")
        if i % 5 == 0:
            out.append(f"node1:11:11 [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {(r + 1) % 8}[{(r + 1) % 8}] via P2P/IPC")
    out += [f"[rank{r}]: RuntimeError: NCCL communicator was aborted on rank {r}." for r in range(8)]
    path.write_text("\n".join(out) + "\nstep 99 of the last", encoding="utf-8")


def _read(log: Path) -> tuple[Kept, list[tuple[int, str]]]:
    """The file's blocks kept as the parser keeps them (trimmed after each), and the blocks read."""
    reader = BlockReader(InputFile(str(log)), block=4096)
    kept, seen = Kept(source=reader), []
    for first, text in reader:
        kept.append(first, text)
        kept.trim(TAIL_CHARS_MULTI)  # as the parser does after each block
        seen.append((first, text))
    return kept, seen


def test_blocks_of_a_plain_file_are_kept_as_offsets_and_read_back_the_same(tmp_path):
    """The newest TAIL_CHARS as text, the older blocks as offsets: read back, the same blocks."""
    log = tmp_path / "job.log"
    _job(log, 40_000)
    kept, seen = _read(log)
    as_text = [i for i, (_, k, _, _) in enumerate(kept._items) if not isinstance(k, int)]
    assert len(seen) > 300 and as_text == list(range(as_text[0], len(seen)))
    assert TAIL_CHARS <= sum(len(seen[i][1]) for i in as_text) < TAIL_CHARS + 8192
    assert list(kept) == seen and list(reversed(kept)) == seen[::-1]
    assert kept.chars == sum(len(t) for _, t in seen)
    kept.trim(kept.chars // 2)
    assert list(kept) == seen[-len(kept):] and len(kept) < len(seen)
    kept.trim(1)  # down to the last block: still text
    assert list(kept) == seen[-1:] and isinstance(kept._items[0][1], (str, bytes))


def test_a_short_file_is_opened_once(tmp_path, monkeypatch):
    """Its tail is all text: the file is not read again for it."""
    from ncclsleuth.ingest import decode

    log = tmp_path / "job.log"
    _job(log, 2000)
    opened: list[str] = []
    real = decode.open_regular
    monkeypatch.setattr(decode, "open_regular", lambda path: (opened.append(path), real(path))[1])
    api.build([str(log)], api.Options(jobs=1))
    assert opened == [str(log)]


def test_blocks_of_an_archive_are_kept_as_text_utf8_where_not_ascii(tmp_path):
    log = tmp_path / "job.log.gz"
    _job(tmp_path / "plain.log", 40_000)
    log.write_bytes(gzip.compress((tmp_path / "plain.log").read_bytes()))
    kept, seen = _read(log)
    kinds = [type(k) for _, k, _, _ in kept._items]
    old = kinds[:kinds.index(str)]  # older than the newest TAIL_CHARS: UTF-8 (progress bars in each)
    assert len(old) > 100 and set(old) == {bytes} and set(kinds[len(old):]) == {str}
    assert list(kept) == seen


def test_where_the_output_stops_is_the_same_read_by_offset_or_as_text(tmp_path):
    """The report of the plain file (tail by offset) and of the same file gzipped (tail as text)."""
    plain = tmp_path / "a" / "job.log"
    plain.parent.mkdir()
    _job(plain, 40_000)
    packed = tmp_path / "b" / "job.log"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    models = [api.build([str(p)], api.Options(jobs=1)).model for p in (plain, packed)]
    tails = [sorted(((-1 if r is None else r), last.line, last.text, p.line if (p := t.progress_line()) else None)
                    for (r, _), t in m.tracks.items() if (last := t.last_line()) is not None) for m in models]
    assert tails[0] == tails[1]
    assert [(r, text) for r, _, text, _ in tails[0] if r >= 0] == [
        (r, f"[rank{r}]: RuntimeError: NCCL communicator was aborted on rank {r}.") for r in range(8)]
    assert all(p is not None for _, _, _, p in tails[0])
    one, two = (api.analyze([str(p)], api.Options(jobs=1)).to_dict() for p in (plain, packed))
    assert json.dumps(one, sort_keys=True).replace(str(plain.parent), "") \
        == json.dumps(two, sort_keys=True).replace(str(packed.parent), "")


def test_a_kept_line_is_placed_at_its_bytes_in_the_file_after_blocks_were_dropped(tmp_path):
    """``Kept.place``: a line of the newest blocks (tqdm's block characters before it: bytes, not
    characters) is found at its byte offset, also after older blocks were trimmed away (their
    indexes move); a line of another text, or of a block no longer kept, is not placed, nor
    one of blocks kept with no source (not known to be the file's bytes)."""
    log = tmp_path / "job.log"
    _job(log, 40_000)
    kept, seen = _read(log)
    data = log.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
    assert not data.isascii()
    placed = 0
    for first, text in seen[-3:]:  # the last one: the line with no line end
        lines = text.split("\n")
        for i in sorted({0, 1, len(lines) - 2, len(lines) - 1} & set(range(len(lines)))):
            n = first + i
            where = kept.place(n, lines[i])
            assert where is not None and where[0] == starts[n - 1], (n, lines[i])
            assert data[where[0]:where[0] + where[1]].decode("utf-8") == lines[i]
            placed += 1
            assert kept.place(n, lines[i] + "x") is None
    assert placed >= 9
    from ncclsleuth.parse.tail import last_number

    end = last_number(kept)  # counted by the caller: the same places
    newest = seen[-1][1].split("\n")
    assert kept.place(end, newest[-1], end) == kept.place(end, newest[-1])
    prev = seen[-2][1].split("\n")
    assert kept.place(seen[-2][0] + len(prev) - 1, prev[-1], end) == (starts[seen[-2][0] + len(prev) - 2],
                                                                     len(prev[-1].encode()))
    first, text = seen[-2]
    assert kept.place(first, text.split("\n")[0]) is not None
    kept.trim(1)  # only the newest block left: the one before is gone, the last one's index moved
    assert len(kept) == 1 and kept.place(first, text.split("\n")[0]) is None
    assert kept.place(seen[-1][0], seen[-1][1]) == (starts[seen[-1][0] - 1], len(seen[-1][1].encode()))
    assert Kept(seen).place(seen[-1][0], seen[-1][1]) is None


def test_the_last_line_number_is_the_readers_count_or_counted(tmp_path):
    """``last_number``: where each block came with the reader's count of its lines (as
    ``FileParser.parse_block`` hands them over), the number it remembers is the one counting the
    newest block gives; without a count it counts (a block kept from another source); a block
    with no line end after its last line, and a file that does not end with one, alike."""
    from ncclsleuth.parse.tail import last_number

    for tail in ("", "\nstep 7 of the last"):
        log = tmp_path / f"job{len(tail)}.log"
        _job(log, 3000)
        log.write_text(log.read_text(encoding="utf-8") + tail + "\n", encoding="utf-8")
        reader = BlockReader(InputFile(str(log)), block=4096)
        counted, remembered = Kept(), Kept(source=reader)
        for first, text in reader:
            counted.append(first, text)
            remembered.append(first, text, reader.block_lines)
            assert remembered._end == first + text.count("\n") == last_number(counted)
            assert last_number(remembered) == remembered._end
        assert last_number(remembered) == reader.lines == len(log.read_text(encoding="utf-8").split("\n")) - 1
        assert Kept(list(counted))._end == -1 and last_number(Kept(list(counted))) == reader.lines


def test_the_rank_prefixes_after_a_line_end_are_those_of_the_pattern_without_its_lookahead():
    """``_NL_RANK`` refuses a line at its first character unless it is ``[`` or a digit: what it
    finds is what ``\\n`` + ``_RANK`` finds, on lines of every prefix form, their near misses and
    Unicode digits."""
    import itertools
    import re

    from ncclsleuth.parse import tail as T

    plain = re.compile("\n(?:" + T._RANK.pattern + ")")
    heads = ["[rank3]:", "[rank 12]:", "[default5]:", "[trainer1]:", "[worker7]:", "[RANK 2]:", "[Rank 4]:",
             "[rank3|1]:", "3: ", "123456: x", "1234567: ", "12: ", "12:x", "[1,7]<stdout>:", "[1,7]<err",
             "2025-11-29T11:31:50.123456789Z [default3]:", "2025-11-29 11:31:50,627 - INFO - step 3",
             "2025-11-29T11:31:50Z 5: go", "[pod/trainer-0/main] [rank9]:", "[pod/x/y] 2025-11-29T11:31:50Z [rank1]:",
             "\u0663: arabic digit", "[rank\u0661]:", "iter 5: loss", "node1:11:11 [0] NCCL INFO", "  [rank1]:", ""]
    for a, b in itertools.product(heads, repeat=2):
        text = f"{a} one\n{b} two\n{a}\n{b}"
        assert T._NL_RANK.findall(text) == plain.findall(text), (a, b)
        assert T.ranks_in(text, 0, len(text)) == {int(x or y or z) for x, y, z in plain.findall(text)} | (
            {int(next(g for g in m.groups() if g is not None))} if (m := T._RANK.match(text)) else set())


def test_a_pre_2_4_nccl_record_is_looked_for_only_where_its_literals_are():
    """``_plain_record`` searches ``_OLD_NCCL`` only in a line holding ``] INFO `` or ``WARN ``:
    every match holds one (a Python logging line's ``- INFO -`` then costs no search); lines
    built of the pattern's pieces and near misses, matched or not, say so."""
    import itertools

    from ncclsleuth.parse import envelope as EN

    pieces = ["[3] INFO ", "[3] WARN ", "init.cc:12 WARN ", "WARN x", " INFO ", "- INFO - ", "[3]INFO ",
              "a.h:1 WARN ", "x.py:3 WARN ", "WARN", "]", " ", "INFO", "\t[12] INFO x", "node1: "]
    for a, b, c in itertools.product(pieces, repeat=3):
        line = a + b + c
        if EN._OLD_NCCL.search(line) is not None:
            assert "] INFO " in line or "WARN " in line, line
