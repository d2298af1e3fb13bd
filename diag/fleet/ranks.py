"""The logs of one deployment (per-rank files, or one file with interleaved TP/DP/PP/EP
prefixes, several nodes) aligned on time: which rank failed first, and when, and which of the
later failures are its cascade (collective timeouts, "other ranks did not finish", watchdog
kills, health-check failures, schedulers that died because a peer died).

An event's time is its own timestamp, else that of the nearest earlier stamped event of the
same input (a traceback line carries none; its header does). With no timestamp in an input, the
inputs are ordered by line only and the answer says so (`basis: "line order"`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .. import rx
from ..parse.batches import ts_seconds
from ..parse.cascade import cascade_text  # noqa: F401  (the parser package reads the log's words; servers.py uses it too)

CASCADE_SIGNALS = ("sigquit", "scheduler_dead", "exit_code", "killed")
FAILURE_KINDS = ("exception", "oom", "signal", "watchdog", "error", "argparse")
FILE_RANK = rx.compile(r"(?:^|[^a-zA-Z])(?:rank|tp|worker)[-_]?(\d{1,4})(?:[^\d]|$)", rx.IGNORECASE)
FILE_NODE = rx.compile(r"(?:^|[^a-zA-Z])(?:node|host)[-_]?(\d{1,4})(?:[^\d]|$)", rx.IGNORECASE)
CASCADE_KEEP = 20


@dataclass
class Failure:
    event: object
    input: int
    rank: str | None
    node: str | None
    t: float            # seconds since the epoch; nan without a timestamp
    cascade: bool

    def to_json(self, first_t: float | None = None) -> dict:
        ev = self.event
        out = {"rank": self.rank, "node": self.node, "input": self.input, "line": ev.line, "ts": ev.ts or _iso(self.t),
               "kind": ev.kind, "text": _text(ev)}
        if first_t is not None and not math.isnan(self.t) and not math.isnan(first_t):
            out["after_s"] = round(self.t - first_t, 3)
        return out


def is_failure(ev) -> bool:
    if ev.kind not in FAILURE_KINDS:
        return False
    if ev.kind == "exception":   # a typed exception, or a traceback cut before its exception line
        return bool(ev.data.get("type")) or bool(ev.data.get("has_traceback") and ev.data.get("frames"))
    if ev.kind == "error":
        return ev.data.get("source") != "traceback-header"
    if ev.kind == "argparse":
        return not ev.data.get("usage")
    if ev.kind == "watchdog":
        return ev.data.get("pyspy") is None
    return True


def is_cascade(ev) -> bool:
    if ev.kind == "watchdog":
        return True
    if ev.kind == "signal":
        return ev.data.get("signal") in CASCADE_SIGNALS
    if ev.kind == "oom" or ev.data.get("oom"):
        return False
    return cascade_text(_text(ev, 600))




def file_hints(name: str) -> tuple[str | None, str | None]:
    """(rank, node) a file name gives: rank3.log, tp-5.err, node1/worker_2.log."""
    base = os.path.basename(name)
    rank = FILE_RANK.search(base)
    node = FILE_NODE.search(name.replace("\\", "/"))
    return (f"rank{rank[1]}" if rank else None), (f"node{node[1]}" if node else None)


def failures(events: list, names: dict[int, str] | None = None, nodes: dict[int, str] | None = None) -> list[Failure]:
    """Every failure event with its time (inherited from the nearest earlier stamp of its input)."""
    names, nodes = names or {}, nodes or {}
    out: list[Failure] = []
    last_t: dict[int, float] = {}
    for ev in sorted(events, key=lambda e: (e.input, e.line)):
        t = ts_seconds(ev.ts) if ev.ts else math.nan
        if math.isnan(t):
            t = last_t.get(ev.input, math.nan)
        else:
            last_t[ev.input] = t
        if not is_failure(ev):
            continue
        hint_rank, hint_node = file_hints(names.get(ev.input, ""))
        out.append(Failure(ev, ev.input, ev.rank or hint_rank, nodes.get(ev.input) or hint_node, t, is_cascade(ev)))
    return out


def first_failure(fails: list[Failure]) -> tuple[Failure | None, str]:
    """The first failure that is not a cascade (the first cascade when all are), and the basis."""
    if not fails:
        return None, "none"
    timed = all(not math.isnan(f.t) for f in fails)
    basis = "timestamps" if timed else "line order"

    def key(f: Failure):
        return (f.t if timed else 0.0, f.input if not timed else 0, f.event.line)

    ordered = sorted(fails, key=key)
    primary = [f for f in ordered if not f.cascade]
    return (primary[0] if primary else ordered[0]), basis


def align(events: list, names: dict[int, str] | None = None, nodes: dict[int, str] | None = None) -> dict | None:
    """The `ranks` part of a report: the first failure, its cascade, the ranks and nodes seen.
    None when the events show fewer than two ranks or inputs."""
    return aligned(events, names, nodes)[0]


def span(ev) -> tuple[int, int]:
    """The lines an event covers: a traceback from its first line to its exception line."""
    return (ev.data.get("tb_start") or ev.line, max(ev.end_line or ev.line, ev.line))


def aligned(events: list, names: dict[int, str] | None = None, nodes: dict[int, str] | None = None):
    """(the `ranks` dict or None, the first Failure, the Failures that followed it)."""
    ranks_seen = sorted({e.rank for e in events if e.rank}, key=_rank_key)
    inputs = sorted({e.input for e in events})
    if len(ranks_seen) < 2 and len(inputs) < 2:
        return None, None, []
    fails = failures(events, names, nodes)
    first, basis = first_failure(fails)
    if first is None:
        return ({"first": None, "basis": basis, "cascade": [], "cascade_count": 0, "ranks": ranks_seen,
                 "failed_ranks": [], "nodes": sorted({n for n in (nodes or {}).values() if n})}, None, [])
    later = [f for f in fails if f is not first and (basis == "line order" or math.isnan(first.t) or f.t >= first.t - 1e-6)]
    later.sort(key=lambda f: (0 if math.isnan(f.t) else f.t, f.input, f.event.line))
    # one entry per rank and kind of message: forty ranks timing out say it forty times
    seen, cascade = set(), []
    for f in later:
        k = (f.rank, f.input, f.event.kind, _shape(_text(f.event, 120)))
        if k in seen:
            continue
        seen.add(k)
        cascade.append(f)
    failed = sorted({f.rank for f in fails if f.rank}, key=_rank_key)
    node_set = sorted({f.node for f in fails if f.node} | {n for n in (nodes or {}).values() if n})
    return ({"first": first.to_json(), "basis": basis,
             "cascade": [f.to_json(first.t) for f in cascade[:CASCADE_KEEP]], "cascade_count": len(cascade),
             "ranks": ranks_seen, "failed_ranks": failed, "nodes": node_set}, first, later)


def _text(ev, cut: int = 300) -> str:
    if ev.kind == "exception" and ev.data.get("type"):
        msg = " ".join((ev.data.get("message") or "").split())
        text = f"{ev.data['type']}: {msg}" if msg else ev.data["type"]
    else:
        text = ev.text.strip()
    return text[:cut]


SHAPE = rx.compile(r"\d+(?:\.\d+)?|0x[0-9a-fA-F]+")


def _shape(text: str) -> str:
    return SHAPE.sub("#", text)


def _rank_key(rank: str):
    out, num = [], ""
    for c in (rank or ""):
        if c.isdigit():
            num += c
            continue
        if num:
            out.append(int(num))
            num = ""
        out.append(c)
    if num:
        out.append(int(num))
    return [(0, p) if isinstance(p, int) else (1, p) for p in out]


def _iso(t: float) -> str | None:
    if math.isnan(t):
        return None
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
