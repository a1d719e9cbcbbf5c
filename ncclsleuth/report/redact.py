"""Redaction: a copy of a Report with site identifiers replaced by stable placeholders.

What is replaced, everywhere in the report (titles, messages, fixes, evidence text and
file names, hosts lists, summary keys and values, unexplained lines, notices):

* hostnames (from the summary, the findings' hosts and the ``host:pid:tid`` prefixes
  of evidence lines, plus ``host: X`` / ``MASTER_ADDR=X`` style mentions) -> ``host-1``
* Kubernetes pod names (``name-<rs hash>-<5>``, ``job-worker-3``) -> ``pod-1``
* IPv4 addresses -> ``10.x.x.1`` (loopback 127.x and 0.0.0.0 are kept: they carry the
  diagnosis, e.g. "NCCL talks over lo", and identify nobody)
* IB GIDs (the address after ``GID``/``Gid``/``gid``) -> ``gid-1``
* other IPv6 addresses (link-local zones included) -> ``ipv6-1``
* user names in home paths (``/home/<user>/``, ``/Users/<user>/``) -> ``user-1``

Identifiers are collected from the whole report first, then replaced in one pass, so
one identifier gets one placeholder across every field and every renderer.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import replace
from typing import Any

from ..rules.findings import Evidence
from . import Report

_IPV4 = re.compile(r"(?<![\w.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f]*:)((?:[0-9A-Fa-f]{0,4}:){2,7}"
                   r"(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4}))(%[\w.-]+)?(?![\w:])")
_GID = re.compile(r"(?i)gids?\b(?:\s*index\s*\d+)?\s*(?:[:=](?=\s))?\s*(?:\[\d+\]\s*)?"
                  r"((?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4}))")
_GID_GLUED = re.compile(r"(?i)gids?((?:::|[0-9A-Fa-f]{1,4}:)(?:[0-9A-Fa-f]{0,4}:){1,6}"
                        r"(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4}))")
_HOME = re.compile(r"/(?:home|Users|export/home)/([A-Za-z_][\w.-]{0,31})(?=/|\b)")
_POD = re.compile(r"(?<![\w.-])([a-z0-9](?:[a-z0-9-]{0,50}[a-z0-9])?-(?:[a-z0-9]{8,10}-[a-z0-9]{5}"
                  r"|(?:master|worker|launcher|ps|chief|evaluator)-\d+))(?![\w-])")
_HOST_MENTION = re.compile(r"(?:^\s*host(?:name)?\s*:\s*|\bhostname\s*=\s*|\bMASTER_ADDR\s*[:=]\s*)"
                           r"([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*)", re.M)
_NOT_HOSTS = frozenset({"localhost", "none", "null", "unknown", "true", "false", "host", "node"})
_KEEP_V4 = ("127.", "0.0.0.0")


class Redactor:
    """Collect identifiers from texts, then replace them with numbered placeholders."""

    def __init__(self) -> None:
        self.mapping: dict[str, str] = {}
        self._count: dict[str, int] = {}
        self._rx: re.Pattern[str] | None = None

    def _add(self, value: str, kind: str) -> None:
        if not value or value in self.mapping:
            return
        n = self._count[kind] = self._count.get(kind, 0) + 1
        self.mapping[value] = {"host": f"host-{n}", "pod": f"pod-{n}", "ipv4": f"10.x.x.{n}", "gid": f"gid-{n}",
                               "ipv6": f"ipv6-{n}", "user": f"user-{n}"}[kind]
        self._rx = None

    def add_host(self, host: str | None) -> None:
        if not host:
            return
        h = host.strip().strip("[]()<>,;'\"")
        if not h or h.lower() in _NOT_HOSTS or self._is_ip(h) or h.isdigit() or len(h) < 2:
            return
        if h in self.mapping:
            return
        self._add(h, "pod" if _POD.fullmatch(h) else "host")

    @staticmethod
    def _is_ip(s: str) -> bool:
        try:
            ipaddress.ip_address(s.split("%")[0])
            return True
        except ValueError:
            return False

    def collect(self, text: str) -> None:
        """Find the identifiers in one piece of text."""
        if not text:
            return
        for m in _GID.finditer(text):
            self._gid(m.group(1))
        for m in _GID_GLUED.finditer(text):
            self._gid(m.group(1))
        for m in _IPV6.finditer(text):
            addr = m.group(1)
            if self._v6(addr) and addr not in self.mapping and (m.group(2) or "") + addr not in self.mapping:
                self._add(addr + (m.group(2) or ""), "ipv6")
                if m.group(2):
                    self.mapping.setdefault(addr, self.mapping[addr + m.group(2)])
        for m in _IPV4.finditer(text):
            if not m.group(0).startswith(_KEEP_V4):
                self._add(m.group(0), "ipv4")
        for m in _HOME.finditer(text):
            self._add(m.group(1), "user")
        for m in _POD.finditer(text):
            self._add(m.group(1), "pod")
        for m in _HOST_MENTION.finditer(text):
            self.add_host(m.group(1))
        self._prefix_hosts(text)

    def _gid(self, addr: str) -> None:
        if self._v6(addr) and addr not in ("::", "::0"):
            self._add(addr, "gid")

    @staticmethod
    def _v6(addr: str) -> bool:
        try:
            return isinstance(ipaddress.ip_address(addr), ipaddress.IPv6Address) and addr not in ("::1",)
        except ValueError:
            return False

    def _prefix_hosts(self, text: str) -> None:
        from ..parse.envelope import peel

        try:
            records = peel(text)
        except Exception:  # noqa: BLE001 - redaction must never fail on odd text
            return
        for rec in records:
            self.add_host(getattr(rec, "host", None))

    # ------------------------------------------------------------------ apply
    def _pattern(self) -> re.Pattern[str]:
        if self._rx is None:
            keys = sorted(self.mapping, key=len, reverse=True)
            # a key starting with ':' (IPv6 "::ffff:...") may follow a word ("remoteGids::ffff:...")
            alt = "|".join((r"(?<![\w-])" if k[0].isalnum() else r"(?<!:)") + re.escape(k) for k in keys)
            self._rx = re.compile(r"(?:" + (alt or r"(?!x)x") + r")(?![\w-]|\.\d)")
        return self._rx

    def sub(self, text: str) -> str:
        if not text or not self.mapping:
            return text
        return self._pattern().sub(lambda m: self.mapping[m.group(0)], text)

    def deep(self, obj: Any) -> Any:
        """Apply :meth:`sub` to every string (keys included) of a plain-builtins structure."""
        if isinstance(obj, str):
            return self.sub(obj)
        if isinstance(obj, dict):
            return {self.deep(k): self.deep(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.deep(v) for v in obj)
        return obj


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _strings(k) + _strings(v)]
    if isinstance(obj, (list, tuple, set)):
        return [s for v in obj for s in _strings(v)]
    return []


def redactor_for(report: Report) -> Redactor:
    """A :class:`Redactor` loaded with every identifier of ``report``."""
    r = Redactor()
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
    texts += [e.text for e in report.unexplained] + [e.file for e in report.unexplained]
    texts += _strings(report.notices) + _strings(report.summary)
    for t in texts:  # evidence lines first fill the host list from their prefixes
        r.collect(t)
    return r


def redact(report: Report, redactor: Redactor | None = None) -> Report:
    """A new Report with every identifier replaced (the input is left unchanged), its
    figures (``report``'s post-mortem pictures) included."""
    r = redactor or redactor_for(report)
    figures = redact_figures(report.figures, r)  # collect the figures' identifiers before applying

    def ev(e: Evidence) -> Evidence:
        return replace(e, file=r.sub(e.file), text=r.sub(e.text))  # rank and repeat counts kept

    findings = [replace(f, title=r.sub(f.title), message=r.sub(f.message), fix=r.sub(f.fix),
                        evidence=[ev(e) for e in f.evidence], shown=[ev(e) for e in f.shown],
                        hosts=[r.sub(h) for h in f.hosts],
                        explained={(r.sub(s), n) for s, n in f.explained})
                for f in report.findings]
    return Report(findings=findings, unexplained=[ev(e) for e in report.unexplained], summary=r.deep(report.summary),
                  notices=r.deep(report.notices), unexplained_total=report.unexplained_total,
                  files_read=report.files_read, figures=figures)


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


__all__ = ["Redactor", "redact", "redactor_for", "redact_figures"]
