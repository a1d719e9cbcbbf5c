"""The line envelope: peel what launchers, loggers and chat clients wrap around a message.

A real line looks like ``[1,3]<stdout>:[2026-03-13 22:26:02] node5:240:240 [6]
misc/socket.cc:533 NCCL WARN socketPollConnect: ...``.  Before the grammar sees the
message, this module strips every wrapper it knows (Open MPI tags, Slurm labels,
torchrun ``[rankN]:``, Ray actor prefixes, ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER] ``
(kubectl ``pkg/cmd/logs/logs.go``, ``addPrefixIfNeeded``: ``"[pod/%s/%s] "``; it says which pod,
not which rank: before it was peeled, its text was taken for NCCL's own time and the wrappers
after it, ``[rank3]:``, were not read), timestamps, glog headers, Markdown quotes)
and records what they said (launcher rank, timestamp, level), then finds the NCCL
``host:pid:tid [dev] file:line NCCL LEVEL`` prefix anywhere in what is left.

Lines of several ranks glued together mid-line are split into one :class:`Record`
each wherever the second prefix is recognisable.

Hot path: plain NCCL INFO lines cost one anchored regex miss, one ``str.find`` and one
``rsplit``; regexes used here are linear (no nested quantifiers) on any input.
"""
from __future__ import annotations

import re

from ..util.classes import NamedTuple
from ..util.rxstore import rx

LEVELS = frozenset(("INFO", "WARN", "TRACE", "CALL", "ABORT"))


class Record(NamedTuple):
    """One message with its envelope.  ``family`` is ``nccl`` or ``other``."""

    body: str
    family: str
    level: str | None = None
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None
    rank: int | None = None
    ts: str | None = None
    where: str | None = None  # file:line of a NCCL WARN
    pg: str | None = None
    pg_rank: int | None = None  # the ``Rank N`` of a ``[PG ... Rank N]`` tag


_LVL = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL", "D": "DEBUG", "C": "ERROR",
        "ERROR": "ERROR", "WARNING": "WARNING", "WARN": "WARNING", "INFO": "INFO", "DEBUG": "DEBUG",
        "CRITICAL": "ERROR", "FATAL": "FATAL"}

#: an ISO 8601 / RFC 3339 time before a line (``kubectl logs --timestamps``, log shippers), and
#: ``kubectl logs --prefix``'s pod tag: wrappers here, and what :mod:`.tail` looks past for a rank tag
ISO_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
POD_TAG = r"\[pod/[\w.-]+/[\w.-]*\] "

