"""The closed rule schema: malformed rule files give one clear error naming file and key."""
from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.rules.loader import load_rules
from ncclsleuth.rules.schema import RuleError

GOOD = textwrap.dedent("""\
    id: USR001
    name: user.example
    title: example
    category: other
    severity: warning
    confidence: 0.5
    description: d
    match:
      event: nccl_other
      where:
        message: {regex: "hello"}
    message: m
    fix: f
    references: [https://example.com]
    tests:
      - name: f
        fail: "h:1:2 [0] NCCL INFO hello world"
        expect_line: 1
      - name: p
        pass: "h:1:2 [0] NCCL INFO bye"
    """)


def write(tmp_path, name, text):
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


def test_good_user_rule_loads_and_its_tests_pass(tmp_path):
    d = write(tmp_path, "USR001.yaml", GOOD)
    rules, errors = load_rules([d])
    assert [r.id for r in rules] == ["USR001"] and not errors
    res = CliRunner().invoke(main, ["rules", "test", str(d)])
    assert res.exit_code == 0, res.output
    assert "2 passed, 0 failed" in res.output


def test_unknown_key_names_file_and_key(tmp_path):
    d = write(tmp_path, "USR001.yaml", GOOD + "severty: error\n")
    with pytest.raises(RuleError) as exc:
        load_rules([d])
    assert "USR001.yaml" in str(exc.value) and "severty" in str(exc.value)


def test_unknown_condition_operator(tmp_path):
    d = write(tmp_path, "USR001.yaml", GOOD.replace("{regex:", "{regexp:"))
    with pytest.raises(RuleError) as exc:
        load_rules([d])
    assert "regexp" in str(exc.value)


def test_bad_regex_is_a_rule_error(tmp_path):
    d = write(tmp_path, "USR001.yaml", GOOD.replace('"hello"', '"hel(lo"'))
    with pytest.raises(RuleError) as exc:
        load_rules([d])
    assert "does not compile" in str(exc.value)


def test_cli_stops_on_broken_rule_unless_keep_going(tmp_path):
    d = write(tmp_path, "USR002.yaml", "id: [unclosed\n")
    log = tmp_path / "x.log"
    log.write_text("h:1:2 [0] NCCL INFO Using network IB\n")
    res = CliRunner().invoke(main, ["analyze", str(log), "--rules", str(d)])
    assert res.exit_code == 2
    assert "USR002.yaml" in res.output
    res = CliRunner().invoke(main, ["analyze", str(log), "--rules", str(d), "--keep-going", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "USR002.yaml" in res.output  # reported, then skipped


def test_yaml_is_data_only(tmp_path):
    d = write(tmp_path, "USR001.yaml", "!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(RuleError):
        load_rules([d])


def test_explains_conditions_are_validated(tmp_path):
    write(tmp_path, "USR001.yaml", GOOD + "explains:\n  - event: nccl_other\n    where: {message: {bogus: 1}}\n")
    with pytest.raises(RuleError, match=r"explains\[0\]\.where\.message\.bogus"):
        load_rules([tmp_path / "rules"])


def test_explains_accounts_for_consequences_only_when_the_rule_fires(tmp_path):
    """RDZV001: 'failed to listen' follows the bind failures; alone it proves no port conflict."""
    from ncclsleuth.api import analyze

    bind = "[W socket.cpp:464] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).\n"
    listen = "[E socket.cpp:500] [c10d] The server socket has failed to listen on any local network address.\n"
    (tmp_path / "both.log").write_text(bind + listen)
    (tmp_path / "listen.log").write_text(listen)
    report = analyze([str(tmp_path / "both.log")])
    f = next(f for f in report.findings if f.rule_id == "RDZV001")
    assert [e.line for e in f.evidence] == [1]  # not evidence
    assert f.explained_lines() == {str(tmp_path / "both.log"): [1, 2]}
    assert report.unexplained_total == 0
    report = analyze([str(tmp_path / "listen.log")])
    assert "RDZV001" not in [f.rule_id for f in report.findings]
    # alone, the line is reported for what it means (the knowledge base's entry), not as a port conflict
    alone = [f for f in report.findings if str(tmp_path / "listen.log") in f.explained_lines()]
    assert [(f.rule_id, f.category) for f in alone] == [("MSG020", "rendezvous_misconfig")]
    assert report.unexplained_total == 0


FACT_RULE = GOOD.replace("""match:
  event: nccl_other
  where:
    message: {regex: "hello"}
message: m""", """match:
  fact: bad_interface
  where:
    where: bootstrap
message: "{host} bootstraps over {iface} ({reason})" """)


@pytest.mark.parametrize("change,key,says", [
    (("fact: bad_interface", "fact: bad_interfaces"), "match.fact", "unknown fact 'bad_interfaces'"),
    (("    where: bootstrap", "    whence: bootstrap"), "match.where.whence", "'bad_interface' has no field 'whence'"),
    (("({reason})", "({reson})"), "message", "placeholder {reson}: no matched event or fact has a field"),
    (("({reason})", "({boot.reason})"), "message", "placeholder {boot.reason}: no condition is named 'boot'"),
])
def test_fact_rules_are_checked_against_the_fact_declaration(tmp_path, change, key, says):
    """A fact declares the fields of its records: unknown facts, where keys and placeholders
    are load-time rule errors naming the key (not a KeyError, or "?" in a message, later)."""
    write(tmp_path, "USR001.yaml", FACT_RULE)
    load_rules([tmp_path / "rules"])  # the unchanged rule is fine
    d = write(tmp_path, "USR001.yaml", FACT_RULE.replace(*change))
    with pytest.raises(RuleError) as exc:
        load_rules([d])
    assert exc.value.key == key and says in str(exc.value), str(exc.value)


@pytest.mark.parametrize("change,key,says", [
    (("event: nccl_other", "event: nccl_others"), "match.event", "unknown event kind 'nccl_others'"),
    (("    message: {regex:", "    mesage: {regex:"), "match.where.mesage", "'nccl_other' has no field 'mesage'"),
    (("message: m", "message: '{catalog}'"), "message", "placeholder {catalog}"),
])
def test_event_rules_are_checked_against_the_event_fields(tmp_path, change, key, says):
    d = write(tmp_path, "USR001.yaml", GOOD.replace(*change))
    with pytest.raises(RuleError) as exc:
        load_rules([d])
    assert exc.value.key == key and says in str(exc.value), str(exc.value)


def test_named_items_and_counts_are_placeholders_too(tmp_path):
    d = write(tmp_path, "USR001.yaml", GOOD.replace("message: m", "message: '{count} x {first.subsys} on {hosts}'")
              .replace("  event: nccl_other\n", "  event: nccl_other\n  as: first\n"))
    (rule,), _ = load_rules([d])
    assert rule.message.startswith("{count}")
