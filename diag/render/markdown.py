"""GitHub / Mattermost Markdown view of a report, for a chat message or an issue (≤ 4,000 characters)."""
from __future__ import annotations

import re

from ..report import Report
from .chat import Dialect, message

LIMIT = 4000


def escape(text: str) -> str:
    """Backslash-escape what Markdown would read as formatting, links or HTML."""
    text = re.sub(r"([\\`*_\[\]<>|~])", r"\\\1", text)
    return re.sub(r"^([#+-]|\d+\.)(?=\s)", r"\\\1", text)


def code(text: str) -> str:
    """Inline code; a longer backtick run delimits text that holds backticks."""
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if ticks != "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(body: str) -> str:
    return "`" * max(3, max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)


MARKDOWN = Dialect(bold="**", bullet="-", escape=escape, code=code, code_escape=lambda s: s, fence=fence, lang=True)


def render(report: Report) -> str:
    return message(report, MARKDOWN, LIMIT)
