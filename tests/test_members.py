"""The model under whole-job reasoning: timestamps, where each file's output stops, who each
track belongs to, what each line says about its rank (tracks, members, knowledge verdicts)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclsleuth import api
from ncclsleuth import events as E
from ncclsleuth.model.facts.said import said, strip_prefixes
from ncclsleuth.model.members import members
from ncclsleuth.parse.tail import Found, last_progress, per_rank, progress
from ncclsleuth.util.clock import Stamp, earlier, stamp


def _model(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return api.build(api.memory_sources(files, dedent=True)).model


@pytest.mark.parametrize("ts,t,exact", [
    ("2024-02-09 09:09:15,164", (39 * 86400 + 9 * 3600 + 9 * 60 + 15.164), True),      # torchelastic / logging
    ("2019-06-02T16:13:44.884Z", ((151 + 1) * 86400 + 16 * 3600 + 13 * 60 + 44.884), True),  # ISO (June 2: day 152)
    ("[2026-04-22 21:34:20]", ((90 + 21) * 86400 + 21 * 3600 + 34 * 60 + 20), True),  # NCCL 2.26 WARN
    ("2026-12-01_10:40:25", ((334 + 0) * 86400 + 10 * 3600 + 40 * 60 + 25), True),    # torchrun failure block
    ("1201 10:40:04.953000", ((334 + 0) * 86400 + 10 * 3600 + 40 * 60 + 4.953), True),  # python glog (torchrun)
    ("1206 18:44:12.715298746", ((334 + 5) * 86400 + 18 * 3600 + 44 * 60 + 12), False),  # c10 glog: ns = MONOTONIC
])
def test_timestamps_in_every_format_compare_within_a_year(ts, t, exact):
    s = stamp(ts)
    assert s is not None and s.exact is exact and abs(s.t - t) < 1e-6


def test_a_nine_digit_glog_stamp_is_known_to_the_second_only():
    a, b = stamp("1206 18:44:12.715298746"), stamp("1206 18:44:12.100000")  # same second, b exact
    assert a is not None and b is not None
    assert not earlier(a, b) and not earlier(b, a)  # a is anywhere in [12, 13): order unknown
    assert earlier(Stamp(10.0, False), Stamp(11.0, True)) and not earlier(Stamp(10.0, True), Stamp(10.0, True))
    assert stamp("not a time") is None


@pytest.mark.parametrize("line,step,total,elapsed,unit", [
    ("step 14 loss 0.9081 time 26.5ms", 14, None, None, "step"),
    ("[default1]:step 15 loss 0.4478 time 23.8ms", 15, None, None, "step"),
    ("iter 83123: loss 1.2345, time: 4400.00ms", 83123, None, None, "iter"),
    (" iteration      100/  500000 | consumed samples: 3200 | elapsed time per iteration (ms): 812.3", 100, 500000,
     None, "iter"),
    ("Epoch 1 Step [200/500] loss 0.3", 200, 500, None, "step"),
    ("global_step=120 loss=0.9", 120, None, None, "step"),
    ("Running tokenizer on dataset: 47%|████▊ | 1695000/3634744 [30:09<33:25, 967.30 examples/s]", 1695000, 3634744,
     1809, "bar"),
    ("Training: 83%|████████▎ | 83123/100000 [1:13:51<14:02, 5.80it/s]", 83123, 100000, 4431, "bar"),
])
def test_progress_lines(line, step, total, elapsed, unit):
    p = progress(line)
    assert p is not None and (p.step, p.total, p.elapsed_s, p.unit) == (step, total, elapsed, unit)


@pytest.mark.parametrize("line", ["optimizer.step()", "steps: 16", "lr_scheduler_step 3", "NCCL INFO 10.0.0.1<0>"])
def test_not_progress(line):
    assert progress(line) is None


def test_last_progress_of_a_file_is_found_backwards():
    blocks = [(1, "iter 1: loss 2.0, time: 10ms\niter 2: loss 1.9, time: 10ms"),
              (3, "saving checkpoint\nnode1:1:1 [0] NCCL INFO x 10.0.0.1<0>\nTraceback (most recent call last):")]
    f = last_progress(blocks)
    assert f is not None and (f.line, f.progress.step) == (2, 2)  # type: ignore[union-attr]


def test_each_rank_of_an_interleaved_tail():
    text = "\n".join(["[rank0]: step 9 loss 1", "[rank1]: step 8 loss 1", "[rank0]: step 10 loss 1",
                      "[rank1]: RuntimeError: boom", "3: iter 7: loss 2"])
    last, prog = per_rank([(1, text)])
    assert {r: f.line for r, f in last.items()} == {0: 3, 1: 4, 3: 5}
    assert {r: f.progress.step for r, f in prog.items()} == {0: 10, 1: 8, 3: 7}  # type: ignore[union-attr]


def test_each_rank_of_a_tail_behind_a_log_collectors_time_and_pod_tag():
    """``kubectl logs --timestamps`` (and ``--prefix``) of torchrun pods: the time and the pod tag
    before each rank's tag; the ranks are still told apart, and rank 2 stopped first."""
    lines = []
    for step in (1, 2, 3):
        for r in (0, 1, 2):
            if r == 2 and step == 3:
                continue
            lines.append(f"[pod/train-{r}/pytorch] 2025-11-29T11:31:0{step}.123456789Z [default{r}]:iter {step}: loss 1")
    last, prog = per_rank([(1, "\n".join(lines))])
    assert {r: f.line for r, f in last.items()} == {0: 7, 1: 8, 2: 6}
    assert {r: f.progress.step for r, f in prog.items()} == {0: 3, 1: 3, 2: 2}  # type: ignore[union-attr]


