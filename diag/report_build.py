"""The last step of the analysis: what the views show, read from the facts once, into the report.

After `build(report, facts)` the report holds everything a renderer needs (the launch command
and each option's command before and after, the lines around each evidence line, the
timeline, the source of every number of a memory budget), so no renderer reads the facts and
the JSON carries what the HTML shows. Every read of the facts is a small `_facts_*`
function here, so a change of the facts object is one place to follow.
"""
from __future__ import annotations

import datetime

from . import commands
from .report import Finding, Launch, Report

RADIUS = 3            # lines kept around each evidence line (the HTML shows them all for the root cause)
LINE_CHARS = 2000     # characters of an evidence line's own text kept in its context
CONTEXT_CHARS = 400   # characters of a line around it
BUCKETS = 240         # batch statistics: at most this many buckets, whatever the log's length
MAX_SAMPLES = 2000    # nvidia-smi loop samples kept (the highest of each stretch when there are more)
# start-up phases: begin -> (end, label); single steps: phase -> label
SPANS = {"dist_begin": ("dist_end", "torch.distributed"), "load_begin": ("load_end", "weights"),
         "graph_begin": ("graph_end", "CUDA graphs")}
POINTS = {"kv_alloc": "KV pool", "mamba_alloc": "Mamba pool", "pool_end": "memory pools", "ready": "ready",
          "http_up": "HTTP up"}
# memory readings -> the start-up step that printed them (and which of them, for repeated steps)
STEP_READINGS = {
    "pre_load_free_gib": ("load_begin", 0), "after_load_free_gib": ("load_end", 0), "weights_gib": ("load_end", 0),
    "draft_weights_gib": ("load_end", 1), "kv_tokens": ("kv_alloc", 0), "k_size_gib": ("kv_alloc", 0),
    "v_size_gib": ("kv_alloc", 0), "kv_size_gib": ("kv_alloc", 0), "kv_dtype": ("kv_alloc", 0),
    "swa_tokens": ("swa_split", 0), "mamba_cache_size": ("mamba_alloc", 0), "conv_state_gib": ("mamba_alloc", 0),
    "ssm_state_gib": ("mamba_alloc", 0), "intermediate_ssm_gib": ("mamba_alloc", 0),
    "intermediate_conv_gib": ("mamba_alloc", 0), "pool_end_avail_gib": ("pool_end", 0),
    "graph_begin_avail_gib": ("graph_begin", 0), "graph_end_avail_gib": ("graph_end", 0), "graph_mem_gib": ("graph_end", 0),
}
CAPACITY_READINGS = ("max_total_num_tokens", "max_running_requests", "context_len", "available_gpu_mem_gib")
OOM_READINGS = ("oom_total_gib", "oom_free_gib", "oom_tried_gib", "oom_process_gib")
INTERNAL_SOURCES = {"log": "log", "nvidia-smi": "nvidia-smi", "model": "model-catalog", "flags": "launch-command",
                    "sglang-default": "default", "estimate": "estimate"}


def build(report: Report, facts) -> None:
    """Fill the report's launch, timeline, evidence context, memory sources and commands from the facts."""
    report.launch = launch(facts)
    report.timeline = timeline(facts)
    lines = _facts_context(facts)
    readings = reading_lines(facts) if any(f.memory for f in report.findings) else {}
    for f in report.findings:
        evidence_context(f, lines)
        memory_sources(f, facts, readings)
    commands.attach(report)


# -- reads of the facts ---------------------------------------------------------------------

def _facts_context(facts) -> dict:
    """(input, line) -> text of the lines kept for evidence windows."""
    return facts.context


def _facts_events(facts) -> list:
    return facts.events


def _facts_milestones(facts) -> list:
    return facts.milestones


def _facts_failure_line(facts) -> int | None:
    return facts.failure_line


def _facts_batches(facts) -> list:
    return facts.batches


def _facts_smi(facts) -> list:
    return facts.smi


def _facts_launch(facts):
    """(the parsed launch command or None, the event that showed it or None)."""
    return facts.launch, facts.launch_event


def _facts_server_args_event(facts):
    return facts.server_args_event


def _facts_reading_events(facts) -> dict:
    """Memory reading name -> the event whose message printed it (the readings facts take from messages)."""
    return facts.reading_events


