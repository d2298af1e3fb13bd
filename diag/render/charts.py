"""Geometry of the HTML report's SVG charts: numbers and labels only, drawn by the template.

The data is the report's (its timeline and memory budget, diag/report_build.py); this module
only places it. All charts are 1000 units wide (the SVG viewBox), so x positions read as
per-mille of the width. Time axes use seconds since the first timestamp, or log line numbers
when the log has no timestamps.
"""
from __future__ import annotations

import math

from .budget import chart_items

WIDTH = 1000
HEIGHT = 70  # plot height of the line charts
# Colours of the budget items: the model's own memory in blues, caches in teal/violet,
# reserves in amber, what is left in grey.
COLOURS = {
    "cuda_context": "#8a94a6", "weights": "#2f4b7c", "draft_weights": "#6a86b8", "kv_pool": "#1f8a70",
    "draft_kv": "#7cc4ae", "mamba_state": "#6b4fa0", "spec_scratch": "#a98bd3", "cuda_graphs": "#c98a1b",
    "activations": "#e7bf6b", "headroom": "#e7bf6b", "other_processes": "#b8553d", "free": "#e4e7ec",
}
SPARE = ("#4c78a8", "#72b7b2", "#b279a2", "#9d755d", "#bab0ac")
DARK = {"#2f4b7c", "#6a86b8", "#1f8a70", "#6b4fa0", "#8a94a6", "#a98bd3", "#c98a1b", "#b8553d", "#4c78a8", "#b279a2", "#9d755d"}
CHAR = 6.6  # width of one character of the 12px labels, in viewBox units


def budget(memory: dict) -> dict | None:
    """The stacked bar: segments scaled to the GPU total (or to the sum, when it is over)."""
    items = chart_items(memory)
    parts = [i for i in items if i["item"] != "total"]
    total = next((i["gib"] for i in items if i["item"] == "total"), None)
    if not parts:
        return None
    used = sum(p["gib"] for p in parts)
    scale = max(total or 0, used)
    x, segments = 0.0, []
    for k, p in enumerate(parts):
        colour = COLOURS.get(p["item"], SPARE[k % len(SPARE)])
        w = p["gib"] / scale * WIDTH
        value = f"{p['gib']:.1f}"
        text = f"{p['label']} {value}" if len(p["label"] + value) * CHAR + 16 < w else value if len(value) * CHAR + 10 < w else ""
        segments.append({"x": round(x, 2), "w": round(w, 2), "colour": colour, "ink": "#ffffff" if colour in DARK else "#1f2933",
                         "text": text, "label": p["label"], "gib": p["gib"], "share": p["gib"] / (total or scale),
                         "source": p.get("source", "")})
        x += w
    ticks = [{"x": round(g / scale * WIDTH, 2), "text": f"{g:g}"} for g in _ticks(scale)]
    over = total is not None and used > total * 1.001
    return {"segments": segments, "total": total, "used": used, "ticks": ticks, "over": over,
            "total_x": round((total or scale) / scale * WIDTH, 2)}


