"""ncclsleuth against torchfrtrace on every Flight Recorder dump fixture, side by side.

    python tools/fr_peer_check.py                 # torchfrtrace's outputs as committed with the fixtures
    python tools/fr_peer_check.py --live          # run torchfrtrace now (TORCH_VENV, default /work/torchenv)
    python tools/fr_peer_check.py --markdown      # the table for the README

For each case it reads what torchfrtrace said (as written, after the one-key pg_config
repair of fixtures/real/_make/fr_repair.py, and with --allow-incomplete-ranks where it
refused an incomplete set) and what ncclsleuth says on the same pickles, and checks:
wherever torchfrtrace names culprit ranks and a sequence number, ncclsleuth names the
same; where it gives up, ncclsleuth must name something (a rank, or why the dumps hold
nothing). Exit status 1 when a case breaks that.  tests/test_fr_peer_check.py runs the
committed mode in CI (no torch there).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
MADE = ROOT / "fixtures" / "fr-constructed"
#: constructed cases: their committed torchfrtrace outputs live beside them, not in them
MADE_OUT = MADE / "torchfrtrace"
#: the layout repair of the subgroup case (as fixtures/real/_make/make.sh gives it)
LAYOUTS = {"fr-subgroup-skip": "0=default_pg:0,1,2,3;1=dp_pair0:0,1;2=dp_pair1:2,3"}


@dataclass
class Said:
    """What one tool said about one case."""

    culprits: set[int] = field(default_factory=set)  # ranks it blames (culprit / missing / no dump)
    seqs: set[int] = field(default_factory=set)  # the sequence numbers of the collectives it names
    summary: str = ""  # in a few words
    gave_up: bool = False


_CULPRIT = re.compile(r"Culprit rank (\d+); Error type: (\w+)")
_SEQ_ERR = re.compile(r"Collective sequence number: (\d+) has errors")
_NOT_ALL = re.compile(r"Not all ranks joining collective, sequence number: (\d+)")
_MISSING = re.compile(r"missing ranks: \{([\d, ]+)\}")
_NO_DUMP = re.compile(r"missed FR dumps from ranks \(\{([\d, ]+)\}\)")
_GROUP = re.compile(r"group info: (\S*)")


def read_torchfrtrace(text: str) -> Said:
    """torchfrtrace's verdict from its stdout/stderr: the first error block per group."""
    s = Said()
    lines = text.splitlines()
    blocks: list[str] = []
    for i, ln in enumerate(lines):
        m = _SEQ_ERR.search(ln) or _NOT_ALL.search(ln)
        if not m:
            continue
        block = "\n".join(lines[i:i + 12])
        g = _GROUP.search(block)
        group = g.group(1) if g else "?"
        c = _CULPRIT.findall(block)
        miss = _MISSING.search(block)
        if c:
            ranks = sorted({int(r) for r, _ in c})
            s.culprits.update(ranks)
            who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ",".join(map(str, ranks))
            blocks.append(f"culprit {who} at #{m.group(1)} ({group}, {c[0][1]})")
        elif miss and group and group != ":":
            ranks = [int(x) for x in miss.group(1).split(",")]
            s.culprits.update(ranks)
            blocks.append(f"missing ranks {{{miss.group(1)}}} at #{m.group(1)} ({group})")
        else:
            continue
        s.seqs.add(int(m.group(1)))
    nodump = _NO_DUMP.search(text)
    if blocks:
        s.summary = "; ".join(dict.fromkeys(blocks))
    elif "KeyError" in text:
        s.gave_up, s.summary = True, "stops: " + next(ln for ln in lines if ln.startswith("KeyError")).strip()
    elif "Missing dump files" in text:
        s.gave_up, s.summary = True, "stops: " + next(ln.strip() for ln in lines
                                                      if ln.startswith("AssertionError: Missing dump files"))
    elif nodump:
        s.gave_up = True
        s.summary = f"cannot decide: missed FR dumps from ranks {{{nodump.group(1)}}} (x{text.count('We cannot decide')})"
    elif "Not all ranks joining" in text:
        s.gave_up, s.summary = True, "no culprit: blocks with 'group info: :', 'expected ranks: set()'"
    else:
        tail = [ln.strip() for ln in lines if ln.strip()]
        s.gave_up, s.summary = True, "stops: " + (tail[-1] if tail else "no output")
    return s


