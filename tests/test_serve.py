"""The HTTP API, started for real on a free loopback port and spoken to with urllib."""
from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
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


def test_timeout_kills_the_worker_and_frees_its_slot_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed-out analysis used to run on in its thread: the next request got 503 until it ended."""
    real = serve.analyze_bytes

    def slow(data: bytes, rules: list, source: str = "<request>", shapes: object = None) -> object:
        if data.startswith(b"SLOW"):
            time.sleep(30)
        return real(data, rules, source, shapes)

    monkeypatch.setattr(serve, "analyze_bytes", slow)  # the workers are forked after this
    srv, url = _start(timeout_s=1.0, workers=1)
    try:
        t = time.monotonic()
        assert call(url + "/analyze", b"SLOW\n")[0] == 504
        assert time.monotonic() - t < 5
        t = time.monotonic()
        code, body, _ = call(url + "/analyze", ROCE.read_bytes())  # the one worker was killed and replaced
        assert code == 200 and json.loads(body)["findings"][0]["category"] == "roce_gid"
        assert time.monotonic() - t < 10
    finally:
        srv.shutdown()
        srv.shutdown_all()


def test_busy_503_beyond_workers_and_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    real = serve.analyze_bytes

    def slow(data: bytes, rules: list, source: str = "<request>", shapes: object = None) -> object:
        if data.startswith(b"SLOW"):
            time.sleep(2)
        return real(data, rules, source, shapes)

    monkeypatch.setattr(serve, "analyze_bytes", slow)
    srv, url = _start(timeout_s=10.0, workers=1, queue=1)
    try:
        with ThreadPoolExecutor(3) as pool:
            first = pool.submit(call, url + "/analyze", b"SLOW " + LINE)
            time.sleep(0.5)
            queued = pool.submit(call, url + "/analyze", LINE)  # waits for the worker
            time.sleep(0.3)
            assert call(url + "/analyze", LINE)[0] == 503  # one running, one waiting: full
            assert first.result()[0] == 200 and queued.result()[0] == 200
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
    # serve installs its SIGTERM handler (raise KeyboardInterrupt) in this process: put pytest's
    # back, or a worker forked later by a --jobs test unwinds through pytest when it is stopped
    # (CI printed a second session summary, "4039 passed ... KeyboardInterrupt", from one)
    before = signal.getsignal(signal.SIGTERM)
    try:
        res = CliRunner().invoke(main, ["serve", "--port", "8123"])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert res.exit_code == 0, res.output
    assert "serving on http://127.0.0.1:8123 (POST /analyze" in res.output and "b'" not in res.output


# ---------------------------------------------------------------------------------------------
# Hostile clients (issue 17): each of these was reproduced against the server before.



def raw_request(url: str, data: bytes, read_timeout: float = 30.0, shut: bool = True) -> bytes:
    """Send raw bytes on a fresh connection; what the server answers until it closes."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=read_timeout) as s:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # answered and closed before all was sent (a limit): read the answer
            pass
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
    return out


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


@pytest.fixture
def small() -> Iterator[str]:
    srv, url = _start(max_bytes=1000, read_timeout=1.0, request_timeout=3.0)
    yield url
    srv.shutdown()
    srv.shutdown_all()


@pytest.mark.parametrize("length", ["-1", "+5", " 5 x", "1_0", "0x10", "5.0", "١٠"])
def test_content_length_must_be_a_plain_integer(small: str, length: str) -> None:
    """``Content-Length: -1`` passed the size check and read until the client closed (a 120 MB
    body past a 50 MB limit was analysed); ``+5``, `` 5 ``, ``1_0`` were accepted too."""
    answer = raw_request(small, f"POST /analyze HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()
                         + b"x" * 5000)
    assert status_of(answer) == 400, answer[:200]
    assert b"Content-Length" in answer


def test_chunked_bodies_count_against_the_limit(small: str) -> None:
    def chunked(body: bytes) -> bytes:
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 300]), body[i:i + 300]) for i in range(0, len(body), 300))
        return (b"POST /analyze HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")

    assert status_of(raw_request(small, chunked(b"x" * 5000))) == 413
    ok = raw_request(small, chunked(b"h:1:1 [0] misc/socket.cc:1 NCCL WARN connect refused\n" * 10))
    assert status_of(ok) == 200
    both = (b"POST /analyze HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n")
    assert status_of(raw_request(small, both)) == 400  # request smuggling's ambiguity: refused
    assert status_of(raw_request(small, b"POST /analyze HTTP/1.1\r\nHost: x\r\n\r\n")) == 411


def test_idle_and_slow_clients_are_cut_off(small: str) -> None:
    """Idle connections were held with no timeout (20 slow clients held 20 connections for 60 s)."""
    host, port = small.split("//")[1].split(":")
    t = time.monotonic()
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(5)]
    assert all(s.recv(10) == b"" for s in idle)  # closed by the server after read_timeout
    assert time.monotonic() - t < 5
    slow = socket.create_connection((host, int(port)), timeout=10)
    t = time.monotonic()
    closed = False
    for c in b"POST /analyze HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n":  # a byte every 0.5 s
        try:
            slow.sendall(bytes([c]))
        except OSError:
            closed = True
            break
        time.sleep(0.5)
        if time.monotonic() - t > 6:
            break
    assert closed or slow.recv(10) == b""  # cut at request_timeout (3 s), although never silent 1 s
    assert time.monotonic() - t < 6
    for s in idle + [slow]:
        s.close()


