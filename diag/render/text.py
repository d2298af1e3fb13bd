"""Terminal view of a report: plain text, coloured with rich when writing to a terminal."""
from __future__ import annotations

import textwrap

from ..report import Finding, Report
from . import fleet

MARK = {"critical": "✖", "error": "✖", "warning": "▲", "info": "•"}
STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
WIDTH = 100


class _Out:
    """Lines with optional styles; rendered plain or through rich."""

    def __init__(self) -> None:
        self.lines: list[list[tuple[str, str]]] = []

    def add(self, *parts) -> None:
        segs = []
        for p in parts:
            segs.append(p if isinstance(p, tuple) else (str(p), ""))
        self.lines.append(segs)

    def wrap(self, text: str, indent: int = 2, style: str = "") -> None:
        for para in str(text).splitlines() or [""]:
            for line in textwrap.wrap(para, WIDTH - indent) or [""]:
                self.add((" " * indent + line, style))

    def plain(self) -> str:
        return "\n".join("".join(t for t, _ in segs).rstrip() for segs in self.lines)

    def rich(self) -> str:
        from io import StringIO
        from rich.console import Console
        from rich.text import Text
        buf = StringIO()
        console = Console(file=buf, force_terminal=True, width=WIDTH + 20, highlight=False, soft_wrap=True)
        for segs in self.lines:
            t = Text()
            for text, style in segs:
                t.append(text, style=style or None)
            console.print(t)
        return buf.getvalue().rstrip("\n")


def _fix_line(fx) -> str:
    if fx.flag:
        head = fx.flag if fx.action == "remove" else (f"{fx.flag} {fx.value}" if fx.value is not None else fx.flag)
        if fx.action == "remove":
            head = f"remove {fx.flag}"
    elif fx.env:
        head = f"{fx.env}={fx.value}" if fx.action != "remove" else f"unset {fx.env}"
    else:
        head = f"export {fx.external_env}={fx.value}" if fx.action != "remove" else f"unset {fx.external_env}"
    was = f"  (now: {fx.was})" if fx.was not in (None, "", "None") else ""
    return head + was


def option_groups(finding: Finding) -> list[tuple[int, str, list]]:
    """(option number, title, fixes) in ranked order."""
    titles = {o["option"]: o.get("title", "") for o in finding.options}
    groups: dict[int, list] = {}
    for fx in finding.fix:
        groups.setdefault(fx.option, []).append(fx)
    for o in finding.options:
        groups.setdefault(o["option"], [])
    return [(n, titles.get(n, ""), groups[n]) for n in sorted(groups)]


def _finding(out: _Out, f: Finding, facts_json: dict, detail: bool) -> None:
    out.add((f"{MARK.get(f.severity, '•')} {f.severity.upper()}", STYLE.get(f.severity, "")), "  ",
            (f.category, "bold"), f"  confidence {f.confidence:.2f}  ", (f"[{f.rule}]", "dim"))
    out.wrap(f.title, 2, "bold")
    if f.summary:
        out.wrap(f.summary, 2)
    if not detail:
        return
    if f.evidence:
        out.add("")
        out.add(("  Evidence", "bold"))
        for e in f.evidence:
            where = f"{e.line:>6}" if e.input == 0 else f"{e.input}:{e.line:>5}"
            text = e.text if len(e.text) <= 160 else e.text[:157] + "..."
            out.add((f"  {where} │ ", "dim"), (text, "" if e.role == "trigger" else "dim"))
    if f.explanation:
        out.add("")
        out.add(("  Why", "bold"))
        out.wrap(f.explanation, 4)
    if f.memory:
        from .budget import budget_rows
        rows = budget_rows(f.memory)
        if rows:
            out.add("")
            out.add(("  Memory per GPU", "bold"))
            for name, value, source, note in rows:
                out.add(f"    {name:<24} {value:>10}  ", (f"{source:<15} ", "dim"), (note, "dim"))
    groups = option_groups(f)
    if groups or f.fix_other:
        out.add("")
        out.add(("  Fix", "bold"))
        for n, title, fixes in groups:
            label = f"Option {n}" + (f": {title}" if title else "")
            out.add((f"    {label}", "bold" if n == groups[0][0] else ""))
            for fx in fixes:
                out.add(("      " + _fix_line(fx), "green"))
                if fx.why:
                    out.wrap(fx.why, 8, "dim")
        for other in f.fix_other:
            out.wrap(f"- {other}", 4)
    if f.confidence_notes:
        out.add("")
        out.add(("  Notes", "bold"))
        for n in f.confidence_notes:
            out.wrap(f"- {n}", 4, "dim")


