"""The HTTP API, started for real on a free loopback port and spoken to with urllib."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ncclsleuth import serve
from ncclsleuth.serve import make_server

ROOT = Path(__file__).resolve().parent.parent
HOROVOD = ROOT / "fixtures/report/horovod-584-lo-interface/log.txt"
ROCE = ROOT / "fixtures/report/roce-gid.log"
#: one line NCCL wrote: the smallest body that is a log
LINE = b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"


def _start(**kw) -> tuple[object, str]:
    srv = make_server("127.0.0.1", 0, **kw)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    return srv, f"http://{host}:{port}"


@pytest.fixture
def server() -> Iterator[str]:
    srv, url = _start()
    yield url
    srv.shutdown()
    srv.shutdown_all()


def call(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def cli_verdict(args: list[str], stdin: bytes | None = None) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", *args, "--format", "json"], input=stdin,
                         capture_output=True, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr
    d = json.loads(out.stdout)
    return d["findings"][0]["rule_id"], d["findings"][0]["category"]


def test_healthz_and_rules(server: str) -> None:
    code, body, _ = call(server + "/healthz")
    assert code == 200 and json.loads(body)["status"] == "ok"
    code, body, _ = call(server + "/rules")
    rules = json.loads(body)["rules"]
    assert code == 200 and {"id", "title", "category"} <= set(rules[0])
    assert any(r["id"] == "NET001" for r in rules)
    assert call(server + "/nope")[0] == 404


def test_same_verdict_as_the_cli_also_when_pasted_as_markdown(server: str) -> None:
    raw = HOROVOD.read_bytes()
    code, body, headers = call(server + "/analyze", raw)
    assert code == 200 and headers["Content-Type"].startswith("application/json")
    got = json.loads(body)["findings"][0]
    expected = cli_verdict([str(HOROVOD)])
    assert (got["rule_id"], got["category"]) == expected
    quoted = b"Here is the log:\n```\n" + b"".join(b"> " + ln for ln in raw.splitlines(keepends=True)) + b"```\n"
    assert cli_verdict(["-"], stdin=quoted) == expected
    code, body, _ = call(server + "/analyze", quoted)
    got = json.loads(body)["findings"][0]
    assert (got["rule_id"], got["category"]) == expected


def test_redaction_is_on_by_default(server: str) -> None:
    body = call(server + "/analyze", ROCE.read_bytes())[1].decode()
    assert "rdma-node-a17" not in body and "10.1.0.17" not in body and "host-1" in body
    body = call(server + "/analyze?redact=0", ROCE.read_bytes())[1].decode()
    assert "rdma-node-a17" in body


def test_gzip_body_by_header_and_by_magic(server: str) -> None:
    gz = gzip.compress(ROCE.read_bytes())
    for headers in ({"Content-Encoding": "gzip"}, {}):
        code, body, _ = call(server + "/analyze", gz, headers)
        assert code == 200 and json.loads(body)["findings"][0]["category"] == "roce_gid"


def test_markdown_and_slack_formats(server: str) -> None:
    code, body, headers = call(server + "/analyze?format=markdown&max_chars=600", ROCE.read_bytes())
    assert code == 200 and headers["Content-Type"].startswith("text/markdown")
    assert body.decode().startswith("\U0001f534 **ERROR · roce_gid") and len(body.decode()) <= 600
    code, body, _ = call(server + "/analyze?format=slack", ROCE.read_bytes())
    assert code == 200 and json.loads(body)["blocks"][0]["type"] == "header"
    assert call(server + "/analyze?format=xml", b"x")[0] == 400


def test_body_is_never_a_path(server: str) -> None:
    """A path in the body is one line of text, not the file it names: not a log (422)."""
    code, body, _ = call(server + "/analyze?redact=0", str(HOROVOD).encode())
    assert code == 422 and json.loads(body)["error"].startswith("not a log")


def test_size_limit_413() -> None:
    srv, url = _start(max_bytes=1000)
    try:
        assert call(url + "/analyze", b"x" * 1001)[0] == 413
        bomb = gzip.compress(b"a" * 100_000)
        assert len(bomb) < 1000
        assert call(url + "/analyze", bomb)[0] == 413  # the decompressed size counts too
        assert call(url + "/analyze", LINE.ljust(999, b" "))[0] == 200
    finally:
        srv.shutdown()
        srv.shutdown_all()


def test_timeout_504_and_busy_503(monkeypatch: pytest.MonkeyPatch) -> None:
    real = serve.analyze_bytes

    def slow(data: bytes, rules: list) -> object:
        if data.startswith(b"SLOW"):
            time.sleep(1.5)
        return real(data, rules)

    monkeypatch.setattr(serve, "analyze_bytes", slow)
    srv, url = _start(timeout_s=0.3, workers=1)
    try:
        assert call(url + "/analyze", b"SLOW\n")[0] == 504
        assert call(url + "/analyze", LINE)[0] == 503  # the one worker is still busy
        time.sleep(1.5)
        assert call(url + "/analyze", LINE)[0] == 200
    finally:
        srv.shutdown()
        srv.shutdown_all()


def test_concurrent_requests() -> None:
    srv, url = _start(workers=8)
    try:
        logs = [HOROVOD.read_bytes(), ROCE.read_bytes()] * 4
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda b: call(url + "/analyze", b), logs))
        assert [r[0] for r in results] == [200] * 8
        cats = [json.loads(r[1])["findings"][0]["category"] for r in results]
        assert cats == [c for _ in range(4) for c in ("wrong_interface", "roce_gid")]
    finally:
        srv.shutdown()
        srv.shutdown_all()


def test_binds_loopback_by_default() -> None:
    srv = make_server(port=0)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.shutdown_all()


def test_serve_prints_the_address_it_listens_on_also_when_the_host_is_bytes(monkeypatch) -> None:
    """socketserver types a bound host as str | bytes: the line must not say http://b'...'."""
    from click.testing import CliRunner

    from ncclsleuth.cli import main

    class Fake:
        server_address = (b"127.0.0.1", 8123)

        def serve_forever(self) -> None:
            raise KeyboardInterrupt

        def shutdown_all(self) -> None:
            pass

    monkeypatch.setattr(serve, "make_server", lambda *a, **k: Fake())
    res = CliRunner().invoke(main, ["serve", "--port", "8123"])
    assert res.exit_code == 0, res.output
    assert "serving on http://127.0.0.1:8123 (POST /analyze" in res.output and "b'" not in res.output