def test_connection_limit() -> None:
    srv, url = _start(max_connections=3, read_timeout=5.0)
    host, port = url.split("//")[1].split(":")
    held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(3)]
    try:
        time.sleep(0.3)
        answer = raw_request(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", read_timeout=5)
        assert status_of(answer) == 503
    finally:
        for s in held:
            s.close()
        srv.shutdown()
        srv.shutdown_all()


def test_deflate_decoded_br_and_zstd_refused(server: str) -> None:
    """deflate, br and zstd bodies were analysed as text: 200 "no problem found"."""
    log = ROCE.read_bytes()
    for body in (zlib.compress(log), zlib.compress(log)[2:-4]):  # zlib-wrapped, and raw deflate
        code, out, _ = call(server + "/analyze", body, {"Content-Encoding": "deflate"})
        assert code == 200 and json.loads(out)["findings"][0]["category"] == "roce_gid"
    for enc in ("br", "zstd", "compress", "gzip, br"):
        code, out, _ = call(server + "/analyze", log, {"Content-Encoding": enc})
        assert code == 415, (enc, code)


def test_every_gzip_member_is_read(server: str) -> None:
    """Only the first member of a multi-member gzip was read."""
    lines = ROCE.read_bytes().splitlines(keepends=True)
    body = gzip.compress(b"just a line\n") + gzip.compress(b"".join(lines))
    code, out, _ = call(server + "/analyze", body, {"Content-Encoding": "gzip"})
    assert code == 200 and json.loads(out)["findings"][0]["category"] == "roce_gid"


def test_truncated_gzip_is_analysed_with_a_notice(server: str) -> None:
    """A truncated gzip body was analysed in part with no notice."""
    gz = gzip.compress(ROCE.read_bytes() * 20)
    code, out, headers = call(server + "/analyze", gz[: len(gz) // 2], {"Content-Encoding": "gzip"})
    d = json.loads(out)
    assert code == 200 and d["findings"]
    assert any("truncated" in n["message"] for n in d["notices"]), d["notices"]
    assert "truncated" in headers.get("X-Ncclsleuth-Notice", "")


def test_random_bytes_are_not_a_log(server: str) -> None:
    """1 MB of random bytes got 200 "no problem found"."""
    code, out, _ = call(server + "/analyze", os.urandom(1 << 20))
    err = json.loads(out)["error"]
    assert code == 422 and err.startswith("not a log") and "the body is not text" in err
    latin = "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4 on héllo wörld\n".encode("latin-1") * 50
    code, _, _ = call(server + "/analyze", latin)
    assert code == 200  # a few non-UTF-8 letters are still text


@pytest.mark.parametrize("query,why", [("max_chars=-50", "max_chars"), ("max_chars=10", "max_chars"),
                                       ("max_chars=abc", "max_chars"), ("redact=maybe", "redact"),
                                       ("fromat=json", "unknown parameter"), ("format=json&format=slack", "more than once"),
                                       ("format=xml", "format")])
def test_parameters_are_checked(server: str, query: str, why: str) -> None:
    """``max_chars=-50`` returned a body of ``…``."""
    code, out, _ = call(server + "/analyze?" + query, ROCE.read_bytes())
    assert code == 400 and why in json.loads(out)["error"]


def test_head_and_methods(server: str) -> None:
    """HEAD returned 501."""
    req = urllib.request.Request(server + "/healthz", method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200 and r.read() == b"" and int(r.headers["Content-Length"]) > 0
    assert call(server + "/analyze")[0] == 405
    req = urllib.request.Request(server + "/analyze", data=b"x", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405


def test_templates_and_rules_are_loaded_once_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each request read the 8.6 MB template cache from disk."""
    from ncclsleuth.parse import grammar

    reads = tmp_path / "reads"
    real = grammar._read_store

    def counted() -> object:
        with open(reads, "a") as f:  # appended from whichever process reads
            f.write("r\n")
        return real()

    monkeypatch.setattr(grammar, "_read_store", counted)
    srv, url = _start(workers=2)
    try:
        at_start = reads.read_text().count("r") if reads.exists() else 0
        for _ in range(4):
            assert call(url + "/analyze", HOROVOD.read_bytes())[0] == 200
        assert (reads.read_text().count("r") if reads.exists() else 0) == at_start <= 1
    finally:
        srv.shutdown()
        srv.shutdown_all()


def test_glued_records_body_is_fast_and_bounded(server: str) -> None:
    """One 1 MB line of glued NCCL records cost 5 s and 530 MB before a RecursionError; four such
    gzip bodies (99 KB each) held the server at 3 GB and answered 503 for over 2 minutes."""
    line = "".join(f"node{i % 97}:1:1 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: refused"
                   for i in range(12000))[: 1 << 20]
    body = gzip.compress((line + "\n").encode())
    t = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: call(server + "/analyze", body, {"Content-Encoding": "gzip"}), range(4)))
    assert [r[0] for r in results] == [200] * 4
    assert time.monotonic() - t < 30
    assert "node" not in results[0][1].decode()  # redacted: every glued host too


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
