"""Geometry of the HTML report's SVG charts: numbers and labels only, drawn by the template.

All charts are 1000 units wide (the SVG viewBox), so x positions read as per-mille of
the width. Time axes use seconds since the first timestamp, or log line numbers when the
log has no timestamps.
"""
from __future__ import annotations

import datetime
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
PHASES = {
    "dist_begin": ("dist_end", "torch.distributed"), "load_begin": ("load_end", "weights"),
    "graph_begin": ("graph_end", "CUDA graphs"),
}
POINTS = {"kv_alloc": "KV pool", "mamba_alloc": "Mamba pool", "pool_end": "memory pools", "ready": "ready",
          "http_up": "HTTP up"}
CHAR = 6.6  # width of one character of the 12px labels, in viewBox units


def seconds(ts: str | None) -> float | None:
    """'2026-05-14 09:12:10(.123)' or nvidia-smi's '2025/03/21 04:44:07.665' -> epoch seconds (UTC)."""
    if not ts:
        return None
    try:
        t = datetime.datetime.fromisoformat(ts.strip().replace("/", "-").replace(",", "."))
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


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


def startup(facts) -> dict | None:
    """Start-up phases of one rank and the failure, on a time axis (or a line axis)."""
    ms = facts.milestones
    events = [e for e in facts.events if e.kind != "milestone"]
    ranks = [m.rank for m in ms]
    pick = "TP0" if "TP0" in ranks else (ranks[0] if ranks else None)
    mine = [m for m in ms if m.rank == pick]
    stamped = [seconds(e.ts) for e in facts.events if e.ts]
    timed = bool(stamped) and None not in stamped and all(m.ts for m in mine)

    def at(e) -> float | None:
        return seconds(e.ts) if timed else float(e.line)

    items: list[dict] = []
    for m in mine:
        phase = m.data.get("phase")
        if phase in PHASES:
            end_phase, label = PHASES[phase]
            end = next((n for n in mine if n.data.get("phase") == end_phase and n.line > m.line), None)
            if end is not None:
                items.append({"kind": "span", "start": at(m), "end": at(end), "label": label, "line": m.line})
        elif phase in POINTS:
            items.append({"kind": "point", "start": at(m), "end": at(m), "label": POINTS[phase], "line": m.line})
    if not items:  # a failure alone is no timeline
        return None
    fail = _failure(facts, events, timed)
    up = next((m for m in ms if m.data.get("phase") in ("ready", "http_up") and (m.ts or not timed)), None)
    last = fail["start"] if fail else (max(stamped) if timed and stamped else None)
    if up is not None and last is not None and last > at(up):
        items.append({"kind": "serving", "start": at(up), "end": last, "label": "serving", "line": up.line})
    if fail is not None:
        items.append(fail)
    points = [v for i in items for v in (i["start"], i["end"])]
    lo = min(stamped) if timed and stamped else min(points)
    hi = max(max(stamped) if timed and stamped else max(points), max(points))
    span = (hi - lo) or 1.0
    for i in items:
        i["x"] = round((i["start"] - lo) / span * WIDTH, 2)
        i["w"] = round(max((i["end"] - i["start"]) / span * WIDTH, 3), 2)
        length = i["end"] - i["start"]
        i["note"] = (_duration(length) if timed else f"{length:,.0f} lines") if i["kind"] in ("span", "serving") else ""
    _place_labels(items)
    start_text = next((e.ts for e in facts.events if e.ts and seconds(e.ts) == lo), "") if timed else ""
    return {"marks": items, "axis": _axis(lo, hi, "time" if timed else "line"), "timed": timed, "start": start_text,
            "rows": 1 + max((i["row"] for i in items), default=0)}


def _failure(facts, events, timed: bool) -> dict | None:
    if facts.failure_line is None:
        return None
    at_line = [e for e in events if e.line <= facts.failure_line]
    here = next((e for e in events if e.line == facts.failure_line), None)
    if here is None:
        return None
    when = float(here.line)
    if timed:
        stamped = [e for e in at_line if e.ts]
        if not stamped:
            return None
        when = seconds((here if here.ts else stamped[-1]).ts)
    label = here.data.get("type") or {"oom": "out of memory", "signal": "signal"}.get(here.kind, "failure")
    return {"kind": "failure", "start": when, "end": when, "label": f"{label} (line {here.line})", "line": here.line}


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


