"""The rule step's memory: what a rule matched lives as long as its findings are being made."""
from __future__ import annotations

import weakref
from typing import Any

import pytest

from ncclsleuth import api
from ncclsleuth.rules import match, ranking
from ncclsleuth.rules.schema import build_rule


class _Item(dict):  # type: ignore[type-arg]
    """A match item that can be watched (a plain dict takes no weak reference)."""


def _rule(rid: str, cond: dict[str, Any]) -> Any:
    return build_rule({"id": rid, "name": rid.lower(), "title": rid, "category": "app_crash",
                       "severity": "error", "confidence": 0.5, "description": "d",
                       "match": cond, "message": "m", "fix": "f", "references": [], "tests": []}, "test")


def test_a_fired_rules_items_are_gone_before_the_next_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the items of the last rule that fired were locals of the loop over the rules and
    lived on through every rule that did not fire (on the 8,000-rank file, 28,000 watchdog items,
    7 MB, at the rule step's peak)."""
    lines = "".join(f"host{r}:1{r}:2{r} [0] NCCL WARN Cuda failure 'out of memory' rank {r}\n" for r in range(4))
    model = api.build(api.memory_sources({"job.log": lines})).model
    assert [ev.kind for ev in model.events["nccl_other"]] == ["nccl_other"] * 4
    made: list[weakref.ref[_Item]] = []

    def light(ev: Any) -> _Item:
        it = _Item(evidence=[ev], host=ev.host, rank=ev.rank)
        made.append(weakref.ref(it))
        return it

    monkeypatch.setattr(match, "_light_item", light)
    alive_later: list[int] = []
    real = ranking.evaluate

    def watched(cond: dict[str, Any], ctx: match.Context) -> match.Match:
        if cond.get("fact") == "nothing_here":
            alive_later.append(sum(r() is not None for r in made))
        return real(cond, ctx)

    monkeypatch.setattr(ranking, "evaluate", watched)
    monkeypatch.setitem(match.FACTS, "nothing_here", lambda model: [])
    found = ranking.run_rules(model, [_rule("T001", {"event": "nccl_other"}),
                                      _rule("T002", {"fact": "nothing_here"})])
    assert [f.rule_id for f in found] == ["T001"] and found[0].evidence_total == 4
    assert len(made) == 3  # the lines after the first (the first is the full item)
    assert alive_later == [0]


def _job(n: int) -> Any:
    lines = "".join(f"host{r}:1{r}:2{r} [0] NCCL WARN Cuda failure 'out of memory' rank {r}\n" for r in range(n))
    return api.build(api.memory_sources({"job.log": lines})).model


def test_a_match_past_the_first_is_a_line_item_that_reads_as_the_dict_it_replaces() -> None:
    """Before: a dict and a list a matched event past the first (~270 bytes; three a rank for a rule
    on the watchdog's lines)."""
    model = _job(3)
    m = match.evaluate({"event": "nccl_other"}, match.Context(model))
    assert m.ok and len(m.items) == 3
    first, rest = m.items[0], m.items[1:]
    assert type(first) is dict and all(type(it) is match.LineItem for it in rest)
    evs = model.events["nccl_other"]
    for it, ev in zip(rest, evs[1:]):
        assert dict(it) == {"evidence": [ev], "host": ev.host, "rank": ev.rank}
        assert it == {"evidence": [ev], "host": ev.host, "rank": ev.rank}
        assert it.get("evidence", ()) == [ev] and it.get("host") == ev.host and it.get("pid") is None
        assert it.get("pid", 7) == 7 and "host" in it and "pid" not in it and list(it) == ["evidence", "host", "rank"]
        with pytest.raises(KeyError):
            it["pid"]
    import sys

    assert sys.getsizeof(rest[0]) < sys.getsizeof({"evidence": [evs[1]], "host": "h", "rank": 1})


def test_the_lines_explained_so_far_are_the_findings_own_sets() -> None:
    """Before: ``run_rules`` kept a union of every finding's lines besides their own sets."""
    big = {("a.log", n) for n in range(ranking.Explained.LARGE)}
    small = {("b.log", 1)}
    ex = ranking.Explained()
    assert not ex and ("a.log", 0) not in ex
    ex.add(small)
    ex.add(big)
    ex.add(set())
    assert ex and ("a.log", 0) in ex and ("b.log", 1) in ex and ("b.log", 2) not in ex and ("a.log", -1) not in ex
    assert ex.large == [big] and ex.large[0] is big  # the finding's own set, not a copy
    assert ex.small == small and ex.small is not small  # small ones copied into one (the finding keeps its own)


def test_known_message_records_share_the_lists_that_say_the_same() -> None:
    """Before: two new lists a record (categories; the ranks a message names: mostly none)."""
    from ncclsleuth.model.facts.knowledge import known_message

    named = known_message(_job(3))  # "... rank N": each record its own list of the ranks named
    assert {r["id"] for r in named} == {named[0]["id"]} and named[0]["categories"]
    assert all(r["categories"] is named[0]["categories"] for r in named)
    assert sorted({(r["evidence"][0].line, tuple(r["ranks"])) for r in named}) == [(1, (0,)), (2, (1,)), (3, (2,))]
    ib = "".join(f"host{r}:1{r}:2{r} [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                 f"10.0.0.{r}<4567> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 "
                 "remoteGidsfe80::1 hca mlx5_0\n" for r in range(3))
    plain = known_message(api.build(api.memory_sources({"job.log": ib})).model)
    assert {r["evidence"][0].line for r in plain} == {1, 2, 3} and all(r["ranks"] == [] for r in plain)
    assert all(r["ranks"] is plain[0]["ranks"] and r["categories"] is plain[0]["categories"] for r in plain)


def test_lines_that_say_the_same_share_one_known() -> None:
    """Before: a ``Known`` and the text read again for every rank's copy of the same line (~230
    bytes a rank of the rule step's peak on 4,096 per-rank files)."""
    from ncclsleuth.knowledge import identifier

    idf = identifier()
    line = "terminate called after throwing an instance of 'c10::DistBackendError'"
    a, b = idf.identify(line), idf.identify("".join(line))  # an equal text, another object
    assert a is not None and a is b and a.message == line
    msg = ("NET/IB : Got completion from peer 10.0.0.1<4567> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
           "localGid ::ffff:10.0.0.1 remoteGidsfe80::1 hca mlx5_0")
    w1 = idf.identify(f"gpu1:1:2 [0] transport/net_ib.cc:1696 NCCL WARN {msg}")
    w2 = idf.identify_warn(msg)  # as a layer above quotes it: no file
    assert w1 is not None and w2 is not None and (w1.source, w1.id) == (w2.source, w2.id) == ("nccl", w1.id)
    assert (w1.file, w2.file) == ("transport/net_ib.cc", None) and w1.message == w2.message
    assert idf.identify_warn(w1.message, "transport/net_ib.cc") is w1  # every rank's copy of the line: one
    assert idf.identify(f"gpu2:3:4 [1] transport/net_ib.cc:1696 NCCL WARN {msg}") is w1
    assert idf.identify("hello world") is None and idf.identify("hello world") is None


def test_a_facts_records_go_after_the_last_rule_that_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every fact's records stayed to the end of the rule step (the whole-job reports, the
    init records: ~120 bytes a rank of its peak on 4,096 per-rank files)."""
    model = _job(3)
    made: list[str] = []
    monkeypatch.setitem(match.FACTS, "t_one", lambda model: made.append("one") or [])
    monkeypatch.setitem(match.FACTS, "t_two", lambda model: made.append("two") or [])
    held: list[set[str]] = []
    real = ranking.evaluate

    def watched(cond: dict[str, Any], ctx: match.Context) -> match.Match:
        held.append(set(ctx._facts))  # noqa: SLF001 - what the context holds as each rule starts
        return real(cond, ctx)

    monkeypatch.setattr(ranking, "evaluate", watched)
    rules = [_rule("T001", {"fact": "t_one"}), _rule("T002", {"any": [{"fact": "t_one"}, {"fact": "t_two"}]}),
             _rule("T003", {"not": {"fact": "t_two"}})]
    ranking.run_rules(model, rules)
    assert made == ["one", "two"]  # each made once, for all its readers
    assert held == [set(), {"t_one"}, {"t_two"}]  # t_one gone after T002, its last reader
    ctx = match.Context(model)  # a context the caller gives keeps what it holds
    ranking.run_rules(model, rules, ctx)
    assert set(ctx._facts) == {"t_one", "t_two"}  # noqa: SLF001


def test_the_unexplained_lines_asked_at_once_are_those_asked_one_by_one() -> None:
    """The report and the per-line facts ask every problem line at once (``Explained.unexplained``:
    a bisect an array over the model's numbers); the answer is ``in``'s, line by line."""
    from ncclsleuth.rules.findings import file_ids
    from ncclsleuth.rules.lineset import LineSet

    model = _job(6)
    evs = model.error_events()
    ids = file_ids(model)
    ex = ranking.Explained()
    ex.add(LineSet([("job.log", evs[1].line), ("job.log", evs[4].line)], ids))
    ex.add(LineSet([("job.log", n) for n in range(1000, 1000 + ranking.Explained.LARGE)], ids))
    one_by_one = [ev for ev in evs if (ev.source, ev.line) not in ex]
    assert sorted({ev.line for ev in one_by_one}) == [1, 3, 4, 6]
    assert ex.unexplained(evs) == one_by_one
    ex.add(LineSet([("other.log", 1), ("job.log", evs[2].line)]))  # ids of its own: asked one by one
    rest = ex.unexplained(evs)
    assert rest == [ev for ev in evs if (ev.source, ev.line) not in ex] and sorted({ev.line for ev in rest}) == [1, 4, 6]


def test_a_finding_that_explains_no_line_keeps_the_questions_on_the_shared_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a finding whose lines were none (an empty ``set``, or a set of no lines given
    before any other) gave the small set file ids of its own, and ``Explained`` then asked every
    problem line of the run set by set, each a tuple made and looked up (``in``): the rule step of
    8,000 watchdog lines spent 30% of its time there."""
    from ncclsleuth.rules.findings import file_ids
    from ncclsleuth.rules.lineset import LineSet

    empty = LineSet(())
    empty.update(set())
    assert empty.ids is None and not empty  # no ids made for no line
    model = _job(6)
    evs = model.error_events()
    ids = file_ids(model)
    ex = ranking.Explained()
    ex.add(set())  # first: a finding with no line
    ex.add(LineSet([("job.log", evs[1].line)], ids))
    ex.add(LineSet([("job.log", n) for n in range(1000, 1000 + ranking.Explained.LARGE)], ids))
    ex.add(LineSet((), ids))
    asked: list[object] = []
    real = LineSet.__contains__
    monkeypatch.setattr(LineSet, "__contains__", lambda self, pair: asked.append(pair) or real(self, pair))
    rest = ex.unexplained(evs)
    assert asked == []  # the numbers bisected, no set asked line by line
    assert [ev.line for ev in rest] == [ev.line for ev in evs if ev.line != evs[1].line]
    assert (evs[1].source, evs[1].line) in ex and (evs[0].source, evs[0].line) not in ex


@pytest.mark.parametrize("n", [3, 300])  # sorted (few), merged (runs past SORT_BELOW)
def test_in_order_is_a_stable_sort_by_file_and_line(n: int) -> None:
    from ncclsleuth.model import job as J

    model = _job(n)
    evs = model.events["nccl_other"]
    runs = evs[1::2] + evs[::2] + evs[:1]  # three runs in order: the first line twice, its copy last
    assert (len(runs) > J.SORT_BELOW) == (n == 300)
    got = list(model.in_order(runs))
    assert [ev for _, ev in got] == sorted(runs, key=model.order_key)
    assert [k for k, _ in got] == [model.order_int(ev) for ev in sorted(runs, key=model.order_key)]
    assert got[0][1] is got[1][1] is evs[0]  # the same line twice, side by side


def test_a_findings_evidence_groups_lines_that_differ_only_in_digits() -> None:
    """``collapsed`` groups by the line's UTF-8 bytes less ASCII digits: lines that differ only in
    digits are one group (counted, their ranks and files), any other character (a non-ASCII one
    too) another; each group's first line in the order given, at most ``limit`` groups."""
    from ncclsleuth import events as E
    from ncclsleuth.rules.findings import collapsed

    def ev(n: int, text: str, rank: int | None, source: str = "a.log") -> E.Event:
        return E.NcclOther(source=source, line=n, text=text, rank=rank, level="WARN", message=text)

    evs = [ev(1, "  rank 3: Größe 12 überschritten ", 3), ev(2, "rank 4: Größe 7 überschritten", 4),
           ev(3, "rank 5: Grösse 12 überschritten", 5), ev(4, "rank 16: Größe 99 überschritten", 16, "b.log"),
           ev(5, "timeout after 600000 ms", None)]
    got = collapsed(evs, 2)
    assert [(g.line, g.text, g.count, g.ranks, g.files) for g in got] == [
        (1, "  rank 3: Größe 12 überschritten ", 3, (3, 4, 16), 2),  # ß and ö: another group than ss
        (3, "rank 5: Grösse 12 überschritten", 1, (5,), 1)]
    assert [g.line for g in collapsed(evs, 5)] == [1, 3, 5]
