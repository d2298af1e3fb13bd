"""What a chat message about a report says, and how it shrinks to fit a size limit.

The Markdown and Slack views differ only in their Dialect (bold, escaping, code blocks).
A message is built at the richest Level that fits; every omission is said in the text.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from ..report import Finding, Report
from . import fleet
from .command import before_after, changes, first_option, fix_text, option_title
from .text import option_groups

ICON = {"critical": "🔴", "error": "🔴", "warning": "🟠", "info": "🔵"}
STATUS = {"clean": ("🟢", "CLEAN", "no failure found"), "inconclusive": ("⚪", "INCONCLUSIVE", "too little to judge")}


@dataclass(frozen=True)
class Dialect:
    bold: str                              # the bold marker: ** or *
    bullet: str                            # a list item's mark
    escape: Callable[[str], str]           # prose from the report
    code: Callable[[str], str]             # inline code
    code_escape: Callable[[str], str]      # text inside a code block
    fence: Callable[[str], str]            # the fence for a code block holding this text
    lang: bool                             # whether a fence takes a language name


@dataclass(frozen=True)
class Level:
    evidence: int      # evidence lines shown
    width: int         # characters per evidence line
    options: int       # other options listed
    others: int        # other findings listed
    full_command: bool  # the whole launch command, or only the changes
    summary: int       # characters of the summary sentence
    runs: int = 8      # servers / runs listed (the chosen one and the failed ones first)
    error: int = 160   # characters of a run's first error line


LEVELS = (Level(8, 200, 5, 5, True, 400, 8, 160), Level(5, 160, 3, 3, True, 300, 5, 120), Level(3, 120, 2, 2, True, 240, 4, 100),
          Level(2, 100, 0, 1, False, 200, 3, 80), Level(1, 80, 0, 0, False, 160, 2, 60))


def message(report: Report, d: Dialect, limit: int) -> str:
    """The whole message within `limit` characters: the richest level that fits."""
    for level in LEVELS:
        text = join(parts(report, d, level))
        if len(text) <= limit:
            return text
    kept = parts(report, d, LEVELS[-1])
    while len(kept) > 2 and len(join(kept)) > limit:
        kept.pop(-2)  # whole parts go, the footer with the full-report command stays
    return join(kept)


def join(parts: list[tuple[str, str]]) -> str:
    return "\n\n".join(text for _, text in parts)


def parts(report: Report, d: Dialect, level: Level) -> list[tuple[str, str]]:
    """(name, text) of each part: status, root, fleet, evidence, budget, fix, options, others, footer."""
    out = [("status", status_line(report, d))]
    f = report.findings[0] if report.findings else None
    if f is not None:
        out.append(("root", _root(f, d, level)))
    if (several := _fleet(report, d, level)):
        out.append(("fleet", several))
    if f is not None:
        out += [(name, text) for name, text in (("evidence", _evidence(report, f, d, level)),
                                                 ("budget", _budget(f, d)),
                                                 ("fix", _fix(report, f, d, level)),
                                                 ("options", _options(f, d, level))) if text]
    if (others := _others(report, d, level)):
        out.append(("others", others))
    out.append(("footer", footer(report, d)))
    return out


def status_line(report: Report, d: Dialect) -> str:
    if not report.findings:
        icon, word, why = STATUS.get(report.status, STATUS["inconclusive"])
        return f"{icon} {_b(d, word)} · {why} in {d.escape(_names(report))}"
    f = report.findings[0]
    return (f"{ICON.get(f.severity, '🔵')} {_b(d, f.severity.upper())} · {d.code(f.category)} · "
            f"confidence {f.confidence:.2f} · {f.rule}")


def context_line(report: Report) -> str:
    """SGLang version, model, GPUs: plain text (escape before use)."""
    facts = report.facts
    bits = []
    if facts.get("sglang_version"):
        bits.append(f"SGLang {facts['sglang_version']}")
    if facts.get("model"):
        bits.append(str(facts["model"]))
    gpus = facts.get("gpus") or []
    if gpus:
        bits.append(f"{len(gpus)}× " + ", ".join(sorted({g.get('name') or '?' for g in gpus})))
    return " · ".join(bits)


def full_report_command(report: Report) -> str:
    words = ["diag", "analyze"]
    for i in report.inputs:
        name = "-" if i.path == "<stdin>" else os.path.basename(i.path)
        words += ["--smi", name] if i.kind == "nvidia-smi" else [name]
    return " ".join(words + ["--format", "html"])


def footer(report: Report, d: Dialect) -> str:
    ctx = context_line(report)
    head = f"_{d.escape(f'diag {report.tool_version}' + (' · ' + ctx if ctx else ''))}_"
    return f"{head}\nFull report: {d.code(full_report_command(report))}"


def first_sentence(text: str, limit: int) -> str:
    m = re.search(r"[.!?](?=\s+[A-Z0-9])", text)
    sentence = text[:m.end()] if m else text
    return _clip(sentence, limit)


def code_block(d: Dialect, lines: list[str], lang: str = "") -> str:
    body = "\n".join(d.code_escape(line) for line in lines)
    fence = d.fence(body)
    return f"{fence}{lang if d.lang else ''}\n{body}\n{fence}"


def _b(d: Dialect, text: str) -> str:
    return f"{d.bold}{text}{d.bold}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _names(report: Report) -> str:
    return ", ".join(os.path.basename(i.path) for i in report.inputs) or "the input"


def _root(f: Finding, d: Dialect, level: Level) -> str:
    text = _b(d, d.escape(_clip(f.title, 300)))
    if f.summary:
        text += "\n" + d.escape(first_sentence(f.summary, level.summary))
    return text


def _evidence(report: Report, f: Finding, d: Dialect, level: Level) -> str:
    if not f.evidence:
        return ""
    inputs = sorted({e.input for e in f.evidence})
    names = ", ".join(os.path.basename(report.inputs[i].path) for i in inputs if i < len(report.inputs))
    shown = f.evidence[:level.evidence]
    lines = [f"{e.line if len(inputs) == 1 else f'{e.input}:{e.line}':>6} │ {_clip(e.text, level.width)}" for e in shown]
    text = f"{_b(d, 'Evidence')} · {d.escape(names)}\n{code_block(d, lines, 'text')}"
    if (more := len(f.evidence) - len(shown)):
        text += f"\n_… {more} more evidence line{'s' if more > 1 else ''} omitted_"
    return text


def _budget(f: Finding, d: Dialect) -> str:
    items = f.memory.get("items") or []
    total = next((i.get("gib") for i in items if i.get("name") == "total"), None)
    shown = [f"{i.get('label') or i.get('name')} {i['gib']:.1f}" for i in items
             if i.get("name") != "total" and i.get("gib") is not None]
    if not shown:
        return ""
    of = f" (of {total:.1f} GiB)" if total else ""
    return f"{_b(d, 'Memory per GPU')}{of}: {d.escape(' · '.join(shown))} GiB"


def _fix(report: Report, f: Finding, d: Dialect, level: Level) -> str:
    option = first_option(f)
    general = [t for t in f.fix_other if not re.match(r"option \d+:", t)]
    if option is None:
        if not general:
            return ""
        return _b(d, "Fix") + "\n" + "\n".join(f"{d.bullet} {d.escape(_clip(t, 300))}" for t in general[:2])
    n, title, fixes = option
    head = _b(d, d.escape(f"Fix — option {n}" + (f": {title}" if title else "")))
    text = head
    before, after = before_after(report)
    if after and before is not None and level.full_command:
        text += f"\nYour launch command with this change:\n{code_block(d, after, 'sh')}"
    elif fixes:
        label = "Change in your launch command:" if before is not None else "Add to your launch command (the log does not show it):"
        text += f"\n{label}\n{code_block(d, [_clip(line, 160) for line in changes(f, n)], 'sh')}"
    why = "; ".join(dict.fromkeys(fx.why for fx in fixes if fx.why))
    now = [f"now {fx.name} {fx.was}" for fx in fixes if fx.was not in (None, "", "None")]
    caveats = [t.split(":", 1)[1].strip() for t in f.fix_other if t.startswith(f"option {n}:")]
    notes = [t.strip() for t in (why, *now, *caveats) if t.strip()]
    if notes:
        text += "\n_" + d.escape(_clip(" · ".join(notes), level.summary).strip()) + "_"
    if general:
        text += "\n" + "\n".join(f"{d.bullet} {d.escape(_clip(t, 300))}" for t in general[:2 if level.full_command else 1])
    return text


def _options(f: Finding, d: Dialect, level: Level) -> str:
    rest = option_groups(f)[1:]
    if not rest or not level.options:
        return ""
    lines = []
    for n, title, fixes in rest[:level.options]:
        changes = " ".join(d.code(fix_text(fx)) for fx in fixes)
        about = option_title(title, fixes)
        lines.append(f"{n}. " + (f"{d.escape(about)}: {changes}" if about else changes))
    if (more := len(rest) - level.options) > 0:
        lines.append(f"_… {more} more option{'s' if more > 1 else ''} omitted_")
    return _b(d, "Other options") + "\n" + "\n".join(lines)


def _others(report: Report, d: Dialect, level: Level) -> str:
    rest = report.findings[1:]
    if not rest:
        return ""
    lines = [f"{d.bullet} {ICON.get(f.severity, '🔵')} {f.severity} · {d.code(f.category)} — {d.escape(_clip(f.title, 200))}"
             for f in rest[:level.others]]
    if (more := len(rest) - level.others) > 0:
        lines.append(f"_… {more} more finding{'s' if more > 1 else ''} omitted_")
    return _b(d, "Other findings") + "\n" + "\n".join(lines)


def _fleet(report: Report, d: Dialect, level: Level) -> str:
    """Several servers or runs: which one the diagnosis is of and how the others ended; the first
    failing rank, its cascade folded into counts."""
    out = []
    rows = fleet.servers(report) + fleet.runs(report)
    if rows:
        title = "Servers and runs" if report.servers and fleet.runs(report) else "Servers" if report.servers else "Runs"
        out.append(f"{_b(d, title)} · {d.escape(fleet.summary(report))}")
        # the chosen one and the failed ones first when not all fit; the rest counted by how they ended
        shown, rest = fleet.fold(rows, level.runs)
        for r in shown:
            label = _b(d, d.escape(r.label) + " ▶") if r.chosen else d.escape(r.label)
            line = f"{d.bullet} {label} · {d.escape(r.where)} · {d.escape(r.ended)}"
            if r.category:
                line += f" · {d.code(r.category)}" + (f" {d.escape(r.rule)}" if r.rule else "")
            elif r.ended not in ("serving", "ready"):
                line += f" · {d.escape(r.outcome)}"
            if r.error and level.error:
                line += f" — {d.escape(_clip(r.error, level.error))}"
            out.append(line)
        if rest:
            out.append(f"_… {d.escape(rest)}_")
    first = fleet.first_failure(report, level.width)
    if first is not None:
        out.append(f"{_b(d, 'First failure')} · {d.escape(first.scale())}")
        out.append(f"{d.bullet} {d.escape(first.line())}")
        out.append(f"{d.bullet} _{d.escape(first.folded())}_")
    return "\n".join(out)
