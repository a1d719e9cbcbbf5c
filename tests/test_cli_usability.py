"""The command line as people meet it, through the real console script: widths and
wrapping, colour conventions, the one-line verdict, not-a-log input, output files by
suffix, the topology export, configuration files, rule authoring, help."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESYNC = ROOT / "fixtures" / "examples" / "desync-16"
CORPUS = ROOT / "fixtures" / "corpus"
REAL_LOGS = [DESYNC, CORPUS / "horovod-584-lo-interface", CORPUS / "nccl-1235-oom-multinode"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``ncclsleuth ARGS`` as a user runs it (a pipe for stdout: not a terminal)."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "LINES")}
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "ncclsleuth", *args], capture_output=True, text=True, cwd=cwd,
                          env=base, input=stdin.decode("latin-1") if stdin else None, timeout=300)


def _words(text: str) -> list[str]:
    return text.split()


# ----------------------------------------------------------------------------- terminal


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("log", REAL_LOGS, ids=[p.name for p in REAL_LOGS])
def test_terminal_never_breaks_a_word_or_a_border(width: int, log: Path) -> None:
    res = run("analyze", str(log), "--fail-on", "never", env={"COLUMNS": str(width)})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert max(len(line) for line in lines) <= width
    box = [line for line in lines if line and line[0] in "╭│╰"]
    assert box[0].startswith("╭") and box[0].endswith("╮") and len(box[0]) == width
    assert all(len(line) == width and line.endswith(("│", "╮", "╯")) for line in box)
    out_words = set(_words(res.stdout))
    report = json.loads(run("analyze", str(log), "--format", "json", "--fail-on", "never").stdout)
    for f in report["findings"]:
        for word in _words(f["title"] + " " + f["message"]):
            if len(word) < width - 12:  # a word longer than the line has to be cut somewhere
                assert word in out_words, f"{word!r} broken at width {width}"


TMUX_LOGS = [CORPUS / "horovod-584-lo-interface", CORPUS / "nccl-1235-oom-multinode",
             CORPUS / "simpletuner-2712-desync"]


def _tmux_capture(tmp_path: Path, width: int, *args: str, env_add: dict[str, str] | None = None,
                  escapes: bool = False) -> str:
    """What a terminal WIDTH columns wide shows of ``ncclsleuth ARGS``: run in a detached
    tmux pane (a real tty, no COLUMNS: the width is the terminal's), captured as drawn."""
    import shlex
    import time
    import uuid

    sock = f"ncclsleuth-test-{uuid.uuid4().hex[:12]}"  # a server of its own (a killed one may still be closing)
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g history-limit 20000\n")
    done = tmp_path / f"done-{sock}"
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "ncclsleuth", *args))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TMUX")}
    env.update(env_add or {})
    tmux = ["tmux", "-L", sock, "-f", str(conf)]
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "40", "-c", str(ROOT),
                    f"{cmd}; touch {shlex.quote(str(done))}; sleep 600"], check=True, env=env, timeout=60)
    try:
        for _ in range(1200):
            if done.exists():
                break
            time.sleep(0.1)
        assert done.exists(), "ncclsleuth did not finish in the tmux pane"
        return subprocess.run([*tmux, "capture-pane", "-p", *(["-e"] if escapes else []), "-S", "-", "-E", "-"],
                              capture_output=True, text=True,
                              check=True, timeout=60).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("log", TMUX_LOGS, ids=[p.name for p in TMUX_LOGS])
