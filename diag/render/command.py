"""The suggested launch command as the views show it: read from the report, never recomputed.

The commands are computed once, when the report is built (diag/commands.py): per option of a
finding, the user's command before and after it, and the changes alone.
"""
from __future__ import annotations

import difflib

from ..commands import fix_text  # noqa: F401  (one way to write a change, shared with the builder)
from ..report import Finding, Fix, Report
from .text import option_groups


def first_option(finding: Finding) -> tuple[int, str, list[Fix]] | None:
    """The ranked-first option (number, title, fixes), or None when the finding has none."""
    groups = option_groups(finding)
    return groups[0] if groups else None


def option_title(title: str, fixes: list[Fix]) -> str:
    """An option's title, or what its changes are for when the rule gave none."""
    return title or "; ".join(dict.fromkeys(fx.why for fx in fixes if fx.why))


def option_command(finding: Finding, option: int) -> dict | None:
    """The report's {before, after, changes} of one option, or None when it changes nothing."""
    return next((c for c in finding.commands if c.get("option") == option), None)


def before_after(report: Report) -> tuple[list[str] | None, list[str]]:
    """(the user's launch command, the command with the root cause's first option applied), as shell lines.

    Without a launch command in the log, `before` is None and `after` is the fragment of changes.
    Without a root cause or option, both are empty.
    """
    finding = report.findings[0] if report.findings else None
    option = first_option(finding) if finding else None
    cmd = option_command(finding, option[0]) if option and option[2] else None
    if cmd is None:
        return None, []
    if cmd.get("before") is None:
        return None, list(cmd.get("changes") or [])
    return list(cmd["before"]), list(cmd.get("after") or [])


def changes(finding: Finding, option: int) -> list[str]:
    """An option's changes alone, one per line (what to add when the whole command is not shown)."""
    cmd = option_command(finding, option)
    return list(cmd.get("changes") or []) if cmd else []


def diff(before: list[str], after: list[str]) -> list[tuple[str, str]]:
    """(' ' | '-' | '+', line) pairs; lines compare without their trailing backslash."""
    strip = [line.removesuffix(" \\") for line in before], [line.removesuffix(" \\") for line in after]
    out: list[tuple[str, str]] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=strip[0], b=strip[1], autojunk=False).get_opcodes():
        if op == "equal":
            out += [(" ", line) for line in before[a1:a2]]
            continue
        out += [("-", line) for line in before[a1:a2]]
        out += [("+", line) for line in after[b1:b2]]
    return out