def _facts_ooms(facts) -> list:
    return [o.event for o in facts.ooms]


# -- the launch command ---------------------------------------------------------------------

def launch(facts) -> Launch | None:
    cmd, event = _facts_launch(facts)
    if cmd is None:
        return None
    return Launch(argv=[str(t) for t in cmd.argv], written={k: str(v) for k, v in cmd.written.items()},
                  env={k: str(v) for k, v in cmd.env.items()}, entry=cmd.entry,
                  source="log" if event is not None else "option",
                  input=event.input if event is not None else None, line=event.line if event is not None else None)


# -- evidence -------------------------------------------------------------------------------

def clip(text: str, limit: int) -> tuple[str, int]:
    """(text cut to `limit` characters, characters left off). A cut falls between words where it
    can, so it never leaves the first part of a secret for redaction to miss."""
    if len(text) <= limit:
        return text, 0
    kept = text[:limit]
    if not text[limit].isspace():
        space = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].isspace()), -1)   # the last space of the part kept
        if space > 0:
            kept = kept[:space]
    return kept, len(text) - len(kept)


def evidence_context(finding: Finding, lines: dict) -> None:
    """Each evidence line gets the lines within RADIUS of it (its own line as the input has it too)."""
    for e in finding.evidence:
        out = []
        for n in range(max(1, e.line - RADIUS), e.line + RADIUS + 1):
            text = lines.get((e.input, n))
            if text is None:
                continue
            kept, cut = clip(text, LINE_CHARS if n == e.line else CONTEXT_CHARS)
            out.append({"line": n, "text": kept, "cut": cut})
        e.context = out


# -- memory: the source of every number ----------------------------------------------------

def reading_lines(facts) -> dict[str, tuple[int, int]]:
    """Memory reading name -> (input, line) of the log line it was read from."""
    out: dict[str, tuple[int, int]] = {}
    ms = _facts_milestones(facts)
    if ms:
        ranks = [m.rank for m in ms]
        pick = "TP0" if "TP0" in ranks else next((r for r in ranks if r and r.endswith("TP0")), ranks[0])
        mine = [m for m in ms if m.rank == pick] or ms
        for name, (phase, k) in STEP_READINGS.items():
            steps = [m for m in mine if m.data.get("phase") == phase]
            if len(steps) > k:
                out[name] = (steps[k].input, steps[k].line)
    events = _facts_events(facts)
    cap = next((e for e in events if e.kind == "capacity"), None)
    if cap is not None:
        out.update({name: (cap.input, cap.line) for name in CAPACITY_READINGS})
    ooms = _facts_ooms(facts)
    if ooms:
        out.update({name: (ooms[0].input, ooms[0].line) for name in OOM_READINGS})
    total = next((o for o in ooms if o.data.get("total_gib")), None)
    if total is not None:  # the GPU total the facts take from the first OOM message that prints one
        out["gpu_total_gib"] = (total.input, total.line)
    for name, ev in _facts_reading_events(facts).items():   # a figure read from a message: that message's line
        out[name] = (ev.input, ev.line)
    return out


def _flag_source(facts, flags: list[str]) -> tuple[str, tuple[int, int] | None]:
    """A flag's value: from the launch command (and its line), else from the server_args dump in the log."""
    cmd, event = _facts_launch(facts)
    if cmd is not None and any(f in cmd.flags for f in flags):
        return "launch-command", (event.input, event.line) if event is not None else None
    dump = _facts_server_args_event(facts)
    if dump is not None:
        return "log", (dump.input, dump.line)
    return "launch-command", None


def _smi_at(facts) -> tuple[int, int] | None:
    """Where an nvidia-smi snapshot shows a GPU's total memory, when the snapshot knows its input."""
    for snap in _facts_smi(facts):
        keys = list(getattr(snap, "context", {}) or {})
        g = next((g for g in snap.gpus if g.memory_total_mib), None)
        if keys and g is not None and g.line is not None:
            return keys[0][0], g.line
    return None


