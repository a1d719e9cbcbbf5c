"""Redaction: a copy of a Report with site identifiers replaced by stable placeholders.

A guarantee, not a best effort: every identifier found anywhere in the report is
replaced everywhere in it (titles, messages, fixes, evidence text and file names, hosts
lists, summary keys and values, unexplained lines, notices, figures), in every notation
it may take, and every renderer's output gets a last pass with the same table.

What is collected (``Redactor.collect``), then replaced (``Redactor.sub``):

* host names: those the parser saw (the summary, the findings, the ``host:pid:tid``
  prefix of every line in the report), and every name in a host position: ``name<port>``
  (NCCL's socket addresses), ``('name', port)`` and ``[name]:port`` (PyTorch), ``host: X``,
  ``MASTER_ADDR=X``, ``connect to X``; fully qualified names count with their short form
  -> ``host-1``; Kubernetes pod names and pod/service DNS names -> ``pod-1`` / ``host-1``;
  AWS names that encode an address (``ip-10-1-2-9.ec2.internal``) -> ``host-1`` and their
  address as below
* IPv4 addresses -> ``10.x.x.1``, also written as hex (both byte orders), IPv4-mapped
  IPv6, ``ip-a-b-c-d`` / ``a-b-c-d`` names and the RoCE GID NCCL prints as ``(0/%lX)``;
  loopback 127.x and 0.0.0.0 are kept: they carry the diagnosis ("NCCL talks over lo")
  and identify nobody
* IB GIDs (after ``GID``/``Gid``/``gid``, or inside a 20-byte IB hardware address) ->
  ``gid-1``, other IPv6 addresses -> ``ipv6-1``: compressed, exploded, 32 hex digits and
  NCCL's ``%lX/%lX`` halves; the MAC inside an EUI-64 interface id too
* MAC addresses -> ``mac-1``; e-mail addresses -> ``email-1``
* user names in home paths (``/home/<user>/``, ``/Users/<user>/``, ``/scratch/<user>/``, ...)
  -> ``user-1``

Replacement works on identifier-shaped runs of characters looked up in one table (not a
regular expression of every identifier), so it is linear in the text whatever the
number of identifiers; a known identifier glued to other word parts (``node7-rank3.log``,
``node7.cm.cluster``) is replaced as well.  Every pattern here is linear on any input
(bounded repetitions; checked by tests/robustness/test_regex_budget.py).
"""
from __future__ import annotations

import ipaddress
import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..rules.findings import Evidence, Finding
from . import Report

if TYPE_CHECKING:
    from .diff import DiffResult

_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)")
#: possessive where Python has it (``{m,n}+``, 3.11): a hex group ends where hex ends and a
#: shorter match is always followed by ":" or a word character, which the look-ahead refuses, so
#: backtracking can only fail; without it 1 MB of "fe80:fe80:..." took ~1 s per scan (the same
#: spans either way: tests/test_redact.py)
_V6_BODY = (r"[0-9A-Fa-f]{0,4}+(?::[0-9A-Fa-f]{0,4}+){2,7}+(?:\.\d{1,3}+){0,3}+" if sys.version_info >= (3, 11)
            else r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}")
#: an IPv6 address standing alone, with its zone (``fe80::1%eth0``)
_IPV6 = re.compile(rf"(?<![\w.])({_V6_BODY})(%[\w.-]{{1,32}})?(?![\w:]|\.\w)")
#: an address glued to a word by its leading ``::`` (``remoteGids::ffff:10.1.0.17``)
_IPV6_GLUED = re.compile(r"(?<=[A-Za-z_])(::[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){0,6}(?:\.\d{1,3}){0,3})"
                         r"(?![\w:]|\.\w)")
_GID = re.compile(r"(?i)gids?\b(?:\s{0,4}index\s{0,4}\d{1,5})?\s{0,4}(?:[:=](?=\s))?\s{0,4}(?:\[\d{1,5}\]\s{0,4})?"
                  r"((?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4}))")
_GID_GLUED = re.compile(r"(?i)gids?((?:::|[0-9A-Fa-f]{1,4}:)(?:[0-9A-Fa-f]{0,4}:){1,6}"
                        r"(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4}))(?![\w:]|\.\w)")
