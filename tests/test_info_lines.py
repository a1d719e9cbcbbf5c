"""NCCL's INFO lines are no problem lines, except the few whose text reports one.

Every INFO format of NCCL's catalog (parse/data/nccl_formats.tsv, 2.3-2.30) is printed with
sample values behind a real prefix and parsed: an INFO line that becomes an error event is a
problem line the report must explain. Two kinds slipped through before: the proxy threads'
"[Proxy Service] Device 0 CPU core 2" (2.23+, on every run: fixtures/gpu/healthy-1rank) and
SYSCHECKSYNC's "Call to X returned <strerror>, retrying" (a call retried on EINTR/EAGAIN); and
CUDACHECKIGNORE's "Cuda failure" at INFO (a CUDA failure NCCL clears and ignores)."""
from __future__ import annotations

from _catalog import coverage_tool, package_formats

from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

cc = coverage_tool()

#: INFO formats whose text does report a problem, each with why (read in NVIDIA/nccl)
REPORT_A_PROBLEM = {
    # xml.cc ncclTopoGetXmlFromFile: NCCL_TOPO_FILE is set but unreadable; NCCL goes on without it
    "Could not open XML topology file %s : %s",
    # ibvwrap.cc (2.23 printed these at INFO): the ECE query or set failed
    "Call to ibv_query_ece failed with error %s errno %d", "Call to ibv_set_ece failed with error %s errno %d",
    # mlx5dvwrap.cc: the data-direct sysfs path could not be read
    "Call to mlx5dv_get_data_direct_sysfs_path failed with error %s errno %d",
    "NET/MLX5: Call to mlx5dv_internal_get_data_direct_sysfs_path failed with error %s errno %d",
    # shmutils.cc: a shared-memory file could not be removed
    "unlink shared memory %s failed, error: %s (%d)",
    # ext-profiler inspector: its JSON output failed
    "jsonError: %s\\n",
}


def _line(fmt: str) -> str:
    """The INFO line NCCL prints from ``fmt`` (values filled as the coverage tool fills them)."""
    return "h1:100:200 [0] NCCL INFO " + " ".join(cc.fill(fmt).split("\n")).strip()


def test_info_formats_are_no_problem_lines() -> None:
    formats = package_formats("INFO")
    assert len(formats) > 1000
    errors = {}
    for fmt in formats:
        fp = FileParser("t", ShapeCache(enabled=False))
        kinds = [ev.kind for ev in fp.parse_line(1, _line(fmt)) + fp.finish() if ev.is_problem]
        if kinds:
            errors[fmt] = kinds
    assert sorted(set(errors) - REPORT_A_PROBLEM) == []
    assert sorted(REPORT_A_PROBLEM - set(errors)) == []  # each exception still holds


def test_retry_lines_are_retries() -> None:
    fp = FileParser("t", ShapeCache(enabled=False))
    evs = fp.parse_line(1, "h1:100:200 [0] NCCL INFO Call to connect returned Connection refused, retrying")
    assert [(e.kind, e.call, e.error) for e in evs] == [("call_retry", "connect", "Connection refused")]