def test_each_rank_of_a_tail_kept_in_blocks_with_blank_lines():
    """Line numbers count across the kept blocks, blank and white-space lines are no one's last."""
    blocks = [(1, "[rank0]: step 3 loss 1\nplain line"), (3, "[rank1]: Step [4/9]\n  \t\n\n[rank0]: boom\n")]
    last, prog = per_rank(blocks)
    assert {r: (f.line, f.text) for r, f in last.items()} == {
        0: (6, "[rank0]: boom"), 1: (3, "[rank1]: Step [4/9]"), None: (2, "plain line")}
    assert {r: (f.line, f.progress.step) for r, f in prog.items()} == {0: (1, 3), 1: (3, 4)}  # type: ignore[union-attr]


def _per_rank_every_line(blocks):
    """per_rank as it read every line of the tail (before chunks were skipped): the reference."""
    from ncclsleuth.parse.tail import _ANY_ANCHOR, _RANK, Found
    last, prog = {}, {}
    for first, text in reversed(blocks):
        lines = text.split("\n")
        for i in range(len(lines) - 1, -1, -1):
            s = lines[i]
            if not s or s.isspace():
                continue
            m = _RANK.match(s)
            r = None if m is None else int(next(g for g in m.groups() if g is not None))
            last.setdefault(r, Found(first + i, s))
            if r not in prog and _ANY_ANCHOR.search(s) is not None and progress(s) is not None:
                prog[r] = Found(first + i, s, progress(s))
    return last, prog


_TAIL_LINES = st.one_of(
    st.sampled_from(["", "  ", "plain line", "step 4 loss 1", "node1:1:1 [0] NCCL INFO x", "Traceback:"]),
    st.builds(lambda pre, r, body: f"{pre.format(r)}{body}",
              st.sampled_from(["[rank{}]: ", "[default{}]:", "{}: ", "[1,{}]<stdout>: ", "[Rank {}] "]),
              st.integers(0, 40), st.sampled_from(["step 7 loss 2", "iter 3: x", "RuntimeError: boom", "x", " "])))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_TAIL_LINES, min_size=1, max_size=400), min_size=1, max_size=4), st.integers(16, 4096))
def test_per_rank_chunked_reads_what_every_line_gives(block_lines, chunk):
    """Chunks skipped once their ranks are answered: the same answers as reading every line."""
    from ncclsleuth.parse import tail
    blocks, n = [], 1
    for bl in block_lines:
        blocks.append((n, "\n".join(bl)))
        n += len(bl)
    old = tail._CHUNK
    tail._CHUNK = chunk
    try:
        assert per_rank(blocks) == _per_rank_every_line(blocks)
    finally:
        tail._CHUNK = old


