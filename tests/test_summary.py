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
