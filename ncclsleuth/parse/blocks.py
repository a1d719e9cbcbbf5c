"""Block readers: the multi-line output of diagnostic tools, read into typed events.

A failure thread often holds a tool's output next to (or instead of) the NCCL log:
``ibstat``, ``ibstatus``, ``ibv_devinfo [-v]``, ``show_gids``, ``nvidia-smi topo -m``,
``nvidia-smi -q`` and its table, ``systemctl status <unit>``, ``df``, and native
backtraces (UCX, gdb, glibc, PyTorch's ``frame #N:``).  Their lines mean something only
in their block: ``State: Down`` is a port of the adapter named above it, ``Pending : Yes``
is a row remap only under ``Remapped Rows``, ``Active: failed`` is the fabric manager
only under its unit header.

The grammar recognises the line a block starts at (``tool_head`` in messages.lark, with
the keywords the fast path needs); :class:`Blocks` then opens the reader for it and hands
it every following line until the reader says a line is not its own (that line is then
parsed as usual).  While a block is open the file is read line by line, as for a Python
traceback.  Where the first line of a tool's output holds no cheap keyword (ibstatus'
``Infiniband device '...'``, ibv_devinfo's ``hca_id:``), the block starts at a port state
line and the reader reads the header from the lines just before it (``recent``), so the
fast path finds these blocks without a lowercase prefilter keyword.

Events of a block carry ``block`` (the line it started at) and ``node`` (a ``node1:``
label a parallel shell put before every line), so two tables of one paste stay apart.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .. import events as E
from ..util.rxstore import rx
from .envelope import peel

#: lines before the opening line a reader may read its header from (and their characters)
LOOKBACK = 64
LOOKBACK_CHARS = 16384
#: lines a block may hold (nvidia-smi -q of 8 GPUs: ~2,500): a hostile file of indented lines
#: after a header is not read line by line to its end
MAX_BLOCK_LINES = 20_000
#: openers per file that may read lines back (a file of a million headerless "state:" lines
#: is not read back a million times)
MAX_LOOKBACKS = 1000
#: lines a crash report may have between its signal line and the first frame (gdb chatter)
FRAME_GAP = 8

Make = Callable[..., E.Event]
#: the lines before the opening one, when a reader asks (reading them back costs: only on demand)
Recent = Callable[[], list[tuple[int, str]]]


#: what may stand before a block line's indentation: a Markdown quote, backticks, a torchrun
#: or srun label (a longer envelope, an NCCL prefix, makes the line no block line)
_WRAPPER = rx(r"^(?:>+ ?|`+|\[(?:default|rank)?\d+\]:|\d{1,6}: )*$")


def _indent_and_body(text: str, prefix: str) -> tuple[int, str, Any]:
    """(indentation, body, record) of a block line, without the envelope and the block's prefix."""
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    text = text.rstrip("\r")
    rec = peel(text)[0] if text.strip() else None
    body = rec.body if rec is not None else ""
    at = text.rfind(body) if body else len(text)
    before = text[:max(at, 0)]
    lead = before.rstrip(" \t")
    indent = len(before) - len(lead)
    if rec is not None and (rec.family == "nccl" or not _WRAPPER.match(lead)):
        indent = 0  # an NCCL line, a log record: not part of a tool's indented output
    return indent, body.rstrip(), rec


class Reader:
    """One open block: ``feed`` a line, get its events, or None when the line is not the block's."""

    tool = ""

    def __init__(self, opener: E.Event, prefix: str, source: str) -> None:
        self.source = source
        self.block = opener.line
        self.node: str | None = getattr(opener, "node", None)
        self.host, self.rank = opener.host, opener.rank
        self.prefix = prefix

    def make(self, cls: type[E.Event], lineno: int, text: str, **fields: Any) -> E.Event:
        if "node" in cls.FIELD_TYPES:
            fields.setdefault("node", self.node)
        if "block" in cls.FIELD_TYPES:
            fields.setdefault("block", self.block)
        return cls(source=self.source, line=lineno, text=text, host=self.host, rank=self.rank, **fields)

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        """Events of the opening line (and of the lines before it the reader reads back)."""
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        raise NotImplementedError

    def close(self) -> list[E.Event]:
        return []


