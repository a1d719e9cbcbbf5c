"""Every example line the knowledge base records for the shapes around NCCL
(knowledge/neighbours/system.yaml, ofi.yaml, rccl.yaml: the ``example:`` of each entry)
parses into its typed event.  Lines that mean something only inside their tool's block (a
port's ``State:``, an ``Active:`` line, an nvidia-smi -q value, a backtrace frame) are
given the block's first lines, as the tool prints them."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

KB = Path(__file__).resolve().parent.parent / "knowledge" / "neighbours"

_IB = "CA 'mlx5_0'\n\tPort 1:\n"
_IBV = "hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
_SVC = "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
_GPU = "GPU 00000000:18:00.0\n"
#: entry id (or id prefix) -> (the event kind its example gives, the block lines before it)
EXPECT: dict[str, tuple[str, str]] = {
    "SYS-xid-": ("gpu_xid", ""),
    "SYS-nvrm-gpu-fallen-off-bus": ("hw_error", ""),
    "SYS-nvrm-api-mismatch": ("driver_error", ""),
    "SYS-nvrm-rminitadapter-failed": ("driver_error", ""),
    "SYS-fabricmanager-version-mismatch": ("driver_error", ""),
    "SYS-nvsmi-driver-library-mismatch": ("driver_error", ""),
    "SYS-nvsmi-no-driver-communication": ("driver_error", ""),
    "SYS-nvml-unknown-error": ("driver_error", ""),
    "SYS-nvsmi-no-devices": ("driver_error", ""),
    "SYS-nvsmi-gpu-lost": ("driver_error", ""),
    "SYS-oom-killed-process": ("oom_kill", ""),
    "SYS-oom-kill-process-old": ("oom_kill", ""),
    "SYS-k8s-oomkilled": ("oom_kill", ""),
    "SYS-pcie-aer": ("pcie_aer", ""),
    "SYS-iommu-": ("iommu_fault", ""),
    "SYS-lspci-acsctl": ("pci_acs", ""),
    "SYS-lspci-lnksta": ("pci_link", ""),
    "SYS-peermem-unknown-symbol": ("kernel_module", ""),
    "SYS-peermem-insert-failed": ("kernel_module", ""),
    "SYS-peermem-module-not-found": ("kernel_module", ""),
    "SYS-mlx5-link-down": ("nic_event", ""),
    "SYS-mlx5-module-event": ("nic_event", ""),
    "SYS-fabricmanager-block": ("tool_output", ""),
    "SYS-fabricmanager-service-": ("service_status", _SVC),
    "SYS-fabricmanager-unit-not-found": ("service_status", ""),
    "SYS-nvsmi-header": ("nvsmi_header", ""),
    "SYS-nvsmi-table-uncorr-ecc": ("nvsmi_gpu", "| NVIDIA-SMI 535.104.05  Driver Version: 535.104.05  CUDA Version: 12.2 |\n"),
    "SYS-nvsmi-q-ecc-uncorrectable": ("nvsmi_value", _GPU + "    ECC Errors\n        Volatile\n"),
    "SYS-nvsmi-q-remapped-pending": ("nvsmi_value", _GPU + "    Remapped Rows\n"),
    "SYS-nvsmi-q-remapping-failure": ("nvsmi_value", _GPU + "    Remapped Rows\n"),
    "SYS-nvsmi-q-retired-pending": ("nvsmi_value", _GPU + "    Retired Pages\n"),
    "SYS-nvsmi-q-fabric-state": ("nvsmi_value", _GPU + "    Fabric\n"),
    "SYS-nvsmi-q-hw-slowdown": ("nvsmi_value", _GPU + "    Clocks Event Reasons\n"),
    "SYS-topo-matrix-block": ("tool_output", ""),
    "SYS-ibstat-block": ("tool_output", ""),
    "SYS-ibstat-state-": ("ib_port", _IB),
    "SYS-ibstat-phys-": ("ib_port", _IB + "\t\tState: Down\n"),
    "SYS-ibstat-link-layer-": ("ib_port", _IB + "\t\tState: Active\n"),
    "SYS-ibstat-rate": ("ib_port", _IB + "\t\tState: Active\n"),
    "SYS-ibv-devinfo-active-mtu": ("ib_port", _IBV),
    "SYS-gid-": ("ib_gid", _IBV),
    "SYS-show-gids-block": ("tool_output", ""),
    "SYS-ibdev2netdev": ("ib_netdev", ""),
    "SYS-libibverbs-": ("ibverbs_warning", ""),
    "SYS-ulimit-": ("ulimit_value", ""),
    "SYS-df-devshm": ("shm_size", "Filesystem      Size  Used Avail Use% Mounted on\n"),
    "SYS-ucx-caught-signal": ("crash_signal", ""),
    "SYS-backtrace-frame-nccl": ("stack_frame", "[node017:12345:0:12401] Caught signal 7 (Bus error: nonexistent physical address)\n"),
    "SYS-shell-core-dumped": ("crash_signal", ""),
    "SYS-python-fatal-error": ("crash_signal", ""),
    "SYS-cpp-exception-raised-from": ("tool_output", ""),
    "SYS-frame-": ("stack_frame", "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):\n"),
    "OFI-selected-provider": ("ofi_provider", ""),
    "OFI-version-banner": ("ofi_version", ""),
    "OFI-using-libfabric-version-info": ("ofi_version", ""),
    "RCCL-version-banner": ("rccl_version", ""),
}


def _expected(entry_id: str) -> tuple[str, str] | None:
    keys = [k for k in EXPECT if entry_id == k or (k.endswith("-") and entry_id.startswith(k))]
    return EXPECT[max(keys, key=len)] if keys else None


def _examples() -> list[tuple[str, str, str, str]]:
    out = []
    for name in ("system.yaml", "ofi.yaml", "rccl.yaml"):
        for e in yaml.safe_load((KB / name).read_text(encoding="utf-8"))["entries"]:
            hit = _expected(str(e["id"]))
            if "example" in e and hit is not None:
                out.append((str(e["id"]), str(e["example"]), *hit))
    return out


EXAMPLES = _examples()


def test_the_examples_cover_the_shapes():
    assert len(EXAMPLES) >= 90  # 95 when written: the mapping above must keep matching entries
    assert {k for _, _, k, _ in EXAMPLES} >= {"gpu_xid", "driver_error", "oom_kill", "ib_port", "ib_gid",
                                             "nvsmi_value", "stack_frame", "crash_signal", "service_status"}


@pytest.mark.parametrize("entry,example,kind,before", EXAMPLES, ids=[x[0] for x in EXAMPLES])
def test_knowledge_example_parses_into_its_event(entry, example, kind, before):
    text = before + example
    fp = FileParser("kb", ShapeCache(enabled=False))
    last = text.count("\n") + 1
    got = [e for e in fp.parse_lines(enumerate(text.split("\n"), 1)) if e.kind == kind]
    assert got, f"{entry}: no {kind} event from {example!r}"
    assert any(e.line >= last - example.count("\n") for e in got) or kind == "ib_port", \
        f"{entry}: the {kind} event is not the example's own line"