#: NCCL's RoCE line: ``GID 3 (<subnet prefix>/<interface id>)``, each half a raw uint64 in %lX
_GID_HEX = re.compile(r"(?i)\bGID \d{1,5} \(([0-9A-F]{1,16})/([0-9A-F]{1,16})\)")
#: 32 hex digits after a GID keyword (a GID printed without colons)
_GID_HEX32 = re.compile(r"(?i)gids?\W{1,3}(?:0x)?([0-9A-F]{32})(?![0-9A-F])")
_MAC = re.compile(r"(?<![\w:.-])([0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\2[0-9A-Fa-f]{2}){4}"
                  r"(?:(?:\2[0-9A-Fa-f]{2}){14})?)(?![\w:-])")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}")
_HOME = re.compile(r"/(?:home|homes|Users|export/home|scratch|mnt/home|u|work)/([A-Za-z_][\w.-]{0,31})(?=/|\b)")
_POD = re.compile(r"(?<![\w.-])([a-z0-9](?:[a-z0-9-]{0,50}[a-z0-9])?-(?:[a-z0-9]{8,10}-[a-z0-9]{5}"
                  r"|(?:master|worker|launcher|ps|chief|evaluator)-\d{1,6}))(?![\w-])")
_NAME = r"[A-Za-z][\w-]{0,62}(?:\.[A-Za-z0-9][\w-]{0,62}){0,8}"
_HOST_MENTION = re.compile(r"(?:(^\s{0,8}host(?:name)?\s{0,4}:\s{0,4}|\bhostname\s{0,4}[=:]\s{0,4}|"
                           r"\b(?:MASTER_ADDR|master_addr|rdzv_endpoint|RDZV_ENDPOINT)\s{0,4}[:=]\s{0,4}|"
                           r"\b(?:to|on|from) host\s{1,4})"
                           rf"({_NAME})|\b(?:connect(?:ing|ed)? to|on node|from node)\s{{1,4}}\[?({_NAME}))", re.M)
#: ``node7<40031>`` (NCCL's socket address), ``('node7', 29500)``, ``[node7]:29500``
_HOST_PORT = re.compile(rf"(?<![\w.%-])({_NAME})<\d{{1,5}}>"
                        rf"|\(\s{{0,3}}['\"]?({_NAME})['\"]?\s{{0,3}},\s{{0,3}}\d{{1,5}}\s{{0,3}}\)"
                        rf"|\[({_NAME})\]:\d{{1,5}}")
#: names whose last labels say they are a site's own (not a public web site)
_SITE_NAME = re.compile(r"(?<![\w.-])([A-Za-z0-9][\w-]{0,62}(?:\.[A-Za-z0-9][\w-]{0,62}){0,6}"
                        r"\.(?:internal|local|cluster|lan|corp|intra|intranet|localdomain|home\.arpa|private))(?![\w-])")
#: names that encode an IPv4 address: AWS (``ip-10-1-2-9``, ``ec2-54-1-2-3``), Kubernetes pod DNS (``10-1-2-3.ns.pod``)
_IP_NAME = re.compile(rf"(?<![\w.-])((?:ip|ec2)-({_OCTET})-({_OCTET})-({_OCTET})-({_OCTET})"
                      r"(?:\.[a-z0-9-]{1,63}){0,6}"
                      rf"|({_OCTET})-({_OCTET})-({_OCTET})-({_OCTET})\.[a-z0-9-]{{1,63}}\.pod(?:\.[a-z0-9-]{{1,63}}){{0,4}})"
                      r"(?![\w-])")
_SERVICE = re.compile(r"(?<![\w.-])([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9-]{1,63}){1,3}\.svc"
                      r"(?:\.cluster\.local)?)(?![\w-])")
#: an identifier-shaped run of characters: what :meth:`Redactor.sub` looks up
_RUN = re.compile(r"[\w%@+.:-]+")
_PIECE = re.compile(r"([._-])")
_NOT_HOSTS = frozenset({"localhost", "none", "null", "unknown", "true", "false", "host", "node", "hostname",
                        "the", "a", "an", "port", "address", "peer", "rank", "server", "client", "master", "worker",
                        "it", "all", "any", "local", "remote", "unix", "tcp", "ip", "self", "is"})
