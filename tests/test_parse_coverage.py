"""Coverage of NCCL lines over the shared corpus: lines with an NCCL INFO/WARN prefix that
end up as 'text' or as 'nccl_other' without a catalog id must stay at or below 1 %."""
from __future__ import annotations

from ncclsleuth.ingest.decode import LineReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse.envelope import peel
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser


def test_nccl_line_coverage(corpus):
    total = unknown = 0
    misses: list[str] = []
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".md", ".py")):
        fp = FileParser(str(path), ShapeCache())
        for lineno, text in LineReader(InputFile(str(path))):
            recs = peel(text)
            evs = fp.parse_line(lineno, text)
            # one event per record, except that a traceback may swallow an exception record
            nccl = [r for r in recs if r.family == "nccl"]
            if not nccl:
                continue
            total += len(nccl)
            for ev in evs:
                if ev.level not in ("INFO", "WARN", "TRACE", "CALL", "ABORT"):
                    continue
                if ev.kind == "text" or (ev.kind == "nccl_other" and not ev.catalog_id):
                    unknown += 1
                    misses.append(f"{path.parent.name}:{lineno}: {ev.to_dict().get('message', text)[:120]}")
    share = 100.0 * unknown / max(total, 1)
    figure = f"NCCL-prefixed lines: {total}, unknown: {unknown} ({share:.2f} %)"
    print("\n" + figure)
    for m in misses:
        print("  unknown:", m)
    assert total > 0
    assert share <= 1.0, figure + "\n" + "\n".join(misses)