def _ticks(span: float, count: int = 6, least: float = 0.0) -> list[float]:
    if span <= 0:
        return [0.0]
    raw = max(span / count, least)
    step = next(m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 2.5, 5, 10) if m * 10 ** math.floor(math.log10(raw)) >= raw)
    return [round(i * step, 6) for i in range(int(span / step) + 1)]


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s" if s >= 10 or s == int(s) else f"{s:.1f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _axis(lo: float, hi: float, unit: str) -> list[dict]:
    """Ticks of an axis in seconds from lo (unit 'time'), or in log lines or samples counted from 1."""
    span = hi - lo or 1.0
    text = {"time": lambda t: _duration(t), "line": lambda t: f"line {t + lo:,.0f}", "sample": lambda t: f"#{t + lo + 1:,.0f}"}[unit]
    return [{"x": round(t / span * WIDTH, 2), "text": text(t)} for t in _ticks(span, least=0 if unit == "time" else 1)
            if t <= span]


def startup(st: dict | None) -> dict | None:
    """Start-up phases of one rank and the failure (report.timeline["startup"]), placed on the axis."""
    if not st or not st.get("marks"):
        return None
    timed = st["axis"] == "time"
    lo, hi = st["range"]
    span = (hi - lo) or 1.0
    items = [dict(m) for m in st["marks"]]
    for i in items:
        i["x"] = round((i["start"] - lo) / span * WIDTH, 2)
        i["w"] = round(max((i["end"] - i["start"]) / span * WIDTH, 3), 2)
        length = i["end"] - i["start"]
        i["note"] = (_duration(length) if timed else f"{length:,.0f} lines") if i["kind"] in ("span", "serving") else ""
    _place_labels(items)
    return {"marks": items, "axis": _axis(lo, hi, "time" if timed else "line"), "timed": timed, "start": st.get("start") or "",
            "rows": 1 + max((i["row"] for i in items), default=0)}


def _place_labels(items: list[dict]) -> None:
    """Label rows: a label goes to the first row where it does not overlap the one before."""
    ends: list[float] = []
    for i in sorted(items, key=lambda i: i["x"] + (i["w"] / 2 if i["kind"] == "serving" else 0)):
        text_w = (len(i["label"]) + len(i["note"]) + 1) * CHAR
        x0 = min(i["x"] + (max(0.0, (i["w"] - text_w) / 2) if i["kind"] == "serving" else 0), WIDTH - text_w)
        i["tx"] = round(max(x0, 0), 2)
        row = next((r for r, end in enumerate(ends) if i["tx"] > end + 10), len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = i["tx"] + text_w
        i["row"] = row


# (series, statistic drawn, title, unit, fixed top of the axis)
BATCH_CHARTS = (("usage", "max", "Token usage (KV pool)", "%", 1.0), ("throughput", "mean", "Decode throughput", "tok/s", None),
                ("running", "max", "Running requests", "", None), ("queue", "max", "Queued requests", "", None))


def batches(bt: dict | None) -> dict | None:
    """Token usage, decode throughput and requests over time (report.timeline["batches"], one point per bucket)."""
    if not bt or not bt["buckets"]["x"]:
        return None
    timed = bt["axis"] == "time"
    lo, hi = bt["range"]
    span = (hi - lo) or 1.0
    xs = [(x - lo) / span * WIDTH for x in bt["buckets"]["x"]]
    charts = []
    for name, stat, title, unit, top in BATCH_CHARTS:
        ys = bt["buckets"][name][stat]
        known = [v for v in ys if v is not None]
        if not known or (name == "queue" and max(known) == 0):
            continue
        ceiling = top or max(max(known), 1e-9) * 1.1
        points = " ".join(f"{x:.1f},{HEIGHT - v / ceiling * HEIGHT:.1f}" for x, v in zip(xs, ys) if v is not None)
        last = known[-1] * (100 if unit == "%" else 1)
        peak = max(known) * (100 if unit == "%" else 1)
        charts.append({"title": title, "points": points, "single": len(known) == 1,
                       "summary": f"last {_num(last, unit)} · peak {_num(peak, unit)} · "
                                  f"axis 0–{_num(ceiling * (100 if unit == '%' else 1), unit)}"})
    at = bt.get("failure_at")
    fail_x = round(min((at - lo) / span * WIDTH, WIDTH), 2) if at is not None else None
    return {"charts": charts, "axis": _axis(lo, hi, "time" if timed else "line"), "timed": timed, "rows": len(xs),
            "lines": bt["lines"], "rank": bt.get("rank"), "fail_x": fail_x}


def _num(value: float, unit: str) -> str:
    return f"{value:,.0f}{unit}" if unit == "%" else f"{value:,.0f} {unit}".rstrip()


def gpu_memory(gm: dict | None) -> dict | None:
    """Memory used per GPU over time from a looped nvidia-smi query (report.timeline["gpu_memory"])."""
    samples = (gm or {}).get("samples") or []
    if len(samples) < 2:
        return None
    lo, hi = gm["range"]
    span = (hi - lo) or 1.0
    top = max((s["total_mib"] or s["used_mib"]) for s in samples)
    lines: dict = {}
    for s in samples:
        lines.setdefault(s["gpu"], []).append(f"{(s['at'] - lo) / span * WIDTH:.1f},{HEIGHT - s['used_mib'] / top * HEIGHT:.1f}")
    colours = ("#2f4b7c", "#1f8a70", "#c98a1b", "#6b4fa0", "#b8553d", "#4c78a8", "#72b7b2", "#9d755d")
    series = [{"gpu": "GPU" if g is None else f"GPU {g}", "points": " ".join(p), "colour": colours[k % len(colours)]}
              for k, (g, p) in enumerate(sorted(lines.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))]
    peak = max(s["used_mib"] for s in samples)
    return {"series": series, "axis": _axis(lo, hi, "time" if gm["axis"] == "time" else "sample"),
            "top_gib": top / 1024, "peak_gib": peak / 1024, "count": gm["count"]}
