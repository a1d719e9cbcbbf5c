"""A rule's reading of an NCCL WARN agrees with the knowledge base's, line by line.

The knowledge base says, from the code around each of NCCL's WARN call sites, what the line
means and, for a cause, which category. A rule written for a message (NET006, OOM001, SHM001,
DESYNC004...) must not read the same line otherwise: every WARN call site of the catalog is
printed with values behind its real prefix and analysed alone (tools/catalog_coverage.py);
where the base calls it a cause, the first finding of a non-knowledge rule must carry that
category. Before this test 27 formats disagreed: every proxy thread WARN was a
'peer that closed its connections', a host malloc failure the GPU out of memory, a bootstrap
'Message truncated' a collective size mismatch, a munmap at teardown a small /dev/shm."""
from __future__ import annotations

from _catalog import coverage_tool
from conftest import require_shared

from ncclsleuth import api, knowledge

cc = coverage_tool()

#: formats where a rule reads a category the knowledge base does not list, each with why
READ_OTHERWISE = {
    # NCCL_TOPO_FILE names a file NCCL cannot open: TOPO001 says topology_file, the base
    # bogus_setting; both name the setting to fix
    "Could not open XML topology file %s : %s",
    # 'family 0 is neither AF_INET nor AF_INET6': the base lists a bad unique id first and other
    # NCCL versions second; VER002 reads version_mismatch, which corpus nccl-1267 confirms
    "Error : connecting to address with family %d is neither AF_INET(%d) nor AF_INET6(%d)",
    # src/os/windows.cc (2.30): the Windows build's accept loop gave up on WSAEINPROGRESS (other);
    # the same words from src/os/linux.cc are network_blocked, which NET005 reads for both
    "ncclOsSocketTryAccept: exceeded error retry count after %d attempts, %s",
}


def test_rules_read_each_warn_as_the_knowledge_base_does() -> None:
    """The WARN call sites tools/catalog_coverage.py analyses one by one (every core WARN of
    2.3-2.30, the run test_catalog_coverage.py makes too: cached, made once)."""
    require_shared(cc.REF, "the NCCL message catalog (../shared/reference/nccl/messages.tsv)")
    results = cc.nccl_results()
    assert len(results) > 1300
    disagree = {}
    for r in results:
        known = knowledge.explain(r["line"], None)
        if known is None or known[1].role != "cause" or r["first_rule"] is None:
            continue
        if not r["first_rule"].startswith("MSG") and r["first_category"] not in known[1].categories:
            disagree[r["format"].rstrip("\\n")] = (r["first_rule"], r["first_category"], known[1].categories)
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