def ncclsleuth_said(paths: list[Path]) -> tuple[Said, str]:
    """ncclsleuth's verdict on the given inputs: (what it blames, the verdict's title)."""
    sys.path.insert(0, str(ROOT))
    from ncclsleuth import api

    report = api.analyze([str(p) for p in paths])
    s = Said()
    fr = [f for f in report.findings if f.rule_id.startswith("FR") and f.severity != "info"]
    for f in fr[:1]:
        s.culprits.update(f.ranks)
        s.seqs.update(int(x) for x in re.findall(r"#(\d+) of ", f.title))
    if not fr:
        info = sorted((f for f in report.findings if f.rule_id.startswith("FR")), key=lambda f: f.rule_id != "FR006")
        s.gave_up = True
        s.summary = info[0].rule_id + ": " + info[0].title if info else "nothing"
    else:
        s.summary = f"{fr[0].rule_id}: {fr[0].title.removeprefix('Flight Recorder: ')}"
    top = report.verdict
    return s, (f"{top.rule_id}: {top.title}" if top else "no problem found")


@dataclass
class Case:
    name: str
    culprit: str
    dumps: Path  # the pickles torchfrtrace reads
    logs: list[Path]
    outputs: dict[str, str]  # label -> torchfrtrace text


def cases(live: bool) -> list[Case]:
    import yaml

    out = []
    for d in sorted(REAL.glob("fr-*")):
        y = yaml.safe_load((d / "case.yaml").read_text())
        outputs = {}
        if live:
            outputs = run_live(d.name, d / "dumps" / "pickle")
        else:
            for label, fname in (("as written", "torchfrtrace.txt"), ("repaired", "torchfrtrace-repaired.txt"),
                                 ("repaired, --allow-incomplete-ranks", "torchfrtrace-repaired-incomplete.txt")):
                if (d / fname).exists():
                    outputs[label] = (d / fname).read_text(errors="replace")
        out.append(Case(d.name, f"rank {y['culprit']['rank']}", d / "dumps" / "pickle", [d / "console.log"], outputs))
    for d in sorted(p for p in MADE.iterdir() if p.is_dir() and p != MADE_OUT):
        if not any(not f.name.endswith(".json") for f in d.iterdir()):
            continue  # JSON dumps: torchfrtrace reads pickles only
        outputs = run_live(d.name, d) if live else {
            "as written": (MADE_OUT / f"{d.name}.txt").read_text(errors="replace")} if (
            MADE_OUT / f"{d.name}.txt").exists() else {}
        out.append(Case(d.name + " (constructed)", _made_culprit(d.name), d, [], outputs))
    return out


def _made_culprit(name: str) -> str:
    return {"v1.4-missing-rank": "rank 1", "v2.1-size-mismatch": "rank 3", "v2.9-desync": "rank 5"}.get(name, "?")


