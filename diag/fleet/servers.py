"""Inputs -> servers -> runs, and one diagnosis per run.

A server is one deployment: one log, or several logs that show one deployment (per-rank
files whose rank prefixes do not overlap, nodes of one multi-node launch), never two logs
whose model, time span or node identity disagree. Unrelated logs given together are separate
servers. Each server's input is split into runs (diag/fleet/runs.py); runs of the inputs of
one server are matched by time (or by order, without timestamps).

`plan(...)` says whether there is more than one unit to diagnose; `conclude(...)` diagnoses
each unit with the pipeline's own function and returns the report of the failing one, which
names the others in `runs` and `servers` (and the first failing rank in `ranks`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..parse.batches import ts_seconds
from ..report import SEVERITIES
from . import ranks as RK
from .runs import ParserView, Run, _last_line, split, view

TIME_SLACK_S = 600.0      # two logs whose spans are further apart than this are not one deployment
RUN_SLACK_S = 120.0       # runs of two ranks' files closer than this are one run


@dataclass
class Collected:
    """What the pipeline read: the log parsers, the snapshots and the explicit version lines,
    each with the input it came from (None: a standalone nvidia-smi input)."""
    parsers: list
    snapshots: list
    snapshot_owner: list
    explicit: list
    explicit_owner: list
    names: dict[int, str] = field(default_factory=dict)   # input index -> its name


@dataclass
class Unit:
    server: int
    run: int
    segments: list[Run]          # one per input of the server (a run may miss from an input)
    trigger: str = "start"


@dataclass
class Plan:
    servers: list[list[int]]     # input indices per server
    units: list[Unit]

    @property
    def single(self) -> bool:
        return len(self.units) <= 1


# -- planning -------------------------------------------------------------------------------

def plan(c: Collected) -> Plan:
    by_input = {p.input: p for p in c.parsers}
    runs = {i: split(p) for i, p in by_input.items()}
    servers = group_inputs(c.parsers)
    units: list[Unit] = []
    for s, members in enumerate(servers):
        for r, segs in enumerate(_match_runs([runs[i] for i in members], [by_input[i] for i in members])):
            trigger = segs[0].trigger if segs else "start"
            units.append(Unit(s, r, segs, trigger))
    return Plan(servers, units)


def features(p) -> dict:
    """What tells two logs apart: ranks, time span, model, node rank, the rendezvous address."""
    f = {"ranks": set(p.ranks), "t0": ts_seconds(p.first_ts), "t1": ts_seconds(p.last_ts),
         "model": None, "node_rank": None, "nnodes": None, "dist": None}
    for ev in p.events:
        if ev.kind == "server_args":
            d = ev.data.get("fields") or {}
            f["model"] = f["model"] or _s(d.get("model_path"))
            f["node_rank"] = f["node_rank"] if f["node_rank"] is not None else _s(d.get("node_rank"))
            f["nnodes"] = f["nnodes"] or _s(d.get("nnodes"))
            f["dist"] = f["dist"] or _s(d.get("dist_init_addr"))
        elif ev.kind == "launch":
            flags = _flags(ev.data.get("command") or "")
            f["model"] = f["model"] or flags.get("--model-path") or flags.get("--model")
            f["node_rank"] = f["node_rank"] if f["node_rank"] is not None else flags.get("--node-rank")
            f["nnodes"] = f["nnodes"] or flags.get("--nnodes")
            f["dist"] = f["dist"] or flags.get("--dist-init-addr")
    if f["nnodes"] in ("1", None):
        f["node_rank"] = f["node_rank"] if f["nnodes"] else None
    return f


def one_deployment(a: dict, b: dict) -> bool:
    """Two logs are one deployment when their ranks or node ranks say so and nothing disagrees."""
    if a["model"] and b["model"] and a["model"] != b["model"]:
        return False
    if a["dist"] and b["dist"] and a["dist"] != b["dist"]:
        return False
    times = [a["t0"], a["t1"], b["t0"], b["t1"]]
    if not any(math.isnan(t) for t in times):
        if a["t0"] > b["t1"] + TIME_SLACK_S or b["t0"] > a["t1"] + TIME_SLACK_S:
            return False
    nodes_differ = a["node_rank"] is not None and b["node_rank"] is not None and a["node_rank"] != b["node_rank"]
    if a["node_rank"] is not None and a["node_rank"] == b["node_rank"] and a["ranks"] == b["ranks"]:
        return False        # the same node and the same ranks twice: two replicas
    if nodes_differ:
        return True
    return bool(a["ranks"]) and bool(b["ranks"]) and not (a["ranks"] & b["ranks"])


def group_inputs(parsers: list) -> list[list[int]]:
    """Input indices grouped into servers (union of pairwise 'one deployment'), in input order."""
    idx = [p.input for p in parsers]
    feats = {p.input: features(p) for p in parsers}
    parent = {i: i for i in idx}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for x in range(len(idx)):
        for y in range(x + 1, len(idx)):
            if one_deployment(feats[idx[x]], feats[idx[y]]):
                parent[find(idx[y])] = find(idx[x])
    groups: dict[int, list[int]] = {}
    for i in idx:
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _match_runs(per_input: list[list[Run]], parsers: list) -> list[list[Run]]:
    """Runs of the inputs of one server matched into server runs: by time where every run has a
    timestamp, else by their order."""
    if len(per_input) == 1:
        return [[r] for r in per_input[0]]
    if all(len(r) == 1 for r in per_input):
        return [[r[0] for r in per_input]]
    spans = []
    for runs, p in zip(per_input, parsers):
        for r in runs:
            ts = [ts_seconds(e.ts) for e in p.events if e.ts and r.start <= e.line <= r.end]
            spans.append((min(ts) if ts else math.nan, max(ts) if ts else math.nan, r))
    if any(math.isnan(a) for a, _, _ in spans):
        n = max(len(r) for r in per_input)
        return [[runs[k] for runs in per_input if k < len(runs)] for k in range(n)]
    spans.sort(key=lambda s: s[0])
    out: list[list[Run]] = []
    end = -math.inf
    for a, b, r in spans:
        if out and a <= end + RUN_SLACK_S:
            out[-1].append(r)
            end = max(end, b)
        else:
            out.append([r])
            end = b
    return out


# -- concluding -------------------------------------------------------------------------------

def conclude(p: Plan, c: Collected, diagnose):
    """Diagnose every unit with `diagnose(parsers, snapshots, explicit) -> (report, facts)`;
    return the chosen unit's (report, facts) with `runs`, `servers` and `ranks` filled in. One
    unit (the usual case) is diagnosed on the parsers as they are."""
    if p.single:
        report, facts = diagnose(c.parsers, c.snapshots, c.explicit)
        inside = [(q.input, 1, 1 << 62) for q in c.parsers]
        return _refocus(report, facts, c, inside, c.parsers, c.snapshots, c.explicit, diagnose)
    by_input = {q.input: q for q in c.parsers}
    done = []
    for u in p.units:
        parsers = [_part(by_input[s.input], s) for s in u.segments]
        inside = [(s.input, s.start, s.end) for s in u.segments]
        snaps = [s for s, owner in zip(c.snapshots, c.snapshot_owner)
                 if owner is None or _within(inside, owner, getattr(s, "first_line", None))]
        explicit = [e for e, owner in zip(c.explicit, c.explicit_owner) if _within(inside, owner, e[0])]
        report, facts = diagnose(parsers, snaps, explicit)
        report, facts = _refocus(report, facts, c, inside, parsers, snaps, explicit, diagnose)
        done.append((u, report, facts, report.ranks))
    chosen = max(range(len(done)), key=lambda k: _weight(done[k][1], done[k][2], k))
    u, report, facts, ranks = done[chosen]
    report.runs = [_summary(x, r, f, rk, x is u) for x, r, f, rk in done]
    report.servers = _servers(p, done, chosen) if len(p.servers) > 1 else []
    return report, facts


def _refocus(report, facts, c: Collected, inside, parsers, snaps, explicit, diagnose):
    """Several ranks or inputs: name the first failing rank (`ranks`). When the leading finding
    rests only on what followed that failure (a peer's collective timeout, a watchdog, a sigquit),
    diagnose again without those events, so the root cause is the first failure's, and the rest
    is its cascade."""
    inputs = sorted({i for i, _, _ in inside})
    nodes = {}
    node_rank = facts.flag("--node-rank")
    if len(inputs) == 1 and node_rank is not None:
        nodes[inputs[0]] = f"node{node_rank}"
    names = {i: c.names.get(i, "") for i in inputs}
    ranks, first, later = RK.aligned(facts.events, names, nodes)
    report.ranks = ranks
    if first is None or first.cascade or not report.findings or not later:
        return report, facts
    top = report.findings[0]
    fa, fb = RK.span(first.event)
    triggers = [e for e in top.evidence if e.role == "trigger"] or top.evidence
    if any(e.input == first.input and fa <= e.line <= fb for e in triggers):
        return report, facts
    drop: dict[int, set[int]] = {}
    for f in later:
        if f.cascade:
            a, b = RK.span(f.event)
            drop.setdefault(f.input, set()).update(range(a, b + 1))
    for e in triggers:   # a line the rule matched that is no event of its own: a cascade by its words
        if e.line not in drop.get(e.input, ()):
            if not RK.cascade_text(e.text):
                return report, facts
            drop.setdefault(e.input, set()).add(e.line)
    parts = [view(q.source, q.run, drop.get(q.input)) if isinstance(q, ParserView)
             else view(q, Run(q.input, 1, _last_line(q)), drop.get(q.input)) for q in parsers]
    again, facts2 = diagnose(parts, snaps, explicit)
    if not again.findings:
        return report, facts
    again.ranks = ranks
    lead = again.findings[0]
    lead.confidence_notes = list(lead.confidence_notes) + [
        f"the first failure was {first.rank or 'a rank'} at {first.event.ts or 'line ' + str(first.event.line)}; "
        f"{len(later)} later failure(s) on other ranks are its cascade (see `ranks`) and were left out of the diagnosis"]
    return again, facts2


def _part(parser, seg: Run):
    whole = seg.start <= 1 and seg.end >= max(parser.lines, max(parser.context, default=0))
    return parser if whole else view(parser, seg)


def _within(inside: list[tuple[int, int, int]], owner: int | None, line: int | None) -> bool:
    if owner is None:
        return False
    for i, a, b in inside:
        if i == owner and (line is None or a <= line <= b):
            return True
    return False


def _top(report):
    return report.findings[0] if report.findings else None


def _weight(report, facts, order: int):
    """The unit whose diagnosis leads: a server or run that failed over one that did not (a run
    whose start-up was cut off by a restart, a serving replica); then the most severe root cause;
    then the earliest (a root cause comes before what it causes)."""
    top = _top(report)
    sev = SEVERITIES.index(top.severity) + 1 if top else 0
    failed = 1 if facts.state == "failed" else 0
    return (failed, sev, top.confidence if top else 0.0, -order)


def first_error(facts, ranks: dict | None) -> dict | None:
    if ranks and ranks.get("first"):
        f = ranks["first"]
        return {"input": f["input"], "line": f["line"], "text": f["text"]}
    fails = RK.failures(facts.events)
    first, _ = RK.first_failure(fails)
    if first is None:
        return None
    return {"input": first.input, "line": first.event.line, "text": RK._text(first.event)}


def _summary(u: Unit, report, facts, ranks, chosen: bool) -> dict:
    out = {"server": u.server, "run": u.run, "trigger": u.trigger,
           "inputs": [{"input": s.input, "first_line": s.start, "last_line": s.end} for s in u.segments]}
    out.update(outcome(report, facts, ranks))
    out["chosen"] = chosen
    return out


def outcome(report, facts, ranks=None) -> dict:
    """What one run came to: status, state, the leading finding, the first error line, and the
    model, GPU, version and key number it ran with (the row `diag scan` writes)."""
    top = _top(report)
    key, value = key_number(report, facts)
    gpu = getattr(facts.gpu, "name", None) or next((g.get("name") for g in facts.gpus if g.get("name")), None)
    if gpu is None and facts.gpu_total_gib:
        gpu = f"{facts.gpu_total_gib:.2f} GiB GPU"
    version = facts.version.exact or (facts.version.describe() if facts.version.describe() != "unknown" else None)
    return {"status": report.status, "state": facts.state,
            "category": top.category if top else None, "rule": top.rule if top else None,
            "severity": top.severity if top else None, "confidence": round(top.confidence, 2) if top else None,
            "first_error": first_error(facts, ranks), "model": facts.model_path or facts.architecture,
            "gpu": gpu, "sglang_version": version, "key": {"name": key, "value": value} if key else None}


def key_number(report, facts) -> tuple[str | None, float | None]:
    """The one number that says most about a run: the allocation that failed, the memory left
    over by the budget, the KV pool's size, the watchdog's timeout, the last token usage."""
    if facts.ooms and facts.ooms[0].event.data.get("tried_gib") is not None:
        return "oom_tried_gib", round(facts.ooms[0].event.data["tried_gib"], 3)
    top = _top(report)
    if top and isinstance(top.memory.get("headroom_gib"), (int, float)):
        return "headroom_gib", round(top.memory["headroom_gib"], 3)
    if facts.readings.get("max_total_num_tokens") is not None:
        return "kv_tokens", float(facts.readings["max_total_num_tokens"])
    if facts.readings.get("kv_tokens") is not None:
        return "kv_tokens", float(facts.readings["kv_tokens"])
    wd = next((e for e in facts.events if e.kind == "watchdog" and e.data.get("timeout_s") is not None), None)
    if wd is not None:
        return "watchdog_timeout_s", wd.data["timeout_s"]
    b = next((s for s in reversed(facts.batches) if len(s)), None)
    if b is not None and b.usage[-1] == b.usage[-1]:
        return "token_usage", round(b.usage[-1], 3)
    return None, None


def _servers(p: Plan, done: list, chosen: int) -> list[dict]:
    out = []
    for s, members in enumerate(p.servers):
        mine = [k for k, d in enumerate(done) if d[0].server == s]
        lead = max(mine, key=lambda k: _weight(done[k][1], done[k][2], k))
        u, report, facts, ranks = done[lead]
        top = _top(report)
        out.append({"server": s, "inputs": members, "runs": len(mine), "status": report.status, "state": facts.state,
                    "category": top.category if top else None, "rule": top.rule if top else None,
                    "severity": top.severity if top else None, "first_error": first_error(facts, ranks),
                    "chosen": done[chosen][0].server == s})
    return out


def _s(v) -> str | None:
    return None if v is None or v == "" else str(v)


def _flags(command: str) -> dict[str, str]:
    from ..launch import split_command
    words = split_command(command)
    out: dict[str, str] = {}
    for k, w in enumerate(words):
        if w.startswith("--"):
            name, eq, value = w.partition("=")
            if eq:
                out[name] = value
            elif k + 1 < len(words) and not words[k + 1].startswith("--"):
                out[name] = words[k + 1]
    return out
