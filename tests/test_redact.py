"""Redaction: no host, IPv4, IPv6 or GID of the input survives in any output format."""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclsleuth import api
from ncclsleuth.cli import main
from ncclsleuth.renderers import render
from ncclsleuth.report import Evidence, Finding, Report
from ncclsleuth.report.redact import redact

ROOT = Path(__file__).resolve().parent.parent
LOGS = [ROOT / "fixtures/report/horovod-584-lo-interface/log.txt", ROOT / "fixtures/report/roce-gid.log",
        ROOT / "fixtures/report/job64"]

_V4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w])")
_PREFIX = re.compile(r"^([A-Za-z0-9][\w.-]*):\d+:\d+ ", re.M)
_GIDS = re.compile(r"(?i)gids?\s*:?\s*((?:[0-9a-f]{0,4}:){2,7}(?:\d+\.\d+\.\d+\.\d+|[0-9a-f]{0,4}))")
_V6 = re.compile(r"\b(fe80::[0-9a-f:]+)")


def identifiers(path: Path) -> set[str]:
    text = "".join(p.read_text() for p in ([path] if path.is_file() else sorted(path.iterdir())))
    ids = {m for m in _V4.findall(text) if not m.startswith(("127.", "0.0.0.0"))}
    ids |= set(_PREFIX.findall(text)) | set(_GIDS.findall(text)) | set(_V6.findall(text))
    return ids


def outputs(path: Path) -> dict[str, str]:
    red = redact(api.analyze([str(path)], api.Options(with_figures=True)))  # the figures too
    figures = red.figures
    return {"json": render("json", red), "markdown": render("markdown", red, max_chars=100_000),
            "slack": render("slack", red, max_chars=100_000), "terminal": render("terminal", red),
            "html": render("html", red, figures=figures),
            "postmortem": render("markdown", red, postmortem=True, figures=figures)}


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_no_identifier_survives(path: Path) -> None:
    ids = identifiers(path)
    assert ids, "the fixture should carry identifiers"
    unredacted = render("json", api.analyze([str(path)]))
    assert any(i in unredacted for i in ids)  # they are in the plain report ...
    for fmt, text in outputs(path).items():
        leaked = sorted(i for i in ids if re.search(r"(?<![\w-])" + re.escape(i) + r"(?![\w-])", text))
        assert not leaked, f"{fmt} leaks {leaked}"  # ... and nowhere in the redacted ones


def test_gids_and_hosts_get_stable_placeholders() -> None:
    text = outputs(ROOT / "fixtures/report/roce-gid.log")["json"]
    assert "host-1" in text and "host-2" in text and "gid-1" in text and "10.x.x." in text
    # one identifier, one placeholder: rdma-node-a17 is host-1 everywhere, in every field
    assert "rdma-node" not in text


def test_loopback_is_kept_because_it_is_the_diagnosis() -> None:
    text = outputs(ROOT / "fixtures/report/horovod-584-lo-interface/log.txt")["markdown"]
    assert "127.0.0.1" in text and "paigcr" not in text and "10.151.40.240" not in text


def test_users_pods_and_consistency() -> None:
    ev = [Evidence("/home/alice/logs/worker.log", 3,
                   "trainer-7d9f8b6c5d-x2k9p:123:456 [0] NCCL WARN open /home/alice/x failed on 10.2.3.4"),
          Evidence("/home/bob/run.log", 9, "[E socket.cpp:860] host: mnist-worker-3 MASTER_ADDR=mnist-master-0 "
                                             "peer 10.2.3.4 ipv6 2001:db8::7 gid fe80::1:2:3:4")]
    f = Finding("X1", "x", "other", "error", 0.5, "Trouble on trainer-7d9f8b6c5d-x2k9p",
                "trainer-7d9f8b6c5d-x2k9p cannot reach 10.2.3.4 (user alice)", "ssh 10.2.3.4", ev, [],
                hosts=["trainer-7d9f8b6c5d-x2k9p"])
    rep = Report([f], [], {"hosts": ["trainer-7d9f8b6c5d-x2k9p"], "network": {"IB": ["trainer-7d9f8b6c5d-x2k9p"]}})
    out = redact(rep)
    text = render("json", out)
    for secret in ("alice", "bob", "trainer-7d9f8b6c5d-x2k9p", "mnist-worker-3", "mnist-master-0", "10.2.3.4",
                   "2001:db8::7", "fe80::1:2:3:4"):
        assert secret not in text, secret
    assert out.findings[0].hosts == ["pod-1"]
    assert out.summary["hosts"] == ["pod-1"] and out.summary["network"] == {"IB": ["pod-1"]}
    assert "/home/user-1/logs/worker.log" == out.findings[0].evidence[0].file
    assert out.findings[0].message == "pod-1 cannot reach 10.x.x.1 (user user-1)"
    assert rep.findings[0].hosts == ["trainer-7d9f8b6c5d-x2k9p"]  # the input is untouched


def test_cli_redact_on_analyze_and_report(tmp_path: Path) -> None:
    log = ROOT / "fixtures/report/roce-gid.log"
    runner = CliRunner()
    for fmt in ("json", "markdown", "slack", "terminal"):
        res = runner.invoke(main, ["analyze", str(log), "--format", fmt, "--redact", "--no-color"])
        assert res.exit_code == 1, res.output
        assert "rdma-node" not in res.output and "10.1.0.17" not in res.output and "host-1" in res.output
    plain = runner.invoke(main, ["analyze", str(log), "--format", "json"])
    assert "rdma-node-a17" in plain.output  # off by default on the CLI
    out = tmp_path / "pm.html"
    res = runner.invoke(main, ["report", str(log), "--redact", "-o", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "rdma-node" not in html and "10.1.0.18" not in html and "host-1" in html


def test_ipv6_placeholders_are_not_addresses() -> None:
    ev = [Evidence("a.log", 1, "x:1:1 [0] NCCL INFO Bootstrap : Using eth1:fe80::215:5dff:fe33:ff6d%eth1<0>")]
    f = Finding("X", "x", "other", "info", 0.1, "t", "m", "f", ev, [])
    text = redact(Report([f], [], {})).findings[0].evidence[0].text
    assert "ipv6-1" in text
    for tok in re.findall(r"[0-9a-f:]{3,}", text):
        with pytest.raises(ValueError):
            ipaddress.ip_address(tok)