def run_live(name: str, dumps: Path) -> dict[str, str]:
    """torchfrtrace now, as written, repaired, and with --allow-incomplete-ranks if it refused."""
    venv = os.environ.get("TORCH_VENV", "/work/torchenv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        raise SystemExit(f"--live needs torch in {venv} (set TORCH_VENV)")
    run = lambda *args: subprocess.run([py, "-m", "torch.distributed.flight_recorder.fr_trace", *args],  # noqa: E731
                                       capture_output=True, text=True, timeout=300)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "as-written"
        shutil.copytree(dumps, src)
        r = run(str(src))
        out["as written"] = r.stdout + r.stderr
        rep = Path(tmp) / "repaired"
        layout = LAYOUTS.get(name)
        fix = subprocess.run([py, str(REAL / "_make" / "fr_repair.py"), str(src), str(rep),
                              *(["--layout", layout] if layout else [])], capture_output=True, text=True)
        if fix.returncode == 0:
            r = run(str(rep))
            out["repaired"] = r.stdout + r.stderr
            if "Missing dump files" in out["repaired"]:
                r = run("--allow-incomplete-ranks", str(rep))
                out["repaired, --allow-incomplete-ranks"] = r.stdout + r.stderr
    return out


def compare(case: Case) -> tuple[Said, Said, Said, str, str, list[str]]:
    """(torchfrtrace's best verdict, ncclsleuth on the dumps, on dumps + logs, the verdict,
    how the two compare, problems).

    The culprit is known (case.yaml, or the constructed case's own description): where
    torchfrtrace names it, ncclsleuth must name it too, at the same sequence number; where
    torchfrtrace names other ranks (its reference rank was the culprit) or gives up,
    ncclsleuth must still name it, or say why the dumps hold nothing (FR006)."""
    best = Said(gave_up=True, summary="(no output)")
    for label in ("repaired, --allow-incomplete-ranks", "repaired", "as written"):
        if label in case.outputs:
            best = read_torchfrtrace(case.outputs[label])
            break
    dumps_only, _ = ncclsleuth_said([case.dumps])
    with_logs, verdict = ncclsleuth_said([case.dumps, *case.logs]) if case.logs else (dumps_only, "")
    truth = {int(case.culprit.split()[-1])} if case.culprit.split()[-1].isdigit() else set()
    problems: list[str] = []
    names_truth = dumps_only.culprits == truth
    if best.gave_up:
        how = "torchfrtrace gives up"
        if not names_truth and not dumps_only.summary.startswith("FR006"):
            problems.append("torchfrtrace gives up and ncclsleuth names no culprit and says nothing useful")
    elif best.culprits == truth:
        how = "same culprit" + (" and collective" if best.seqs & dumps_only.seqs else "")
        if not names_truth:
            problems.append(f"torchfrtrace blames {sorted(best.culprits)}, ncclsleuth {sorted(dumps_only.culprits)}")
        elif best.seqs and not best.seqs & dumps_only.seqs:
            problems.append(f"torchfrtrace names #{sorted(best.seqs)}, ncclsleuth #{sorted(dumps_only.seqs)}")
    elif truth <= best.culprits:
        others = best.culprits - truth
        how = f"torchfrtrace also names rank(s) {sorted(others)}; ncclsleuth follows them to the culprit"
        if not names_truth or others - _mentioned(case.dumps, others):
            problems.append(f"ncclsleuth blames {sorted(dumps_only.culprits)} and does not account for "
                            f"{sorted(others)}")
    else:
        how = f"torchfrtrace blames {sorted(best.culprits)}: its reference rank was the culprit"
        if not names_truth:
            problems.append(f"ncclsleuth blames {sorted(dumps_only.culprits)}, not the culprit {sorted(truth)}")
    return best, dumps_only, with_logs, verdict, how, problems


def _mentioned(dumps: Path, ranks: set[int]) -> set[int]:
    """Ranks ncclsleuth's top finding names in its text (a messenger it followed)."""
    sys.path.insert(0, str(ROOT))
    from ncclsleuth import api

    report = api.analyze([str(dumps)])
    fr = [f for f in report.findings if f.rule_id.startswith("FR") and f.severity != "info"]
    text = fr[0].message if fr else ""
    return {r for r in ranks if re.search(rf"\brank {r}\b", text)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--live", action="store_true", help="run torchfrtrace now instead of reading its saved outputs")
    ap.add_argument("--markdown", action="store_true", help="print the README table")
    ap.add_argument("--save", action="store_true", help="with --live: write the constructed cases' outputs to "
                                                        "fixtures/fr-constructed/torchfrtrace/")
    a = ap.parse_args(argv)
    bad = 0
    rows = []
    for c in cases(a.live):
        if a.live and a.save and c.name.endswith("(constructed)"):
            MADE_OUT.mkdir(exist_ok=True)
            (MADE_OUT / f"{c.name.split()[0]}.txt").write_text(c.outputs.get("as written", ""))
        best, dumps_only, with_logs, verdict, how, problems = compare(c)
        bad += bool(problems)
        rows.append((c, best, dumps_only, verdict, how, problems))
    if a.markdown:
        print("| case (culprit) | torchfrtrace | ncclsleuth on the same pickles | compared | "
              "ncclsleuth with console.log: verdict |")
        print("|---|---|---|---|---|")
        for c, best, dumps_only, verdict, how, problems in rows:
            raw = read_torchfrtrace(c.outputs["as written"]).summary if "as written" in c.outputs else "-"
            label = next((k for k in ("repaired, --allow-incomplete-ranks", "repaired") if k in c.outputs), "")
            tft = best.summary if raw == best.summary else f"as written: {raw}; {label}: {best.summary}"
            flag = " **PROBLEM: " + "; ".join(problems) + "**" if problems else ""
            print(f"| {c.name} ({c.culprit}) | {tft} | {dumps_only.summary} | {how}{flag} | "
                  f"{verdict or '(no logs)'} |")
    else:
        for c, best, dumps_only, verdict, how, problems in rows:
            print(f"{c.name} (culprit {c.culprit})")
            print(f"  torchfrtrace: {best.summary}")
            print(f"  ncclsleuth:   {dumps_only.summary}")
            if verdict:
                print(f"  with logs:    {verdict}")
            print(f"  compared:     {how}")
            for p in problems:
                print(f"  PROBLEM: {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