# One wrapper per alternative, all anchored at the start of what is left.
_WRAP = rx(
    r"(?:"
    r"\[(?:\d+),(?P<mpi>\d+)\]<(?:stdout|stderr)>:"                      # Open MPI --tag-output
    r"|\((?P<ray>\w+)(?:(?: [\w=]{1,32}){0,3} pid=\d+)?(?:, ip=[\w.:]+)?\) ?"  # Ray actor, vLLM worker
    r"|\[(?:default|rank ?|trainer|worker|RANK |Rank )(?P<lr>\d+)(?:\|\d+)?\]:? ?"  # torchrun, apps, [trainer0|0]:
    r"|\[(?P<rep>\d+)\]:(?! )"                                             # torchx replica [0]:
    r"|\[c10d\] ?"
    r"|\[repeated \d+x across cluster\] ?"
    r"|" + POD_TAG +                                                     # kubectl logs --prefix
    r"|(?P<slurm>\d{1,6}): (?=\S)"                                       # srun --label
    r"|>+ ?"                                                             # Markdown quote
    r"|E {3,}(?=\S)"                                                     # pytest's failure lines
    r"|`+"                                                               # backticks
    r"|\*\*"
    r"|(?P<iso>" + ISO_TIME + r"):? "
    r"|\[(?P<bts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?: [A-Z]{2}\d+)*\] ?"
    r"|(?P<nts>\d{4}-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ?"     # 2023-Aug-01 16:12:43.0204
    r"|\d+:\d+ +(?P<nlvl>ERROR|WARNING|WARN|INFO|DEBUG|FATAL) +(?=\S)"     # Neuron runtime: pid:tid LEVEL
    r"|\[(?P<hts>\d\d:\d\d:\d\d)\] +"                                    # rich log time column
    r"|(?P<syslog>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) [\w.-]+ [\w./-]+(?:\[\d+\])?: "
    r"|\[ *\d+\.\d+\] "                                                  # dmesg
    r"|\[(?P<glvl>[IWEFD])(?P<gts>\d{3,4} \d\d:\d\d:\d\d\.\d+)? *[\w.]+:\d+\] "  # c10 glog
    r"|(?P<plvl>[IWEF])(?P<pts>\d{4} \d\d:\d\d:\d\d\.\d+) +\d+ [^\s\]]+:\d+\] "  # python glog
    r"|(?P<llvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:"              # logging basicConfig
    r"|(?P<rlvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) +(?=\S)"              # rich log level column
    r"|[\w.]+: \[(?P<elvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "         # torchelastic 2.1
    r"|\[(?P<blvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "                 # [ERROR]
    r"|\[[\w.]+:\d+:\w+\] "                                              # DeepSpeed [file:line:fn]
    r"|\[PG (?:ID )?(?P<pg>\w+)(?: PG GUID \w+)?(?: ?\([^)]*\))? Rank (?P<pgr>\d+)\] *"
    r")"
)
_RAY_SUFFIX = " [repeated "
# Linear on any input: the link text cannot contain "[" (so each "[" starts at most one
# short attempt) and the rich source column is only tried where a run of spaces starts.
#: (the URL stops at a bracket too: ``[x](http://a/`` glued 20,000 times scanned to the line's end
#: from each ``[``, quadratic: 256 KB took minutes)
_MD_LINK = rx(r"\[([^\[\]\s]+)\]\(https?://[^()\[\]\s]*\)")
_RICH_SRC = rx(r"(?<!\s)\s{2,}[\w.]+\.py:\d+\s*$")
_MPI_TAG = rx(r"\[\d+,\d+\]<(?:stdout|stderr)>:")
_OLD_NCCL = rx(r"(?:^|\s)(?:\[(\d+)\] (INFO|WARN) |([\w./-]+\.(?:h|cc|cu|c)):(\d+) (WARN) )|^WARN (?=\S)")
_FILE_LINE = rx(r"[\w./+-]+:\d+")


#: how far before ``NCCL LEVEL`` the ``host:pid:tid [dev] file:line (func)`` prefix is looked
#: for: NCCL's host name buffer is 1,024 bytes (``src/debug.cc``), so a real prefix is
#: shorter; a longer window would only make every false start cost more
PREFIX_WINDOW = 2048
_SPACE = rx(r"\s*")


def peel(line: str) -> list[Record]:
    """Split a cleaned line into its records (usually one).

    Linear in the length of the line whatever it holds: records glued onto one line are
    found in one left-to-right scan over offsets (no recursion, no copy of the rest of
    the line per record), and each possible prefix is read from a bounded window.
    """
    if "]<std" in line:
        parts = _split_mpi(line)
        if len(parts) > 1:
            out: list[Record] = []
            for p in parts:
                out.extend(_records(p))
            return out
    return _records(line)


def _records(line: str) -> list[Record]:
    """The records of one line without Open MPI tags inside: a record, then each one glued after it."""
    if "](http" in line:
        line = _MD_LINK.sub(r"\1", line)
    out: list[Record] = []
    pos, end = 0, len(line)
    known: _Prefix | None = None
    while True:
        meta: dict[str, object] = {}
        pos, end = _strip_wrappers(line, pos, end, meta)
        k, lvl = _find_level(line, pos, end)
        if k < 0:
            out.append(_plain_record(line[pos:end], meta))
            return out
        rec, known = _nccl_record(line, pos, end, k, lvl, meta, known)
        out.append(rec)
        if known is None:
            return out
        pos = known.start  # the glued record is peeled like a line of its own


