"""Redaction: no identifier of the input (hosts, addresses, GIDs, MACs, users, e-mails, pods) survives in
any output of any command, in any notation."""
from __future__ import annotations

import ipaddress
import ipaddress as _ip
import json as _json
import os
import re
import threading as _threading
import time
import urllib.request as _urlreq
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------------------------------------
# Redaction as a guarantee: a job seeded with identifiers of every kind, in every place a log
# puts them; none may survive in any output of any command, in any notation.



def notations(kind: str, value: str) -> set[str]:
    """Every way ``value`` may be written (computed here, independently of the redactor)."""
    if kind == "ipv4":
        b = _ip.IPv4Address(value).packed
        iid = int.from_bytes(b"\0\0\xff\xff" + b, "little")  # NCCL's "GID n (0/%lX)" of a RoCE v2 GID
        mapped = _ip.IPv6Address(b"\0" * 10 + b"\xff\xff" + b)
        return {value, b.hex(), b[::-1].hex(), f"{iid:x}", "-".join(map(str, b)), mapped.compressed,
                mapped.exploded}
    if kind in ("ipv6", "gid"):
        a = _ip.IPv6Address(value)
        out = {a.compressed, a.exploded, a.packed.hex(), f"{int.from_bytes(a.packed[8:], 'little'):x}"}
        if a.packed[11:13] == b"\xff\xfe":  # EUI-64: the NIC's MAC
            mac = bytes([a.packed[8] ^ 2]) + a.packed[9:11] + a.packed[13:16]
            out |= notations("mac", ":".join(f"{x:02x}" for x in mac))
        return out
    if kind == "mac":
        return {value, value.replace(":", "-")}
    return {value}


def leaks(text: str, secrets: dict[str, set[str]]) -> list[str]:
    found = []
    for what, forms in secrets.items():
        for s in forms:
            if len(s) >= 5 and re.search(r"(?<![0-9A-Za-z])" + re.escape(s) + r"(?![0-9A-Za-z])", text, re.I):
                found.append(f"{what}: {s}")
    return found


def seeded_job(ids: dict[str, str]) -> dict[str, str]:
    """Two rank files (named after their hosts) whose WARN/error lines carry every identifier."""
    i = ids
    iid = int.from_bytes(b"\0\0\xff\xff" + _ip.IPv4Address(i["ip"]).packed, "little")
    a = [f"{i['short']}:1001:1001 [0] NCCL INFO Bootstrap : Using eth0:{i['ip']}<0>",
         f"{i['short']}:1001:1001 [0] NCCL INFO ncclCommInitRank comm 0x55d5c8a0e6b0 rank 0 nranks 2 cudaDev 0 "
         f"nvmlDev 0 busId 18000 commId 0x3a5c8f1e2b4d6071 - Init START",
         f"{i['short']}:1001:1010 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: connect to {i['site']}<40031> "
         f"returned Connection refused, retrying",
         f"{i['short']}:1001:1010 [0] misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid "
         f"argument, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:{i['ip']}, "
         f"remote GID ::ffff:{i['ip2']}",
         f"{i['short']}:1001:1010 [0] transport/net_ib.cc:1415 NCCL WARN NET/IB : Got completion from peer "
         f"{i['ip2']}<40312> with error 12, opcode 0, len 0, vendor err 129 (Send) localGid {i['gid']} "
         f"remoteGids::ffff:{i['ip2']}",
         f"{i['short']}:1001:1010 [0] transport/net_ib.cc:1 NCCL WARN NET/IB: GID 3 (0/{iid:X}) mac {i['mac']} "
         f"peer {i['v6']}%eth1 hw 80:00:02:08:{':'.join(f'{x:02x}' for x in _ip.IPv6Address(i['gid']).packed)}",
         f"[rank0]: RuntimeError: The client socket has failed to connect to [{i['fqdn']}]:29500 (errno: 111 - "
         f"Connection refused). MASTER_ADDR={i['aws_fqdn']}",
         f"[rank0]: torch.distributed.DistNetworkError: failed to reach ('{i['svc']}', 29400) from {i['k8s']}",
         f"{i['short']}:1001:1010 [0] misc/utils.cc:1 NCCL WARN plugin /home/{i['user']}/lib/libnccl-net.so owned "
         f"by {i['email']} on pod {i['pod']}"]
    b = [f"{i['aws']}:2002:2002 [1] NCCL INFO Bootstrap : Using eth0:{i['ip2']}<0>",
         f"{i['aws']}:2002:2020 [1] misc/socket.cc:540 NCCL WARN socketPollConnect: connect to {i['fqdn']}<40031> "
         f"returned Connection refused, retrying",
         f"{i['aws']}:2002:2020 [1] misc/socket.cc:540 NCCL WARN peer {i['short']} gid "
         f"{_ip.IPv6Address(i['gid']).packed.hex()} unreachable"]
    return {f"logs/{i['short']}.log": "\n".join(a) + "\n", f"logs/rank1-{i['aws']}.log": "\n".join(b) + "\n"}


