"""Which SGLang version wrote this log: named outright, or narrowed by what dates its lines.

The evidence is read elsewhere: the parser's version events (a version named outright, diag.parse.sglang)
and the wordings it dates (diag.parse.wording), the message catalog's printing versions of each
matched message (facts). This module combines them: several ranges intersect.
"""
from __future__ import annotations

from .versions import VersionRange


def combine(explicit: list[tuple[int, str]], ranges: list[tuple[int, VersionRange]]) -> tuple[VersionRange, list[int], str]:
    """The version the evidence supports, the lines that show it, and a note on conflicts."""
    if explicit:
        line, v = explicit[0]
        return VersionRange(exact=v, source=f"named on line {line}"), [line], ""
    result: VersionRange | None = None
    lines: list[int] = []
    dropped = []
    for line, r in ranges:
        nxt = r if result is None else result.intersect(r)
        if nxt is None:
            dropped.append(r.source)
            continue
        result = nxt
        lines.append(line)
    note = f"ignored template evidence that contradicts the rest: {', '.join(dropped)}" if dropped else ""
    return (result or VersionRange()), lines, note
