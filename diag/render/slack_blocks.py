"""Slack Block Kit view of a report: a JSON payload {"text", "blocks"} for chat.postMessage.

A header, a context line, one section per part of the chat message (several servers, runs
and ranks included; each within 3,000
characters: the richest level of detail where all fit), a context footer; never more than
a dozen blocks (Slack allows 50). The text is the notification fallback.
"""
from __future__ import annotations

import json

from ..report import Report
from .chat import ICON, LEVELS, STATUS, context_line, first_sentence, parts
from .slack import SLACK, entities

SECTION_LIMIT = 3000
HEADER_LIMIT = 150


def _header(report: Report) -> str:
    if not report.findings:
        icon, word, why = STATUS.get(report.status, STATUS["inconclusive"])
        return f"{icon} {word.title()}: {why}"
    f = report.findings[0]
    return f"{ICON.get(f.severity, '🔵')} {f.title}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def blocks(report: Report) -> list[dict]:
    level = next((lv for lv in LEVELS if all(len(t) <= SECTION_LIMIT for _, t in parts(report, SLACK, lv))), LEVELS[-1])
    named = dict(parts(report, SLACK, level))
    out: list[dict] = [{"type": "header", "text": {"type": "plain_text", "text": _clip(_header(report), HEADER_LIMIT), "emoji": True}}]
    if report.findings:
        f = report.findings[0]
        meta = f"*{f.severity.upper()}* · `{f.category}` · confidence {f.confidence:.2f} · {f.rule}"
        out.append(_context(_clip(" · ".join(t for t in (meta, entities(context_line(report))) if t), SECTION_LIMIT)))
        if f.summary:
            out.append(_section(SLACK.escape(first_sentence(f.summary, level.summary))))
    else:
        out.append(_section(named["status"]))
    for name in ("fleet", "evidence", "budget", "fix", "options"):
        if name in named:
            out.append(_section(named[name]))
    if "others" in named:
        out += [{"type": "divider"}, _section(named["others"])]
    out.append(_context(named["footer"]))
    return out


def render(report: Report) -> str:
    return json.dumps({"text": entities(_header(report)), "blocks": blocks(report)}, ensure_ascii=False, indent=2)