def _find_level(s: str, pos: int, end: int) -> tuple[int, str]:
    """Where ``NCCL <LEVEL>`` (or a first ``CCOM <LEVEL>``) starts in ``s[pos:end]``, and the level."""
    k = s.find("NCCL ", pos, end)
    if k < 0:
        k = s.find("CCOM ", pos, end)
    while k >= 0:
        lvl = _level_at(s, k, end)
        if lvl:
            return k, lvl
        k = s.find("NCCL ", k + 5, end)
    return -1, ""


def _level_at(s: str, k: int, end: int) -> str:
    """The level word after the ``NCCL `` at ``k`` (ended by a space or the end), or ``""``."""
    e = s.find(" ", k + 5, end)
    e = end if e < 0 else e
    if e - k - 5 > 5:
        return ""
    word = s[k + 5:e]
    return word if word in LEVELS else ""


def _plain_record(s: str, meta: dict[str, object]) -> Record:
    """A record without ``NCCL <LEVEL>``: a pre-2.4 NCCL line, or any other line."""
    # each regex only where its literal is (every match of _OLD_NCCL holds "] INFO " or "WARN ",
    # of _RICH_SRC ".py:"): a search over a 300-character PyTorch line cost ~20 and ~12 us, and
    # over a Python logging line (``2025-11-29 11:33:10,627 - INFO - step 84049 | ...``) ~4 us
    m = _OLD_NCCL.search(s) if "] INFO " in s or "WARN " in s else None
    if m:
        return _old_record(s, m, meta)
    if ".py:" in s and _RICH_SRC.search(s):
        s = _RICH_SRC.sub("", s)
    return Record(s, "other", meta.get("level"), None, None, None, None,  # type: ignore[arg-type]
                  meta.get("rank"), meta.get("ts"), None, meta.get("pg"), meta.get("pg_rank"))  # type: ignore[arg-type]


def _split_mpi(line: str) -> list[str]:
    starts = [m.start() for m in _MPI_TAG.finditer(line)]
    if not starts or (len(starts) == 1 and starts[0] == 0):
        return [line]
    if starts[0] != 0:
        starts.insert(0, 0)
    bounds = starts + [len(line)]
    return [line[a:b].rstrip() for a, b in zip(bounds, bounds[1:]) if line[a:b].strip()]


def _strip_wrappers(s: str, pos: int, end: int, meta: dict[str, object]) -> tuple[int, int]:
    """Peel anchored wrappers off ``s[pos:end]`` until none matches; record rank, timestamp
    and level.  Returns the bounds of what is left (offsets: nothing is copied)."""
    pos = _skip_space(s, pos, end)
    bold = s.startswith("**", pos, end)
    if s.endswith("across cluster]", pos, end):
        r = s.rfind(_RAY_SUFFIX, pos, end)
        if r >= 0:
            end = r
    for _ in range(12):  # bounded: each pass removes at least one character
        m = _WRAP.match(s, pos, end)
        if not m or m.end() == pos:
            break
        if m.lastindex is not None:  # a wrapper that says something (not [c10d], a quote, ...)
            _absorb(m.groups(), meta)
        pos = _skip_space(s, m.end(), end)
    while end > pos and s[end - 1] == "`":
        end -= 1
    if bold and end - pos >= 2 and s.endswith("**", pos, end):
        end -= 2
    return pos, end


#: the peeling of a line's wrappers, the match of one at a place, and a line's Open MPI parts
#: (:mod:`.prefixed` asks them)
strip_wrappers = _strip_wrappers
wrapper_at = _WRAP.match
split_mpi = _split_mpi