# ---------------------------------------------------------------------- nvidia-smi topo -m

#: connection types of a topology cell (nvidia-smi's legend; SOC is old drivers' SYS)
TOPO_CELLS = rx(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|C2C|NV#)$")
_TOPO_LEGEND = rx(r"^(?:Legend:|NIC Legend:|(?:X|SYS|NODE|PHB|PXB|PIX|NV#|SOC|C2C)\s+=)")
_TOPO_NIC = rx(r"^(NIC\d+):\s*(\S+)\s*$")


class TopoReader(Reader):
    """``nvidia-smi topo -m``: the header's columns, then one row per device, the legend."""

    tool = "topo"

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        head = str(getattr(opener, "detail", "")).split()
        self.columns = tuple(head[:head.index("CPU")] if "CPU" in head else head)
        self.in_legend = False
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        _, body, _ = _indent_and_body(text, self.prefix)
        if not body:
            return []
        toks = body.split()
        n = len(self.columns)
        if not self.in_legend and len(toks) > n and toks[0] in self.columns and all(
                TOPO_CELLS.match(c) for c in toks[1:n + 1]):
            rest = toks[n + 1:]
            return [self.make(E.TopoRow, lineno, text, device=toks[0], columns=self.columns,
                              cells=tuple(toks[1:n + 1]), cpu_affinity=rest[0] if rest else None,
                              numa=rest[1] if len(rest) > 1 else None)]
        if _TOPO_LEGEND.match(body):
            self.in_legend = True
            return []
        m = _TOPO_NIC.match(body)
        if m and self.in_legend:
            return [self.make(E.TopoNic, lineno, text, nic=m.group(1), name=m.group(2))]
        if self.in_legend and body.startswith(("NV#", "X ")):
            return []
        return None


# ---------------------------------------------------------------------- ibstat / ibstatus / ibv_devinfo

_IB_DEVICE = rx(r"^(?:CA '([^']+)'|Infiniband device '([^']+)' port (\d+) status:|hca_id:\s*(\S+))\s*$")
#: a raw line that may hold such a header (looked for before the line is peeled)
_IB_DEVICE_RAW = rx(r"CA '|Infiniband device '|hca_id:")
_IB_PORT = rx(r"^(?:Port (\d+):|port:\s*(\d+))\s*$")
_IB_KV = rx(r"^([A-Za-z][\w ]*?|GID\[\s*\d+\])\s*:\s*(.*?)\s*$")
_GID = rx(r"^gid\[\s*(\d+)\]$", re.I)
_GID_VALUE = rx(r"^([0-9a-fA-F:.]+)(?:,\s*(RoCE v\d|IB))?\s*$")
_STATES = {"active": "Active", "down": "Down", "initializing": "Initializing", "init": "Initializing",
           "armed": "Armed", "active_defer": "Active"}
_PHYS = {"linkup": "LinkUp", "link_up": "LinkUp", "polling": "Polling", "disabled": "Disabled", "sleep": "Sleep",
         "linkerrorrecovery": "LinkErrorRecovery", "link_error_recovery": "LinkErrorRecovery",
         "portconfigurationtraining": "PortConfigurationTraining", "phytest": "PhyTest"}


def port_state(value: str, table: dict[str, str]) -> str:
    """``Active`` / ``4: ACTIVE`` / ``PORT_ACTIVE (4)`` / ``LINK_UP (5)`` -> the ibstat word."""
    v = value.strip()
    v = re.sub(r"^\d+:\s*", "", v)
    v = re.sub(r"\s*\(\d+\)$", "", v)
    v = v[5:] if v.upper().startswith("PORT_") else v
    return table.get(v.lower(), v)


def ipv4_of(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (``::ffff:10.0.0.1``, ``0000:...:ffff:0a00:0001``)."""
    g = gid.lower()
    if g.startswith("::ffff:") and "." in g:
        return g[7:]
    digits = g.replace(":", "")
    if len(digits) == 32 and digits.startswith("00000000000000000000ffff"):
        return ".".join(str(int(digits[24 + 2 * i:26 + 2 * i], 16)) for i in range(4))
    return None


class IbReader(Reader):
    """ibstat, ibstatus and ibv_devinfo [-v]: adapters, their ports and GID tables.

    A port's event is made when the next port, adapter or the end of the block comes, on its
    state line (the line a finding quotes); GID entries as they come."""

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        self.tool = str(getattr(opener, "tool", ""))
        self.device: str | None = None
        self.port: int | None = None
        self.cur: dict[str, Any] | None = None
        self.blank = False
        out: list[E.Event] = []
        if getattr(opener, "name", None) is None:  # opened at a state line: read the header back
            back = recent()
            start = next((i for i in range(len(back) - 1, -1, -1) if _IB_DEVICE_RAW.search(back[i][1])
                          and _IB_DEVICE.match(_indent_and_body(back[i][1], self.prefix)[1])), None)
            if start is None:
                self.device = "?"  # a port pasted without its adapter's header
            else:
                for lineno, text in back[start:]:
                    out.extend(self.feed(lineno, text) or [])
        out.extend(self.feed(opener.line, opener.text) or [])
        return out

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        indent, body, _ = _indent_and_body(text, self.prefix)
        if not body:
            self.blank = True
            return []
        m = _IB_DEVICE.match(body)
        if m:
            out = self._flush()
            self.device = m.group(1) or m.group(2) or m.group(4)
            self.port = int(m.group(3)) if m.group(3) else None
            if self.port is not None:
                self._new_port(lineno, text)
            self.blank = False
            return out
        m = _IB_PORT.match(body)
        if m and self.device is not None:
            out = self._flush()
            self.port = int(m.group(1) or m.group(2))
            self._new_port(lineno, text)
            self.blank = False
            return out
        if indent == 0:  # a line that is no header and not indented: the block has ended
            return None
        self.blank = False
        kv = _IB_KV.match(body)
        if kv is None:  # ibv_devinfo -v lists capability flags on lines of their own
            return []
        return self._value(lineno, text, kv.group(1).strip().lower(), kv.group(2))

    def _new_port(self, lineno: int, text: str) -> None:
        self.cur = {"line": lineno, "text": text}

    def _value(self, lineno: int, text: str, key: str, value: str) -> list[E.Event]:
        g = _GID.match(key) if key.startswith("gid[") else None
        if g is not None or key == "default gid":
            return self._gid(lineno, text, int(g.group(1)) if g else 0, value)
        if self.cur is None:
            if key in ("state", "physical state", "phys state", "phys_state"):
                self._new_port(lineno, text)  # ibstat of a one-port adapter pasted without "Port 1:"
            else:
                return []
        cur = self.cur
        assert cur is not None
        if key == "state":
            cur["state"] = port_state(value, _STATES)
            cur["line"], cur["text"] = lineno, text
        elif key in ("physical state", "phys state", "phys_state"):
            cur["phys_state"] = port_state(value, _PHYS)
        elif key in ("link layer", "link_layer"):
            cur["link_layer"] = value.split()[0] if value else value
        elif key == "rate":
            cur["rate"] = value
        elif key in ("base lid", "port_lid"):
            cur["base_lid"] = value
        elif key in ("sm lid", "sm_lid"):
            cur["sm_lid"] = value
        elif key == "active_mtu":
            cur["active_mtu"] = value
        return []

    def _gid(self, lineno: int, text: str, index: int, value: str) -> list[E.Event]:
        m = _GID_VALUE.match(value)
        if m is None or self.device is None:
            return []
        gid = m.group(1)
        return [self.make(E.IbGid, lineno, text, device=self.device, port=self.port, index=index, gid=gid,
                          gid_type=m.group(2), ipv4=ipv4_of(gid), tool=self.tool)]

    def _flush(self) -> list[E.Event]:
        cur, self.cur = self.cur, None
        if cur is None or self.device is None or not any(k in cur for k in ("state", "phys_state", "link_layer")):
            return []
        fields = {k: v for k, v in cur.items() if k not in ("line", "text")}
        return [self.make(E.IbPort, cur["line"], cur["text"], device=self.device, port=self.port, tool=self.tool,
                          **fields)]

    def close(self) -> list[E.Event]:
        return self._flush()


# ---------------------------------------------------------------------- show_gids

_SHOW_GIDS_ROW = rx(r"^(\S+)\s+(\d+)\s+(\d+)\s+([0-9a-fA-F:]{15,})\s+(?:(\d{1,3}(?:\.\d{1,3}){3})\s+)?"
                            r"(v[12])\s+(\S+)\s*$")


class ShowGidsReader(Reader):
    """MLNX_OFED's ``show_gids``: DEV PORT INDEX GID IPv4 VER DEV, then ``n_gids_found=N``."""

    tool = "show_gids"

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        _, body, _ = _indent_and_body(text, self.prefix)
        if not body or body.startswith("---"):
            return []
        m = _SHOW_GIDS_ROW.match(body)
        if m is None:
            return [] if body.startswith("n_gids_found") else None
        gid = m.group(4)
        return [self.make(E.IbGid, lineno, text, device=m.group(1), port=int(m.group(2)), index=int(m.group(3)),
                          gid=gid, gid_type="RoCE " + m.group(6), ipv4=m.group(5) or ipv4_of(gid),
                          netdev=m.group(7), tool="show_gids")]


# ---------------------------------------------------------------------- systemctl status

_SVC_KV = rx(r"^(Loaded|Active|Process|Main PID|Tasks|Memory|CPU|CGroup|Docs|TriggeredBy|Status|"
                     r"Drop-In|IO|Invocation|Mem peak|Triggers)\s*:\s*(.*)$")
_ACTIVE = rx(r"^(\w[\w-]*)(?: \(([^)]*)\))?")
_RESULT = rx(r"Result: ([\w-]+)")
_EXIT = rx(r"status=([\w/-]+)\)")


class ServiceReader(Reader):
    """``systemctl status <unit>``: the indented ``Key: value`` lines under the unit header;
    one event at the ``Active:`` line when the block ends (with the ``Process:`` exit status)."""

    tool = "service"

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        self.unit = str(getattr(opener, "name", "") or "")
        self.description = getattr(opener, "detail", None) or None
        self.fields: dict[str, Any] = {}
        self.active: tuple[int, str] | None = None
        self.tree = False
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        indent, body, _ = _indent_and_body(text, self.prefix)
        if not body:
            return None
        m = _SVC_KV.match(body)
        if m is not None and indent > 0:
            self.tree = m.group(1) == "CGroup"
            key, value = m.group(1), m.group(2)
            if key == "Active":
                a = _ACTIVE.match(value)
                if a:  # active (running), inactive (dead), failed (Result: exit-code)
                    sub = a.group(2)
                    self.fields["state"] = a.group(1)
                    self.fields["sub"] = None if sub is None or sub.startswith("Result:") else sub
                r = _RESULT.search(value)
                self.fields["result"] = r.group(1) if r else None
                self.active = (lineno, text)
            elif key == "Process":
                x = _EXIT.search(value)
                if x:
                    self.fields["exit_status"] = x.group(1)
            return []
        if self.tree and indent > 0 and body[:1] in "└├│":  # the cgroup's process tree
            return []
        return None

    def close(self) -> list[E.Event]:
        if self.active is None:
            return []
        return [self.make(E.ServiceStatus, self.active[0], self.active[1], unit=self.unit,
                          description=self.description, **self.fields)]


# ---------------------------------------------------------------------- df

_DF_ROW = rx(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)%\s+(/\S*)\s*$")
_DF_ROW_TYPE = rx(r"^(\S+)\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)%\s+(/\S*)\s*$")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def size_bytes(s: str, blocks: int = 0) -> int | None:
    """``64M`` / ``16G`` / ``1.5G`` (df -h) or a count of ``blocks``-byte blocks (df, df -k)."""
    m = re.fullmatch(r"(\d+(?:[.,]\d+)?)([KMGTP]?)i?B?", s.strip())
    if m is None:
        return None
    n = float(m.group(1).replace(",", "."))
    if not m.group(2) and blocks:
        return int(n * blocks)
    return int(n * _UNITS[m.group(2)])


class DfReader(Reader):
    """``df [-h] [-T]``: the ``/dev/shm`` row under the header."""

    tool = "df"

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        head = str(getattr(opener, "detail", ""))
        self.typed = " Type " in f" {head} "
        m = re.search(r"(\d+)([KMG]?)-blocks", head)
        self.blocks = (int(m.group(1)) * _UNITS[m.group(2)]) if m else 0
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        _, body, _ = _indent_and_body(text, self.prefix)
        m = (_DF_ROW_TYPE if self.typed else _DF_ROW).match(body) if body else None
        if m is None:
            return None
        if m.group(6) != "/dev/shm":
            return []
        return [self.make(E.ShmSize, lineno, text, filesystem=m.group(1), size=m.group(2), used=m.group(3),
                          avail=m.group(4), use_pct=int(m.group(5)), size_bytes=size_bytes(m.group(2), self.blocks),
                          mount=m.group(6))]


# ---------------------------------------------------------------------- nvidia-smi -q

#: the values of ``nvidia-smi -q`` a diagnosis reads (section path / key), by regex
NVSMI_Q_KEEP = rx(
    r"^(?:ECC Errors/(?:Volatile|Aggregate)(?:/[^/]+)*/[\w -]*Uncorrectable[\w -]*"
    r"|ECC Errors/(?:Volatile|Aggregate)/Double Bit/.*"
    r"|Remapped Rows/(?:Pending|Remapping Failure Occurred|Uncorrectable Error|Correctable Error)"
    r"|Retired Pages/(?:.*Pending.*|Double Bit ECC(?:/Count)?)"
    r"|Fabric/(?:State|Status)"
    r"|Clocks (?:Event|Throttle) Reasons/(?:HW Slowdown|HW Thermal Slowdown|HW Power Brake Slowdown"
    r"|SW Thermal Slowdown)"
    r"|(?:Driver Version|CUDA Version|Product Name|Compute Mode|Persistence Mode))$")
_Q_KV = rx(r"^(\S[^:]*?)\s+:\s*(.*?)\s*$")
_Q_GPU = rx(r"^GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s*$")
_Q_SECTION = rx(r"^[A-Z][\w /().,-]*$")
_Q_TOP = ("Timestamp", "Driver Version", "CUDA Version", "Attached GPUs", "NVML Version", "DRIVER Version")


class NvsmiQReader(Reader):
    """``nvidia-smi -q [-d ...]``: GPU sections, nested by indentation, with ``Key : value``
    lines; the values a diagnosis needs become events with their section path."""

    tool = "nvsmi_q"

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        self.gpu: str | None = getattr(opener, "name", None)
        self.stack: list[tuple[int, str]] = []
        self.blanks = 0
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        indent, body, _ = _indent_and_body(text, self.prefix)
        if not body:
            self.blanks += 1
            return [] if self.blanks < 3 else None
        self.blanks = 0
        m = _Q_GPU.match(body)
        if m is not None and indent == 0:
            self.gpu, self.stack = m.group(1), []
            return []
        if body.startswith("=") and "NVSMI LOG" in body:
            return []
        kv = _Q_KV.match(body)
        if indent == 0 and not (kv and kv.group(1) in _Q_TOP):
            return None
        while self.stack and self.stack[-1][0] >= indent:
            self.stack.pop()
        if kv is None:
            if not _Q_SECTION.match(body):
                return None
            self.stack.append((indent, body))
            return []
        key, value = kv.group(1).strip(), kv.group(2)
        section = "/".join(s for _, s in self.stack)
        if not NVSMI_Q_KEEP.match(f"{section}/{key}" if section else key):
            return []
        return [self.make(E.NvsmiValue, lineno, text, gpu=self.gpu, section=section, key=key, value=value)]


# ---------------------------------------------------------------------- nvidia-smi (the table)

_SMI_ROW1 = rx(r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off)\s*\|\s*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)"
                       r"\s+\S+\s*\|\s*(\S+)\s*\|\s*$")