RUNS_SHOWN = 20   # servers / runs listed in the terminal (the chosen and the failed ones first)


def _fleet(out: _Out, report: Report) -> None:
    """Several servers or runs: which one the diagnosis is of, and what the others did; the first
    failing rank and its cascade, folded into counts (diag/render/fleet.py, as every view)."""
    for rows, what in ((fleet.servers(report), "separate servers"), (fleet.runs(report), "server runs (restarts)")):
        if not rows:
            continue
        out.add(("  ", ""), (f"{len(rows)} {what} in the inputs; the diagnosis below is of the one marked ▶", "dim"))
        shown, rest = fleet.fold(rows, RUNS_SHOWN)
        for r in shown:
            outcome = r.category or r.outcome
            line = f"  {'▶' if r.chosen else ' '} {r.label} ({r.where}): {r.ended}, {outcome}"
            out.add(line + (f" — {r.error}" if r.error else ""))
        if rest:
            out.add((f"    … {rest}", "dim"))
    first = fleet.first_failure(report, 120)
    if first is not None:
        out.add(("  First failure: ", "bold"), first.line(), (f"  [{first.scale()}]", "dim"))
        if first.cascade:
            out.add((f"  {first.folded()}", "dim"))


def render(report: Report, color: bool = False) -> str:
    out = _Out()
    facts = report.facts
    names = ", ".join(f"{i.path} ({i.kind}, {i.lines} lines)" for i in report.inputs)
    out.add((f"diag {report.tool_version}", "bold"), f" — {names}")
    bits = []
    if facts.get("sglang_version"):
        bits.append(f"SGLang {facts['sglang_version']}")
    if facts.get("model"):
        bits.append(f"model {facts['model']}")
    if facts.get("architecture"):
        bits.append(facts["architecture"])
    gpus = facts.get("gpus") or []
    if gpus:
        names = sorted({g.get("name") or "?" for g in gpus})
        bits.append(f"{len(gpus)}× {', '.join(names)}")
    if bits:
        out.add(("  " + " · ".join(bits), "dim"))
    for i in report.inputs:
        for n in i.notes:
            out.add((f"  {i.path}: {n}", "dim"))
    out.add("")
    status = {"findings": ("FINDINGS", "bold red"), "clean": ("CLEAN", "bold green"),
              "inconclusive": ("INCONCLUSIVE", "bold yellow")}[report.status]
    out.add(("Status: ", "bold"), status)
    _fleet(out, report)
    if not report.findings:
        out.add("  No failure found in the input.")
    for k, f in enumerate(report.findings):
        out.add("")
        if k == 1:
            out.add(("Other findings", "bold"))
            out.add("")
        _finding(out, f, facts, detail=k == 0 or f.severity in ("critical", "error"))
    if gpus:
        out.add("")
        out.add(("GPUs", "bold"))
        for g in gpus:
            used, total = g.get("memory_used_mib"), g.get("memory_total_mib")
            mem = f"{used if used is not None else '?'} / {total if total is not None else '?'} MiB"
            out.add(f"  {g.get('index') if g.get('index') is not None else '-':>3}  {g.get('name') or '?':<32} {mem}")
        for p in facts.get("gpu_processes") or []:
            used = p.get("used_mib")
            out.add(("  " + f"     pid {p.get('pid')} {p.get('name') or ''} on GPU {p.get('gpu')}: "
                     f"{used if used is not None else p.get('used_raw', '?')} MiB", "dim"))
    if report.unchecked:
        out.add("")
        out.add(("Not checked", "bold"))
        for u in report.unchecked:
            out.wrap(f"- {u}", 2, "dim")
    return out.rich() if color else out.plain()