def test_tmux_capture_has_no_broken_word_or_border(tmp_path: Path, width: int, log: Path) -> None:
    screen = _tmux_capture(tmp_path, width, "analyze", str(log), "--fail-on", "never")
    lines = screen.rstrip("\n").split("\n")
    assert lines[0].startswith("╭") and "internal error" not in screen and len(lines) > 20
    assert max(len(line) for line in lines) <= width
    box = [line for line in lines if line and line[0] in "╭│╰"]
    assert box and box[0].startswith("╭") and "ncclsleuth verdict" in box[0] and box[-1].startswith("╰")
    assert all(len(line) == width and line.endswith(("│", "╮", "╯")) for line in box), box
    shown = set(_words(screen))
    report = json.loads(run("analyze", str(log), "--format", "json", "--fail-on", "never").stdout)
    assert report["findings"]
    for f in report["findings"]:
        for word in _words(f["title"] + " " + f["message"]):
            if len(word) < width - 12:
                assert word in shown, f"{word!r} broken at width {width}"
        for ev in f["evidence"]:  # evidence wraps at spaces too (a long line is cut at a space, with '…')
            for word in _words(ev["text"][:380])[:-1]:
                if len(word) < width - 12:
                    assert word in shown, f"evidence word {word!r} broken at width {width}"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_a_terminal_gets_colour_unless_no_color_is_set(tmp_path: Path) -> None:
    args = ("analyze", str(CORPUS / "horovod-584-lo-interface"), "--fail-on", "never")
    assert ANSI.search(_tmux_capture(tmp_path, 100, *args, escapes=True))
    plain = _tmux_capture(tmp_path, 100, *args, env_add={"NO_COLOR": "1"}, escapes=True)
    assert "ncclsleuth verdict" in plain and not ANSI.search(plain)


def test_piped_output_is_not_wrapped() -> None:
    res = run("analyze", str(DESYNC), "--fail-on", "never")
    report = json.loads(run("analyze", str(DESYNC), "--format", "json", "--fail-on", "never").stdout)
    lines = res.stdout.splitlines()
    for f in report["findings"]:
        assert f["message"] in lines or f"   {f['message']}" in lines  # one line, whole
    assert not any(line.startswith(("╭", "│")) for line in lines)  # no box around the verdict


def test_quiet_is_one_line_with_severity_category_and_verdict() -> None:
    res = run("analyze", str(DESYNC), "-q", env={"COLUMNS": "40"})
    assert res.returncode == 1
    assert res.stdout.count("\n") == 1
    assert res.stdout.startswith("ERROR [collective_desync] Rank 4 (node000) never called collective #1245")
    assert res.stdout.rstrip().endswith("(DESYNC002)")


@pytest.mark.parametrize("env,flag,colored", [
    ({}, None, False),  # piped: plain
    ({"FORCE_COLOR": "1"}, None, True),  # force-color.org: on although piped
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, None, False),  # no-color.org wins
    ({"NO_COLOR": "1"}, "--color=always", True),  # a flag wins over the environment
    ({"FORCE_COLOR": "1"}, "--color=never", False),
    ({"FORCE_COLOR": "1"}, "--no-color", False),
])
def test_colour_conventions(env: dict[str, str], flag: str | None, colored: bool) -> None:
    res = run("analyze", str(DESYNC), *([flag] if flag else []), env=env)
    assert bool(ANSI.search(res.stdout)) is colored


def test_evidence_is_grouped_by_file_in_line_order_and_repeats_collapsed() -> None:
    out = run("analyze", str(DESYNC), env={"COLUMNS": "200"}).stdout
    block = out.split("2. [TIMEOUT001]")[1].split("\n3. ")[0]
    numbers = [int(m) for m in re.findall(r"^ {7}(\d+) ", block, re.M)]
    assert numbers == sorted(numbers) and numbers
    assert "(×15, ranks 0-3, 5-15)" in block  # one watchdog line from 15 ranks, said once


def _with_bar_at_once(*args: str) -> list[str]:
    """``ncclsleuth ARGS`` through the CLI's entry point with the bar's delay set to 0 (a
    2-second delay keeps it off quick runs such as this one)."""
    code = ("import sys; import ncclsleuth.cli.progress as P; P.DELAY = 0; from ncclsleuth.cli import entry; "
            f"sys.argv = ['ncclsleuth', *{list(args)!r}]; entry()")
    return [sys.executable, "-c", code]