def test_per_rank_skips_chunks_of_answered_ranks(monkeypatch):
    """The burst at the end answers every rank; the 100,000 lines before it are not read one by one."""
    from ncclsleuth.parse import tail
    body = "".join(f"[rank{i % 8}]: step {i} loss 1\n" for i in range(100_000))
    burst = "\n".join(f"[rank{r}]: step 99 loss 1\n[rank{r}]: RuntimeError: boom" for r in range(8))
    text = body + burst + "\nplain\nstep 3"
    expected = _per_rank_every_line([(1, text)])
    matched = []
    real = tail._RANK

    class Counting:
        """The prefix regex, counting the lines it is matched against."""

        def match(self, s, *pos):
            matched.append(1)
            return real.match(s, *pos)

    monkeypatch.setattr(tail, "_RANK", Counting())
    last, prog = per_rank([(1, text)])
    assert (last, prog) == expected
    assert {r: f.text for r, f in last.items()} == {**{r: f"[rank{r}]: RuntimeError: boom" for r in range(8)},
                                                     None: "step 3"}
    assert {r: f.progress.step for r, f in prog.items()} == {**{r: 99 for r in range(8)}, None: 3}  # type: ignore[union-attr]
    assert len(matched) < 5_000, f"{len(matched)} lines read one by one"


def test_a_files_rank_from_its_prefix_its_nccl_process_its_name_and_its_sibling():
    m = _model({
        "a.log": "[rank4]: RuntimeError: x\nstep 3 loss 1\n",                   # launcher prefix
        "b.log": "h2:9:9 [1] NCCL INFO comm 0x1 rank 6 nranks 8 cudaDev 1 busId 3b000 commId 0xab - Init START\n"
                 "step 5 loss 1\n",                                             # its NCCL process
        "rank7.log": "step 2 loss 1\n",                                         # its name
        "job/attempt_0/2/stdout.log": "step 9 loss 1\n",                        # torchrun --log-dir, one node
        "x/stdout.log": "step 1 loss 1\n", "x/stderr.log": "[rank5]: RuntimeError: y\n",  # siblings
    })
    got = {mb.rank: sorted(mb.sources) for mb in members(m).ranks}
    assert got == {2: ["job/attempt_0/2/stdout.log"], 4: ["a.log"], 5: ["x/stderr.log", "x/stdout.log"],
                   6: ["b.log"], 7: ["rank7.log"]}
    assert members(m).by_rank[6].host == "h2" and members(m).by_rank[5].step == 1


def test_members_share_their_tracks_counters_and_find_ranks_without_a_dict():
    """A member keeps its one track's counters mapping (no copy per rank), merges two tracks'
    counters into a new one (the further on per process group; neither track's is changed), names
    its files in a tuple, and is found by rank (absent ranks and None give None)."""
    m = _model({
        "rank1.log": "[rank1]:[E1129 11:41:55.494124337 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) "
                     "Rank 1]  failure detected by watchdog at work sequence id: 7 PG status: last enqueued work: 7, "
                     "last completed work: 6\n",
        "rank3.log": "[rank3]:[E1129 11:41:55.494124337 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) "
                     "Rank 3]  failure detected by watchdog at work sequence id: 5 PG status: last enqueued work: 5, "
                     "last completed work: 4\nstep 3 loss 1\n",
        "more/rank3.err": "[rank3]:[E1129 11:41:56.494124337 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) "
                          "Rank 3]  failure detected by watchdog at work sequence id: 9 PG status: last enqueued work: "
                          "9, last completed work: 8\n",
    })
    ms = members(m)
    one, three = ms.by_rank[1], ms.by_rank.get(3)
    assert three is not None and ms.by_rank.get(2) is None and ms.by_rank.get(None) is None and 2 not in ms.by_rank
    (track1,) = [t for (r, _), t in m.tracks.items() if r == 1]
    assert one.counters is track1.counters and one.sources == ("rank1.log",)
    assert {pg: c[:2] for pg, c in three.counters.items()} == {"0": (9, 8)}
    assert sorted(three.sources) == ["more/rank3.err", "rank3.log"] and isinstance(three.sources, tuple)
    assert sorted((c or {})["0"][0] for (r, _), t in m.tracks.items() if r == 3 for c in [t.counters]) == [5, 9]