def memory_sources(finding: Finding, facts, readings: dict) -> None:
    """The budget's provenance (diag/memory/provenance.py) -> `memory.sources` per number, with the
    log lines it was read from; each budget item says its source the same way."""
    m = finding.memory
    prov = m.pop("provenance", None) if m else None
    if not m:
        return
    from .memory.provenance import ITEM_KEYS   # the memory model's package: only for a finding with a budget
    items = m.get("items") or []
    shown = {ITEM_KEYS.get(i.get("name")) for i in items}
    sources: dict[str, dict] = {}
    for key, p in (prov or {}).items():
        if key not in m and key not in shown:
            continue
        entry = {"source": p["source"]}
        at = [readings[r] for r in p.get("reads", []) if r in readings]
        if p["source"] == "launch-command" and p.get("flags"):
            entry["source"], where = _flag_source(facts, p["flags"])
            at = [where] if where else []
        elif p["source"] == "nvidia-smi" and (where := _smi_at(facts)):
            at = [where]
        if at:
            entry["at"] = [{"input": i, "line": n} for i, n in dict.fromkeys(at)]
        for k in ("reads", "from", "flags", "note"):
            if p.get(k):
                entry[k] = p[k]
        sources[key] = entry
    m["sources"] = sources
    for item in items:
        s = sources.get(ITEM_KEYS.get(item.get("name")))
        if s is None:
            item["source"] = INTERNAL_SOURCES.get(item.get("source"), "estimate")
            continue
        item["source"] = s["source"]
        for k in ("at", "from"):
            if s.get(k):
                item[k] = s[k]


# -- the timeline ---------------------------------------------------------------------------

def seconds(ts: str | None) -> float | None:
    """'2026-05-14 09:12:10(.123)' or nvidia-smi's '2025/03/21 04:44:07.665' -> epoch seconds (UTC)."""
    if not ts:
        return None
    try:
        t = datetime.datetime.fromisoformat(ts.strip().replace("/", "-").replace(",", "."))
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def _stamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def timeline(facts) -> dict:
    stamps = sorted(e.ts for e in _facts_events(facts) if e.ts)
    return {"first_timestamp": stamps[0] if stamps else None, "last_timestamp": stamps[-1] if stamps else None,
            "startup": startup(facts), "batches": batches(facts), "gpu_memory": gpu_memory(facts)}


def startup(facts) -> dict | None:
    """Start-up steps of one rank (TP0 where there is one), the serving span and the failure.

    Positions are on the axis: seconds since `start` (the first timestamp of the log) when
    every step has a timestamp, else log line numbers.
    """
    all_events = _facts_events(facts)
    ms = _facts_milestones(facts)
    events = [e for e in all_events if e.kind != "milestone"]
    ranks = [m.rank for m in ms]
    pick = "TP0" if "TP0" in ranks else (ranks[0] if ranks else None)
    mine = [m for m in ms if m.rank == pick]
    stamped = [seconds(e.ts) for e in all_events if e.ts]
    timed = bool(stamped) and None not in stamped and all(m.ts for m in mine)

    def at(e) -> float:
        return seconds(e.ts) if timed else float(e.line)

    marks: list[dict] = []
    for m in mine:
        phase = m.data.get("phase")
        if phase in SPANS:
            end_phase, label = SPANS[phase]
            end = next((n for n in mine if n.data.get("phase") == end_phase and n.line > m.line), None)
            if end is not None:
                marks.append({"kind": "span", "label": label, "phase": phase, "line": m.line, "start": at(m), "end": at(end)})
        elif phase in POINTS:
            marks.append({"kind": "point", "label": POINTS[phase], "phase": phase, "line": m.line, "start": at(m), "end": at(m)})
    if not marks:  # a failure alone is no timeline
        return None
    fail = _failure(facts, events, timed)
    up = next((m for m in ms if m.data.get("phase") in ("ready", "http_up") and (m.ts or not timed)), None)
    last = fail["start"] if fail else (max(stamped) if timed and stamped else None)
    if up is not None and last is not None and last > at(up):
        marks.append({"kind": "serving", "label": "serving", "phase": None, "line": up.line, "start": at(up), "end": last})
    if fail is not None:
        marks.append(fail)
    points = [v for i in marks for v in (i["start"], i["end"])]
    lo = min(stamped) if timed and stamped else min(points)
    hi = max(max(stamped) if timed and stamped else max(points), max(points))
    start = next((e.ts for e in all_events if e.ts and seconds(e.ts) == lo), None) if timed else None
    if timed:  # seconds since the first timestamp (exact: the differences of nearby floats)
        for i in marks:
            i["start"], i["end"] = i["start"] - lo, i["end"] - lo
        lo, hi = 0.0, hi - lo
    return {"rank": pick, "axis": "time" if timed else "line", "start": start, "range": [lo, hi], "marks": marks}