@pytest.mark.skipif(shutil.which("script") is None, reason="script (util-linux) not installed")
def test_progress_bar_with_total_and_eta_on_stderr_only_on_a_terminal(tmp_path: Path) -> None:
    import shlex

    cmd = _with_bar_at_once("analyze", str(DESYNC), "-j", "1")
    out, typescript = tmp_path / "stdout.txt", tmp_path / "typescript"
    # stderr is script's pty (a terminal), stdout a file
    shell = " ".join(shlex.quote(c) for c in cmd) + f" > {shlex.quote(str(out))}"
    subprocess.run(["script", "-qec", shell, str(typescript)], capture_output=True, timeout=300, cwd=ROOT)
    drawn = ANSI.sub("", typescript.read_text(encoding="utf-8", errors="replace"))
    # the total, its files, the ETA (rich draws -:--:-- when the last files came too fast for a rate)
    assert re.search(r"reading .*100% 16/16 files ETA (?:0:00:00|-:--:--)", drawn)
    report = out.read_text()
    assert "ncclsleuth verdict" in report and "reading" not in report and "ETA" not in report
    piped = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)  # stderr not a terminal
    assert piped.returncode == 1 and "reading" not in piped.stderr and "ETA" not in piped.stderr


# ----------------------------------------------------------------------------- words, ranks, hosts


def test_long_rank_lists_are_cut_for_people_with_their_count() -> None:
    from ncclsleuth.model.stats import ranges

    assert ranges([47, 40, 41, 42, 44], ", ", 3) == "40-42, 44, 47"  # three items: all of them
    assert ranges([47, 40, 41, 42, 44, 50], ", ", 3) == "40-42, 44, …, 50 (6 in all)"
    assert ranges(range(0, 30, 3), ", ", 4) == "0, 3, 6, …, 27 (10 in all)"
    assert ranges(range(0, 3000, 3)) == ",".join(map(str, range(0, 3000, 3)))  # data: whole


def test_a_line_repeated_by_hundreds_of_scattered_ranks_names_them_briefly() -> None:
    """A watchdog line from every third of 600 ranks: the terminal names the first ranges and the
    count (before, all 200: ~1,300 characters in the message and as many after the evidence line,
    ~60 terminal lines a line at 8,000 ranks); the JSON lists every rank."""
    log = "".join(f"[rank{r}]:[E1129 11:41:55.056547440 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
                  f"collective operation timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=262144, "
                  f"NumelOut=262144, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
                  for r in range(0, 600, 3)).encode()
    out = run("analyze", "-", "--fail-on", "never", env={"COLUMNS": "400"}, stdin=log).stdout
    assert "(×200, ranks 0, 3, 6, 9, 12, 15, 18, 21, 24, …, 597 (200 in all))" in out  # after the evidence line
    assert "ranks 0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, …, 597 (200 in all): the watchdog" in out
    assert "45, 48" not in out
    f = json.loads(run("analyze", "-", "--format", "json", "--fail-on", "never", stdin=log).stdout)["findings"][0]
    assert f["rule_id"] == "TIMEOUT001" and f["ranks"] == list(range(0, 600, 3))


def test_a_finding_names_the_ranks_its_message_names() -> None:
    """NCCL names ranks in its words ("at and around rank 39"): the finding's ranks say so,
    not only ranks in a [rankN] prefix."""
    log = (b"gpu7:401:402 [3] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
           b"gpu7:401:409 [3] enqueue.cc:1247 NCCL WARN Mismatched collective detected, please check your "
           b"collective calls at and around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see "
           b"the collective logs\n")
    res = run("analyze", "-", "--format", "json", "--fail-on", "never", stdin=log)
    f = json.loads(res.stdout)["findings"][0]
    assert (f["rule_id"], f["ranks"], f["hosts"]) == ("MSG022", [39], ["gpu7"])
    assert f["evidence"][0]["line"] == 2


# ----------------------------------------------------------------------------- not a log


