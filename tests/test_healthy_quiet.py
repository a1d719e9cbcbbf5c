"""Healthy runs stay quiet (issue 19, part 7).

Lines that look alarming but are printed by healthy runs never produce a finding of
severity warning or error: libibverbs missing on a node without RDMA (an INFO since
2.11, a WARN in 2.4.6..2.10.3, misc/ibvwrap.cc), ``NET/IB : No device found`` on cloud
VMs, RoCE NICs of another vendor (E810/iRDMA), ``P2P is disabled between connected
GPUs`` (an INFO of graph/paths.cc on consumer GPUs, 2.12+), busbw 0 on one GPU (nccl-tests
computes busbw = algbw * 2(n-1)/n), network/tuner plugins not found and their dlerror
text (INFO in every release), ``Could not find real path of /sys/class/net/lo/device``
(an INFO of the socket transport: topo.h getSockPath 2.3, net_socket.cc 2.4..2.5), and
loopback as the only interface of a one-node job.  Each shape is a log of
fixtures/healthy/; next to it, the same line where context makes it harmful must still
be reported.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ncclsleuth import api

HEALTHY = Path(__file__).resolve().parent.parent / "fixtures" / "healthy"
LOGS = sorted(HEALTHY.glob("*.log"))
SHAPES = {"single-node-no-libibverbs", "single-node-no-libibverbs-2.7-warn", "cloud-vm-no-ib", "e810-irdma",
          "consumer-gpus-p2p-disabled", "nccltests-one-gpu", "plugins-not-found", "plugins-not-found-2.17",
          "lo-real-path-2.4"}


def report(sources):  # type: ignore[no-untyped-def]
    return api.analyze(sources, api.Options(cache=False))


def alarms(rep) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{f.rule_id} {f.severity} {f.category}: {f.title}" for f in rep.findings
            if f.severity in ("warning", "error")]


def test_every_shape_has_a_log():
    assert {p.stem for p in LOGS} == SHAPES


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
def test_healthy_log_raises_no_warning(path):
    rep = report([str(path)])
    assert rep.files_read == 1
    assert not alarms(rep), f"{path.name}: " + "; ".join(alarms(rep))


def _text(name: str) -> str:
    return (HEALTHY / f"{name}.log").read_text(encoding="utf-8")


def test_missing_libibverbs_is_a_fallback_where_another_host_has_ib():
    """The context that makes the line harmful: the other host of the job runs over IB."""
    other = ("ib-node:5001:5050 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.9.0.8<0>\n"
             "ib-node:5001:5050 [0] NCCL INFO Using network IB\n")
    rep = report(api.memory_sources({"a.log": _text("single-node-no-libibverbs"), "b.log": other}))
    cats = [f.category for f in rep.findings if f.severity in ("warning", "error")]
    assert "socket_fallback" in cats


def test_loopback_is_wrong_where_the_job_spans_hosts():
    """lo on one host of a two-host communicator is the bad interface (NET001)."""
    a = ("n1:100:100 [0] NCCL INFO Bootstrap : Using [0]lo:127.0.0.1<0>\n"
         "n1:100:120 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\n")
    b = ("n2:200:200 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0>\n"
         "n2:200:220 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 - Init START\n")
    rep = report(api.memory_sources({"a.log": a, "b.log": b}))
    net001 = [f for f in rep.findings if f.rule_id == "NET001"]
    assert net001 and net001[0].evidence[0].line == 1 and net001[0].evidence[0].file == "a.log"


def test_one_rank_of_a_bigger_job_on_loopback_is_not_called_healthy():
    """A log of one rank whose communicator has ranks the log does not show is not one-node."""
    text = ("n1:100:100 [0] NCCL INFO Bootstrap : Using [0]lo:127.0.0.1<0>\n"
            "n1:100:120 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init START\n")
    assert "NET001" in {f.rule_id for f in report(api.memory_sources({"a.log": text})).findings}


def test_p2p_disabled_between_nvlink_gpus_is_reported():
    """The WARN variant (graph/paths.cc, 2.12+: NVLink-connected GPUs without P2P) is a hardware problem."""
    text = ("node:1:1 [0] graph/paths.cc:311 NCCL WARN P2P is disabled between NVLINK connected GPUs 0 and 1. This"
            " should not be the case given their connectivity, and is probably due to a hardware issue. If you"
            " still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\n")
    rep = report(api.memory_sources({"a.log": text}))
    assert any(e.line == 1 for f in rep.findings if f.severity in ("warning", "error") for e in f.evidence)