class NvsmiTableReader(Reader):
    """The ``nvidia-smi`` table: a GPU per pair of rows (index, name, bus id, uncorrectable
    ECC count; then fan, temperature, power, memory: ``ERR!`` where NVML cannot read them)."""

    tool = "nvsmi_table"

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        self.pending: tuple[int, str, dict[str, Any]] | None = None
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        _, body, _ = _indent_and_body(text, self.prefix)
        if not body or body[0] not in "|+=":
            return None
        if "Processes:" in body:
            return None
        m = _SMI_ROW1.match(body)
        if m is not None:
            out = self._flush()
            self.pending = (lineno, text, {"index": int(m.group(1)), "name": m.group(2), "bus_id": m.group(3),
                                           "uncorr_ecc": m.group(4)})
            return out
        if self.pending is not None and body.startswith("|") and "ERR!" in body:
            self.pending[2]["errors"] = True
        if body.startswith("+") or body.startswith("="):
            return self._flush()
        return []

    def _flush(self) -> list[E.Event]:
        p, self.pending = self.pending, None
        return [self.make(E.NvsmiGpu, p[0], p[1], **p[2])] if p is not None else []

    def close(self) -> list[E.Event]:
        return self._flush()


# ---------------------------------------------------------------------- backtraces

_UCX_FRAME = rx(r"^(\d+)\s+(\S+?)\((\S*?)\+0x[0-9a-fA-F]+\)\s*\[0x[0-9a-fA-F]+\]\s*$")
_GLIBC_FRAME = rx(r"^(/\S+?)\((\S*?)\+0x[0-9a-fA-F]+\)\s*\[0x[0-9a-fA-F]+\]\s*$")
_GDB_FRAME = rx(r"^#(\d+)\s+(?:0x[0-9a-fA-F]+ in )?(\S+?)\s*\(.*?\)(?: from (\S+)| at (\S+:\d+))?\s*$")
_C10_FRAME = rx(r"^frame #(\d+):\s+(.*?) \+ 0x[0-9a-fA-F]+ \(0x[0-9a-fA-F]+ in (\S+)\)\s*$")
_BT_SKIP = rx(r"^(?:=+ ?backtrace \(tid:\s*\d+\) ?=+|\[Switching to .*\]|\(gdb\).*|\[Thread debugging.*"
                      r"|\[New Thread .*\]|Using host libthread_db.*)$")
