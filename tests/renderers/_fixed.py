"""A fixed Report (and figures payload) for the golden-file tests: no analysis involved."""
from __future__ import annotations

from ncclsleuth.report import Evidence, Finding, Report


def fixed_report() -> Report:
    f1 = Finding(
        rule_id="IB003", name="ib.retry_exceeded", category="ib_link_error", severity="error", confidence=0.55,
        title="IB transport retries exhausted (completion status 12): the link to 10.0.0.17<51234> is broken",
        message="gpu-node-06: IB completion error status 12 (vendor err 129) talking to 10.0.0.17<51234>. "
                "The peer's HCA never acknowledged.",
        fix="Test the fabric outside NCCL: `ibstat` on both nodes,\n`ib_write_bw` between them & `ibdiagnet`.",
        evidence=[Evidence("logs/job/rank-44.log", 10, "gpu-node-06:41308:41369 [4] transport/net_ib.cc:1696 NCCL WARN "
                                                       "NET/IB : Got completion from peer 10.0.0.17<51234> with status=12"),
                  Evidence("logs/job/rank-45.log", 11, "gpu-node-06:41315:41376 [5] NCCL WARN NET/IB : Got completion "
                                                       "from peer 10.0.0.17<51234> with status=12")],
        references=["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"],
        evidence_total=5, hosts=["gpu-node-06"], ranks=[44, 45])
    f2 = Finding(
        rule_id="INITT002", name="init.slow_host", category="slow_init", severity="warning", confidence=0.6,
        title="Slow NCCL init: gpu-node-06 took 27.27 s (median 3.51 s)",
        message="Bootstrap took 24.9 s on gpu-node-06; the other hosts waited.",
        fix="export NCCL_SOCKET_IFNAME=ib0\n```\nnested fence in a fix\n```",
        evidence=[Evidence("logs/job/rank-41.log", 8, "gpu-node-06:41287:41287 [1] NCCL INFO Init timings - total 27.27 "
                                                      "(bootstrap 24.90) `quoted`")],
        references=[], evidence_total=1, hosts=["gpu-node-06"])
    f3 = Finding(
        rule_id="CUDA001", name="gpu.cuda_failure", category="other", severity="info", confidence=0.4,
        title="CUDA call failed: unspecified launch failure", message="A CUDA call failed.",
        fix="Rerun with CUDA_LAUNCH_BLOCKING=1.", evidence=[], references=[], caused_by="IB003", role="symptom")
    summary = {
        "files": 64, "lines": 598, "hosts": [f"gpu-node-{i:02d}" for i in range(1, 9)], "processes": 64, "ranks": 64,
        "nccl_versions": {"2.21.5": 64}, "cuda_versions": {"12.4": 64},
        "network": {"IB": [f"gpu-node-{i:02d}" for i in range(1, 9)]}, "ib_devices": ["mlx5_0/IB", "mlx5_1/IB"],
        "communicators": [{"comm": "0x5a5a3c1e9f2b7d41", "nranks": 64, "ranks_seen": 64, "init_complete": 64,
                           "init_max_s": 27.27, "channels": 2, "transports": {"NET/IB": 32, "P2P": 112}}],
        "communicators_total": 1, "nccltests_avg_busbw": [], "events": {"comm_init": 128},
    }
    return Report(findings=[f1, f2, f3],
                  unexplained=[Evidence("logs/job/rank-20.log", 10, "gpu-node-03:41140:41149 [4] NCCL WARN NET/IB : "
                                                                    "mlx5_1:1 Got async event : GID table change")],
                  summary=summary, notices=[], unexplained_total=1)


def fixed_figures() -> dict:
    hosts = {str(r): f"gpu-node-{r // 4 + 1:02d}" for r in range(8)}
    order = list(range(8))
    hops = []
    for a in order:
        b = (a + 1) % 8
        t = "P2P" if a // 4 == b // 4 else "NET/IB"
        hops.append({"src": a, "dst": b, "transport": t, "net": "IB" if t != "P2P" else None,
                     "gdr": t != "P2P", "channels": 2})
    hops.append({"src": 2, "dst": 6, "transport": "NET/Socket", "net": "Socket", "gdr": False, "channels": 1})
    hops.append({"src": 1, "dst": 2, "transport": "SHM", "net": None, "gdr": False, "channels": 1})
    init = []
    for r in range(8):
        boot = 24.8 if r // 4 == 1 else 1.1
        init.append({"comm": "0x5a5a", "rank": r, "host": hosts[str(r)], "offset": 0.0,
                     "duration": round(boot + 2.3, 2), "source": "timings",
                     "phases": [["kernels", 0.2], ["bootstrap", boot], ["connections", 1.5], ["rest", 0.6]]})
    return {"comms": [{"key": "0x5a5a", "nranks": 8, "ranks": order, "rank_host": hosts, "rings": [[0, order]],
                       "hops": hops, "truncated": False}], "init": init}
