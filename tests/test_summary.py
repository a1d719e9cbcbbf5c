"""The report's job summary (``model/summary.py``)."""
from __future__ import annotations

from ncclsleuth import api
from ncclsleuth.model.summary import summarize


def test_each_network_lists_its_hosts_once_sorted(tmp_path):
    """Hosts per transport NCCL chose (``NET/IB`` / ``NET/Socket``), each host once however many
    of its processes chose it, sorted: a set per network (a list scanned per process was
    quadratic in the hosts of a big job)."""
    log = tmp_path / "job.log"
    log.write_text("h2:11:11 [0] NCCL INFO Using network IB\n"
                   "h1:12:12 [0] NCCL INFO Using network IB\n"
                   "h2:13:13 [1] NCCL INFO Using network IB\n"
                   "h3:14:14 [0] NCCL INFO Using network Socket\n")
    model = api.build([str(log)], api.Options(jobs=1, cache=False)).model
    assert summarize(model)["network"] == {"IB": ["h1", "h2"], "Socket": ["h3"]}


_PG = ("[rank{r}]:[I1129 11:31:50.839963438 ProcessGroupNCCL.cpp:968] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
       "ProcessGroupNCCL initialization options: size: 2, global rank: {r}, TIMEOUT(ms): 600000\n")


def test_a_files_lines_without_a_pid_are_its_process_where_another_line_names_it(tmp_path):
    """Before: a per-rank file's PyTorch lines (no pid) counted as a process besides the one its
    NCCL lines name (a job of 2,048 ranks had 4,096 processes)."""
    for r in range(2):
        (tmp_path / f"rank{r}.log").write_text(f"node{r}:10{r}:10{r} [0] NCCL INFO NCCL version 2.23.4+cuda12.4\n"
                                               + _PG.format(r=r))
    (tmp_path / "torch_only.log").write_text(_PG.format(r=5))
    model = api.build([str(tmp_path)], api.Options(jobs=1, cache=False)).model
    # a file's lines with no pid are the process its NCCL lines name (its launcher rank), or one of
    # the model's own where no line names one
    assert {k[0].rsplit("/", 1)[-1]: p.launcher_rank for k, p in model.processes.items()} == \
        {"node0": 0, "node1": 1, "torch_only.log": 5}
    assert summarize(model)["processes"] == 3  # two with a pid, and the file that names none
