"""The HTML incident report: one self-contained file (inline CSS and SVG, no script, no network).

This module turns a report into plain values; templates/report.html.j2 lays them out with
autoescaping on, so nothing from a log can become markup.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from ..report import Finding, Report
from . import charts, fleet
from .budget import budget_rows
from .chat import first_sentence
from .command import before_after, diff, first_option, fix_text, option_title
from .text import option_groups

TEMPLATES = Path(__file__).parent / "templates"
RADIUS = 3          # lines shown around the root cause's evidence lines (the report keeps as many)
MAX_CHARS = 2000    # characters of an evidence line shown, when the report has no context for it
STATUS = {"findings": "Findings", "clean": "Clean", "inconclusive": "Inconclusive"}
PHASE = {"dist_init": "distributed init", "weights": "loading weights", "kv_pool": "KV cache pool", "mamba": "Mamba state pool",
         "cuda_graph": "CUDA graph capture", "draft": "draft model", "warmup": "warm-up", "prefill": "prefill (serving)",
         "decode": "decode (serving)", "multimodal": "multimodal encoder"}


def render(report: Report) -> str:
    return _template().render(**context(report))


@functools.lru_cache(maxsize=1)
def _template():
    """The compiled template (once per process: a service or the tests render many reports)."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html.j2")


def context(report: Report) -> dict:
    root = report.findings[0] if report.findings else None
    tone = root.severity if root else ("ok" if report.status == "clean" else "unknown")
    timeline = report.timeline or {}
    return {
        "status": STATUS.get(report.status, report.status), "tone": tone,
        "headline": root.title if root else ("No failure found in the input" if report.status == "clean"
                                             else "Too little in the input to judge"),
        "root": _finding(report, root) if root else None,
        "meta": _meta(report),
        "inputs": [{"path": i.path, "kind": i.kind, "lines": i.lines, "size": _size(i.bytes), "notes": i.notes}
                   for i in report.inputs],
        "budget": _budget(root) if root else None,
        "startup": charts.startup(timeline.get("startup")),
        "batches": charts.batches(timeline.get("batches")),
        "gpu_memory": charts.gpu_memory(timeline.get("gpu_memory")),
        "fix": _fix(report, root) if root else None,
        "fleet": _fleet(report),
        "others": [_finding(report, f, radius=0) for f in report.findings[1:]],
        "gpus": report.facts.get("gpus") or [], "processes": report.facts.get("gpu_processes") or [],
        "unchecked": report.unchecked,
        "tool_version": report.tool_version, "generated_at": report.generated_at,
        "redacted": report.redacted,
    }


def _meta(report: Report) -> list[tuple[str, str]]:
    f = report.facts
    rows = [("Model", f.get("model") or "not shown in the log"), ("Architecture", f.get("architecture") or "")]
    gpus = f.get("gpus") or []
    if gpus:
        names = ", ".join(sorted({g.get("name") or "?" for g in gpus}))
        mib = next((g.get("memory_total_mib") for g in gpus if g.get("memory_total_mib")), None)
        rows.append(("GPU", f"{len(gpus)} × {names}" + (f" ({mib / 1024:.1f} GiB)" if mib else "")))
    rows.append(("SGLang", f.get("sglang_version") or "unknown"))
    if f.get("driver_version") or f.get("cuda_version"):
        rows.append(("Driver / CUDA", f"{f.get('driver_version') or '?'} / {f.get('cuda_version') or '?'}"))
    if f.get("failure_phase"):
        rows.append(("Failed during", PHASE.get(f["failure_phase"], f["failure_phase"])))
    first, last = (report.timeline or {}).get("first_timestamp"), (report.timeline or {}).get("last_timestamp")
    if first and last:
        shown = last[11:] if last[:10] == first[:10] else last
        rows.append(("Log time", first if first == last else f"{first} – {shown}"))
    return [(k, v) for k, v in rows if v]


def _size(n: int) -> str:
    return f"{n / 1048576:.1f} MB" if n >= 1048576 else f"{n / 1024:.1f} kB" if n >= 1024 else f"{n} B"


def _finding(report: Report, f: Finding, radius: int = RADIUS) -> dict:
    lead = first_sentence(f.summary, len(f.summary) + 1)
    return {"rule": f.rule, "category": f.category, "severity": f.severity, "confidence": f.confidence,
            "title": f.title, "summary": f.summary, "lead": lead, "detail": f.summary[len(lead):].strip(),
            "explanation": f.explanation, "notes": f.confidence_notes, "windows": _windows(report, f, radius)}