#: what gdb prints between "received signal" and its backtrace: the current frame
_GDB_HERE = rx(r"^0x[0-9a-fA-F]+ in \S")


def is_nccl_frame(function: str, library: str | None) -> bool:
    lib = (library or "").rsplit("/", 1)[-1]
    return function.startswith(("nccl", "rccl")) or lib.startswith(("libnccl", "librccl"))


class FrameReader(Reader):
    """Native frames after a crash report (UCX ``N  lib(func+0x..) [0x..]``, gdb ``#N 0x.. in
    func () from lib``, glibc ``lib(func+0x..)[0x..]``) or after PyTorch's ``Exception raised
    from ...`` (``frame #N: func + 0x.. (0x.. in lib)``)."""

    def start(self, opener: E.Event, recent: Recent) -> list[E.Event]:
        self.tool = "c10" if opener.kind == "tool_output" else str(getattr(opener, "tool", ""))
        self.frames = 0
        self.gap = 0
        return []

    def feed(self, lineno: int, text: str) -> list[E.Event] | None:
        _, body, _ = _indent_and_body(text, self.prefix)
        frame = self._frame(body) if body else None
        if frame is not None:
            self.frames += 1
            index, function, library, where, tool = frame
            return [self.make(E.StackFrame, lineno, text, index=index, function=function, library=library,
                              where=where, tool=tool, nccl=is_nccl_frame(function, library))]
        if body and set(body) == {"="} and self.frames:  # UCX's closing line
            return []
        if body and (_BT_SKIP.match(body) or _BT_SKIP.match(text.strip())):  # "(gdb) bt" peels as a Ray tag
            return []
        if self.frames or self.tool != "gdb" or not _GDB_HERE.match(body):
            return None
        self.gap += 1  # gdb's current frame before "(gdb) bt"
        return [] if self.gap <= FRAME_GAP else None

    @staticmethod
    def _frame(body: str) -> tuple[int | None, str, str | None, str | None, str] | None:
        m = _C10_FRAME.match(body)
        if m:
            return int(m.group(1)), m.group(2), m.group(3), None, "c10"
        m = _UCX_FRAME.match(body)
        if m:
            return int(m.group(1)), m.group(3), m.group(2), None, "ucx"
        m = _GDB_FRAME.match(body)
        if m:
            return int(m.group(1)), m.group(2), m.group(3), m.group(4), "gdb"
        m = _GLIBC_FRAME.match(body)
        if m:
            return None, m.group(2), m.group(1), None, "glibc"
        return None


