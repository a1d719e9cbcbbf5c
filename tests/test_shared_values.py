"""Memory that does not grow with repeated values: equal field values of events are one
object (host names, communicator ids, levels, interface lists, phase pairs), bounded; the
per-rank and per-process records have no dict each."""
from __future__ import annotations

import pickle

from ncclsleuth import events as E
from ncclsleuth.events import base
from ncclsleuth.model.job import Comm, Process, RankState
from ncclsleuth.model.members import Member


def test_equal_field_values_are_one_object():
    a = E.CommInit(source="a.log", line=1, text="x", host="node" + "07", comm_id="0x" + "8a3e", phase="COMPLETE")
    b = E.CommInit(source="b.log", line=9, text="y", host="".join(["node", "07"]), comm_id="".join(["0x", "8a3e"]),
                   phase="COMPLETE")
    assert a.host == b.host and a.host is b.host
    assert a.comm_id is b.comm_id


def test_lines_and_time_stamps_are_not_shared():
    t1, t2 = "".join(["same", " text"]), "".join(["same", " text"])
    a = E.NcclOther(source="a", line=1, text=t1, ts="".join(["12:00", ":01"]), message="m")
    b = E.NcclOther(source="a", line=2, text=t2, ts="".join(["12:00", ":01"]), message="m")
    assert a.text is t1 and b.text is t2 and a.ts is not b.ts
    long_one = "w" * (base.SHARE_LEN + 1)
    E.NcclOther(source="a", line=3, text="t", message=long_one)
    assert long_one not in base._SHARED  # a long text is kept as given, not in the table


def test_value_tuples_shared_and_equal():
    devs = (E.IbDev(hca="mlx5_0", port=1, link="IB", idx=0), E.IbDev(hca="mlx5_1", port=1, link="IB", idx=1))
    again = (E.IbDev(hca="mlx5_0", port=1, link="IB", idx=0), E.IbDev(hca="mlx5_1", port=1, link="IB", idx=1))
    a = E.NetIbDevices(source="a", line=1, text="t", devices=devs)
    b = E.NetIbDevices(source="b", line=1, text="t", devices=again)
    assert a.devices is b.devices and a.devices == again


def test_phase_pairs_of_init_timings_shared():
    from ncclsleuth.parse.build import _b_phases

    f1 = {"phases": ["init", "0.12", "bootstrap", "0.50"]}
    f2 = {"phases": ["".join(["in", "it"]), "0.12", "bootstrap", "0.77"]}
    _b_phases(f1)
    _b_phases(f2)
    assert f1["phases"] == (("init", 0.12), ("bootstrap", 0.5)) and f2["phases"][1] == ("bootstrap", 0.77)
    assert f1["phases"][0] is f2["phases"][0]  # the same pair: one object
    assert f1["phases"][1][0] is f2["phases"][1][0]  # a new time, the same name object


def test_shared_values_survive_pickling_between_processes():
    evs = [E.CommInit(source=f"r{i}.log", line=1, text="t", host="".join(["node", "1"]), phase="COMPLETE")
           for i in range(3)]
    back = [pickle.loads(pickle.dumps(ev)) for ev in evs]  # each on its own, as workers ship results
    assert all(ev.host is back[0].host for ev in back)


def test_the_table_is_bounded(monkeypatch):
    monkeypatch.setattr(base, "MAX_SHARED", 100)
    monkeypatch.setattr(base, "_SHARED", {})
    for i in range(1_000):
        E.CommInit(source="a", line=i, text="t", host=f"host-{i}")
        assert len(base._SHARED) <= 100
    a = E.CommInit(source="a", line=1, text="t", host="".join(["host-", "x"]))
    b = E.CommInit(source="a", line=2, text="t", host="".join(["host-", "x"]))
    assert a.host is b.host  # still sharing after the table started again


def test_per_rank_records_have_no_dict():
    for obj in (RankState("c", 0), Process("h", 1, "s"), Comm("c"), Member(0)):
        assert not hasattr(obj, "__dict__"), type(obj).__name__


def test_equal_integers_are_one_object_but_line_numbers_are_not():
    a = E.CommInit(source="a.log", line=int("70001"), text="x", pid=int("123457"), tid=int("123458"), rank=int("4097"))
    b = E.CommInit(source="b.log", line=int("70001"), text="y", pid=int("123457"), tid=int("123458"), rank=int("4097"))
    assert a.pid is b.pid and a.tid is b.tid and a.rank is b.rank
    assert a.line == b.line and a.line is not b.line  # (nearly) every line number is different: not kept


def test_integers_survive_pickling_shared():
    evs = [E.CommInit(source=f"r{i}.log", line=1, text="t", pid=int("99001")) for i in range(3)]
    back = [pickle.loads(pickle.dumps(ev)) for ev in evs]
    assert all(ev.pid is back[0].pid for ev in back) and back[0].pid == 99001


def test_the_integer_table_is_bounded_and_keeps_types(monkeypatch):
    monkeypatch.setattr(base, "MAX_SHARED_INT", 100)
    base._SHARED_INT.clear()
    for i in range(1_000):
        E.CommInit(source="a", line=i, text="t", pid=100_000 + i)
        assert len(base._SHARED_INT) <= 100
    base._SHARED_INT.clear()
    ev = E.CommInit(source="a", line=1, text="t", pid=None, tid=True, rank=int("0"))  # type: ignore[arg-type]
    assert ev.pid is None and ev.tid is True and ev.rank == 0  # only ints (not a bool) go through the table
    assert True not in base._SHARED_INT
