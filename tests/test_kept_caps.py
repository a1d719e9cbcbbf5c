"""Facts that read kept events do not lose what lies past ``KEEP_PER_KIND`` (20,000 events a
kind): a big job prints more of some lines than that (an 8,000-rank job with two communicators,
32,000 Init START/COMPLETE lines), and the facts then read the model's per-rank state too."""
from __future__ import annotations

from ncclsleuth import api


def test_the_phase_of_a_line_counts_init_lines_past_the_kept_events(tmp_path, monkeypatch):
    """A process that began init is known by its rank state too, not only by the ``comm_init``
    events kept (up to ``KEEP_PER_KIND``: an 8,000-rank job prints 32,000 Init lines): its WARN
    before Init COMPLETE is read as an init-phase line, whichever Init lines were kept."""
    from ncclsleuth.model import job
    from ncclsleuth.model.facts import knowledge as K

    log = tmp_path / "job.log"
    log.write_text(
        "h1:11:11 [0] NCCL INFO ncclCommInitRank comm 0x1000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000"
        " commId 0xabc - Init START\n"
        "h2:22:22 [0] NCCL INFO ncclCommInitRank comm 0x2000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000"
        " commId 0xabc - Init START\n"
        "h2:22:22 [0] NCCL WARN Cuda failure 'out of memory'\n")
    monkeypatch.setattr(job, "KEEP_PER_KIND", 1)
    kept = api.build([str(log)], api.Options(jobs=1, cache=False, default_rules=False)).model
    assert [ev.host for ev in kept.events["comm_init"]] == ["h1"]  # h2's Init line was not kept
    model = api.build([str(log)], api.Options(jobs=1, cache=False)).model
    assert "comm_init" not in model.events  # analyze keeps none (UNREAD_KINDS)
    for m in (kept, model):
        records = K.known_message(m)
        assert records and {(r["host"], r["phase"]) for r in records} == {("h2", "init")}


_INIT = "{host}:{pid}:{pid} [0] NCCL INFO ncclCommInitRank comm 0x{pid}0 rank {rank} nranks 4 cudaDev 0 nvmlDev 0" \
    " busId 1000 commId 0xabc - Init {phase}\n"
_OOM = "{host}:{pid}:{pid} [0] NCCL WARN Cuda failure 'out of memory'\n"


def _init(host: str, pid: int, rank: int, phase: str = "START") -> str:
    return _INIT.format(host=host, pid=pid, rank=rank, phase=phase)


def test_init_lines_no_rank_state_keeps_are_set_aside(tmp_path):
    """A process whose Init lines no rank state keeps still began its init: a second START of a
    rank (h3: two processes claimed rank 1), a COMPLETE line replaced by another process's (h4,
    then h5, for rank 2).  Their WARN lines before any COMPLETE of theirs are init-phase lines,
    as when the ``comm_init`` events were kept; in one file, and split over files (merged)."""
    from ncclsleuth.model.facts import knowledge as K

    texts = [_init("h2", 22, 1), _init("h3", 33, 1) + _OOM.format(host="h3", pid=33),
             _init("h4", 44, 2, "COMPLETE"), _init("h5", 55, 2, "COMPLETE")]
    one = tmp_path / "one.log"
    one.write_text("".join(texts))
    parts = []
    for i, text in enumerate(texts):  # a file a process
        parts.append(tmp_path / f"part{i}.log")
        parts[-1].write_text(text)
    for paths in ([one], parts):
        files = [str(p) for p in paths]
        kept = api.build(files, api.Options(jobs=1, cache=False, default_rules=False)).model
        model = api.build(files, api.Options(jobs=1, cache=False)).model
        assert "comm_init" not in model.events
        every = {(ev.source, ev.host, ev.pid) for ev in kept.events["comm_init"]}
        assert len(every) == 4
        assert K._init_started(model) == K._init_started(kept) == every
        # h3's line and one of the two COMPLETE lines are the ones no rank state keeps (one file:
        # the later COMPLETE replaces the earlier; merged: the first one's stays)
        assert {h for _, h, _ in model.init_aside} in ({"h3", "h4"}, {"h3", "h5"})
        records = K.known_message(model)
        assert records and {(r["host"], r["phase"]) for r in records} == {("h3", "init")}


def test_a_socket_ifname_set_past_the_kept_settings_is_read(tmp_path, monkeypatch):
    """NCCL_SOCKET_IFNAME as each process printed it: a value only a later process set (its
    ``env_setting`` event not kept) is still checked against the interfaces NCCL used."""
    from ncclsleuth.model import job
    from ncclsleuth.model.facts import network as N

    log = tmp_path / "job.log"
    log.write_text("h1:11:11 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
                   "h2:22:22 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to bogus0\n"
                   "h1:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                   "h2:22:22 [0] NCCL WARN Bootstrap : no socket interface found\n")
    monkeypatch.setattr(job, "KEEP_PER_KIND", 1)
    model = api.build([str(log)], api.Options(jobs=1, cache=False)).model
    assert [ev.value for ev in model.events["env_setting"]] == ["eth0"]  # type: ignore[attr-defined]
    got = N.ifname_unseen(model)
    assert [(r["host"], r["setting"], r["failure"]) for r in got] == [("h2", "bogus0", "no_interface")]
    assert got[0]["evidence"][0].line == 2


def test_the_ranks_a_message_names_are_read_and_only_those(tmp_path):
    """``known_message``'s ``ranks``: the global ranks NCCL names ("rank %d and rank %d", src/init.cc
    2.5.6-2.29), none from a line that names no "rank N" (a local rank, a capitalised [Rank N] tag)."""
    from ncclsleuth.model.facts import knowledge as K

    log = tmp_path / "job.log"
    log.write_text("h1:11:11 [1] init.cc:974 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\n"
                   "h1:11:11 [1] NCCL WARN Cuda failure 'out of memory' on local rank 3\n")
    model = api.build([str(log)], api.Options(jobs=1, cache=False)).model
    assert {r["evidence"][0].line: r["ranks"] for r in K.known_message(model)} == {1: [0, 1], 2: []}