def _skip_space(s: str, pos: int, end: int) -> int:
    """``pos`` past the white space there (the regex only where there is some: most wrappers
    take their own trailing space)."""
    if pos < end and s[pos].isspace():
        return _SPACE.match(s, pos, end).end()  # type: ignore[union-attr]  # \s* always matches
    return pos


#: what each group of _WRAP says, in group order: a launcher rank, a timestamp, a level, a
#: process group (with its rank), or nothing (ray, pgr: read with pg)
_ROLE = {"mpi": "rank", "lr": "rank", "slurm": "rank", "rep": "rank",
         "iso": "ts", "bts": "ts", "nts": "ts", "hts": "ts", "syslog": "ts", "gts": "ts", "pts": "ts",
         "glvl": "level", "plvl": "level", "llvl": "level", "rlvl": "level", "elvl": "level", "blvl": "level",
         "nlvl": "level", "pg": "pg"}
_ROLES = tuple(_ROLE.get(name, "") for name, _ in sorted(_WRAP.groupindex.items(), key=lambda kv: kv[1]))
_PGR = _WRAP.groupindex["pgr"] - 1


def _absorb(groups: tuple[str | None, ...], meta: dict[str, object]) -> None:
    """Record what one wrapper said (its groups: only one alternative's are set)."""
    for role, v in zip(_ROLES, groups):
        if v is None or not role:
            continue
        if role == "rank":
            if "rank" not in meta:
                meta["rank"] = int(v)
        elif role == "ts":
            if v and "ts" not in meta:
                meta["ts"] = v
        elif role == "level":
            if v:
                meta["level"] = _LVL[v]
        else:  # the process group tag: [PG ID 0 PG GUID 0(default_pg) Rank 3]
            meta["pg"] = v
            meta["pg_rank"] = int(groups[_PGR])  # type: ignore[arg-type]
            meta.setdefault("rank", int(groups[_PGR]))  # type: ignore[arg-type]


def _is_float(t: str) -> bool:
    a, dot, b = t.partition(".")
    return bool(dot) and a.isdecimal() and b.isdecimal()


def _int(x: str | None) -> int | None:
    return int(x) if x is not None and x.isdecimal() else None


def _prefix_fields(pre: str) -> tuple[dict[str, object], int]:
    """Parse ``host:pid:tid [dev] [ms func:line] [file:line [(func)]]`` backwards.

    Returns the fields and the offset in ``pre`` where the NCCL prefix starts.
    """
    f: dict[str, object] = {}
    end = len(pre)
    toks = pre.rstrip().rsplit(" ", 5)
    i = len(toks) - 1
    pos = len(pre.rstrip())

    def take() -> None:
        nonlocal i, pos
        pos -= len(toks[i])
        i -= 1
        if pos > 0 and pre[pos - 1] == " ":
            pos -= 1

    if i >= 0 and toks[i].startswith("(") and toks[i].endswith(")"):
        f["func"] = toks[i][1:-1]
        take()
    if i >= 0 and _FILE_LINE.fullmatch(toks[i]):
        if "." in toks[i].split(":")[0]:
            f["where"] = toks[i]
            take()
        elif i >= 1 and _is_float(toks[i - 1]):  # TRACE: "ms func:line"
            take()
        if i >= 0 and _is_float(toks[i]):
            take()
    if i >= 0 and len(toks[i]) > 2 and toks[i][0] == "[" and toks[i][-1] == "]" and toks[i][1:-1].isdecimal():
        f["dev"] = int(toks[i][1:-1])
        take()
    if i >= 0 and toks[i].count(":") >= 1:
        parts = toks[i].rsplit(":", 2)
        if len(parts) == 3 and parts[1].isalnum() and parts[2].isalnum():
            f["host"] = parts[0] or None
            f["pid"], f["tid"] = _int(parts[1]), _int(parts[2])
            take()
        elif len(parts) == 2 and parts[0].isdecimal() and parts[1].isdecimal():
            f["pid"], f["tid"] = int(parts[0]), int(parts[1])
            take()
        elif len(parts) == 2 and parts[0] and parts[1].isalnum():  # pid:tid redacted to one field
            f["host"], f["pid"] = parts[0], _int(parts[1])
            take()
    return f, max(pos, 0) if pos < end else end


