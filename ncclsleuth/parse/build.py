"""From grammar output (rule name + field strings) to typed event fields.

The grammar decides *what* a message is and *where* each value is; this module only
converts the value strings to their types (``int``, ``float``, interface records) and
maps grammar rule names to event kinds.  It is the step the shape cache replays, so it
must depend on nothing but the field strings.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from .. import events as E
from ..events.base import share
from ..events.nccl import as_int, via_fields
from ..util import bounded_put
from ..util.rxstore import rx
from . import host as _host

Fields = dict[str, Any]

# grammar rule (alias) -> (event kind, fixed fields)
ALIASES: dict[str, tuple[str, Fields]] = {
    "version": ("nccl_version", {}),
    "no_interface_bootstrap": ("no_interface", {"what": "bootstrap: no socket interface found"}),
    "no_interface_socket": ("no_interface", {"what": "NET/Socket: no usable interface found"}),
    "no_interface_ib": ("no_interface", {"what": "NET/IB: no IP interface found"}),
    "no_interface_oob": ("no_interface", {"what": "no device found matching NCCL_OOB_NET_IFNAME"}),
    "no_interface_subnet": ("no_interface", {"what": "no interface in the same subnet as the remote address"}),
    "ib_async_fatal": ("ib_async_event", {"fatal": True}),
    "plugin_not_found": ("net_plugin", {"status": "not_found"}),
    "plugin_symbol": ("net_plugin", {"status": "symbol_missing"}),
    "plugin_loaded": ("net_plugin", {"status": "loaded"}),
    "plugin_path": ("net_plugin", {"status": "path"}),
    "sock_connect": ("socket_error", {"op": "connect"}),
    "sock_closed": ("socket_error", {"op": "closed", "error": "Connection closed by remote peer"}),
    "sock_accept": ("socket_error", {"op": "accept"}),
    "sock_exceeded": ("socket_error", {"op": "connect"}),
    "sock_family": ("socket_error", {"op": "connect"}),
    "proxy_poll_failed": ("proxy_error", {"error": "Socket recv failed while polling"}),
    "shm_error_munmap": ("shm_error", {"op": "munmap"}),
    "shm_error": ("shm_error", {}),
    "shm_error_attach": ("shm_error", {"op": "attaching to"}),
    "shm_error_unlink": ("shm_error", {"op": "unlink"}),
    # "Failed to malloc %ld bytes" (include/alloc.h ncclCalloc/ncclRealloc): host memory, not the GPU's
    "alloc_failure_host": ("alloc_failure", {"what": "host malloc"}),
    "nvls": ("nvls", {}),
    "nvls_bind_failed": ("nvls", {"available": False}),
    "ring_peer": ("nccl_other", {}),
    "ws_timeout_at": ("work_status", {"what": "timeout_at"}),
    "ws_exception_at": ("work_status", {"what": "exception_at"}),
    "ws_failure_at": ("work_status", {"what": "failure_at"}),
    "ws_dump_signal": ("work_status", {"what": "dump_signal"}),
    "ws_update": ("work_status", {"what": "update"}),
    "desync_head": ("desync_report", {"what": "head"}),
    "desync_not_joined": ("desync_report", {"what": "not_joined"}),
    "desync_joined_not_finished": ("desync_report", {"what": "joined_not_finished"}),
    "desync_finished": ("desync_report", {"what": "finished"}),
    "desync_started": ("desync_report", {"what": "started"}),
    "desync_never_joined": ("desync_report", {"what": "never_joined"}),
    "desync_header": ("desync_report", {"what": "header"}),
    "cpp_terminate": ("cpp_abort", {"what": "terminate"}),
    "gloo_enforce": ("cpp_abort", {"what": "enforce"}),
    "mb_failed": ("monitored_barrier", {"what": "failed"}),
    "mb_timeout": ("monitored_barrier", {"what": "timeout"}),
    "mb_nonzero": ("monitored_barrier", {"what": "waited"}),
    "abort_async_error": ("nccl_abort", {"what": "async_error"}),
    "abort_job_failed": ("nccl_abort", {"what": "job_failed"}),
    "abort_reclaim": ("nccl_abort", {"what": "reclaim"}),
    "abort_proxy": ("nccl_abort", {"what": "proxy_stop"}),
    "abort_cleanup": ("nccl_abort", {"what": "cleanup"}),
    "abort_revoked": ("nccl_abort", {"what": "revoked"}),
    "ras_dead_peer": ("ras_peer", {"what": "dead"}),
    "ras_keepalive": ("ras_peer", {"what": "keepalive"}),
    "ras_coll_timeout": ("ras_peer", {"what": "coll_timeout"}),
    "abort_ops_failed": ("pg_abort", {"what": "ops_failed"}),
    "abort_taking_down": ("pg_abort", {"what": "taking_down"}),
    "abort_terminating": ("pg_abort", {"what": "terminating"}),
    "abort_dump_observed": ("pg_abort", {"what": "dump_observed"}),
    "abort_watchdog_exception": ("pg_abort", {"what": "watchdog_exception"}),
    "store_connect_timeout": ("store_error", {"what": "connect_timeout"}),
    "store_connect_failed": ("store_error", {"what": "connect_failed"}),
    "store_resolve_failed": ("store_error", {"what": "resolve_failed"}),
    "store_not_listening": ("store_error", {"what": "not_listening"}),
    "store_socket_timeout": ("store_error", {"what": "socket_timeout"}),
    "store_barrier_timeout": ("store_error", {"what": "barrier_timeout"}),
    "store_uniqueid": ("store_error", {"what": "uniqueid"}),
    "store_recv_failed": ("store_error", {"what": "recv_failed"}),
    "store_wait_timeout": ("store_error", {"what": "wait_timeout"}),
    "addr_bind_failed": ("addr_in_use", {}),
    "addr_listen_failed": ("addr_in_use", {}),
    "addr_errno": ("addr_in_use", {}),
    "hw_ecc": ("hw_error", {"what": "ecc"}),
    "hw_xid": ("hw_error", {"what": "xid"}),
    "hw_bus": ("hw_error", {"what": "fell_off_bus"}),
    "cuda_error_torch": ("cuda_error", {"origin": "torch"}),
    "step_time_megatron": ("step_time", {}),
}

#: ncclResult_t (FORMAT.md 3.12): what a bare "error 6" / "sets state 2" means
NCCL_RESULTS = {0: "success", 1: "unhandled cuda error", 2: "system error", 3: "internal error",
                4: "invalid argument", 5: "invalid usage", 6: "remote error", 7: "in progress", 8: "timeout"}

_IFACE = rx(
    r"^(?:\[(\d+)\])?(.+?)(?::((?:\d{1,3}\.){3}\d{1,3}(?:<\w*>)?|[0-9a-fA-F]*:[0-9a-fA-F:.]*(?:%\S+?)?(?:<\w*>)?"
    r"|<\w+>|[^:]*<\w*>))?$")
_IBDEV = rx(r"^\[(\d+)\](.*?)(?::(\d+))?(?::(\d+))?(?::(\d+))?/(\w+)(?:/\S*)?$")
_FP = rx(r"(SequenceNumber|OpType|TensorShape)=(\[[^\]]*\]|[A-Z_a-z]+|\d+)")
_MEGATRON_MS = rx(r"elapsed time per iteration \(ms\): *([\d.]+)")
_EXC_PRE = rx(r"([\w.]*(?:Error|Exception))\s*:?\s*$")
_SIZE = rx(r"size: (\d+)")
_TIMEOUT = rx(r"TIMEOUT\(ms\): (\d+)")
_GRANK = rx(r"global rank: (\d+)")
_NCCLV = rx(r"NCCL version: ([\d.]+)")
_PGNAME = rx(r"PG Name: (\S+)")
_PORT = rx(r":(\d+)\b")


def iface(tok: str) -> E.Iface:
    """``[0]eth0:10.0.0.1<0>`` / ``eno1:avahi:1.2.3.4<0>`` / ``veth0:fe80::1%veth0<0>``."""
    m = _IFACE.match(tok)
    if not m:
        return E.Iface(name=tok)
    addr = m.group(3)
    if addr and "<" in addr:
        addr = addr[: addr.index("<")]
    return E.Iface(name=m.group(2), addr=addr or None, idx=int(m.group(1)) if m.group(1) else None)


def ibdev(tok: str) -> list[E.IbDev]:
    """``[0]mlx5_0:1/IB``; 2.30 ``[0]mlx5_0:1:rail:plane/IB``; the 2.23 merged form
    ``[0]={[0] mlx5_0:1/IB, [1] ...}`` (each member gets the merged device's index, the
    one ``NET/IB/<n>`` in channel lines refers to)."""
    if "={" in tok:
        outer = _int(tok[1:tok.index("]")])
        inner = tok[tok.index("{") + 1: tok.rindex("}") if "}" in tok else len(tok)]
        out: list[E.IbDev] = []
        for part in inner.split(","):
            out.extend(dataclasses.replace(d, idx=outer) for d in ibdev(part.strip().replace("] ", "]", 1)))
        return out
    hit = _IBDEVS.get(tok)
    if hit is None:
        m = _IBDEV.match(tok)
        hit = E.IbDev(hca=tok, port=None, link="?") if not m else \
            E.IbDev(hca=m.group(2), port=_int(m.group(3)), link=m.group(6), idx=int(m.group(1)),
                    rail=_int(m.group(4)), plane=_int(m.group(5)))
        if len(_IBDEVS) < 10_000:
            _IBDEVS[tok] = hit
    return [hit]


#: device token -> its (frozen) IbDev: every rank of a node prints the same devices
_IBDEVS: dict[str, E.IbDev] = {}


def tree_edges(tokens: list[str]) -> tuple[E.TreeEdge, ...]:
    """Edges of a ``Trees [0] a/b/c->me->up [1] ...`` line (tokens: index, spec, index, spec...).

    A rank prints the same one or two specs on all its 32 channels, so each spec is
    split once (memo) and each edge is one constructor call.
    """
    edge, spec_of = E.TreeEdge, _TREE_SPECS.get
    out = []
    for idx, spec in zip(tokens[0::2], tokens[1::2]):
        parsed = spec_of(spec) or _tree_spec(spec)
        out.append(edge(int(idx.strip("[]")), *parsed))
    return tuple(out)


_TREE_SPECS: dict[str, tuple[tuple[int, ...], int, int]] = {}
#: specs kept at most: a spec names its rank, so it comes back on that rank's other channels and
#: no other rank's; the table starts again when full (it grew with the ranks: 0.8 MiB at 4,096)
MAX_TREE_SPECS = 4096


def _tree_spec(spec: str) -> tuple[tuple[int, ...], int, int]:
    """``d0/d1/d2->me->up`` (2.5+) or ``up->me->d0/d1/d2`` (2.4); for NCCL 2.5-2.7
    ``a|b`` pairs, the first tree.  Returns (downs, me, up)."""
    a, me, b = spec.split("|")[0].split("->")
    if "/" in b and "/" not in a:  # 2.4: up->me->d0/d1/d2
        up, downs = a, b
    else:  # 2.5+: d0/d1/d2->me->up
        downs, up = a, b
    parsed = (tuple(int(x) for x in downs.split("/")), int(me), int(up))
    return bounded_put(_TREE_SPECS, MAX_TREE_SPECS, spec, parsed)


def _int(s: str | None) -> int | None:
    return None if s is None else as_int(s)


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


# --------------------------------------------------------------------------- per-kind fixes


def _b_version(f: Fields) -> None:
    v = f.pop("version", "")
    ver, _, cuda = v.partition("+cuda")
    f["version"], f["cuda"] = ver, cuda or None


def _b_env(f: Fields) -> None:
    f["value"] = f.get("value", "").rstrip().rstrip(".")


def _b_ifaces(f: Fields) -> None:
    toks = f.pop("ifaces", [])
    f["ifaces"] = tuple(iface(t) for t in toks)


def _b_ibdevs(f: Fields) -> None:
    devs: list[E.IbDev] = []
    for t in f.pop("ibdevs", []):
        devs.extend(ibdev(t))
    f["devices"] = tuple(devs)
    if "oob" in f:
        f["oob"] = iface(f["oob"])
    f["plugin"] = f.pop("_netib", None)


def _b_comm(f: Fields, kind: str) -> str:
    phase = f.get("phase") or ""
    if phase.startswith(("Destroy", "Abort", "Revoke")):
        return "comm_end"
    f["phase"] = phase.split()[-1] if phase else "INFO"
    return "comm_init"


def _b_phases(f: Fields) -> None:
    if "tfunc" in f:
        f["func"] = f.pop("tfunc")
    toks = f.pop("phases", [])
    # each (phase, seconds) pair shared: every rank prints the same names, and mostly the same times
    f["phases"] = tuple(share((share(k), float(v))) for k, v in zip(toks[0::2], toks[1::2]))


def _b_trace(f: Fields) -> None:
    file, _, line = f.get("file", "").rpartition(":")
    f["file"], f["fline"] = file, _int(line)
    if "_thread" in f:
        f["thread"] = f["_thread"].strip("[]")
    if "efunc" in f:
        f["func"] = f.pop("efunc")
    if "errtext" in f:
        f["error"] = f.pop("errtext")[1:-1]


def _b_ifpaths(f: Fields) -> None:
    f["paths"] = tuple(tuple(t[:-1].split("(", 1)) for t in f.pop("ifpaths", []))


def _b_chans(f: Fields) -> None:
    # tokens: N channels , N collnet channels , ... , N p2p channels per peer
    num, what = None, "coll"
    for t in f.pop("chans", []):
        if t[:1].isdecimal():
            num, what = t, "coll"
        elif t.startswith("channels"):
            f["p2p_per_peer" if t.endswith("peer") else what] = _int(num)
        else:
            what = t


def _b_desync(f: Fields) -> None:
    r = f.pop("ranks", None)
    if r is not None:
        f["ranks"] = tuple(int(x) for x in r.strip("[]").split(",") if x.strip())
    hdr = f.pop("rank_hdr", None)  # v2.6+ header line "Rank N" (the reporting rank)
    if hdr is not None:
        f["ranks"] = (int(hdr),)


def _b_ring(f: Fields) -> None:
    ch = f.pop("chan", "0")
    c, _, n = ch.partition("/")
    f["channel"], f["nchannels"] = int(c), _int(n) if n else None
    f["order"] = tuple(int(x) for x in f.pop("order", []))
    f["truncated"] = "_ellipsis" in f


def _b_conn(f: Fields) -> None:
    ch = f.pop("chan", "0")
    c, _, n = ch.partition("/")
    f["channel"], f["conn_index"] = int(c), _int(n) if n else None
    for end in ("src", "dst"):
        r, _, d = f.pop(end, "0[0]").partition("[")
        f[end], f[end + "_dev"] = int(r), d.rstrip("]")
    f.update(via_fields(f.get("via", "")))


def _b_call(f: Fields) -> str:
    call = f.get("call", "")
    if "errno" in f:
        f["errno"] = _int(f["errno"])
    for k in ("errmsg", "errmsg_nr"):
        if k in f:
            f["error"] = f.pop(k)
    f.setdefault("error", "")
    if "hcaport" in f:
        h, _, p = f.pop("hcaport").rpartition(":")
        f["hca"], f["port"] = h, _int(p)
    if "attempt" in f:
        return "ibv_retry"
    err = f["error"].rstrip()
    if err.endswith(", retrying"):  # "Call to X returned <strerror>, retrying": no failure (events.CallRetry)
        f["error"] = err[: -len(", retrying")]
        return "call_retry"
    if call.startswith("ibv_") or call.startswith("wrap_ibv"):
        return "ibv_error"
    if call in ("connect", "accept", "recv", "send", "socket", "bind", "listen", "poll", "getsockname",
                "setsockopt") or "from" in f or "peer" in f:
        f["op"] = call
        return "socket_error"
    if call in ("posix_fallocate", "shm_open", "mmap", "ftruncate", "shm_unlink", "unlink", "fallocate"):
        f["op"] = call
        return "shm_error"
    return "syscall_error"


def _b_ib_completion(f: Fields) -> None:
    st = f.pop("status", None)
    sn = f.pop("status_name", None)
    if st is not None:
        f["status"] = _int(st)
    elif sn is not None:
        m = re.match(r"(\w+)\((\d+)\)$", sn)
        if m:
            f["status_name"], f["status"] = m.group(1), int(m.group(2))
        else:
            f["status"] = _int(sn)
    f["vendor_err"] = _int(f.get("vendor_err"))
    f["plugin"] = f.pop("_netib", None)


_FROM_RANK = rx(r"from rank (\d+)")


_VS = rx(r"(\S+) vs (\S+?)\.?(?:\s|$)")


def _b_cpp_abort(f: Fields) -> None:
    t = f.pop("cpp_type", None)
    if t is not None:
        f["exc_type"] = str(t).strip("'")
    enf = f.pop("_enforceat", None)
    if enf is not None:
        f["where"] = str(enf)[len("[enforce fail at "):-1]
        detail = str(f.get("detail") or "")
        m = _VS.search(detail)
        if m is not None:  # "op.preamble.length <= op.nbytes. 580 vs 548. Received data size ..."
            f["got"], f["expected"] = m.group(1), m.group(2)


def _b_mbarrier(f: Fields) -> None:
    f["ranks"] = tuple(int(str(x)) for x in f.pop("mb_ranks", []))
    rest = str(f.pop("_rest", "") or "")
    m = _FROM_RANK.search(rest)
    if m is not None:  # "... waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
        f["points_to"] = int(m.group(1))


def _b_mismatch(f: Fields) -> None:
    for side in ("a", "b"):
        fp = f.pop("fp_" + side, None)
        if not fp:
            continue
        vals = dict(_FP.findall(fp))
        f["seq_" + side] = _int(vals.get("SequenceNumber"))
        f["op_" + side] = vals.get("OpType")
        f["shape_" + side] = vals.get("TensorShape")
    rest = f.pop("_rest", "")
    if "differ in the following aspects:" in rest:
        f["differ"] = rest.split("aspects:", 1)[1].strip()


def _b_pg_options(f: Fields) -> None:
    d = f.get("detail", "")
    for key, pattern in (("size", _SIZE), ("timeout_ms", _TIMEOUT), ("global_rank", _GRANK)):
        m = pattern.search(d)
        if m:
            f[key] = int(m.group(1))
    m = _NCCLV.search(d)
    if m:
        f["nccl_version"] = m.group(1)
    m = _PGNAME.search(d)
    if m:
        f["pg"] = m.group(1).rstrip(",")


def _b_store(f: Fields) -> None:
    hp = f.pop("hostport", None)
    if hp:
        h, _, p = hp.strip("()").rpartition(",")
        f["peer_host"], f["port"] = h.strip(), _int(p.strip())
    addr = f.pop("addr", None)
    if addr:  # [host]:port / host:port
        h, _, p = addr.rpartition(":")
        f["peer_host"], f["port"] = h.strip("[]") or None, _int(p)
    if "_rest" in f and not f.get("detail"):
        f["detail"] = f["_rest"]


def _b_addr(f: Fields, kind: str) -> None:
    addr = f.get("addr")
    if addr:
        m = _PORT.search(addr[-8:])
        f["port"] = int(m.group(1)) if m else None
    d = f.get("detail") or f.get("_rest") or ""
    f["detail"] = d
    if kind == "addr_listen_failed":
        m = re.search(r"port: (\d+)", d)
        if m:
            f["port"] = int(m.group(1))


def build(rule: str, raw: Fields, pre: str = "") -> tuple[type[E.Event], Fields]:
    """Map a grammar rule and its raw field strings to an event class and typed fields.

    A value the grammar accepted but that does not convert (a number glued to another
    record, '1501/0') makes the line an ``nccl_other`` rather than an exception.
    """
    try:
        return _build(rule, raw, pre)
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        return E.NcclOther, {}


def _build(rule: str, raw: Fields, pre: str = "") -> tuple[type[E.Event], Fields]:
    f = dict(raw)
    kind, fixed = ALIASES.get(rule, (rule, {}))
    f.update(fixed)
    fixer = _FIXERS.get(rule) or _FIXERS.get(kind)
    if fixer is not None:
        fixer(f)
    kind = _special(rule, kind, f, pre)
    cls = E.REGISTRY.get(kind, E.NcclOther)
    return cls, _typed(cls, f)


def _special(rule: str, kind: str, f: Fields, pre: str) -> str:
    """The fixes that depend on the grammar rule or on the text before the message (the
    fields-only ones are in :data:`_FIXERS`); returns the kind, which a rule may change."""
    if rule == "comm_line":
        return _b_comm(f, kind)
    if rule == "call_failed":
        return _b_call(f)
    if "_sockfn" in f or "_sockpoll" in f:
        f["func"] = f.get("_sockfn") or f.get("_sockpoll")
    if rule == "sock_exceeded":
        f["error"] = "exceeded " + f.get("error", "").strip()
    if rule == "sock_connect_maybe_retry":
        f["op"] = "connect"
        return "socket_retry" if "retrying" in f.get("error", "") else "socket_error"
    pre_fix = _host.PRE_FIXERS.get(kind)
    if pre_fix is not None and pre:
        pre_fix(f, pre)
    if kind == "addr_in_use":
        _b_addr(f, rule)
    elif kind in ("nccl_error", "nccl_error_class", "exception") and pre:
        m = _EXC_PRE.search(pre)  # "RuntimeError: <message>": the type precedes the message
        if m:
            f.setdefault("exc_type", m.group(1))
    return kind


def _b_cuda(f: Fields) -> None:
    q = f.pop("_quoted", None)
    if q is not None:
        f["error"] = q.strip("'")
    f["code"] = _int(f.get("code"))


def _b_shm(f: Fields) -> None:
    f.setdefault("op", "creating")


def _b_error_class(f: Fields) -> None:
    f["code"] = f.pop("code_name", "")


def _b_exception(f: Fields) -> None:
    f["message"] = f.pop("message_opt", "")


def _b_step_time(f: Fields) -> None:
    if "ms" in f:
        f["ms"] = _float(f["ms"].rstrip("ms"))
    else:
        m = _MEGATRON_MS.search(f.get("detail", ""))
        f["ms"] = float(m.group(1)) if m else None


def _b_tests_failure(f: Fields) -> None:
    f["message"] = (f.pop("message_opt", "") or f.get("_rest", "")).strip().strip("'")
    if "fail_what" in f:
        f["what"] = f.pop("fail_what")


def _b_tests_rank(f: Fields) -> None:
    if "test_bus_id" in f:
        f["bus_id"] = f.pop("test_bus_id")


def _b_nvls(f: Fields) -> None:
    f["available"] = False if "_avail" in f or f.get("available") is False else f.get("available", True)
    f["detail"] = f.get("detail", "")


def _b_failure_head(f: Fields) -> None:
    f["block"] = "root_cause" if f.get("_failhead", "").startswith("Root") else "failures"


def _b_failure_field(f: Fields) -> None:
    f["name"], f["value"] = f.pop("fkey", ""), f.pop("fvalue", "").strip()


def _b_ib_async(f: Fields) -> None:
    if "hcaport" in f:
        h, _, p = f.pop("hcaport").rpartition(":")
        f["hca"], f["port"] = h, _int(p)


def _b_connected(f: Fields) -> None:
    f["what"] = f.get("what") or f.pop("what_rest", "")


#: a whole ``Trees`` spec (the grammar's TREESPEC): a line cut by NCCL's 1,024-byte buffer ends in
#: a pair whose spec is not
_WHOLE_SPEC = rx(r"-?\d+(?:/-?\d+)*->-?\d+->-?\d+(?:/-?\d+)*(?:\|-?\d+(?:/-?\d+)*->-?\d+->-?\d+(?:/-?\d+)*)?")


def _b_trees(f: Fields) -> None:
    f["edges"] = tree_edges(whole_pairs(f.pop("tree", [])))


def whole_pairs(tokens: list[str]) -> list[str]:
    """The (``[index]``, spec) tokens of a ``Trees`` line without the pair NCCL's buffer cut
    (``src/init.cc``, 2.4-2.30: the line stops at 1,023 characters, inside a pair or after its
    index)."""
    n = len(tokens) - len(tokens) % 2
    if n and _WHOLE_SPEC.fullmatch(tokens[n - 1]) is None:
        n -= 2
    return tokens if n == len(tokens) else tokens[:n]


def _b_net_plugin(f: Fields) -> None:
    if "name_rest" in f:
        f["name"] = f.pop("name_rest")


_GDR_HCA_NAME = rx(r"HCA (?:\d+ )?'([^']+)'|HCA ([A-Za-z]\w+)")


def _b_net_gdr(f: Fields) -> None:
    target = str(f.pop("gdr_target", "")).strip()
    f["enabled"] = str(f.pop("gdr_state", "")).lower() == "enabled"
    net = f.pop("_netib", None) or f.pop("_netsocket", None)
    f["net"] = str(net) if net else None
    f["scope"] = "path" if "distance" in target else "hca"
    m = _GDR_HCA_NAME.search(target)
    f["hca"] = (m.group(1) or m.group(2)) if m else None
    f["detail"] = target


def _b_net_selected(f: Fields) -> None:
    f["network"] = f.get("network", "").strip()


def _b_duplicate_gpu(f: Fields) -> None:
    if "device" not in f and "detail" in f:
        f["device"] = None


def _b_nccl_abort(f: Fields) -> None:
    code = _int(f.get("code"))
    f["code"] = code
    f["code_name"] = (f"error {code}, {NCCL_RESULTS[code]}" if code in NCCL_RESULTS else
                      f"error {code}" if code is not None else "communicator revoked")
    f["during"] = f.pop("abort_in", None)


def _b_ras_peer(f: Fields) -> None:
    if "ras_level" in f:  # keep-alive / collective timeout "warning" or "error"
        f["what"] += "_" + f.pop("ras_level")
    if "ras_secs" in f:
        f["seconds"] = _int(f.pop("ras_secs").rstrip("s"))
    f["coll"] = f.pop("ras_coll", None)


def _b_pg_abort(f: Fields) -> None:
    if "detail" in f:
        f["detail"] = f["detail"].strip().rstrip(".")


# rule or kind -> fixer(fields): the fixes that need nothing but the fields
_FIXERS: dict[str, Callable[[Fields], Any]] = {
    "version": _b_version,
    "env_setting": _b_env,
    "bootstrap_iface": _b_ifaces,
    "net_socket_ifaces": _b_ifaces,
    "net_ib_devices": _b_ibdevs,
    "init_timings": _b_phases,
    "bootstrap_timings": _b_phases,
    "ring": _b_ring,
    "err_trace": _b_trace,
    "channel_conn": _b_conn,
    "ib_completion_error": _b_ib_completion,
    "collective_mismatch": _b_mismatch,
    "monitored_barrier": _b_mbarrier,
    "cpp_abort": _b_cpp_abort,
    "pg_options": _b_pg_options,
    "channels_summary": _b_chans,
    "net_iface_paths": _b_ifpaths,
    "desync_report": _b_desync,
    "store_error": _b_store,
    "cuda_error": _b_cuda,
    "shm_error": _b_shm,
    "nccl_error_class": _b_error_class,
    "exception": _b_exception,
    "step_time": _b_step_time,
    "nccltests_failure": _b_tests_failure,
    "nccltests_rank": _b_tests_rank,
    "nvls": _b_nvls,
    "failure_block_head": _b_failure_head,
    "failure_field": _b_failure_field,
    "ib_async_event": _b_ib_async,
    "connected": _b_connected,
    "trees": _b_trees,
    "net_plugin": _b_net_plugin,
    "net_selected": _b_net_selected,
    "net_gdr": _b_net_gdr,
    "duplicate_gpu": _b_duplicate_gpu,
    "nccl_abort": _b_nccl_abort,
    "ras_peer": _b_ras_peer,
    "pg_abort": _b_pg_abort,
}
# the lines around NCCL (kernel, driver, tools, crash handlers, plugins): parse/host.py
ALIASES.update(_host.ALIASES)
_FIXERS.update(_host.FIXERS)


_CONVERTERS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _converters(cls: type[E.Event]) -> tuple[tuple[str, Any], ...]:
    """(field, converter) per typed field of a class, computed once: int, float or None.

    Read from the annotation strings (``int | None``, ``tuple[int, ...]``) rather than
    ``typing.get_type_hints``, which compiles and evaluates every annotation: ~200
    compiles, 6 ms of each process's first file.
    """
    conv = _CONVERTERS.get(cls)
    if conv is None:
        out: list[tuple[str, Any]] = []
        for name, annotation in cls.FIELD_TYPES.items():
            if name in E.Event.FIELD_TYPES or name.startswith("_"):
                continue
            names = _type_names(annotation)
            if "int" in names and "str" not in names:
                out.append((name, _int))
            elif "float" in names and "str" not in names:
                out.append((name, _float))
            else:
                out.append((name, None))
        conv = _CONVERTERS[cls] = tuple(out)
    return conv


def _type_names(annotation: str) -> set[str]:
    """``"int | None"`` -> {int, None}; ``"tuple[int, ...]"`` -> {int, ...} (the arguments)."""
    out: set[str] = set()
    for part in annotation.split("|"):
        part = part.strip()
        if "[" in part:
            out.update(x.strip() for x in part[part.index("[") + 1: part.rindex("]")].split(","))
        else:
            out.add(part)
    return out


_BY_NAME: dict[type, dict[str, Any]] = {}


def _typed(cls: type[E.Event], f: Fields) -> Fields:
    """The fields of ``f`` that ``cls`` declares, stripped and converted: a walk over the
    handful of fields a line has, not over the class's (a dozen with the base's)."""
    conv = _BY_NAME.get(cls)
    if conv is None:
        conv = _BY_NAME[cls] = dict(_converters(cls))
    out: Fields = {}
    for name, v in f.items():
        if name in conv:
            if isinstance(v, str):
                v = v.strip()
                fn = conv[name]
                if fn is not None:
                    v = fn(v)
            out[name] = v
    return out