# ---------------------------------------------------------------------- the hook

_READERS: dict[str, type[Reader]] = {
    "topo": TopoReader, "ibstat": IbReader, "ibstatus": IbReader, "ibv_devinfo": IbReader,
    "show_gids": ShowGidsReader, "service": ServiceReader, "df": DfReader, "nvsmi_q": NvsmiQReader,
    "c10_stack": FrameReader,
}
#: event kinds (besides ``tool_output``) whose line starts a block
OPENERS = frozenset({"tool_output", "nvsmi_header", "crash_signal"})


def _prefix_of(opener: E.Event) -> str:
    """What stands before the opener's message in its line when that is a host label
    (``node1: ``): the block's other lines carry the same prefix."""
    node = getattr(opener, "node", None)
    if node:
        at = opener.text.find(node + ":")
        if at >= 0:
            end = at + len(node) + 1
            while end < len(opener.text) and opener.text[end] in " \t":
                end += 1
            return opener.text[:end]
    return ""


class Blocks:
    """The block open in one file (at most one): :meth:`start` on an opener event, then
    :meth:`feed` with each following line until it returns None."""

    __slots__ = ("source", "open", "lines")

    def __init__(self, source: str) -> None:
        self.source = source
        self.open: Reader | None = None
        self.lines = 0

    def start(self, ev: E.Event, recent: Recent) -> list[E.Event]:
        """Open the reader ``ev`` starts (if any); events of the lines it reads back."""
        cls: type[Reader] | None
        if ev.kind == "tool_output":
            cls = _READERS.get(str(getattr(ev, "tool", "")))
        elif ev.kind == "nvsmi_header":
            cls = NvsmiTableReader
        elif ev.kind == "crash_signal":
            cls = FrameReader if getattr(ev, "tool", "") in ("ucx", "gdb") else None
        else:
            cls = None
        out = self.close()
        if cls is None:
            return out
        reader = cls(ev, _prefix_of(ev), self.source)
        out.extend(reader.start(ev, recent))
        self.open, self.lines = reader, 0
        return out

    def feed(self, lineno: int, text: str) -> tuple[list[E.Event], bool]:
        """(events, whether the line was the block's); a line that is not closes the block."""
        reader = self.open
        if reader is None:
            return [], False
        self.lines += 1
        if self.lines > MAX_BLOCK_LINES:
            return self.close(), False
        try:
            got = reader.feed(lineno, text)
        except Exception:  # noqa: BLE001 - a garbled line ends the block, never the run
            got = None
        if got is not None:
            return got, True
        return self.close(), False

    def close(self) -> list[E.Event]:
        reader, self.open = self.open, None
        return reader.close() if reader is not None else []