def _windows(report: Report, f: Finding, radius: int) -> list[dict]:
    """The evidence lines with `radius` lines around each (from the report's evidence context), merged where they touch."""
    out = []
    for inp in sorted({e.input for e in f.evidence}):
        marks = {e.line: e for e in f.evidence if e.input == inp}
        around = {c["line"]: c for e in marks.values() for c in e.context if c["line"] not in marks}
        spans: list[list[int]] = []
        for n in sorted(marks):
            if spans and n - radius <= spans[-1][1] + 1:
                spans[-1][1] = n + radius
            else:
                spans.append([max(1, n - radius), n + radius])
        name = report.inputs[inp].path if inp < len(report.inputs) else f"input {inp}"
        for a, b in spans:
            rows = []
            for n in range(a, b + 1):
                if n in marks:
                    own = next((c for c in marks[n].context if c["line"] == n), None)
                    text, cut = (own["text"], own["cut"]) if own else (marks[n].text[:MAX_CHARS], max(0, len(marks[n].text) - MAX_CHARS))
                    rows.append({"line": n, "text": text, "cut": cut, "role": marks[n].role,
                                 "parts": _highlight(text, marks[n])})
                elif n in around:
                    rows.append({"line": n, "text": around[n]["text"], "cut": around[n]["cut"], "role": "",
                                 "parts": [(around[n]["text"], False)]})
            out.append({"input": os.path.basename(name), "rows": rows})
    return out


def _highlight(text: str, ev) -> list[tuple[str, bool]]:
    """The line in pieces, the catalog-matched message (the evidence's `message` span) marked;
    a span that does not fall on the same characters of the shown text is left out."""
    spans = sorted((a, min(b, len(text))) for a, b, kind in ev.spans
                   if kind == "message" and 0 <= a < min(b, len(text)) and text[a:min(b, len(text))] == ev.text[a:min(b, len(text))])
    parts, last = [], 0
    for a, b in spans:
        if a < last:
            continue
        if a > last:
            parts.append((text[last:a], False))
        parts.append((text[a:b], True))
        last = b
    if last < len(text) or not parts:
        parts.append((text[last:], False))
    return parts


def _budget(f: Finding) -> dict | None:
    chart = charts.budget(f.memory) if f.memory else None
    if chart is None:
        return None
    m = f.memory
    drawn = {s["label"]: s for s in chart["segments"]}
    rows = [{"name": name, "gib": value.replace(" GiB", ""), "source": source, "note": note,
             "colour": drawn[name]["colour"] if name in drawn else None,
             "share": drawn[name]["share"] if name in drawn else None, "total": item.get("name") == "total"}
            for (name, value, source, note), item in zip(budget_rows(m), m.get("items") or [])]
    rows.sort(key=lambda r: r["total"])  # the total last, under the parts
    return {"chart": chart, "rows": rows, "problems": m.get("problems") or [], "rules": m.get("sglang_rules"),
            "fraction": m.get("mem_fraction_static"), "static_gib": m.get("static_budget_gib")}


def _fix(report: Report, f: Finding) -> dict:
    before, after = before_after(report)
    option = first_option(f)
    arithmetic = {o["option"]: o for o in f.options}
    caveats = {int(m[1]): m[2] for t in f.fix_other if (m := re.match(r"option (\d+):\s*(.*)", t))}
    options = [{"n": n, "title": option_title(title, fixes), "changes": [fix_text(fx) for fx in fixes],
                "arithmetic": arithmetic.get(n, {}).get("arithmetic", ""), "fits": arithmetic.get(n, {}).get("fits"),
                "caveat": caveats.get(n, "")} for n, title, fixes in option_groups(f)]
    return {"option": options[0] if options else None, "before": before, "after": after,
            "diff": diff(before, after) if before else [],
            "why": [{"change": fix_text(fx), "why": fx.why, "was": fx.was} for fx in (option[2] if option else [])],
            "options": options, "general": [t for t in f.fix_other if not re.match(r"option \d+:", t)],
            "arithmetic": any(o["arithmetic"] for o in options), "fits": any(o["fits"] is not None for o in options)}


def _fleet(report: Report) -> dict | None:
    """Several servers or runs (which one the diagnosis is of, how the others ended) and the first
    failing rank with its cascade (at most the 20 the report keeps, the rest counted)."""
    rows = fleet.servers(report) + fleet.runs(report)
    first = fleet.first_failure(report, MAX_CHARS)
    if not rows and first is None:
        return None
    cascade = []
    for c in (report.ranks or {}).get("cascade") or []:
        name = os.path.basename(report.inputs[c["input"]].path) if c["input"] < len(report.inputs) else f"input {c['input']}"
        cascade.append({"who": " ".join(x for x in (c.get("node"), c.get("rank")) if x) or "—", "kind": c.get("kind") or "",
                        "after": f"+{c['after_s']:,.0f} s" if isinstance(c.get("after_s"), (int, float)) else "",
                        "where": f"{name}:{c['line']}", "text": c.get("text") or ""})
    title = ("Servers and runs" if report.servers and fleet.runs(report) else "Servers" if report.servers
             else "Runs" if rows else "Ranks")
    return {"title": title, "summary": fleet.summary(report), "rows": rows, "first": first, "cascade": cascade}
