"""One input's line stream -> the server runs it holds (a restart, a re-launch appended to the
same file, `kubectl logs --previous` followed by the current log, `docker logs` after a restart).

The boundaries come from what the parser already emits, never from log text:

- a launch command line (`python -m sglang.launch_server …`) or a `server_args=` dump after
  the run so far has shown anything of a server (its own dump, start-up steps, batches, a
  failure); a launch line repeated with nothing between (a paste that shows the command
  twice) stays one run;
- a rank that starts again: `Init torch distributed begin` a second time for the same rank,
  or `Load weight begin` again for the same rank after the run failed (a second load in a
  healthy run is a draft model's);
- any start-up step after the processes were seen to end (`Killed`, a segfault, `Exit code:`);
- a timestamp that goes back more than BACKWARDS_S against the run so far (a second log
  appended after the first).

`split(parser)` returns the runs as line ranges; `view(parser, run)` a parser-shaped view of one
run's events, batches and context, which facts.build reads as it reads a whole input.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from ..parse.batches import BatchSeries, ts_seconds

BACKWARDS_S = 300.0
# the processes are gone: what a shell or the launcher prints when the server exited
PROCESS_END = ("killed", "segfault", "sigbus", "abort", "exit_code")
START_PHASES = ("dist_begin", "load_begin")


@dataclass
class Run:
    input: int
    start: int                 # first line of the run (1-based, as the input numbers them)
    end: int                   # last line
    trigger: str = "start"     # why a run begins here: start | launch | server_args | restart | timestamp

    def to_json(self) -> dict:
        return {"input": self.input, "first_line": self.start, "last_line": self.end, "trigger": self.trigger}


def terminal(ev) -> bool:
    """An event that ends a server run: a typed exception, a device OOM, a signal, argparse's
    error, a watchdog timeout, SGLang's 'Initialization failed'."""
    k = ev.kind
    if k in ("oom", "signal", "watchdog"):
        return k != "watchdog" or ev.data.get("pyspy") is None
    if k == "exception":
        return bool(ev.data.get("type"))
    if k == "argparse":
        return not ev.data.get("usage")
    return k == "error" and ev.data.get("source") == "init_failed"


@dataclass
class _State:
    start: int
    trigger: str
    substance: bool = False      # anything of a server: dump, start-up step, batch, failure
    server_args: bool = False
    ended: bool = False          # a terminal event was seen
    process_end: bool = False    # the processes were seen to end
    started: dict = field(default_factory=dict)   # (rank, phase) -> count
    max_ts: float = -math.inf


def split(parser, total_lines: int | None = None) -> list[Run]:
    """The runs of one parsed input, in order; one run (the whole input) when nothing restarts."""
    last = total_lines or _last_line(parser)
    batch_lines = parser.batches.line
    runs: list[Run] = []
    st = _State(start=1, trigger="start")

    def has_batches(upto: int) -> bool:
        i = bisect_left(batch_lines, st.start)
        return i < len(batch_lines) and batch_lines[i] < upto

    def begin(line: int, trigger: str) -> None:
        nonlocal st
        if line <= st.start:
            return
        runs.append(Run(parser.input, st.start, line - 1, st.trigger))
        st = _State(start=line, trigger=trigger)

    for ev in parser.events:
        k = ev.kind
        t = ts_seconds(ev.ts) if ev.ts else math.nan
        substance = st.substance or has_batches(ev.line)
        if not math.isnan(t):
            if substance and t < st.max_ts - BACKWARDS_S:
                begin(ev.line, "timestamp")
                substance = False
            st.max_ts = max(st.max_ts, t)
        if k == "launch":
            if substance:
                begin(ev.line, "launch")
            continue
        if k == "server_args":
            if substance:
                begin(ev.line, "server_args")
            st.server_args = st.substance = True
        elif k == "milestone" and ev.data.get("phase") in START_PHASES:
            key = (ev.rank or "", ev.data["phase"])
            again = st.started.get(key, 0) > 0
            if st.process_end or (again and (ev.data["phase"] == "dist_begin" or st.ended)):
                begin(ev.line, "restart")
                key_count = 0
            else:
                key_count = st.started.get(key, 0)
            st.started[key] = key_count + 1
            st.substance = True
        elif k in ("milestone", "capacity"):
            st.substance = True
        if terminal(ev):
            st.ended = st.substance = True
            if k == "signal" and ev.data.get("signal") in PROCESS_END:
                st.process_end = True
    runs.append(Run(parser.input, st.start, max(last, st.start), st.trigger))
    return _merge_empty(runs, parser)