_KEEP_V4 = ("127.", "0.0.0.0")
_PLACEHOLDER = {"host": "host-{}", "pod": "pod-{}", "ipv4": "10.x.x.{}", "gid": "gid-{}", "ipv6": "ipv6-{}",
                "user": "user-{}", "mac": "mac-{}", "email": "email-{}"}
#: longest identifier kept (a DNS name is at most 253 characters)
MAX_ID = 253
#: most ``[._-]``-separated pieces of an identifier matched inside a longer run
MAX_PIECES = 16


class Redactor:
    """Collect identifiers from texts, then replace them with numbered placeholders.

    ``mapping`` is the table: every notation of an identifier -> its placeholder.  It only
    grows, so placeholders stay stable while texts keep coming (``watch``)."""

    def __init__(self) -> None:
        self.mapping: dict[str, str] = {}
        self._count: dict[str, int] = {}
        self._pieces = 1
        #: the placeholders given out: never identifiers themselves (a redacted text read again
        #: must come out unchanged)
        self._given: set[str] = set()

    # ------------------------------------------------------------------ the table
    def _put(self, key: str, placeholder: str) -> None:
        if len(key) < 2 or len(key) > MAX_ID or key in self.mapping or key in self._given:
            return
        self.mapping[key] = placeholder
        n = len(_PIECE.split(key)) // 2 + 1
        if n > self._pieces:
            self._pieces = min(n, MAX_PIECES)

    def _add(self, value: str, kind: str) -> str:
        """The placeholder of ``value`` (a new one for a new identifier)."""
        got = self.mapping.get(value)
        if got is not None or value in self._given:
            return got or value
        n = self._count[kind] = self._count.get(kind, 0) + 1
        ph = _PLACEHOLDER[kind].format(n)
        self._given.add(ph)
        self._put(value, ph)
        return ph

    def add_host(self, host: str | None, weak: bool = False) -> None:
        """A host name (short or fully qualified; a pod name): both forms get one placeholder.

        ``weak``: found only by the words around it ("connect to X"), so taken only when it
        looks like a machine's name (a digit, a dot or a dash in it), not like a word."""
        if not host:
            return
        h = host.strip().strip("[]()<>,;'\"").rstrip(".")
        if (not h or len(h) < 2 or len(h) > MAX_ID or h.lower() in _NOT_HOSTS or h.isdecimal() or h in self.mapping
                or h in self._given):
            return
        ip = self._ip(h)
        if ip is not None:
            if ip.version == 4:
                self.add_ipv4(str(ip))
            else:
                self.add_ipv6(h)
            return
        if weak and not any(c.isdecimal() or c in ".-" for c in h):
            return
        short = h.split(".", 1)[0]
        ph = self.mapping.get(short) if short != h else None
        kind = "pod" if _POD.fullmatch(short) else "host"
        ph = ph or self._add(h, kind)
        self._put(h, ph)
        if short != h and len(short) >= 2 and not short.isdecimal() and short.lower() not in _NOT_HOSTS:
            self._put(short, ph)
        m = _IP_NAME.fullmatch(h)
        if m is not None:  # the name is a host's: its address gets the address placeholders
            self._ipv4_of_name(m)

    def add_ipv4(self, addr: str) -> None:
        """An IPv4 address and every other way it is written."""
        if addr.startswith(_KEEP_V4):
            return
        try:
            ip = ipaddress.IPv4Address(addr)
        except ValueError:
            return
        ph = self._add(str(ip), "ipv4")
        b = ip.packed
        dashed = "-".join(str(x) for x in b)
        mapped = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + b)
        iid = int.from_bytes(b"\0\0\xff\xff" + b, "little")  # NCCL's RoCE interface id, %lX of the raw bytes
        for key in (addr, b.hex(), b[::-1].hex(), f"ip-{dashed}", dashed, f"{iid:X}", f"{iid:x}"):
            if not key.isdecimal():
                self._put(key, ph)
                self._put(key.upper(), ph)
        for key in (f"::ffff:{ip}", mapped.compressed, mapped.exploded):  # IPv4-mapped: still says so
            for k in (key, key.upper()):
                self._put(k, "::ffff:" + ph)

    def add_ipv6(self, addr: str, kind: str = "ipv6") -> None:
        """An IPv6 address or a GID (``kind`` ``gid``), in every notation; its embedded IPv4 and MAC too."""
        a = addr.split("%", 1)[0]
        try:
            ip = ipaddress.IPv6Address(a)
        except ValueError:
            return
        if ip.is_loopback or ip.is_unspecified:
            return
        mapped = ip.ipv4_mapped
        if mapped is not None:
            self.add_ipv4(str(mapped))
        ph = self._add(a, kind)
        b = ip.packed
        keys = [a, ip.compressed, ip.exploded, b.hex()]
        if mapped is None and not ip.is_link_local:
            prefix = int.from_bytes(b[:8], "little")
            keys += [f"{prefix:X}"]
        iid = int.from_bytes(b[8:], "little")
        if iid > 0xFFFF:
            keys += [f"{iid:X}"]
        for key in keys:
            if not key.isdecimal():
                self._put(key, ph)
                self._put(key.upper(), ph)
                self._put(key.lower(), ph)
        if addr != a:
            self._put(addr, ph)
        if b[11:13] == b"\xff\xfe":  # EUI-64: the interface id is the NIC's MAC
            mac = bytes([b[8] ^ 0x02]) + b[9:11] + b[13:16]
            self.add_mac(":".join(f"{x:02x}" for x in mac))

    def add_mac(self, mac: str) -> None:
        """A MAC (or 20-byte IB hardware address: its GID too), with ``:`` or ``-``, either case."""
        octets = re.split(r"[:-]", mac)
        ph = self._add(mac.lower().replace("-", ":"), "mac")
        for sep in (":", "-"):
            key = sep.join(octets)
            self._put(key.lower(), ph)
            self._put(key.upper(), ph)
        if len(octets) == 20:
            self.add_ipv6(str(ipaddress.IPv6Address(bytes.fromhex("".join(octets[4:])))), "gid")

    @staticmethod
    def _ip(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        try:
            return ipaddress.ip_address(s.split("%")[0])
        except ValueError:
            return None

    def _ipv4_of_name(self, m: re.Match[str]) -> None:
        octets = [g for g in m.groups()[1:] if g is not None]
        if len(octets) == 4:
            self.add_ipv4(".".join(octets))

    # ------------------------------------------------------------------ collect
    def collect(self, text: str) -> None:
        """Find the identifiers in one piece of text (linear in its length)."""
        if not text:
            return
        for m in _GID.finditer(text):
            self.add_ipv6(m.group(1), "gid")
        for m in _GID_GLUED.finditer(text):
            self.add_ipv6(m.group(1), "gid")
        for m in _GID_HEX32.finditer(text):
            self.add_ipv6(str(ipaddress.IPv6Address(bytes.fromhex(m.group(1)))), "gid")
        for m in _GID_HEX.finditer(text):
            self._gid_halves(m.group(1), m.group(2))
        for m in _MAC.finditer(text):
            self.add_mac(m.group(1))
        for start, end in _v6_spans(text):
            self.add_ipv6(text[start:end])
        for m in _IPV4.finditer(text):
            self.add_ipv4(m.group(0))
        for m in _EMAIL.finditer(text):
            self._add(m.group(0), "email")
        for m in _HOME.finditer(text):
            self._add(m.group(1), "user")
        for m in _IP_NAME.finditer(text):
            self.add_host(m.group(1))
        for rx in (_POD, _SITE_NAME, _SERVICE):
            for m in rx.finditer(text):
                self.add_host(m.group(1))
        for m in _HOST_MENTION.finditer(text):
            self.add_host(m.group(2) or m.group(3), weak=m.group(2) is None)
        for m in _HOST_PORT.finditer(text):
            self.add_host(m.group(1) or m.group(2) or m.group(3))
        self._prefix_hosts(text)

    def _gid_halves(self, prefix_hex: str, iid_hex: str) -> None:
        """A GID printed as NCCL's two raw little-endian uint64 halves."""
        try:
            raw = int(prefix_hex, 16).to_bytes(8, "little") + int(iid_hex, 16).to_bytes(8, "little")
        except OverflowError:
            return
        self.add_ipv6(str(ipaddress.IPv6Address(raw)), "gid")

    def _prefix_hosts(self, text: str) -> None:
        """The host of each ``host:pid:tid [dev] NCCL ...`` record of the text (the parser's own reading)."""
        from ..parse.envelope import peel

        for line in text.split("\n"):
            if "NCCL " in line or "WARN " in line or "INFO " in line:
                for rec in peel(line):
                    self.add_host(rec.host)

    # ------------------------------------------------------------------ apply
    def sub(self, text: str) -> str:
        """``text`` with every known identifier replaced (linear: one table look-up per run)."""
        if not text or not self.mapping:
            return text
        return _RUN.sub(self._run, text)

    def _run(self, m: re.Match[str]) -> str:
        run = m.group(0)
        hit = self.mapping.get(run)
        if hit is not None:
            return hit
        if ":" not in run:
            return self._part(run)
        out: list[str] = []
        last = 0
        for start, end in _v6_spans(run):
            key = run[start:end]
            ph = self.mapping.get(key)
            if ph is None and "%" in key:
                zone = key.index("%")
                ph = self.mapping.get(key[:zone])
                end = start + zone if ph is not None else end
            if ph is not None:
                out.append(self._colon_parts(run[last:start]))
                out.append(ph)
                last = end
        out.append(self._colon_parts(run[last:]))
        return "".join(out)

    def _colon_parts(self, s: str) -> str:
        if not s:
            return s
        return ":".join(self.mapping.get(p) or self._part(p) for p in s.split(":"))

    def _part(self, part: str) -> str:
        """A run without ``:``: whole, else its longest known ``[._-]``-separated pieces."""
        hit = self.mapping.get(part)
        if hit is not None:
            return hit
        if len(part) < 2:
            return part
        pieces = _PIECE.split(part)
        if len(pieces) == 1:
            return part
        get = self.mapping.get
        span = 2 * self._pieces - 1
        out: list[str] = []
        i, n = 0, len(pieces)
        while i < n:
            if i % 2:  # a separator
                out.append(pieces[i])
                i += 1
                continue
            for j in range(min(n - 1, i + span - 1), i - 1, -2):
                cand = "".join(pieces[i:j + 1])
                ph = get(cand)
                if ph is not None:
                    out.append(ph)
                    i = j + 1
                    break
            else:
                out.append(pieces[i])
                i += 1
        return "".join(out)

    def deep(self, obj: Any) -> Any:
        """Apply :meth:`sub` to every string (keys included) of a plain-builtins structure."""
        if isinstance(obj, str):
            return self.sub(obj)
        if isinstance(obj, dict):
            return {self.deep(k): self.deep(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.deep(v) for v in obj)
        if isinstance(obj, (set, frozenset)):
            return type(obj)(self.deep(v) for v in obj)
        return obj


def _v6_spans(run: str) -> list[tuple[int, int]]:
    """Where IPv6-looking parts of a text are (with their zone): what :meth:`Redactor.collect`
    takes and :meth:`Redactor.sub` looks up, found the same way by both."""
    spans = []
    for m in _IPV6.finditer(run):
        s = m.start()
        if run.startswith(":", s) and not run.startswith("::", s):  # "eth1:fe80::1": the colon is the separator
            s += 1
        spans.append((s, m.end()))
    spans += [(m.start(1), m.end(1)) for rx in (_IPV6_GLUED, _GID_GLUED) for m in rx.finditer(run)]
    spans.sort()
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if not out or s >= out[-1][1]:
            out.append((s, e))
    return out


def _strings(obj: Any) -> list[str]:
    """Every string of a plain-builtins structure, keys included, in order (iterative: no
    depth of nesting can exhaust the stack)."""
    out: list[str] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict):
            stack.extend(x for kv in reversed(o.items()) for x in (kv[1], kv[0]))
        elif isinstance(o, (list, tuple)):
            stack.extend(reversed(o))
        elif isinstance(o, (set, frozenset)):
            stack.extend(sorted((x for x in o if isinstance(x, str)), reverse=True))
    return out


def collect_report(r: Redactor, report: Report) -> Redactor:
    """Load ``r`` with every identifier of ``report``: the parser's hosts first, then every text."""
    for h in report.summary.get("hosts") or []:
        r.add_host(h)
    for hosts in (report.summary.get("network") or {}).values():
        for h in hosts:
            r.add_host(h)
    for f in report.findings:
        for h in f.hosts:
            r.add_host(h)
    texts: list[str] = []
    for f in report.findings:
        texts += [f.title, f.message, f.fix] + [e.text for e in (*f.evidence, *f.shown)]
        texts += [e.file for e in (*f.evidence, *f.shown)]
        texts += f.explained.files()
    texts += [e.text for e in report.unexplained] + [e.file for e in report.unexplained]
    texts += _strings(report.notices) + _strings(report.summary)
    for t in texts:  # evidence lines first fill the host list from their prefixes
        r.collect(t)
    return r


def redactor_for(report: Report) -> Redactor:
    """A :class:`Redactor` loaded with every identifier of ``report``."""
    return collect_report(Redactor(), report)


def redact(report: Report, redactor: Redactor | None = None) -> Report:
    """A new Report with every identifier replaced (the input is left unchanged), its
    figures (``report``'s post-mortem pictures) included."""
    r = redactor or redactor_for(report)
    if redactor is not None:
        collect_report(r, report)
    figures = redact_figures(report.figures, r)  # collect the figures' identifiers before applying

    def ev(e: Evidence) -> Evidence:
        return replace(e, file=r.sub(e.file), text=r.sub(e.text))  # rank and repeat counts kept

    findings = [redact_finding(f, r) for f in report.findings]
    return Report(findings=findings, unexplained=[ev(e) for e in report.unexplained], summary=r.deep(report.summary),
                  notices=r.deep(report.notices), unexplained_total=report.unexplained_total,
                  files_read=report.files_read, figures=figures)


def redact_finding(f: Finding, r: Redactor) -> Finding:
    """One finding with ``r``'s placeholders (its identifiers added first): ``watch`` shows
    findings one at a time as they appear, with one table for the whole watch."""
    for h in f.hosts:
        r.add_host(h)
    shown = (*f.evidence, *f.shown)
    for t in [f.title, f.message, f.fix, *(e.text for e in shown), *(e.file for e in shown)]:
        r.collect(t)

    def ev(e: Evidence) -> Evidence:
        return replace(e, file=r.sub(e.file), text=r.sub(e.text))  # rank and repeat counts kept

    return replace(f, title=r.sub(f.title), message=r.sub(f.message), fix=r.sub(f.fix),
                   evidence=[ev(e) for e in f.evidence], shown=[ev(e) for e in f.shown],
                   hosts=[r.sub(h) for h in f.hosts], explained=f.explained.renamed(r.sub))


def redact_plain(obj: Any, r: Redactor) -> Any:
    """A plain-builtins structure (``watch``'s live state) with every identifier in it replaced."""
    for s in _strings(obj):
        r.collect(s)
    return r.deep(obj)


def redact_figures(figures: dict[str, Any] | None, redactor: Redactor) -> dict[str, Any] | None:
    """The figures payload of ``ncclsleuth report`` with the same placeholders."""
    if figures is None:
        return None
    for c in figures.get("comms") or []:
        for h in (c.get("rank_host") or {}).values():
            redactor.add_host(h)
    for row in (*(figures.get("init") or ()), *(figures.get("init_progress") or ())):
        redactor.add_host(row.get("host"))
    for s in _strings(figures):
        redactor.collect(s)
    return redactor.deep(figures)


def redact_text(text: str, redactor: Redactor) -> str:
    """A renderer's whole output with the table applied once more (and what it alone shows
    collected first): nothing a renderer derives by itself escapes the placeholders."""
    redactor.collect(text)
    return redactor.sub(text)


def redact_diff(result: DiffResult, redactor: Redactor | None = None) -> DiffResult:
    """Both runs of a diff and their changes with one table (one host, one placeholder on both sides)."""
    from .diff import Change, DiffResult

    r = redactor or Redactor()
    for run in (result.good, result.bad):
        collect_report(r, run.report)
        for s in _strings(run.facts):
            r.collect(s)
    for c in result.changes:
        for s in [c.key, c.good, c.bad, c.why, *_strings(c.detail)]:
            r.collect(s)

    def run_of(run: Any) -> Any:
        return replace(run, path=r.sub(run.path), report=redact(run.report, r), facts=r.deep(run.facts))

    changes = [Change(r.sub(c.key), c.area, r.sub(c.good), r.sub(c.bad), c.score, r.sub(c.why), r.deep(c.detail))
               for c in result.changes]
    return DiffResult(run_of(result.good), run_of(result.bad), changes)


__all__ = ["Redactor", "redact", "redactor_for", "redact_figures", "redact_text", "redact_diff", "redact_finding",
           "redact_plain", "collect_report"]