def batches(facts) -> dict | None:
    """Token usage, decode throughput and requests over time, from one rank's batch lines (polars)."""
    series = [b for b in facts.batches if len(b)]
    if not series:
        return None
    import polars as pl

    b = next((s for s in series if s.rank in ("TP0", None)), max(series, key=len))
    df = pl.DataFrame({"kind": list(b.kind), "line": list(b.line), "ts": list(b.ts), "usage": list(b.usage),
                       "throughput": list(b.throughput), "running": list(b.running), "queue": list(b.queue)})
    df = df.with_columns(pl.col("ts", "usage", "throughput", "running", "queue").fill_nan(None))
    timed = df["ts"].null_count() == 0
    df = df.with_columns(x=pl.col("ts") if timed else pl.col("line").cast(pl.Float64))
    lo, hi = df["x"].min(), df["x"].max()
    span = (hi - lo) or 1.0
    buckets = min(len(df), 240)
    df = (df.with_columns(bucket=((pl.col("x") - lo) / span * (buckets - 1)).floor().cast(pl.Int32))
          .group_by("bucket")
          .agg(pl.col("x").mean(), pl.col("usage").max(),
               pl.col("throughput").filter(pl.col("kind") == 1).mean(),
               pl.col("running").max(), pl.col("queue").max())
          .sort("bucket"))
    xs = [(x - lo) / span * WIDTH for x in df["x"]]
    charts = []
    for name, title, unit, top in (("usage", "Token usage (KV pool)", "%", 1.0),
                                   ("throughput", "Decode throughput", "tok/s", None),
                                   ("running", "Running requests", "", None), ("queue", "Queued requests", "", None)):
        ys = df[name].to_list()
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
    fail_x = None
    if facts.failure_line is not None:
        here = next((e for e in facts.events if e.line == facts.failure_line), None)
        when = (seconds(here.ts) if here is not None and here.ts else None) if timed else float(facts.failure_line)
        if when is not None and lo <= when <= hi + span * 0.05:
            fail_x = round(min((when - lo) / span * WIDTH, WIDTH), 2)
    return {"charts": charts, "axis": _axis(lo, hi, "time" if timed else "line"), "timed": timed, "rows": len(df), "lines": len(b),
            "rank": b.rank, "fail_x": fail_x}


def _num(value: float, unit: str) -> str:
    return f"{value:,.0f}{unit}" if unit == "%" else f"{value:,.0f} {unit}".rstrip()


def gpu_memory(facts) -> dict | None:
    """Memory used per GPU over time from a looped nvidia-smi query (one line per GPU)."""
    samples = [s for snap in facts.smi for s in snap.samples if s.memory_used_mib is not None]
    if len(samples) < 2:
        return None
    stamps = [seconds(s.timestamp) for s in samples]
    timed = all(t is not None for t in stamps)
    xs = stamps if timed else [float(i) for i in range(len(samples))]
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0
    top = max((s.memory_total_mib or s.memory_used_mib) for s in samples)
    lines: dict = {}
    for s, x in zip(samples, xs):
        lines.setdefault(s.gpu, []).append(f"{(x - lo) / span * WIDTH:.1f},{HEIGHT - s.memory_used_mib / top * HEIGHT:.1f}")
    colours = ("#2f4b7c", "#1f8a70", "#c98a1b", "#6b4fa0", "#b8553d", "#4c78a8", "#72b7b2", "#9d755d")
    series = [{"gpu": "GPU" if g is None else f"GPU {g}", "points": " ".join(p), "colour": colours[k % len(colours)]}
              for k, (g, p) in enumerate(sorted(lines.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))]
    peak = max(s.memory_used_mib for s in samples)
    return {"series": series, "axis": _axis(lo, hi, "time" if timed else "sample"),
            "top_gib": top / 1024, "peak_gib": peak / 1024, "count": len(samples)}