def _merge_empty(runs: list[Run], parser) -> list[Run]:
    """A later 'run' that shows nothing of a server (a launch command quoted after the error in an
    issue, a timestamp that goes back across a '...' cut) belongs to the run before it."""
    if len(runs) == 1:
        return runs
    own = [False] * len(runs)
    starts = [r.start for r in runs]
    for ev in parser.events:
        if ev.kind in ("server_args", "milestone", "capacity") or terminal(ev):
            own[bisect_right(starts, ev.line) - 1] = True
    lines = parser.batches.line
    for k, r in enumerate(runs):
        j = bisect_left(lines, r.start)
        own[k] = own[k] or (j < len(lines) and lines[j] <= r.end)
    out = [runs[0]]
    for r, has in zip(runs[1:], own[1:]):
        if has:
            out.append(r)
        else:
            out[-1] = Run(out[-1].input, out[-1].start, r.end, out[-1].trigger)
    return out


def _last_line(parser) -> int:
    candidates = [max(parser.context, default=0), parser.lines]
    if parser.events:
        candidates.append(max(e.end_line or e.line for e in parser.events))
    if len(parser.batches):
        candidates.append(parser.batches.line[-1])
    return max(candidates)


class ParserView:
    """The part of a parsed input between two lines, shaped like a LogParser for facts.build."""

    def __init__(self, parser, run: Run, drop: set[int] | None = None):
        a, b = run.start, run.end
        drop = drop or set()
        self.input = parser.input
        self.run = run
        self.source = parser
        self.events = [e for e in parser.events if a <= e.line <= b and e.line not in drop]
        self.tracebacks = [t for t in getattr(parser, "tracebacks", []) if a <= t.start <= b]
        self.batches = _batch_slice(parser.batches, a, b)
        self.context = {n: t for n, t in parser.context.items() if a <= n <= b}
        self.lines = b - a + 1
        # non-blank lines are not counted per line by the parser: the kept lines tell which are blank
        blank = sum(1 for t in self.context.values() if not t.strip())
        self.content_lines = max(0, min(parser.content_lines, self.lines - blank))
        self.prefixed_lines = sum(1 for e in self.events if e.ts or e.rank) + len(self.batches)
        self.http = _http_slice(parser, self.events, a, b)
        self.ranks = {e.rank for e in self.events if e.rank}
        stamped = [e.ts for e in self.events if e.ts]
        self.first_ts = stamped[0] if stamped else None
        self.last_ts = stamped[-1] if stamped else None
        fb = getattr(parser, "first_batch", None)
        if fb and a <= fb[0] <= b:
            self.first_batch = fb
        elif len(self.batches):
            n = self.batches.line[0]
            self.first_batch = (n, _message(self.context.get(n, "")))
        else:
            self.first_batch = None
        last = max((n for n, t in self.context.items() if t.strip()), default=None)
        self.last_line_text = parser.last_line_text if b >= _last_line(parser) else (self.context.get(last, "") if last else "")


def view(parser, run: Run, drop: set[int] | None = None) -> ParserView:
    """One run of a parsed input; `drop`: lines whose events are left out (a cascade folded away)."""
    return ParserView(parser, run, drop)


def _message(text: str) -> str:
    """The message of a kept batch line, after its '[time rank] ' prefix."""
    if text.startswith("[") and "] " in text:
        return text.split("] ", 1)[1]
    return text


def _batch_slice(b: BatchSeries, first: int, last: int) -> BatchSeries:
    return b.between(first, last)   # the rows kept in full (diag/parse/batches.py)


def _http_slice(parser, events: list, first: int, last: int) -> dict:
    """Access lines are counted, not kept: a run gets its error lines, and the successes when the
    last access line falls in it (the counts before it are not known per run)."""
    errors = sum(1 for e in events if e.kind == "http")
    total = parser.http.get("count", 0) or 0
    last_line = parser.http.get("last_line")
    count = errors + (total - (parser.http.get("errors", 0) or 0) if last_line and first <= last_line <= last else 0)
    return {"count": count, "errors": errors, "last_line": last_line if last_line and first <= last_line <= last else None}