def test_how_a_worker_ended_comes_from_the_agent():
    m = _model({"console.log": """\
        [rank 2] step 9 loss 1
        E1201 10:42:08.352000 25011 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 2 (pid: 25016) of binary: /venv/bin/python3
        Root Cause (first observed failure):
        [0]:
          time      : 2026-12-01_10:42:08
          host      : node7
          rank      : 2 (local_rank: 2)
          exitcode  : -9 (pid: 25016)  (SIGKILL)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 25016
        """})
    mb = members(m).by_rank[2]
    assert mb.exit is not None and (mb.exit.exitcode, mb.exit.signal, mb.exit.root_cause) == (-9, "SIGKILL", True)
    assert mb.host == "node7" and mb.exit.evidence[0].kind == "agent_failure"


@pytest.mark.parametrize("text,what", [
    ("[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
     "[10.0.0.2]:5 . This is typically caused by a remote worker crashing.", "lost"),
    ("[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
     "10000ms for recv operation to complete", "waited"),
    ("[rank3]:[E1206 18:44:10.715298746 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process "
     "group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered", "own"),
    ("[rank0]:[E1129 11:41:55.712034518 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000) ran "
     "for 600047 milliseconds before timing out.", "waited"),
])
def test_what_a_line_says_about_its_rank(text, what):
    ev = E.WarnText(source="x", line=1, text=text, message=text)
    assert said(ev).what == what


def test_an_exception_the_knowledge_base_does_not_know_is_the_ranks_own():
    tb = E.Traceback(source="x", line=3, text="[rank1]: RuntimeError: corrupt sample 8812", exc_type="RuntimeError",
                     message="corrupt sample 8812 in shard-00001.tar (step 10): cannot decode image")
    s = said(tb)
    assert (s.what, s.category) == ("own", "app_crash")
    agent = E.Traceback(source="x", line=9, text="", exc_type="torch.distributed.elastic.multiprocessing.errors."
                        "ChildFailedError", message="")
    assert said(agent).what == "context"  # the launcher's summary, not a rank's failure


_XID = ("[ 8812.310245] NVRM: Xid (PCI:0000:3b:00): {}, pid=41233, name=python, Timeout after 6s of waiting for RPC "
        "response from GPU1 GSP!")
_CUDA_INIT = ("[rank0]: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error {}: "
              "unknown error")


@pytest.mark.parametrize("first,second,verdicts", [
    # the knowledge base has an entry for each Xid (knowledge/neighbours/system.yaml)
    (_XID.format(119), _XID.format(154), [("own", "SYS-xid-119", "hardware_fault"),
                                          ("own", "SYS-xid-154", "hardware_fault")]),
    # one entry, told apart by its context variants ``Error 802`` and ``Error 80[34]``
    (_CUDA_INIT.format(802), _CUDA_INIT.format(804), [("own", "SYS-torch-cuda-init-warning", "p2p_topology"),
                                                      ("own", "SYS-torch-cuda-init-warning", "version_mismatch")]),
])
def test_lines_that_differ_in_a_number_the_knowledge_base_reads_each_say_their_own(monkeypatch, first, second,
                                                                                    verdicts):
    """The verdicts are kept per message shape (a 16,384-rank job's watchdog lines, which differ in
    times and sizes, cost one lookup).  Before, every number of three or more digits was masked in
    that shape, so the second line got the first one's verdict: an Xid 154 read as an Xid 119, a
    CUDA ``Error 804`` (a driver mismatch) as ``Error 802`` (the fabric manager): in either order."""
    from ncclsleuth.model.facts import said as said_module

    for a, b, expect in ((first, second, verdicts), (second, first, verdicts[::-1])):
        monkeypatch.setattr(said_module, "_CACHE", {})
        got = [said(E.WarnText(source="x", line=i, text=t, message=t)) for i, t in enumerate((a, b))]
        assert [(s.what, s.kb_id, s.category) for s in got] == expect


def test_a_message_shape_masks_the_numbers_that_do_not_tell_messages_apart():
    from ncclsleuth import knowledge
    from ncclsleuth.model.facts.said import shape

    named = knowledge.numbers()
    assert {"119", "154", "802", "113", "1024"} <= named  # formats' literal numbers, context patterns'
    assert not {"600000", "1048576", "5238"} & named
    assert shape("WorkNCCL(SeqNum=12, NumelIn=1048576, Timeout(ms)=600000) ran for 600047 milliseconds") == \
        "WorkNCCL(SeqNum=12, NumelIn=#, Timeout(ms)=#) ran for # milliseconds"
    assert shape("Xid (PCI:0000:3b:00): 154, pid=41233") == "Xid (PCI:0000:3b:00): 154, pid=#"
    assert shape("no number at all") == "no number at all"
    # a context variant that reads a number of three or more digits: its lines are looked up each
    assert knowledge.reads_digits("SYS-torch-cuda-init-warning")
    assert not knowledge.reads_digits("PGN-WD-TIMEOUT")  # ``SeqNum=1, `` reads a one-digit number