@pytest.mark.parametrize("content", [b"hello world\n", bytes(range(256)) * 800], ids=["hello", "random"])
def test_a_file_that_is_not_a_log_says_so_with_its_own_exit_code(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "job.log"
    path.write_bytes(content)
    res = run("analyze", str(path))
    assert res.returncode == 3
    assert "Not a log: no line of NCCL, PyTorch distributed or nccl-tests was found" in res.stdout
    assert "NCCL_DEBUG=INFO" in res.stdout and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in res.stdout
    assert "No problem found" not in res.stdout
    js = run("analyze", str(path), "--format", "json")
    assert js.returncode == 3 and json.loads(js.stdout)["verdict"].startswith("not a log")


# ----------------------------------------------------------------------------- output files


@pytest.mark.parametrize("suffix,check", [
    (".json", lambda t: json.loads(t)["findings"][0]["rule_id"] == "DESYNC002"),
    (".md", lambda t: t.startswith("\U0001f534 **ERROR · collective_desync")),
    (".html", lambda t: t.startswith("<!DOCTYPE html>")),
    (".txt", lambda t: t.startswith("ncclsleuth verdict\nERROR · collective_desync") and "\x1b[" not in t),
])
def test_output_format_follows_the_suffix(tmp_path: Path, suffix: str, check) -> None:
    out = tmp_path / f"verdict{suffix}"
    res = run("analyze", str(DESYNC), "-o", str(out), env={"FORCE_COLOR": "1"})
    assert res.returncode == 1 and res.stdout == ""
    assert check(out.read_text(encoding="utf-8"))


def test_output_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    res = run("analyze", str(DESYNC), "-o", str(tmp_path / "no" / "such" / "a.json"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "does not exist" in res.stderr
    res = run("analyze", str(DESYNC), "-o", str(tmp_path / "a.pdf"))
    assert res.returncode == 2 and "cannot write .pdf" in res.stderr and "Traceback" not in res.stderr
    res = run("report", str(DESYNC), "-o", str(tmp_path / "missing" / "pm.html"))
    assert res.returncode == 2 and "does not exist" in res.stderr


def test_topology_export_writes_what_it_can_and_refuses_the_rest(tmp_path: Path) -> None:
    assert run("topology", str(DESYNC), "--export", str(tmp_path / "g.dot")).returncode == 0
    assert (tmp_path / "g.dot").read_text().startswith('digraph "0x')
    assert run("topology", str(DESYNC), "--export", str(tmp_path / "g.graphml")).returncode == 0
    assert "<graphml" in (tmp_path / "g.graphml").read_text()
    res = run("topology", str(DESYNC), "--export", str(tmp_path / "g.jpg"))
    assert res.returncode == 2 and "cannot write .jpg" in res.stderr and not (tmp_path / "g.jpg").exists()
    res = run("topology", str(DESYNC), "--export", str(tmp_path / "g.png"))
    if res.returncode == 0:  # Graphviz installed: a real PNG
        assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert res.returncode == 2 and "Graphviz" in res.stderr


# ----------------------------------------------------------------------------- configuration


def test_a_config_file_in_a_parent_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / ".ncclsleuth.yaml").write_text(
        "fail_on: never\ndisable: [INITT*, abort*]\nseverity: {TIMEOUT001: warning}\nformat: json\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    res = run("analyze", str(DESYNC), cwd=deep)
    assert res.returncode == 0, res.stderr  # fail_on: never
    report = json.loads(res.stdout)  # format: json
    ids = {f["rule_id"]: f["severity"] for f in report["findings"]}
    assert "INITT001" not in ids and "ABORT001" not in ids and ids["TIMEOUT001"] == "warning"
    assert run("analyze", str(DESYNC), "--fail-on", "error", "--format", "terminal", cwd=deep).returncode == 1
    show = run("config", "show", cwd=deep).stdout
    assert f"# configuration file: {tmp_path / '.ncclsleuth.yaml'}" in show
    assert re.search(r'^fail_on +"never"  # ' + re.escape(str(tmp_path / ".ncclsleuth.yaml")), show, re.M)
    assert re.search(r'^redact +false  # default$', show, re.M)


def test_pyproject_table_and_a_user_rule_replacing_a_shipped_one(tmp_path: Path) -> None:
    rules = tmp_path / "team-rules"
    rules.mkdir()
    shipped = (ROOT / "rules" / "torch" / "DESYNC002.yaml").read_text()
    (rules / "DESYNC002.yaml").write_text(shipped.replace('title: "Rank {rank}', 'title: "Team says: rank {rank}'))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.ncclsleuth]\nrules = ["team-rules"]\n')
    res = run("analyze", str(DESYNC), "-q", cwd=tmp_path)
    assert "Team says: rank 4" in res.stdout
    assert res.stderr.count("replaces the shipped rule DESYNC002") == 1
    bad = run("analyze", str(DESYNC), "--config", str(tmp_path / "nope.yaml"))
    assert bad.returncode == 2 and "configuration file not found" in bad.stderr


def test_a_misspelt_setting_is_an_error_naming_file_and_key(tmp_path: Path) -> None:
    (tmp_path / ".ncclsleuth.yaml").write_text("fail_onn: error\n")
    res = run("analyze", str(DESYNC), cwd=tmp_path)
    assert res.returncode == 2 and "key 'fail_onn': unknown setting" in res.stderr


# ----------------------------------------------------------------------------- rule authoring

FIVE_MISTAKES = """\
id: NET900
name: net.my_rule
title: "Peer {peerr} refused"
category: network_blokced
severity: error
confidence: 0.5
description: x
match:
  event: socket_eror
  where:
    error: {regexx: refused}
message: "{host}: refused"
fix: do something
references: [shared/reference/nccl/FORMAT.md]
tests:
  - name: t
    fail: "x"
    expect_line: 1
"""


def test_rules_check_reports_every_mistake_at_once_with_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "NET900.yaml").write_text(FIVE_MISTAKES)
    (tmp_path / "NET901.yaml").write_text(FIVE_MISTAKES.replace("NET900", "NET901").replace("socket_eror",
                                                                                            "socket_error"))
    res = run("rules", "check", str(tmp_path))
    assert res.returncode == 2
    out = res.stdout
    f900, f901 = tmp_path / "NET900.yaml", tmp_path / "NET901.yaml"
    assert f"{f900}:4: key 'category': unknown category 'network_blokced' (valid: " in out
    assert "network_blocked" in out.split("'category'")[1].split("\n")[0]
    assert f"{f900}:9: key 'match.event': unknown event kind 'socket_eror' (did you mean 'socket_error'?)" in out
    assert f"{f900}:11: key 'match.where.error.regexx': unknown operator (did you mean 'regex'?)" in out
    assert f"{f900}:14: key 'references[0]': must be a public URL" in out
    # with the kind known, its fields are: the placeholder nothing fills is found too
    assert f"{f901}:3: key 'title': placeholder {{peerr}}: no matched event or fact has a field 'peerr'" \
           " (did you mean 'peer'?)" in out
    assert "2 rule files checked: 8 errors in 2 files" in res.stderr


SIX_MISTAKES_ONE_FILE = """\
id: NET950
name: net.six_mistakes
title: "Peer {peer} refused"
category: network_blokced
severity: fatal
confidence: 0.5
description: x
match:
  all:
    - event: socket_error
      where:
        error: {regexx: refused}
    - fact: no_such_fact
    - event: socket_eror
message: "{host}: refused"
fix: do something
references: [shared/reference/nccl/FORMAT.md]
tests:
  - name: t
    fail: "x"
    expect_line: 1
"""


def test_one_rule_file_with_six_different_mistakes_is_told_all_of_them_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "NET950.yaml").write_text(SIX_MISTAKES_ONE_FILE)
    res = run("rules", "check", str(tmp_path))
    assert res.returncode == 2 and "1 rule file checked: 6 errors in 1 file" in res.stderr
    where = re.findall(r"^" + re.escape(str(tmp_path / "NET950.yaml")) + r":(\d+): key '([^']+)': (.*)$",
                       res.stdout, re.M)
    assert [(int(n), k) for n, k, _ in where] == [
        (4, "category"), (5, "severity"), (12, "match.all[0].where.error.regexx"), (13, "match.all[1].fact"),
        (14, "match.all[2].event"), (17, "references[0]")]
    said = dict((k, m) for _, k, m in where)
    assert said["severity"] == "severity must be one of info, warning, error (got 'fatal')"
    assert said["match.all[1].fact"].startswith("unknown fact 'no_such_fact' (known: ") and "init_timing" in \
        said["match.all[1].fact"]
    assert said["match.all[2].event"].startswith("unknown event kind 'socket_eror' (did you mean 'socket_error'?)")