def _window(s: str, lo: int, k: int) -> int:
    """Where the prefix before ``k`` is read from: ``lo``, or the first whole token of the
    last ``PREFIX_WINDOW`` characters (a longer run cannot be a prefix of NCCL's)."""
    if k - lo <= PREFIX_WINDOW:
        return lo
    sp = s.find(" ", k - PREFIX_WINDOW, k)
    return k if sp < 0 else sp


class _Prefix(NamedTuple):
    """The prefix of a glued record, read while looking for it: its ``NCCL`` offset, fields, start."""

    k: int
    fields: dict[str, object]
    start: int


def _nccl_record(s: str, pos: int, end: int, k: int, lvl: str, meta: dict[str, object],
                 known: _Prefix | None) -> tuple[Record, _Prefix | None]:
    """The record whose ``NCCL <LEVEL>`` is at ``k``, and the prefix of a record glued after it
    (None: none).  ``known``: this record's prefix, when the previous record found it."""
    if known is not None and known.k == k and known.start >= pos:
        f, start = known.fields, known.start
    else:
        lo = _window(s, pos, k)
        f, start = _prefix_fields(s[lo:k])
        start += lo
    body_start = k + 5 + len(lvl) + 1
    body_end, glued = end, None
    # Another record glued on the same line?
    j = s.find("NCCL ", body_start, end)
    while j >= 0:
        if _level_at(s, j, end):
            wlo = _window(s, body_start, j)
            f2, st2 = _prefix_fields(s[wlo:j])
            if "pid" in f2 or "where" in f2:
                glued = _Prefix(j, f2, wlo + st2)
                body_end = glued.start
                break
        j = s.find("NCCL ", j + 5, end)
    body = s[body_start:body_end].rstrip()
    pre = s[pos:start].strip()
    ts = meta.get("ts")
    if pre and ts is None and pre[0] == "[" and pre[-1] == "]":
        ts = pre[1:-1]  # NCCL's own configurable timestamp (2.26+)
    rec = Record(body, "nccl", lvl, f.get("host"), f.get("pid"), f.get("tid"),  # type: ignore[arg-type]
                 f.get("dev"), meta.get("rank"), ts, f.get("where"), meta.get("pg"))  # type: ignore[arg-type]
    return rec, glued


def _old_record(s: str, m: re.Match[str], meta: dict[str, object]) -> Record:
    """Lines without the word NCCL: pre-2.4 ``[0] INFO NET : ...``, ``include/socket.h:360 WARN ...``,
    and a bare ``WARN NET/IB : ...`` whose poster cut the prefix up to the level."""
    if m.group(1) is not None:
        lvl, dev, where = m.group(2), int(m.group(1)), None
    elif m.group(5) is None:  # a bare "WARN NET/IB : ..." (the poster cut the prefix with the word NCCL)
        return Record(s[m.end():].rstrip(), "nccl", "WARN", None, None, None, None, meta.get("rank"),  # type: ignore[arg-type]
                      meta.get("ts"), None, meta.get("pg"))  # type: ignore[arg-type]
    else:
        lvl, dev, where = "WARN", None, f"{m.group(3)}:{m.group(4)}"
    f, _ = _prefix_fields(s[: m.start() + (1 if s[m.start()] == " " else 0)])
    return Record(s[m.end():].rstrip(), "nccl", lvl, f.get("host"), f.get("pid"), f.get("tid"),  # type: ignore[arg-type]
                  dev, meta.get("rank"), meta.get("ts"), where, meta.get("pg"))  # type: ignore[arg-type]
