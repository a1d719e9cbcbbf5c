"""Anchors and prefilter keywords are declared in the grammar, next to the rule of each
message kind (``//@`` comments in messages.lark), and checked against it here: a new
kind is its grammar rule (with its declarations), its event and its model handler."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ncclsleuth.ingest.blocks import BlockReader
from ncclsleuth.ingest.memory import MemoryInput
from ncclsleuth.parse import anchors as A
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = Path(A.GRAMMAR).read_text(encoding="utf-8")
DECLS = A.declarations()
#: messages outside NCCL lines that need no anchor: found by the parser's own patterns
FOUND_OTHERWISE = {
    "exception": "an exception line (lines._EXC)",
    "tests_row": "an nccl-tests result row (lines._ROW)",
}


def _alternatives(rule: str) -> list[str]:
    m = re.search(rf"^\?{rule}:([^\n]*(?:\n\s+\|[^\n]*)*)", GRAMMAR, re.M)
    assert m, rule
    return re.findall(r"[a-z_]+", m.group(1))


def test_every_declaration_is_written_above_a_rule_of_the_grammar():
    rules = set(re.findall(r"^\??([a-z_]\w*)\s*:", GRAMMAR, re.M))
    assert DECLS and all(d.rule in rules for d in DECLS), [d for d in DECLS if d.rule not in rules]


def test_every_message_outside_nccl_lines_has_an_anchor():
    """A PyTorch or nccl-tests message is found in a line only by an anchor: one forgotten
    next to a new rule would make its lines unparsed (and dropped by the fast path)."""
    anchored = {d.rule for d in DECLS if d.what in ("anchor", "step")}
    for top in ("torch_msg", "tests_msg"):
        missing = [r for r in _alternatives(top) if r not in anchored and r not in FOUND_OTHERWISE]
        assert not missing, f"{top}: no //@ anchor above {missing}"


@pytest.mark.parametrize("d", [d for d in DECLS if d.what != "keywords"], ids=lambda d: f"{d.rule}:{d.line}")
def test_anchors_compile_and_start_with_a_literal_character(d):
    re.compile(d.value)
    if d.guard is None:  # the first-character grouping needs a literal (or an escaped one) first
        assert re.match(r"[\w#/ .:'●×○-]|\\[\[\].()]", d.value) and not re.match(r"\\[wdsSWD]", d.value), d.value
    else:
        assert d.guard  # searched only where the line holds its literal


#: anchors whose lines hold no keyword of their own but always one of the envelope's
#: (a level, an exception name, another message): no lowercase keyword (each one would cost
#: the prefilter a branch at every such letter of training output)
IN_ENVELOPED_LINES = {
    "connecting to address with family": "an NCCL WARN line (... neither AF_INET nor AF_INET6)",
    "caught collective operation timeout": "PyTorch's [E...] line ([Rank N] Watchdog caught ...)",
    "failure detected by watchdog": "a ProcessGroupNCCL [E...] line",
    "To avoid data inconsistency": "a ProcessGroupNCCL [E...] line",
    "Terminating the process after attempting": "a ProcessGroupNCCL [E...] / FATAL line",
    "Observed flight recorder dump signal": "a ProcessGroupNCCL [E...] line",
    "Process group watchdog thread terminated": "a ProcessGroupNCCL [E...] line",
    "nccl(?:SystemError|RemoteError|InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError):":
        "a Python exception line (DistBackendError: ... ncclInvalidUsage: ...)",
    "wait timeout after": "a Python exception line (DistStoreError: wait timeout after ...)",
    r"failed \(exitcode": "torchrun's error-level line (E1129 ... / ERROR)",
    "could not insert '": "modprobe's ERROR: line (could not insert 'nvidia_peermem': ...)",
    r"Module \S+ not found": "modprobe's FATAL: line (Module nvidia_peermem not found in directory ...)",
}


def examples(pattern: str) -> list[str]:
    """Shortest strings the regex matches, one per alternative (lookarounds skipped)."""
    import re._parser as sp  # type: ignore[import-not-found]

    cat = {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "x"}

    def char(items) -> str:  # type: ignore[no-untyped-def]
        op, av = items[0]
        return chr(av) if str(op) == "LITERAL" else chr(av[0]) if str(op) == "RANGE" else cat.get(str(av), "x")

    def walk(items) -> list[str]:  # type: ignore[no-untyped-def]
        outs = [""]
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                add = [chr(av)]
            elif name in ("NOT_LITERAL", "ANY"):
                add = ["y" if av == ord("x") else "x"]
            elif name == "IN":
                add = [char(av)]
            elif name == "CATEGORY":
                add = [cat.get(str(av), "x")]
            elif name in ("MAX_REPEAT", "MIN_REPEAT"):
                add = [s * av[0] for s in walk(av[2])[:1]]
            elif name == "SUBPATTERN":
                add = walk(av[-1])
            elif name == "BRANCH":
                add = [s for b in av[1] for s in walk(b)]
            elif name in ("AT", "ASSERT", "ASSERT_NOT"):
                continue
            else:
                raise ValueError(f"{pattern}: {name}")
            outs = [o + a for o in outs for a in add]
        return outs

    return walk(sp.parse(pattern))


@pytest.mark.parametrize("d", [d for d in DECLS if d.what == "anchor"], ids=lambda d: f"{d.rule}:{d.line}")
def test_every_anchor_holds_a_prefilter_keyword(d):
    """The fast path parses only lines with a keyword: a message its anchor finds must have
    one (declare it with //@ keywords next to the rule), unless its lines always carry one
    of the envelope's (IN_ENVELOPED_LINES)."""
    cases = examples(d.value)
    assert cases and all(re.search(d.value, c) for c in cases), cases
    bare = [c for c in cases if A.PREFILTER.search(c) is None]
    assert not bare or d.value in IN_ENVELOPED_LINES, f"{d.rule}: no keyword in {bare}"


def _line_cases() -> list[str]:
    out = []
    for p in sorted((ROOT / "fixtures" / "parse").glob("*.yaml")):
        out += [c["line"] for c in yaml.safe_load(p.read_text(encoding="utf-8")) if "line" in c]
    return out


def _kinds(fp: FileParser, events) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return [(e.kind, e.line) for e in [*events, *fp.finish()] if e.kind not in ("text", "step_time")]


def test_the_fast_path_reaches_every_message_of_the_line_cases():
    """Each line case parses to the same events through the prefilter (keywords) and the
    block reader as line by line: the keywords cover every anchor of the grammar."""
    lost = []
    for line in _line_cases():
        slow = FileParser("t", ShapeCache())
        want = _kinds(slow, slow.parse_line(1, line))
        fast = FileParser("t", ShapeCache(), keep_text=False, use_catalog=False)
        got: list = []
        for first, block in BlockReader(MemoryInput("t", data=line.encode())):
            got += fast.parse_block(first, block)
        if _kinds(fast, got) != want:
            lost.append(line)
    assert not lost, lost[:5]


def test_declarations_are_read_from_the_comments_above_a_rule():
    text = ('//@ anchor: Foo bar \\d\n//@ anchor when "oo ba": (?<!\\w)\\w+ oo ba\n'
            '//@ keywords: "Foo", "The "\n// any comment\nfoo_msg: "Foo" "bar" f_x\n')
    got = A.declarations(text)
    assert [(d.what, d.value, d.rule, d.guard) for d in got] == [
        ("anchor", "Foo bar \\d", "foo_msg", None), ("anchor", "(?<!\\w)\\w+ oo ba", "foo_msg", "oo ba"),
        ("keywords", '"Foo", "The "', "foo_msg", None)]


def test_the_parser_uses_the_grammar_declarations():
    assert "Watchdog caught" in A.ANCHOR_PATTERNS and "Watchdog" in A.KEYWORDS
    assert set(A.ENVELOPE_KEYWORDS) <= set(A.KEYWORDS) and len(A.KEYWORDS) == len(set(A.KEYWORDS))
    assert A.anchor_starts("x [rank1]: Watchdog caught collective operation timeout") == [11]
    assert A.anchor_starts("foo: Connect to 10.0.0.1<1234> failed : Connection refused") == [0, 5]


@pytest.mark.parametrize("text", [
    "step 10 | loss 1.2 | time: 40ms\nnode1:1:1 [0] NCCL INFO Bootstrap : Using eth0\nterminated normally\n",
    "iter 5\nterminate called after throwing an instance of 'c10::DistBackendError'\n  what():  x\n",
    "srun: error: node07: task 3: Exited with exit code 1\nepoch 2 done\n",
    "[enforce fail at gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 4 vs 2\n",
])
def test_the_block_prefilter_finds_what_the_full_one_finds(text: str) -> None:
    """parse_block scans a block with the prefilter without the frequent-first-character
    keywords and finds those with str.find (or with PREFILTER itself on short ranges): from
    every position, to every end, the first keyword must start where the full prefilter's first
    match starts, with either of the two functions."""
    found = 0
    for search in A.block_search(text):
        for pos in range(len(text) + 1):
            for end in (len(text), pos + 9, pos + 17, pos + 40):  # ends that cut ": error: " and "terminate called"
                full = A.PREFILTER.search(text, pos, end)
                block = search(text, pos, end)
                assert (None if block is None else block.start()) == (None if full is None else full.start()), (pos, end)
                found += full is not None
        # and from positions that move back, as a caller may
        for pos in reversed(range(0, len(text) + 1, 7)):
            full, block = A.PREFILTER.search(text, pos), search(text, pos)
            assert (None if block is None else block.start()) == (None if full is None else full.start()), pos
    assert found  # each text holds a keyword


def test_a_block_without_the_frequent_first_keywords_is_scanned_by_the_rare_first_prefilter() -> None:
    """Most blocks: the C method itself for both ranges, no Python call per line."""
    text = "iter 5: loss 2.0\n[rank3]: Watchdog caught collective operation timeout\n"
    assert A.block_search(text) == (A.PREFILTER_RARE.search, A.PREFILTER_RARE.search)


def test_a_block_with_a_frequent_first_keyword_is_scanned_for_the_others_only() -> None:
    """A crash log's last block: "terminate called" found by str.find, the rare-first
    alternation for the rest (PREFILTER itself tries a branch at every letter t), a rare-first
    keyword before it still first."""
    text = "iter 5: loss 2.0\n" * 3 + "terminate called after throwing an instance of 'c10::Error'\n"
    search, short = A.block_search(text)
    assert search is not A.PREFILTER.search and short == A.PREFILTER.search
    m = search(text)
    assert m is not None and m.start() == text.index("terminate called")
    assert search(text, 0, text.index("terminate called") + 15) is None  # the literal cut by endpos
    later = "Watchdog caught collective operation timeout\n" + text
    m = A.block_search(later)[0](later, 1)
    assert m is not None and m.start() == later.index("terminate called")
    m = A.block_search(later)[0](later)
    assert m is not None and m.start() == 0


def test_frequent_first_character_keywords_are_few() -> None:
    """Each one costs a str.find per block of every log: a new one needs a reason."""
    assert set(A.COMMON_FIRST_KEYWORDS) == {"terminate called", ": error: "}


def test_an_nccl_info_line_is_a_prefilter_match_before_its_info_words():
    """``FileParser.parse_block`` scans a block for its first keyword before it looks for NCCL INFO
    lines, and skips the lines before that keyword's: every NCCL INFO line must hold a keyword
    that starts no later than its `` NCCL INFO `` (``NCCL`` is one), for both prefilters."""
    from ncclsleuth.parse.anchors import PREFILTER, PREFILTER_RARE

    line = "node7:4242:4242 [3] NCCL INFO Channel 00/24 : 0[3] -> 1[3] via P2P/IPC"
    for rx_ in (PREFILTER, PREFILTER_RARE):
        m = rx_.search(line)
        assert m is not None and m.start() <= line.index(" NCCL INFO ") + 1