def test_keep_going_skips_a_broken_rule_file_on_every_command(tmp_path: Path) -> None:
    (tmp_path / "NET900.yaml").write_text(FIVE_MISTAKES)
    for args in (["analyze", str(DESYNC), "-q"], ["rules", "list"], ["report", str(DESYNC)],
                 ["explain", "NET001"], ["diff", str(DESYNC), str(DESYNC)]):
        broken = run(*args, "--rules", str(tmp_path))
        assert broken.returncode == 2 and "rules check" in broken.stderr, args
        kept = run(*args, "--rules", str(tmp_path), "--keep-going")
        assert kept.returncode in (0, 1) and "(skipped)" in kept.stderr, args
    res = run("rules", "test", str(tmp_path), "--keep-going")
    assert res.returncode == 0 and "0 passed, 0 failed" in res.stdout and "(skipped)" in res.stderr


def test_events_lists_kinds_and_fields() -> None:
    res = run("events", "--format", "json")
    data = json.loads(res.stdout)
    assert "timeout_ms" in data["events"]["watchdog_timeout"]["fields"]
    assert data["events"]["watchdog_timeout"]["origin"] == "torch"
    assert "slow_rank" in data["facts"]["init_timing"]["fields"]
    assert run("events", "no_such_kind").returncode == 2