SEEDED = {"short": "gpu-node-17", "fqdn": "gpu-node-17.corp.example.com", "site": "node.cm.cluster",
          "aws": "ip-10-1-2-9", "aws_fqdn": "ip-10-1-2-21.ec2.internal", "k8s": "10-1-2-30.default.pod.cluster.local",
          "pod": "trainer-7d9f8b6c5d-x2k9p", "svc": "rdzv.training.svc.cluster.local", "ip": "10.20.30.40",
          "ip2": "172.16.5.6", "v6": "2001:db8:85a3::8a2e:370:7334", "gid": "fe80::ba59:9fff:fe03:1a2c",
          "mac": "0c:42:a1:5e:77:10", "email": "alice.smith@example.com", "user": "alice"}
_KINDS = {"ip": "ipv4", "ip2": "ipv4", "v6": "ipv6", "gid": "gid", "mac": "mac"}
#: the addresses the host names above encode
_ENCODED = {"aws": "10.1.2.9", "aws_fqdn": "10.1.2.21", "k8s": "10.1.2.30"}


def secrets_of(ids: dict[str, str]) -> dict[str, set[str]]:
    out = {k: notations(_KINDS.get(k, "name"), v) for k, v in ids.items()}
    out |= {f"{k} address": notations("ipv4", v) for k, v in _ENCODED.items() if k in ids}
    return out


