"""What every view says about several servers, runs and ranks (the report's `servers`, `runs` and
`ranks`, filled by diag/fleet/servers.py): which one the diagnosis is of, what the others did, and
the first failing rank with its cascade folded into counts.

Read from the report alone (never from facts); the text is plain, each view escapes it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..report import Report

STATE = {"failed": "failed", "serving": "serving", "ready": "ready", "startup_incomplete": "start-up not finished",
         "no_failure_seen": "no failure seen", "empty": "empty", "nohup_only": "only nohup's message",
         "smi_only": "only nvidia-smi output", "not_sglang": "not an SGLang log", "unknown": "unknown"}
TRIGGER = {"start": "", "launch": "re-launched", "server_args": "a second server_args dump", "restart": "restarted",
           "timestamp": "time went back"}
ERROR_CHARS = 160


@dataclass(frozen=True)
class Row:
    """One server or one run."""
    chosen: bool        # the diagnosis is of this one
    label: str          # "run 2", "server 1 run 3", "server 2"
    where: str          # file names and lines
    ended: str          # how it ended, in words
    outcome: str        # the leading finding's category and rule, or "no failure found"
    error: str          # the first error line ("line 15: ..."), or ""
    failed: bool
    category: str = ""  # the leading finding's category and rule (for views that set them apart)
    rule: str = ""


def _name(report: Report, i: int) -> str:
    return os.path.basename(report.inputs[i].path) if 0 <= i < len(report.inputs) else f"input {i}"


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _outcome(item: dict) -> str:
    if item.get("category"):
        return f"{item['category']}" + (f" ({item['rule']})" if item.get("rule") else "")
    return "no failure found" if item.get("status") == "clean" else "nothing diagnosed"


def _error(report: Report, item: dict, several_inputs: bool) -> str:
    """'line 15: …' ('name.log:15: …' where the row spans several inputs)."""
    err = item.get("first_error")
    if not err:
        return ""
    where = f"{_name(report, err['input'])}:{err['line']}" if several_inputs else f"line {err['line']}"
    return f"{where}: {_clip(err.get('text') or '', ERROR_CHARS)}"


def _failed(item: dict) -> bool:
    return item.get("state") == "failed" or item.get("severity") in ("critical", "error")


def servers(report: Report) -> list[Row]:
    """One row per unrelated server given together (empty for one deployment)."""
    out = []
    for s in report.servers:
        names = ", ".join(_name(report, i) for i in s.get("inputs") or [])
        runs = s.get("runs") or 1
        out.append(Row(bool(s.get("chosen")), f"server {s['server'] + 1}", names + (f" ({runs} runs)" if runs > 1 else ""),
                       STATE.get(s.get("state"), s.get("state") or "?"), _outcome(s),
                       _error(report, s, len(s.get("inputs") or []) > 1), _failed(s), s.get("category") or "", s.get("rule") or ""))
    return out


def runs(report: Report) -> list[Row]:
    """One row per server run, when some input holds more than one (restarts); empty when every
    server is one run (the server rows say it all)."""
    if not report.runs or (report.servers and len(report.runs) <= len(report.servers)):
        return []
    several = len(report.inputs) > 1
    out = []
    for r in report.runs:
        label = (f"server {r['server'] + 1} run {r['run'] + 1}" if report.servers else f"run {r['run'] + 1}")
        parts = []
        for seg in r.get("inputs") or []:
            span = f"lines {seg['first_line']}–{seg['last_line']}"
            parts.append(f"{_name(report, seg['input'])} {span}" if several else span)
        how = TRIGGER.get(r.get("trigger") or "", "")
        where = ", ".join(parts) + (f", {how}" if how else "")
        out.append(Row(bool(r.get("chosen")), label, where, STATE.get(r.get("state"), r.get("state") or "?"), _outcome(r),
                       _error(report, r, len(r.get("inputs") or []) > 1), _failed(r), r.get("category") or "", r.get("rule") or ""))
    return out


def fold(rows: list[Row], limit: int) -> tuple[list[Row], str]:
    """At most `limit` rows (the chosen one and the failed ones first, then in order), and what the
    others came to in a few words ('33 more: 31 serving, 2 start-up not finished'; '' when all fit)."""
    shown = sorted(rows, key=lambda r: (not r.chosen, not r.failed))[:max(limit, 0)]
    shown.sort(key=rows.index)
    rest = [r for r in rows if r not in shown]
    if not rest:
        return shown, ""
    counts: dict[str, int] = {}
    for r in rest:
        what = f"{r.ended} ({r.category})" if r.category else r.ended
        counts[what] = counts.get(what, 0) + 1
    kinds = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{n} {what}" for what, n in kinds[:4]) + (", …" if len(kinds) > 4 else "")
    return shown, f"{len(rest)} more: {text}"


def summary(report: Report) -> str:
    """One sentence: how many servers / runs, which failed, which one the diagnosis is of."""
    bits = []
    if report.servers:
        rows = servers(report)
        failed = [r.label for r in rows if r.failed]
        chosen = next((r.label for r in rows if r.chosen), "")
        bits.append(f"{len(rows)} separate servers in the inputs" + (f", {len(failed)} failed" if failed else ", none failed")
                    + (f"; the diagnosis is of {chosen}" if chosen else ""))
    rows = runs(report)
    if rows:
        failed = [r.label for r in rows if r.failed]
        chosen = next((r.label for r in rows if r.chosen), "")
        what = f"{len(rows)} server runs (restarts) in the inputs"
        what += f": {', '.join(failed)} failed" if failed else ": none failed"
        others = [f"{r.label} {r.ended}" for r in rows if not r.failed]
        if others:
            what += f", {', '.join(others[:4])}" + (" …" if len(others) > 4 else "")
        bits.append(what + (f"; the diagnosis is of {chosen}" if chosen else ""))
    return ". ".join(bits)


@dataclass(frozen=True)
class FirstFailure:
    who: str             # "node0 TP8", or a line without a rank prefix
    when: str            # the timestamp, or ""
    where: str           # file name and line
    text: str            # the line, clipped
    cascade: int         # how many later failures were folded
    cascade_ranks: tuple[str, ...]
    kinds: str           # "3 timeouts, 1 watchdog": the cascade by kind
    basis: str           # "timestamps" | "line order"
    ranks: int           # ranks seen
    failed_ranks: int
    nodes: int
    span_s: float | None  # seconds from the first failure to the last one of the cascade

    def line(self) -> str:
        """'First failure: TP8 at 2026-… (c43.log line 46): torch.OutOfMemoryError …'"""
        when = f" at {self.when}" if self.when else ""
        return f"{self.who}{when} ({self.where}): {self.text}"

    def folded(self) -> str:
        """'then 3 later failures on TP0, TP6 over 601 s (2 exceptions, 1 signal) — its cascade'"""
        if not self.cascade:
            return "no later failure on another rank"
        ranks = ", ".join(self.cascade_ranks[:8]) + (" …" if len(self.cascade_ranks) > 8 else "")
        text = f"then {self.cascade} later failure{'s' if self.cascade != 1 else ''}" + (f" on {ranks}" if ranks else "")
        if self.span_s:
            text += f" over {self.span_s:,.0f} s"
        if self.kinds:
            text += f" ({self.kinds})"
        text += " — its cascade (timeouts, peers gone, watchdogs)"
        if self.basis != "timestamps":
            text += "; ordered by line: no timestamps"
        return text

    def scale(self) -> str:
        """'17 ranks on 2 nodes, 2 failed'"""
        bits = [f"{self.ranks} rank{'s' if self.ranks != 1 else ''}" + (f" on {self.nodes} nodes" if self.nodes > 1 else "")]
        if self.failed_ranks:
            bits.append(f"{self.failed_ranks} failed")
        return ", ".join(bits)


KIND_WORD = {"exception": "exception", "oom": "out-of-memory", "signal": "signal", "watchdog": "watchdog",
             "error": "error", "message": "message", "http": "HTTP error"}


def first_failure(report: Report, text_chars: int = 200) -> FirstFailure | None:
    rk = report.ranks
    if not rk or not rk.get("first"):
        return None
    f = rk["first"]
    who = " ".join(x for x in (f.get("node"), f.get("rank")) if x) or "a line without a rank prefix"
    cascade = rk.get("cascade") or []
    count = int(rk.get("cascade_count") or len(cascade))
    ranks = tuple(dict.fromkeys(c["rank"] for c in cascade if c.get("rank") and c["rank"] != f.get("rank")))
    by_kind: dict[str, int] = {}
    for c in cascade:
        by_kind[c.get("kind") or "failure"] = by_kind.get(c.get("kind") or "failure", 0) + 1
    kinds = ", ".join(f"{n} {KIND_WORD.get(k, k)}{'s' if n > 1 else ''}" for k, n in sorted(by_kind.items(), key=lambda x: -x[1]))
    if count > len(cascade):
        kinds += f"; {len(cascade)} of {count} listed" if kinds else ""
    spans = [c["after_s"] for c in cascade if isinstance(c.get("after_s"), (int, float))]
    nodes = {n for n in rk.get("nodes") or [] if n}
    if f.get("node"):
        nodes.add(f["node"])
    return FirstFailure(who=who, when=f.get("ts") or "", where=f"{_name(report, f['input'])} line {f['line']}",
                        text=_clip(f.get("text") or "", text_chars), cascade=count, cascade_ranks=ranks, kinds=kinds,
                        basis=rk.get("basis") or "line order", ranks=len(rk.get("ranks") or []),
                        failed_ranks=len(rk.get("failed_ranks") or []), nodes=len(nodes) or 1,
                        span_s=max(spans) if spans else None)
