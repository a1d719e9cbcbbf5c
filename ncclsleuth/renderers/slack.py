"""Slack Block Kit JSON (``--format slack``): paste into chat.postMessage's ``blocks``.

A header with the verdict, a section with severity/category/location and the message,
one section per top finding (evidence in inline code, the fix in a code block), a
context block with the job summary, and a context block saying what was left out.
Slack's limits are respected: header text <= 150 chars, section text <= 3000, context
element text <= 3000, at most 50 blocks; ``max_chars`` bounds the sum of all texts.
"""
from __future__ import annotations

import json
from typing import Any

from ..model.stats import counted
from .markdown import DEFAULT_MAX_CHARS, cut, first_sentence, short_file, summary_line, where

HEADER_MAX = 150
SECTION_MAX = 3000
CONTEXT_MAX = 3000
BLOCKS_MAX = 50
_ICON = {"error": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}


def esc(text: str) -> str:
    """Slack's three control characters in mrkdwn/plain text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _icode(text: str) -> str:
    return "`" + esc(" ".join(text.split()).replace("`", "'")) + "`"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, SECTION_MAX)}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(text, CONTEXT_MAX)}]}


def _finding(i: int, f: Any) -> dict[str, Any]:
    lines = [f"*{i}. [{esc(f.rule_id)}] {esc(f.title)}*",
             f"_{esc(f.severity)} · {esc(f.category)} · confidence {f.confidence:.2f}"
             + (f" · {esc(where(f))}" if where(f) else "")
             + (f" · symptom of {esc(f.caused_by)}" if f.caused_by else "") + "_"]
    msg = first_sentence(f.message, 400)
    if msg and msg != f.title:
        lines.append(esc(msg))
    if f.evidence:
        e = f.evidence[0]
        lines.append(_icode(f"{short_file(e.file)}:{e.line}") + " " + _icode(cut(e.text.strip(), 300)))
        more = max(f.evidence_total, len(f.evidence)) - 1
        if more > 0:
            lines.append(f"_… {counted(more, 'more evidence line')}_")
    if f.fix.strip():
        fix = esc(f.fix.strip().replace("```", "'''"))
        room = SECTION_MAX - len("\n".join(lines)) - 20
        lines.append("*Fix:*\n```" + cut(fix, max(room, 40)) + "```")
    return _section("\n".join(lines))


def _size(block: dict[str, Any]) -> int:
    if "text" in block:
        return len(block["text"]["text"])
    return sum(len(e["text"]) for e in block.get("elements", []))


def render(report: Any, color: bool = False, max_chars: int | None = DEFAULT_MAX_CHARS, max_findings: int = 3,
           **_: Any) -> str:
    max_chars = DEFAULT_MAX_CHARS if max_chars is None else max_chars
    v = report.verdict
    if v is None:
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": "ncclsleuth: no problem found", "emoji": True}},
            _section("No rule fired on these logs.")]
    else:
        title = cut(f"{v.severity.upper()}: {first_sentence(v.title, HEADER_MAX)}", HEADER_MAX)
        head = f"{_ICON.get(v.severity, '')} *{esc(v.severity.upper())} · {esc(v.category)}*"
        if where(v):
            head += f" · {esc(where(v))}"
        blocks = [{"type": "header", "text": {"type": "plain_text", "text": title, "emoji": True}},
                  _section(head + "\n" + esc(first_sentence(v.message, 600)))]
    tail = [_context(esc("Job: " + summary_line(report.summary)))]
    if report.unexplained_total:
        tail.insert(0, _context(f"{report.unexplained_total} warning/error line(s) no rule explains."))

    findings = [_finding(i, f) for i, f in enumerate(report.findings[:max_findings], 1)]
    left = len(report.findings) - len(findings)
    note_room = 200
    budget = max_chars - sum(_size(b) for b in blocks + tail) - note_room
    kept: list[dict[str, Any]] = []
    for fb in findings:
        if len(blocks) + len(kept) * 2 + 2 + len(tail) + 1 > BLOCKS_MAX:
            left += 1
            continue
        if _size(fb) <= budget:
            kept.append(fb)
            budget -= _size(fb)
        elif budget > 300 and not kept:  # the top finding at least, shortened
            short = _section(cut(fb["text"]["text"], budget))
            if short["text"]["text"].count("```") % 2:
                short["text"]["text"] = cut(short["text"]["text"], budget - 3) + "```"
            kept.append(short)
            budget -= _size(short)
        else:
            left += 1
    for fb in kept:
        blocks += [{"type": "divider"}, fb]
    blocks += tail
    if left:
        blocks.append(_context(f"… {counted(left, 'more finding')} left out "
                               "(full report: `ncclsleuth analyze --format json`)"))
    blocks = _squeeze(blocks[:BLOCKS_MAX], max_chars)
    return json.dumps({"blocks": blocks}, indent=2, ensure_ascii=False) + "\n"


def _squeeze(blocks: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """Shorten the fixed blocks (verdict section, then contexts, then header) to fit ``max_chars``."""
    over = sum(_size(b) for b in blocks) - max_chars
    order = [b for b in blocks if b["type"] == "section" and "```" not in b["text"]["text"]]
    order += [b for b in blocks if b["type"] == "context"][::-1]
    order += [b for b in blocks if b["type"] == "header"]
    for b in order:
        if over <= 0:
            break
        holder = b["text"] if "text" in b else b["elements"][0]
        room = len(holder["text"]) - 24
        if room > 0:
            take = min(over, room)
            holder["text"] = cut(holder["text"], len(holder["text"]) - take)
            over -= take
    return blocks
