"""What the tools around NCCL say, diagnosed (issue 19.4): each harmful tool output of
fixtures/host/ gets its rule with the decisive line as evidence, healthy output
(fixtures/host/healthy/, and the healthy shapes beside the harmful ones) raises no warning,
and the facts over tool output group and compare what they should."""
from __future__ import annotations

from pathlib import Path

import pytest

from ncclsleuth import api
from ncclsleuth.model.facts import FACTS
from ncclsleuth.ruletests import model_of

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "fixtures" / "host"
HEALTHY = sorted((HOST / "healthy").glob("*.txt")) + [HOST / n for n in (
    "topo-healthy.txt", "systemctl-fm-running.txt", "show-gids.txt", "ibv-devinfo-roce.txt")]
CORPUS = ROOT.parent / "shared" / "corpus" / "cases"


def findings(path: Path):  # type: ignore[no-untyped-def]
    return api.analyze([str(path)], api.Options(cache=False)).findings


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_healthy_tool_output_raises_no_warning(path):
    loud = [f"{f.rule_id} {f.severity}: {f.title}" for f in findings(path) if f.severity in ("warning", "error")]
    assert not loud, loud


#: fixture -> (first rule, its severity, the evidence line it leads with)
HARMFUL = {
    "ibstat-no-sm.txt": ("PORT001", "error", 6),
    "ibstatus-init.txt": ("PORT001", "error", 5),
    "pdsh-ibstat.txt": ("PORT002", "error", 8),
    "systemctl-fm-failed.txt": ("FM001", "error", 8),
    "nvsmi-q-remap.txt": ("NVSMI001", "error", 19),
    "nvsmi-table-ecc.txt": ("NVSMI005", "error", 12),
    "ucx-sigbus.txt": ("SHM002", "error", 1),
    "gdb-sigbus.txt": ("SHM002", "error", 1),
    "df-shm-64m.txt": ("SHM003", "warning", 4),
    "ulimit-a.txt": ("ULIM003", "warning", 8),
    "topo-sys-nic.txt": ("TOPO003", "info", 2),
    "c10-checktimeout.txt": ("TIMEOUT001", "error", 1),
}


@pytest.mark.parametrize("name", sorted(HARMFUL))
def test_harmful_tool_output_gets_its_rule(name):
    got = findings(HOST / name)
    rule, severity, line = HARMFUL[name]
    assert got and (got[0].rule_id, got[0].severity, got[0].evidence[0].line) == (rule, severity, line)


def test_the_watchdogs_frames_do_not_repeat_its_message():
    """STACK001 reads the checkTimeout frame only where the watchdog's own line is missing."""
    assert "STACK001" not in [f.rule_id for f in findings(HOST / "c10-checktimeout.txt")]


def test_pdsh_labels_name_the_host_of_each_port():
    (f,) = [f for f in findings(HOST / "pdsh-ibstat.txt") if f.rule_id == "PORT002"]
    assert f.hosts == ["node2"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not beside the checkout")
def test_corpus_fabric_manager_case():
    """pt-129749: systemctl's failed unit plus the fabric manager's version line."""
    got = findings(CORPUS / "pt-129749-fabricmanager" / "log.txt")
    assert got[0].rule_id == "FM001" and got[0].category == "version_mismatch"
    assert [e.line for e in got[0].evidence] == [7, 4]
    assert "550.90.07" in got[0].title and "550.54.15" in got[0].title


def test_ib_port_state_counts_active_ports_per_host():
    ports = FACTS["ib_port_state"](model_of((HOST / "pdsh-ibstat.txt").read_text()))
    assert [(p["host"], p["state"], p["active_on_host"], p["matters"]) for p in ports] == [
        ("node1", "Active", 1, False), ("node2", "Down", 0, True)]


def test_a_port_nccl_lists_matters_beside_an_active_one():
    log = {"rank0.log": "n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n",
           "ibstat.txt": (HOST / "healthy" / "ibstat-spare-port-down.txt").read_text().replace("mlx5_0", "mlx5_1", 1)}
    ports = FACTS["ib_port_state"](model_of(log))
    assert [(p["device"], p["port"], p["used_by_nccl"], p["matters"]) for p in ports] == [
        ("mlx5_1", 1, True, False), ("mlx5_1", 2, True, True), ("mlx5_1", 1, True, False)]


def test_gid_conflict_names_both_sides_and_where_the_ipv4_gid_is():
    head = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
    v4 = "0000:0000:0000:0000:0000:ffff:0a00:000{n}\t10.0.0.{n}  \tv2\tens1f0np0\n"
    log = {"a.log": "a:1:1 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3\n" + head
           + "mlx5_0\t1\t3\t" + v4.format(n=1),
           "b.log": "b:2:2 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3\n" + head
           + "mlx5_0\t1\t3\tfe80:0000:0000:0000:4c21:88ff:fe90:1b2c\t\t\tv2\tmacvlan0\n"
           + "mlx5_0\t1\t4\t" + v4.format(n=2)}
    (c,) = FACTS["gid_index_conflict"](model_of(log))
    assert (c["index"], c["host_a"], c["kind_a"], c["host_b"], c["kind_b"], c["ipv4_index_a"], c["ipv4_index_b"]) == \
        (3, "a", "ipv4", "b", "link_local", "3", "4")


def test_gpus_far_from_every_nic():
    far = FACTS["gpu_nic_far"](model_of((HOST / "topo-sys-nic.txt").read_text()))
    assert [(f["gpu"], f["nic"], f["path"], f["gpus_far"]) for f in far] == [
        ("GPU0", "mlx5_0", "SYS", 4), ("GPU1", "mlx5_0", "SYS", 4), ("GPU2", "mlx5_0", "PHB", 4),
        ("GPU3", "mlx5_0", "PHB", 4)]
    assert FACTS["gpu_nic_far"](model_of((HOST / "healthy" / "topo-pcie-nic-per-pair.txt").read_text())) == []


def test_nic_legend_names_the_nic():
    log = (HOST / "topo-healthy.txt").read_text().replace("GPU1\tNV18\t X \tSYS\tPIX", "GPU1\tNV18\t X \tSYS\tSYS")
    (f,) = FACTS["gpu_nic_far"](model_of(log))
    assert (f["gpu"], f["nic"], f["path"]) == ("GPU1", "mlx5_0", "SYS")
