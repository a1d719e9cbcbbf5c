"""A rule's reading of an NCCL WARN agrees with the knowledge base's, line by line.

The knowledge base says, from the code around each of NCCL's WARN call sites, what the line
means and, for a cause, which category. A rule written for a message (NET006, OOM001, SHM001,
DESYNC004...) must not read the same line otherwise: every WARN format of the catalog
(parse/data/nccl_formats.tsv, 2.3-2.30) is printed with sample values behind a real prefix and
analysed alone; where the base calls it a cause, the first finding of a non-knowledge rule
must carry that category. Before this test 27 formats disagreed: every proxy thread WARN was a
'peer that closed its connections', a host malloc failure the GPU out of memory, a bootstrap
'Message truncated' a collective size mismatch, a munmap at teardown a small /dev/shm."""
from __future__ import annotations

import csv
import re

from ncclsleuth import api, knowledge
from ncclsleuth.knowledge.identify import TORCH_FORMATS

NCCL_FORMATS = TORCH_FORMATS.with_name("nccl_formats.tsv")
_PH = re.compile(r"%(?:%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|t|j|L)?([diuxXpfgeEcsm]))")
_VALUE = {"d": "1", "i": "1", "u": "2", "x": "1a", "X": "1A", "p": "0x55d1c0a3b2c0", "f": "1.50", "g": "1.5",
          "e": "1e3", "c": "c", "s": "abc", "m": "Success"}

#: formats where a rule reads a category the knowledge base does not list, each with why
READ_OTHERWISE = {
    # NCCL_TOPO_FILE names a file NCCL cannot open: TOPO001 says topology_file, the base
    # bogus_setting; both name the setting to fix
    "Could not open XML topology file %s : %s",
    # 'family 0 is neither AF_INET nor AF_INET6': the base lists a bad unique id first and other
    # NCCL versions second; VER002 reads version_mismatch, which corpus nccl-1267 confirms
    "Error : connecting to address with family %d is neither AF_INET(%d) nor AF_INET6(%d)",
    "Error : connecting to address with family %d is neither AF_INET(%d) nor AF_INET6(%d)\\n",
}


def _warns() -> list[tuple[str, str]]:
    """(format, file) of every WARN format, the file relative to src/ as a WARN prefix has it."""
    with open(NCCL_FORMATS, newline="") as fh:
        rd = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        rows = [r for r in rd if r["level"] == "WARN"]
    out = []
    for r in rows:
        sites = r["sites"].split()
        out.append((r["format"], sites[0].split(":")[0].removeprefix("src/") if sites else "init.cc"))
    return out


def _line(fmt: str, file: str) -> str:
    msg = _PH.sub(lambda m: _VALUE.get(m.group(1), "1") if m.group(1) else "%", fmt)
    return f"h1:100:200 [0] {file}:123 NCCL WARN " + msg.replace('\\"', '"').replace("\\n", "").strip()


def test_rules_read_each_warn_as_the_knowledge_base_does() -> None:
    warns = _warns()
    assert len(warns) > 1000
    options = api.Options()
    disagree = {}
    for fmt, file in warns:
        line = _line(fmt, file)
        known = knowledge.explain(line, None)
        if known is None or known[1].role != "cause":
            continue
        report = api.analyze(api.memory_sources({"a.log": line + "\n"}), options)
        first = next((f for f in report.findings if f.severity in ("error", "warning")), None)
        if first is not None and not first.rule_id.startswith("MSG") and first.category not in known[1].categories:
            disagree[fmt] = (first.rule_id, first.category, known[1].categories)
    assert {k: v for k, v in disagree.items() if k not in READ_OTHERWISE} == {}
    assert sorted(READ_OTHERWISE - set(disagree)) == []  # each exception still holds


#: PyTorch's wrapper of a failed NCCL call, by NCCL error class -> NCCLERR001's category
ERROR_CLASSES = {
    "invalid usage (run with NCCL_DEBUG=WARN for details)": "invalid_usage",
    "remote process exited or there was a network error": "peer_failure",
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details)": "cuda_error",
}


def test_a_lone_pytorch_nccl_error_is_read_by_its_error_class() -> None:
    got = {}
    for text in ERROR_CLASSES:
        line = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                f"NCCLUtils.cpp:93, {text}, NCCL version 2.28.9\n")
        report = api.analyze(api.memory_sources({"a.log": line}), api.Options())
        first = next(f for f in report.findings if f.severity in ("error", "warning"))
        got[text] = (first.rule_id, first.category)
    assert got == {k: ("NCCLERR001", v) for k, v in ERROR_CLASSES.items()}
