"""What a plain ``ncclsleuth analyze`` imports: only what it uses (start-up is what a
chat-ops bot pays per question), and every command is still reachable."""
from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ncclsleuth import cli

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "examples" / "desync-16"

_PROBE = """
import sys
from ncclsleuth.cli import main
try:
    main([*sys.argv[2:], "--format", "json", "-o", "/dev/null"])
except SystemExit:
    pass
print(" ".join(m for m in sys.argv[1].split(",") if m in sys.modules))
"""
#: modules a plain ``analyze`` of a text log must not import: other commands, codecs of
#: inputs it does not have
OTHER_COMMANDS = ("ncclsleuth.cli.report", "ncclsleuth.cli.watch", "ncclsleuth.cli.serve", "ncclsleuth.cli.diff",
                  "ncclsleuth.parse.catalog", "ncclsleuth.live", "ncclsleuth.serve",
                  "gzip", "bz2", "lzma", "multiprocessing")
#: ... nor, with warm caches, what only a first start needs: the YAML parser (the rule pack
#: and the knowledge base come from the cache, validated), Lark (the shapes from the
#: template store), the regex parser's Python half for ncclsleuth's own patterns, and the
#: modules of inputs and outputs it was not given (dumps of the Flight Recorder are parsed by
#: frdump and folded by model.flight, remote stores, redaction, the other renderers, the parallel engines
#: and the parse in pieces of a big file)
NOT_ON_A_WARM_START = ("yaml", "lark", "hashlib", "pickle", "ncclsleuth.util.yamldocs", "ncclsleuth.parse.frdump",
                       "ncclsleuth.ingest.remote", "ncclsleuth.report.redact", "ncclsleuth.parallel.pool",
                       "ncclsleuth.parallel.cluster", "ncclsleuth.renderers.html", "ncclsleuth.renderers.markdown",
                       "ncclsleuth.model.topology", "ncclsleuth.report.diff", "networkx", "ncclsleuth.model.flight",
                       "ncclsleuth.parse.pieces")


def _imported_by_analyze(path: Path, watch: tuple[str, ...] = OTHER_COMMANDS) -> set[str]:
    """Modules of ``watch`` imported by ``analyze path``, caches warm (a first run with
    empty caches imports Lark and YAML, which import codecs of their own)."""
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _PROBE, ",".join(watch), "analyze", str(path)],
                             capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_every_command_has_its_module():
    cli.register_commands()
    assert set(cli.main.commands) == set(cli.COMMAND_MODULES)


def test_each_command_runs_from_a_fresh_process():
    for name in cli.COMMAND_MODULES:
        res = subprocess.run([sys.executable, "-m", "ncclsleuth", name, "--help"], capture_output=True, text=True)
        assert res.returncode == 0 and "Usage:" in res.stdout, (name, res.stderr)


def test_help_lists_every_command():
    res = CliRunner().invoke(cli.main, ["--help"])
    assert all(name in res.output for name in cli.COMMAND_MODULES)


def test_analyze_imports_no_other_command_nor_unused_codecs():
    assert _imported_by_analyze(LOG) == set()


def test_a_compressed_log_imports_its_codec(tmp_path):
    src = next(LOG.iterdir())
    gz = tmp_path / (src.name + ".gz")
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert _imported_by_analyze(gz) == {"gzip"}


def test_a_warm_analyze_imports_only_what_it_uses():
    """The start-up a chat-ops bot pays per question: no parser of data files whose parsed
    form is cached, no module of an input or output this run does not have."""
    assert _imported_by_analyze(LOG, NOT_ON_A_WARM_START) == set()


def test_one_small_log_imports_no_fork_machinery():
    """``--jobs`` defaults to the machine's cores, and the rule step asks whether to share its
    rules with a helper (``parallel.rulestep``): a model this small answers no before the fork
    machinery (``parallel.forked``, ~1.1 ms of a paste's start) is imported."""
    one = sorted(LOG.iterdir())[0]
    assert _imported_by_analyze(one, ("ncclsleuth.parallel.forked", "ncclsleuth.parallel.local")) == set()


def test_the_probe_sees_an_unneeded_import():
    """The check above can fail: ``yaml`` imported by the run is reported."""
    assert _imported_by_analyze(LOG, ("yaml", "ncclsleuth.renderers.json_out")) == {"ncclsleuth.renderers.json_out"}


_COLLECTOR_PROBE = """
import gc, sys
import ncclsleuth.__main__ as start
from ncclsleuth import cli
seen = []
resolve = cli._LazyGroup.get_command
def get_command(self, ctx, name):  # start-up: the command's module is imported here
    seen.append(("start-up", gc.isenabled()))
    return resolve(self, ctx, name)
cli._LazyGroup.get_command = get_command
@cli.main.command("collector-probe")
def probe():
    seen.append(("command", gc.isenabled()))
sys.argv = ["ncclsleuth", *sys.argv[1:]]
try:
    start.entry()
except SystemExit:
    pass
print(seen, gc.isenabled(), flush=True)
"""


def _collector_states(*args: str, before: str = "") -> str:
    code = before + _COLLECTOR_PROBE
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_console_script_collects_no_garbage_until_the_command_starts():
    """``ncclsleuth.__main__.entry`` (``python -m`` and the console script): start-up without
    collection passes, the command (serve, watch: long-running) with the collector on."""
    assert _collector_states("collector-probe") == "[('start-up', False), ('command', True)] True"
    # a caller that had turned it off keeps it off
    assert _collector_states("collector-probe", before="import gc; gc.disable()\n") == (
        "[('start-up', False), ('command', False)] False")
    # no command ran (help lists them all): the process ends as it started up
    listed = _collector_states("--help").splitlines()[-1]
    assert listed.startswith("[('start-up', False)") and "True" not in listed and listed.endswith("] False")


def test_importing_the_cli_leaves_the_collector_alone():
    code = "import gc, ncclsleuth.cli, ncclsleuth.__main__; print(gc.isenabled())"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "True\n"