def test_the_published_json_schema_is_the_schema_and_accepts_the_pack() -> None:
    from ncclsleuth.rules.schema import json_schema

    published = json.loads((ROOT / "docs" / "rule.schema.json").read_text())
    assert published == json_schema(enums=False), \
        "regenerate: python -m ncclsleuth.rules.schema > docs/rule.schema.json"
    full = json.loads(run("rules", "schema").stdout)  # with this version's kinds, facts, categories
    assert "watchdog_timeout" in json.dumps(full) and full["properties"]["category"]["enum"]
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    validator = jsonschema.Draft202012Validator(full)
    for path in (ROOT / "rules").rglob("*.yaml"):
        assert not list(validator.iter_errors(yaml.safe_load(path.read_text()))), path
    assert list(validator.iter_errors(yaml.safe_load(FIVE_MISTAKES)))


# ----------------------------------------------------------------------------- help


def test_every_command_has_an_example_and_the_top_help_is_whole() -> None:
    from ncclsleuth.cli import main, register_commands

    register_commands()
    top = run("--help").stdout
    assert "..." not in top.split("Commands:")[1]  # summaries not cut
    for name, cmd in main.commands.items():
        subs = getattr(cmd, "commands", {}) or {name: cmd}
        for sub in subs:
            args = [name] if sub == name else [name, sub]
            text = run(*args, "--help").stdout
            assert "Example" in text, args
    assert run("-V").stdout.startswith("ncclsleuth, version ")


def test_a_pyproject_that_only_mentions_the_table_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / ".ncclsleuth.yaml").write_text("fail_on: never\n")
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[project]\nname = "x"  # configure with [tool.ncclsleuth]\n')
    res = run("config", "show", cwd=sub)
    assert res.returncode == 0 and f"# configuration file: {tmp_path / '.ncclsleuth.yaml'}" in res.stdout


def test_shell_completion_as_documented() -> None:
    """The script the README says to eval, and the completions a shell then asks for:
    commands, options, an option's choices."""
    script = run("completion", "bash")
    assert script.returncode == 0 and "_NCCLSLEUTH_COMPLETE=bash_complete" in script.stdout
    assert 'eval "$(ncclsleuth completion bash)"' in (ROOT / "README.md").read_text()

    exe = Path(sys.executable).with_name("ncclsleuth")  # the console script a shell completes
    if not exe.exists():
        pytest.skip("no ncclsleuth console script beside this Python (pip install -e .)")

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_NCCLSLEUTH_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        res = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
        return [line.split(",", 1)[1] for line in res.stdout.splitlines()]

    assert complete("ncclsleuth ana", 1) == ["analyze"]
    assert complete("ncclsleuth analyze --col", 2) == ["--color"]
    assert complete("ncclsleuth analyze --color ", 3) == ["auto", "always", "never"]
    assert run("completion", "tcsh").returncode == 2