@pytest.mark.parametrize("body", [b"hello world\n", bytes(range(256)) * 800], ids=["hello", "random"])
def test_a_body_that_is_not_a_log_is_422(server: str, body: bytes) -> None:
    code, text, _ = call(server + "/analyze", body)
    err = json.loads(text)
    assert code == 422 and err["status"] == 422
    assert err["error"].startswith("not a log: no line of NCCL, PyTorch distributed or nccl-tests was found")
    assert "NCCL_DEBUG=INFO" in err["error"]


def _raw(url: str, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request(method, path)
    r = conn.getresponse()
    out = (r.status, dict(r.getheaders()), r.read())
    conn.close()
    return out


def test_wrong_method_is_405_with_allow_and_head_works(server: str) -> None:
    status, headers, body = _raw(server, "GET", "/analyze")
    assert status == 405 and headers["Allow"] == "POST" and b"answers POST, not GET" in body
    status, headers, _ = _raw(server, "DELETE", "/rules")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, body = _raw(server, "HEAD", "/healthz")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    assert _raw(server, "PUT", "/nowhere")[0] == 404


def test_one_access_line_per_request_without_the_body() -> None:
    lines: list[str] = []
    srv, url = _start(access_log=lines.append)
    try:
        call(url + "/analyze?format=markdown", b"SECRET-LOG-TEXT " + LINE)
        _raw(url, "GET", "/analyze")
        call(url + "/healthz")
    finally:
        srv.shutdown()
        srv.shutdown_all()
    assert len(lines) == 3
    assert re.fullmatch(r'127\.0\.0\.1 "POST /analyze" 200 \d+ \d+ms', lines[0]), lines[0]
    assert re.fullmatch(r'127\.0\.0\.1 "GET /analyze" 405 \d+ \d+ms', lines[1])
    assert re.fullmatch(r'127\.0\.0\.1 "GET /healthz" 200 \d+ \d+ms', lines[2])
    assert not any("SECRET" in line for line in lines)


def test_sigterm_stops_the_server_at_once() -> None:
    import signal
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "ncclsleuth", "serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # wait until it answers
            try:
                if call(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 2.0
        assert proc.returncode == 0
        assert '"GET /healthz" 200' in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_takes_the_rule_options_and_the_configuration(tmp_path: Path) -> None:
    """``serve`` loads rules as ``analyze`` does: --rules, --keep-going, and the project's
    configuration (extra folders, disabled rules, severity overrides)."""
    import socket

    team = tmp_path / "team-rules"
    team.mkdir()
    shipped = (ROOT / "rules" / "torch" / "DESYNC002.yaml").read_text()
    (team / "DESYNC002.yaml").write_text(shipped.replace('title: "Rank {rank}', 'title: "Team says: rank {rank}'))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "NET900.yaml").write_text("id: NET900\nname: x\ncategory: nope\n")
    (tmp_path / ".ncclsleuth.yaml").write_text("rules: [team-rules]\ndisable: [INITT*]\nseverity: {NET001: warning}\n")
    args = [sys.executable, "-m", "ncclsleuth", "serve", "--rules", str(broken)]
    refused = subprocess.run([*args, "--port", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and "rules check" in refused.stderr  # before it binds anything
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*args, "--keep-going", "--port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        body = b""
        for _ in range(300):
            try:
                code, body, _ = call(f"http://127.0.0.1:{port}/rules")
                if code == 200:
                    break
            except OSError:
                time.sleep(0.05)
        rules = {r["id"]: r for r in json.loads(body)["rules"]}
        assert rules["DESYNC002"]["title"].startswith("Team says: rank")
        assert rules["NET001"]["severity"] == "warning"
        assert not any(i.startswith("INITT") for i in rules)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "NET900.yaml" in err and "(skipped)" in err
    assert err.count("replaces the shipped rule DESYNC002") == 1