@pytest.mark.parametrize("pattern,reads", [
    ("SeqNum=1, ", False), ("Error 35:", False), ("errno: 113|No route to host", True), ("Error 80[34]", True),
    ("1: DOWN|PORT_DOWN", True), (r"exitcode\s*: -9\b", True), (r"\|\s+[1-9]\d*\s+\|", True),
    (r"(127\.\d+\.\d+\.\d+|::1)<", True), ("no digits", False), ("ends in 7", True),
])
def test_which_context_patterns_read_numbers(pattern, reads):
    from ncclsleuth.knowledge import pattern_reads_digits

    assert pattern_reads_digits(pattern) is reads


def test_strip_prefixes():
    assert strip_prefixes("[rank0]:[E1201 10:42:52.644326315 ProcessGroupGloo.cpp:67] [Rank 0]: Rank 3 failed") == \
        "Rank 3 failed"
    assert strip_prefixes("17: [rank17]: RuntimeError: x") == "RuntimeError: x"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["step", "Step", "STEP", "iter", "ITER", "<", "st", "ep", "x", "\n", "loss 1.0 "]),
                max_size=400),
       st.integers(min_value=0, max_value=5000), st.sampled_from([1, 2, 3, 7, 64, 4096]))
def test_the_last_anchor_in_windows_is_the_last_in_the_whole_text(parts, at, window):
    """``tail._last_anchor`` (where ``last_progress`` tries a line) looks near ``pos`` first: the
    same answer as the largest ``rfind`` of every anchor over the whole text, anchors across a
    window's edge included."""
    from ncclsleuth.parse import tail

    text = "".join(parts)
    pos = min(at, len(text))
    want = max(text.rfind(a, 0, pos) for a in tail._ANCHORS)
    old = tail._WINDOW
    tail._WINDOW = window
    try:
        assert tail._last_anchor(text, pos) == want
    finally:
        tail._WINDOW = old


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["step 12 loss 1.0", "noise", "", "iter 7: loss 2.0, time: 5.0ms", "x < y"]),
                min_size=1, max_size=60), st.integers(min_value=1, max_value=10_000), st.integers(min_value=0, max_value=60))
def test_the_last_progress_and_last_lines_are_numbered_as_counted_from_the_start(lines, first, cut):
    """``tail.ends`` numbers the last line and the last progress line from the end of the block
    (its line ends counted once for both): the numbers a count from the block's start gives, as
    ``last_line`` and ``last_progress`` on their own give them."""
    from ncclsleuth.parse.tail import ends, last_line

    text = "\n".join(lines)
    k = min(cut, len(lines))  # in two blocks where 0 < k < len(lines): the lines stay numbered alike
    blocks = [(first, "\n".join(lines[:k])), (first + k, "\n".join(lines[k:]))] if 0 < k < len(lines) \
        else [(first, text)]
    got = last_progress(blocks)
    if got is not None:  # the line at that number is the one returned
        assert text.split("\n")[got.line - first] == got.text
    one = last_line(blocks)
    if one is not None:
        assert text.split("\n")[one.line - first] == one.text
    assert ends(blocks) == (one, got)


def test_the_last_line_before_a_last_block_of_blank_lines_keeps_its_number():
    """The last line in a block before a last block of blank lines: numbered in its own block
    (4dda1a7 had reused the name of the given end for the scan position, so such a line was
    numbered -1: a file whose last 64 KB block held only line ends)."""
    from ncclsleuth.parse.tail import ends, last_line

    blocks = [(1, "a\nstep 12 loss 1.0\nb"), (4, "\n\n")]
    assert last_line(blocks) == Found(3, "b")
    assert ends(blocks) == (Found(3, "b"), Found(2, "step 12 loss 1.0", progress("step 12 loss 1.0")))