def _collector_on_when_called(monkeypatch, module: object, name: str, args: list[str]) -> list[bool]:  # type: ignore[no-untyped-def]
    """Whether the cyclic collector was on each time ``module.name`` was called while the CLI ran
    ``args`` (in this process, its collector on before)."""
    import gc

    from click.testing import CliRunner

    from ncclsleuth.cli import main

    seen: list[bool] = []
    real = getattr(module, name)

    def called(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(module, name, called)
    was_on = gc.isenabled()
    gc.enable()
    try:
        res = CliRunner().invoke(main, args)
    finally:
        if not was_on:
            gc.disable()
    assert res.exit_code == 0, res.output
    return seen


def test_topology_draws_its_graphs_with_the_collector_still_paused(monkeypatch) -> None:
    """The build paused the cyclic collector and turned it on at its end: drawing the graphs then
    ran a pass over the whole model first (topology of the 8,000-rank file 3.45-3.57 -> 2.73-2.82 s
    with the command paused throughout)."""
    from ncclsleuth.model import topology

    assert _collector_on_when_called(monkeypatch, topology, "analyze_topology",
                                     ["topology", str(DESYNC), "--format", "json"]) == [False]


def test_the_post_mortem_page_is_rendered_with_the_collector_still_paused(monkeypatch) -> None:
    """``api.analyze`` turned the collector on at its end: rendering the page then began with a
    pass over the whole model (``report`` of the 8,000-rank file 4.09-4.11 -> 3.62-3.75 s paused
    throughout, with the fast exit)."""
    from ncclsleuth import renderers

    assert _collector_on_when_called(monkeypatch, renderers, "render",
                                     ["report", str(DESYNC), "--format", "markdown"]) == [False]


# ----------------------------------------------------------------------------- cache


def test_cache_warm_keeps_what_a_first_run_makes_and_the_next_run_reads_it(tmp_path: Path) -> None:
    """A run on a fresh cache folder (a new container) first parsed the rule pack, made the knowledge
    table, compiled Lark's grammar and indexed the NCCL catalog: a 200-line paste took ~0.6 s
    against ~0.07 s.  ``cache warm`` makes and keeps them (in an image, as the user that runs
    ncclsleuth); the next run finds each kept and makes none of them again."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    res = run("cache", "warm", env=env)
    assert res.returncode == 0, res.stderr
    steps = [line.split("  ")[0] for line in res.stdout.splitlines()[:-1]]
    assert steps == ["rule pack", "knowledge table", "grammar", "NCCL catalog", "compiled code"]
    assert res.stdout.splitlines()[-1] == f"kept in {tmp_path / 'ncclsleuth'}"
    kept = {p.name.split("-")[0] for p in (tmp_path / "ncclsleuth").iterdir()}
    assert {"grammar.lark.cache", "knowledge", "rulepack", "catalog", "code"} <= kept
    # the next run, in a process of its own, finds them kept: asked where each would be made
    probe = """
import os, sys
from ncclsleuth import api, knowledge
from ncclsleuth.parse import catalog
from ncclsleuth.util import cache
folder = str(knowledge.default_dir())
made = []
for mod, name in ((knowledge, "_docs"), (catalog, "_table")):
    real = getattr(mod, name)
    setattr(mod, name, lambda *a, _r=real, _n=name: made.append(_n) or _r(*a))
knowledge.prepare()
knowledge.identifier()
catalog.prepare()
print(cache.is_kept("knowledge", knowledge._sources(folder), knowledge.TABLE_VERSION), made)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.stdout.split() == ["True", "[]"], done.stderr


def test_cache_warm_with_a_sample_keeps_its_line_shapes_and_exits_0(tmp_path: Path) -> None:
    """With a log of the kind the jobs write, the templates of its line shapes are kept too: the
    next analysis of such a log never imports Lark.  The sample's findings do not fail the
    command (``analyze`` exits 1 on them: a Dockerfile's RUN would stop)."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    sample = ROOT / "fixtures" / "examples" / "desync-16"
    assert run("analyze", str(sample), "-q", env=env).returncode == 1  # what the README used to suggest
    for p in (tmp_path / "ncclsleuth").iterdir():
        p.unlink()
    res = run("cache", "warm", str(sample), env=env)
    assert res.returncode == 0, res.stderr
    assert [line.split("  ")[0] for line in res.stdout.splitlines()][-2] == "line shapes"
    probe = f"""
import sys
from ncclsleuth import api
api.analyze([{str(sample)!r}], api.Options(jobs=1))
print("lark" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.stdout.split() == ["False"], done.stderr


def test_cache_warm_without_a_cache_folder_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run("cache", "warm", env={"XDG_CACHE_HOME": str(blocker)})
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("ncclsleuth: error: cache warm: no cache folder to keep them in")