def write_job(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "logs"


def all_outputs(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """Every command's every format, with --redact (serve: by default)."""
    job = write_job(tmp_path / "run", files)
    other = write_job(tmp_path / "good", {k: v.replace("Connection refused", "timeout") for k, v in files.items()})
    runner = CliRunner()
    out: dict[str, str] = {}
    for fmt in ("json", "markdown", "slack", "terminal"):
        out[f"analyze {fmt}"] = runner.invoke(main, ["analyze", str(job), "--format", fmt, "--redact", "--no-color",
                                                     "--fail-on", "never"]).output
    for suffix in ("html", "md"):
        target = tmp_path / f"pm.{suffix}"
        res = runner.invoke(main, ["report", str(job), "--redact", "-o", str(target)])
        assert res.exit_code == 0, res.output
        out[f"report {suffix}"] = target.read_text()
    for fmt in ("json", "markdown", "terminal"):
        out[f"diff {fmt}"] = runner.invoke(main, ["diff", str(other), str(job), "--format", fmt, "--redact",
                                                  "--no-color"]).output
    for fmt in ("json", "terminal", "markdown", "jsonl", "live"):
        out[f"watch {fmt}"] = runner.invoke(main, ["watch", str(job), "--once", "--format", fmt, "--redact",
                                                   "--no-color"]).output
    from ncclsleuth.serve import make_server

    srv = make_server("127.0.0.1", 0, workers=1)
    _threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        host, port = srv.server_address[:2]
        url = f"http://{host!s}:{port}/analyze"
        body = "".join(files.values()).encode()
        for fmt in ("json", "markdown", "slack"):
            with _urlreq.urlopen(_urlreq.Request(f"{url}?format={fmt}", data=body), timeout=60) as r:
                out[f"serve {fmt}"] = r.read().decode()
    finally:
        srv.shutdown()
        srv.shutdown_all()
    return out


def test_seeded_job_every_identifier_reaches_the_plain_report(tmp_path: Path) -> None:
    """The seeds are not trivially absent: unredacted, each literal one is in the report."""
    job = write_job(tmp_path, seeded_job(SEEDED))
    plain = CliRunner().invoke(main, ["analyze", str(job), "--format", "json", "--fail-on", "never"]).output
    missing = [k for k, v in SEEDED.items() if v not in plain]
    assert not missing, missing


def test_seeded_job_nothing_survives_in_any_output(tmp_path: Path) -> None:
    secrets = secrets_of(SEEDED)
    outputs = all_outputs(tmp_path, seeded_job(SEEDED))
    for name, text in outputs.items():
        assert "host-1" in text or "host-2" in text or name.startswith("watch live"), (name, text[:400])
        assert not leaks(text, secrets), f"{name} leaks {leaks(text, secrets)}"
    d = _json.loads(outputs["analyze json"])
    files = {e["file"] for f in d["findings"] for e in f["evidence"]} | {e["file"] for e in d["unexplained"]}
    assert files and all("gpu-node-17" not in f and "ip-10-1-2-9" not in f for f in files), files


def test_one_identifier_one_placeholder_everywhere(tmp_path: Path) -> None:
    job = write_job(tmp_path, seeded_job(SEEDED))
    rep = redact(api.analyze([str(job)]))
    text = render("json", rep)
    # gpu-node-17 is the prefix host of one file, a file name, a mention in the other file and the
    # short form of gpu-node-17.corp.example.com: one placeholder for all of them
    ph = {e.text.split(":", 1)[0] for f in rep.findings for e in f.evidence if ":1001:" in e.text}
    ph |= {e.text.split(":", 1)[0] for e in rep.unexplained if ":1001:" in e.text}
    assert len(ph) == 1 and next(iter(ph)).startswith("host-"), ph
    host = next(iter(ph))
    assert f"logs/{host}.log" in text and f"peer {host} gid" in text and f"[{host}]:29500" in text


def test_redaction_is_linear_past_a_thousand_glued_records() -> None:
    """The RecursionError inside the redactor let every host through past ~1,000 glued records."""
    glued = "".join(f"node{i:05d}:1:1 [0] misc/socket.cc:540 NCCL WARN x " for i in range(3000))
    ev = [Evidence("a.log", 1, glued)]
    rep = Report([Finding("X", "x", "other", "error", 0.5, "t", "m", "f", ev, [])], [], {})
    t = time.process_time()
    text = render("json", redact(rep))
    assert time.process_time() - t < 5
    assert not re.search(r"node\d{5}", text)


_label = st.from_regex(r"[a-z][a-z0-9]{1,5}-?[0-9]{1,3}", fullmatch=True)
_octet = st.integers(1, 254)
_v4 = st.tuples(st.integers(11, 223).filter(lambda x: x != 127), _octet, _octet, _octet).map(
    lambda t: ".".join(map(str, t)))
_v6 = st.binary(min_size=14, max_size=14).filter(lambda b: b.count(0) < 8).map(lambda b: str(_ip.IPv6Address(b"\x20\x01" + b)))
_gid = st.binary(min_size=8, max_size=8).filter(lambda b: b.count(0) < 4).map(lambda b: str(_ip.IPv6Address(b"\xfe\x80" + b"\0" * 6 + b)))
_mac = st.binary(min_size=6, max_size=6).filter(lambda b: b.count(0) < 3).map(lambda b: ":".join(f"{x:02x}" for x in b))


@st.composite
def seeded_identifiers(draw) -> dict[str, str]:  # type: ignore[no-untyped-def]
    short, other, user = draw(_label), draw(_label), draw(st.from_regex(r"[a-z]{4,8}", fullmatch=True))
    ip, ip2 = draw(_v4), draw(_v4)
    a, b = ip.split("."), ip2.split(".")
    return {"short": short, "fqdn": f"{short}.{draw(_label)}.example.org", "site": f"{other}.cm.cluster",
            "aws": f"ip-{'-'.join(b)}", "aws_fqdn": f"ip-{'-'.join(a)}.ec2.internal",
            "k8s": f"{'-'.join(b)}.default.pod.cluster.local", "pod": f"{draw(_label)}-7d9f8b6c5d-x2k9p",
            "svc": f"{draw(_label)}.ns.svc.cluster.local", "ip": ip, "ip2": ip2, "v6": draw(_v6),
            "gid": draw(_gid), "mac": draw(_mac), "email": f"{user}.x@{draw(_label)}.com", "user": user}


@settings(max_examples=int(os.environ.get("NCCLSLEUTH_REDACT_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seeded_identifiers())
def test_generated_identifiers_never_survive(ids: dict[str, str]) -> None:
    assume(len({ids["short"], ids["user"], ids["site"].split(".")[0]}) == 3)
    files = seeded_job(ids)
    rep = redact(api.analyze(api.memory_sources(files), api.Options(with_figures=True)))
    secrets = secrets_of(ids)
    for fmt, text in {"json": render("json", rep), "markdown": render("markdown", rep, max_chars=100_000),
                      "terminal": render("terminal", rep), "html": render("html", rep, figures=rep.figures)}.items():
        assert not leaks(text, secrets), f"{fmt} leaks {leaks(text, secrets)}"


# The IPv6 body is possessive on Python 3.11+ (no backtracking on 1 MB of "fe80:fe80:...");
# it must find exactly the spans of the backtracking form it replaced.
_V6_BACKTRACKING = re.compile(r"(?<![\w.])([0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3})"
                              r"(%[\w.-]{1,32})?(?![\w:]|\.\w)")


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="0123456789abcdefABCDEF:.%_- gx\n", max_size=60))
def test_ipv6_spans_same_as_backtracking_form(s: str) -> None:
    from ncclsleuth.report.redact import _IPV6

    assert [m.span() for m in _IPV6.finditer(s)] == [m.span() for m in _V6_BACKTRACKING.finditer(s)]


def test_ipv6_examples_found() -> None:
    from ncclsleuth.report.redact import _IPV6

    for text, want in [("addr fe80::1%eth0 up", "fe80::1%eth0"), ("gid ::ffff:10.1.0.17,", "::ffff:10.1.0.17"),
                       ("x 2001:db8:0:0:1:0:0:1 y", "2001:db8:0:0:1:0:0:1")]:
        m = _IPV6.search(text)
        assert m is not None and m.group(0) == want