def _failure(facts, events, timed: bool) -> dict | None:
    line = _facts_failure_line(facts)
    if line is None:
        return None
    here = next((e for e in events if e.line == line), None)
    if here is None:
        return None
    when = float(here.line)
    if timed:
        stamped = [e for e in events if e.line <= line and e.ts]
        if not stamped:
            return None
        when = seconds((here if here.ts else stamped[-1]).ts)
    label = here.data.get("type") or {"oom": "out of memory", "signal": "signal"}.get(here.kind, "failure")
    return {"kind": "failure", "label": f"{label} (line {here.line})", "phase": None, "line": here.line,
            "start": when, "end": when}


def batches(facts) -> dict | None:
    """One rank's batch statistics in at most BUCKETS buckets of equal width on the axis.

    Per bucket: the mean position `x`, the number of batch lines, and min/max/last of running
    and queued requests, token usage, Mamba usage and decode throughput (its mean too, over
    decode lines only). The axis is seconds since the first batch line, or log line numbers.
    Computed by the series itself (diag/parse/batches.py: exact from the rows it keeps, or from
    its fine buckets for the longest logs), so a million lines stay cheap.
    """
    series = [b for b in _facts_batches(facts) if len(b)]
    if not series:
        return None
    b = next((s for s in series if s.rank in ("TP0", None)), max(series, key=len))
    t = b.timeline(BUCKETS)
    timed, lo, hi, span = t["timed"], t["lo"], t["hi"], t["span"]
    shift = lo if timed else 0.0
    failure_at = None
    line = _facts_failure_line(facts)
    if line is not None:
        here = next((e for e in _facts_events(facts) if e.line == line), None)
        when = (seconds(here.ts) if here is not None and here.ts else None) if timed else float(line)
        if when is not None and lo <= when <= hi + span * 0.05:
            failure_at = when - shift
    return {"rank": b.rank, "axis": "time" if timed else "line", "start": _stamp(lo) if timed else None,
            "lines": len(b), "first_line": b.first_line, "last_line": b.last_line,
            "range": [lo - shift, hi - shift], "failure_at": failure_at, "buckets": t["buckets"]}


def gpu_memory(facts) -> dict | None:
    """Memory used per GPU from looped nvidia-smi queries (seconds since the first sample, or sample numbers)."""
    samples = [s for snap in _facts_smi(facts) for s in snap.samples if s.memory_used_mib is not None]
    if len(samples) < 2:
        return None
    stamps = [seconds(s.timestamp) for s in samples]
    timed = all(t is not None for t in stamps)
    xs = stamps if timed else [float(i) for i in range(len(samples))]
    lo = min(xs)
    shift = lo if timed else 0.0
    rows = [{"gpu": s.gpu, "at": x - shift, "used_mib": s.memory_used_mib, "total_mib": s.memory_total_mib}
            for s, x in zip(samples, xs)]
    return {"axis": "time" if timed else "sample", "start": _stamp(lo) if timed else None, "count": len(samples),
            "range": [lo - shift, max(xs) - shift], "samples": _thin(rows)}


def _thin(rows: list[dict]) -> list[dict]:
    """At most MAX_SAMPLES rows: per GPU, the highest of each stretch of samples."""
    if len(rows) <= MAX_SAMPLES:
        return rows
    by_gpu: dict = {}
    for k, r in enumerate(rows):
        by_gpu.setdefault(r["gpu"], []).append((k, r))
    share = max(2, MAX_SAMPLES // len(by_gpu))
    kept: list[tuple[int, dict]] = []
    for seq in by_gpu.values():
        stretches: dict[int, tuple[int, dict]] = {}
        for j, (k, r) in enumerate(seq):
            s = j * share // len(seq)
            if s not in stretches or r["used_mib"] > stretches[s][1]["used_mib"]:
                stretches[s] = (k, r)
        kept += stretches.values()
    return [r for _, r in sorted(kept, key=lambda kr: kr[0])]
