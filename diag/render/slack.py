"""Slack mrkdwn view of a report: one message of at most 4,000 characters."""
from __future__ import annotations

import re

from ..report import Report
from .chat import Dialect, message

LIMIT = 4000
# Slack has no escape for its formatting marks; at a word edge they become look-alikes.
LOOKALIKE = {"*": "∗", "_": "ˍ", "~": "∼", "`": "ˋ"}


def entities(text: str) -> str:
    """The three characters Slack reads as markup, everywhere (code included)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape(text: str) -> str:
    return re.sub(r"(?<!\w)[*_~`]|[*_~`](?!\w)", lambda m: LOOKALIKE[m[0]], entities(text))


def code(text: str) -> str:
    return "`" + entities(text).replace("`", "ˋ") + "`"


def code_escape(text: str) -> str:
    """Inside a code block only a run of three backticks would end it early."""
    return re.sub(r"`(?=``)", "`\u200b", entities(text))


SLACK = Dialect(bold="*", bullet="•", escape=escape, code=code, code_escape=code_escape, fence=lambda body: "```", lang=False)


def render(report: Report) -> str:
    return message(report, SLACK, LIMIT)
