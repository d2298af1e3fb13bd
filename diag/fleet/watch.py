"""`diag watch server.log`: a live log followed, findings printed the moment their signature
completes, early warnings from the batch lines.

- Following (`Follower`) is rotation- and truncation-safe: the file is polled every
  `interval` seconds; a new file at the path (logrotate's rename, a restarted pod's new log)
  is opened from its start after the old one is read to its end; a file that got shorter
  (copytruncate, `: > server.log`) is read again from its start. A path that does not exist
  yet is waited for.
- Lines go to the SGLang parser as they arrive. A failure's signature completes when its
  traceback or message has ended (the next record began) or when no line came for `settle`
  seconds; then the current run's lines are diagnosed by the pipeline and each finding not
  reported yet is printed. A restart (diag/fleet/runs.py) starts a new run.
- Early warnings from the batch lines: the KV pool near full while requests are retracted,
  the queue growing, generation throughput collapsing, running requests stuck (no batch line
  for `stuck_after` seconds while requests were running).
"""
from __future__ import annotations

import datetime
import math
from bisect import bisect_left
from collections import deque
import os
import tempfile
import time
from dataclasses import dataclass, field

from .ranks import is_failure
from .runs import split

CHUNK = 1 << 20
WINDOW_ROWS = 4096   # the last batch rows the warnings read (60 s of a log that prints 68 a second)


# -- following a file -------------------------------------------------------------------------

class Follower:
    """Complete lines appended to a path, across rotation and truncation."""

    def __init__(self, path: str, from_end: bool = False):
        self.path = path
        self.from_end = from_end
        self._f = None
        self._id: tuple[int, int] | None = None
        self._pos = 0
        self._partial = b""
        self._head = b""               # the file's first bytes: a file rewritten in place changes them
        self.notes: list[str] = []     # 'rotated' / 'truncated' / 'opened', since the last read

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")
        except OSError:
            return False
        st = os.fstat(f.fileno())
        self._f, self._id = f, (st.st_dev, st.st_ino)
        self._pos = st.st_size if self.from_end else 0
        self.from_end = False          # a later file (after rotation) is read from its start
        f.seek(self._pos)
        self._head = os.pread(f.fileno(), 64, 0)
        self.notes.append("opened")
        return True

    def read(self) -> list[str]:
        if self._f is None and not self._open():
            return []
        lines = self._drain()
        try:
            st = os.stat(self.path)
            now = (st.st_dev, st.st_ino)
        except OSError:
            now = None                 # moved away, not replaced yet: keep the old one
        if now is not None and now != self._id:
            lines += self._drain()     # the rest of the rotated file, then the new one
            lines += self._flush_partial()
            self._f.close()
            self._f = None
            self.notes.append("rotated")
            if self._open():
                lines += self._drain()
        return lines

    def _drain(self) -> list[str]:
        f = self._f
        size = os.fstat(f.fileno()).st_size
        head = os.pread(f.fileno(), 64, 0)
        k = min(len(head), len(self._head))
        if size < self._pos or head[:k] != self._head[:k]:
            # truncated in place (copytruncate), perhaps written again past where we were
            self.notes.append("truncated")
            self._partial = b""
            self._pos = 0
            f.seek(0)
            self._head = os.pread(f.fileno(), 64, 0)
        elif len(head) > len(self._head):
            self._head = head
        out: list[str] = []
        while True:
            data = f.read(CHUNK)
            if not data:
                break
            self._pos += len(data)
            data = self._partial + data
            parts = data.split(b"\n")
            self._partial = parts.pop()
            out.extend(p.rstrip(b"\r").decode("utf-8", "replace") for p in parts)
        return out

    def _flush_partial(self) -> list[str]:
        if not self._partial:
            return []
        line, self._partial = self._partial.decode("utf-8", "replace"), b""
        return [line]

    def flush(self) -> list[str]:
        """The last line, when it has waited long enough without its newline."""
        return self._flush_partial()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


# -- watching -------------------------------------------------------------------------------

@dataclass
class Thresholds:
    kv_usage: float = 0.92          # token usage at or above this, with retractions: warn
    queue_growth: float = 20        # queue grew by at least this many requests over the window ...
    queue_factor: float = 2.0       # ... and to at least this many times its size
    throughput_drop: float = 0.25   # recent throughput under this share of the window's peak
    window_s: float = 60.0          # the window the batch statistics are read over
    stuck_after: float = 120.0      # no batch line for this long while requests were running


@dataclass
class Note:
    """One thing watch says: a finding, an early warning, or what happened to the log."""
    type: str                       # finding | warning | run | ready | rotated | truncated | opened
    line: int | None
    message: str
    severity: str = "info"
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"type": self.type, "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "line": self.line, "severity": self.severity, "message": self.message}
        out.update(self.data)
        return out


class Watcher:
    """Feed lines (`feed`), ask what is new (`tick`); a run's lines are spooled to a temp file
    that the pipeline reads when a failure completes."""

    def __init__(self, thresholds: Thresholds | None = None, settle: float = 1.0, sglang_version: str | None = None,
                 clock=time.monotonic):
        from ..clean import Cleaner  # noqa: F401  (import cost paid once, before the first line)
        self.t = thresholds or Thresholds()
        self.settle = settle
        self.sglang_version = sglang_version
        self.clock = clock
        self.line = 0                    # lines seen since the watch began
        self.run_start = 1               # the stream line the current run starts at
        self.run = 0
        self._spool = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._new_parser()
        self._pending_since: float | None = None
        self._last_line_at = clock()
        self._reported: set[tuple] = set()
        self._armed: dict[str, bool] = {}
        # when each of the last batch lines came, for logs without timestamps (aligned with
        # the series' last rows: one per row the parser added)
        self._arrival: deque[float] = deque(maxlen=WINDOW_ROWS)
        self._ready = False
        self._candidate = 0
        self.findings: list[Note] = []

    def _new_parser(self):
        from ..parse.sglang import LogParser
        self.parser = LogParser(0)
        self._seen_events = 0

    def close(self) -> None:
        self._spool.close()

    # -- lines in -----------------------------------------------------------------------------
    def feed(self, lines: list[str]) -> list[Note]:
        notes: list[Note] = []
        now = self.clock()
        for text in lines:
            self.line += 1
            self._spool.write(text + "\n")
            n_batches = len(self.parser.batches)
            self.parser.feed(self.line - self.run_start + 1, text)
            if len(self.parser.batches) > n_batches:
                self._arrival.append(now)
            notes += self._events()
        if lines:
            self._last_line_at = now
            notes += self._batch_warnings()
        return notes

    def _events(self) -> list[Note]:
        notes = []
        evs = self.parser.events[self._seen_events:]
        self._seen_events = len(self.parser.events)
        for ev in evs:
            if ev.kind in ("launch", "server_args") or (ev.kind == "milestone" and ev.data.get("phase") in ("dist_begin", "load_begin")):
                self._candidate = 50           # a run may start here: look again at the next events
            if self._candidate > 0:
                self._candidate -= 1
                notes += self._maybe_restart()
                if self._seen_events == 0:   # a new run was started: its events are being read again
                    self._candidate = 0
                    return notes + self._events()
            if ev.kind == "milestone" and ev.data.get("phase") == "ready" and not self._ready:
                self._ready = True
                notes.append(Note("ready", self._stream_line(ev.line), "the server is ready (fired up and ready to roll)"))
            if is_failure(ev) and self._pending_since is None:
                self._pending_since = self.clock()
        return notes

    def _maybe_restart(self) -> list[Note]:
        runs = split(self.parser)
        if len(runs) < 2:
            return []
        start = runs[-1].start                     # in run-relative lines
        self._spool.seek(0)
        kept = self._spool.readlines()[start - 1:]
        self._spool.seek(0)
        self._spool.truncate()
        self._spool.writelines(kept)
        self.run_start += start - 1
        self.run += 1
        self._new_parser()
        self._arrival = deque(maxlen=WINDOW_ROWS)
        self._pending_since = None
        self._ready = False
        self._armed = {}
        now = self.clock()
        for k, text in enumerate(kept, 1):
            n_batches = len(self.parser.batches)
            self.parser.feed(k, text.rstrip("\n"))
            if len(self.parser.batches) > n_batches:
                self._arrival.append(now)
        return [Note("run", self.run_start, f"a new server run starts at line {self.run_start} (a restart)", data={"run": self.run})]

    def _stream_line(self, run_line: int | None) -> int | None:
        return None if run_line is None else run_line + self.run_start - 1

    # -- what is new ---------------------------------------------------------------------------
    def tick(self, final: bool = False) -> list[Note]:
        """Findings whose signature has completed, and the stuck-requests warning."""
        notes = self._stuck()
        if final:   # the end of what will be read: a traceback cut at the end is closed
            self.parser.finish()
            notes += self._events()
        if self._pending_since is None:
            return notes
        quiet = self.clock() - self._last_line_at >= self.settle
        closed = not self.parser.record_open   # the next record has begun
        if not (final or quiet or closed):
            return notes
        self._pending_since = None
        return notes + self._diagnose()

    def _diagnose(self) -> list[Note]:
        from ..analyze import Options, analyze
        self._spool.flush()
        self._spool.seek(0, os.SEEK_END)
        path = None
        try:
            fd, path = tempfile.mkstemp(prefix="diag-watch-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                self._spool.seek(0)
                while chunk := self._spool.read(CHUNK):
                    out.write(chunk)
            report = analyze([path], None, Options(sglang_version=self.sglang_version))
        finally:
            self._spool.seek(0, os.SEEK_END)
            if path:
                os.unlink(path)
        notes = []
        for f in report.findings:
            trig = next((e for e in f.evidence if e.role == "trigger"), f.evidence[0] if f.evidence else None)
            key = (self.run, f.rule, trig.line if trig else None)
            if key in self._reported or (self.run, f.rule) in self._reported:
                continue
            self._reported.add(key)
            self._reported.add((self.run, f.rule))
            data = f.to_json()
            for e in data["evidence"]:
                e["line"] = self._stream_line(e["line"])
                e.pop("context", None)
            data.pop("memory", None)
            note = Note("finding", self._stream_line(trig.line) if trig else None, f.title, f.severity,
                        {"finding": data, "run": self.run})
            notes.append(note)
            self.findings.append(note)
        return notes

    # -- early warnings ------------------------------------------------------------------------
    def _window(self):
        """The last batch rows (at most WINDOW_ROWS, column by column) and their times: the log's
        timestamps, or when the lines came."""
        w = self.parser.batches.tail(WINDOW_ROWS)
        ts = w["ts"]
        if len(ts) and not math.isnan(ts[-1]) and not math.isnan(ts[0]):
            return w, ts
        return w, list(self._arrival)[len(self._arrival) - len(ts):] if len(ts) else []

    def _warn(self, name: str, active: bool, line: int | None, message: str, data: dict) -> list[Note]:
        if not active:
            self._armed[name] = False
            return []
        if self._armed.get(name):
            return []
        self._armed[name] = True
        return [Note("warning", line, message, "warning", {"warning": name, "run": self.run, **data})]

    def _batch_warnings(self) -> list[Note]:
        if not len(self.parser.batches):
            return []
        b, times = self._window()
        n = len(b["line"])
        if n == 0 or len(times) != n:
            return []
        now = times[-1]
        first = min(bisect_left(times, now - self.t.window_s), n - 1)
        line = self._stream_line(b["line"][-1])
        notes = []
        # the KV pool near full while requests are being retracted
        usage = b["usage"][-1]
        retracts = [e for e in self.parser.events.of_kind("retract") if e.line >= b["line"][first]]
        notes += self._warn("kv_pressure", usage == usage and usage >= self.t.kv_usage and bool(retracts), line,
                            f"KV cache token usage {usage:.2f} with {sum(e.data.get('retracted') or 0 for e in retracts)} "
                            f"request(s) retracted in the last {self.t.window_s:.0f} s: the pool is full",
                            {"token_usage": usage, "retracted": sum(e.data.get("retracted") or 0 for e in retracts)})
        # the queue growing over the window
        q0, q1 = b["queue"][first], b["queue"][-1]
        growing = q1 == q1 and q0 == q0 and q1 - q0 >= self.t.queue_growth and q1 >= self.t.queue_factor * max(q0, 1)
        notes += self._warn("queue_growth", growing, line,
                            f"#queue-req grew from {q0:.0f} to {q1:.0f} in {now - times[first]:.0f} s: requests arrive faster than they are served",
                            {"queue_from": q0, "queue_to": q1})
        # generation throughput collapsing while requests run
        kind, throughput = b["kind"], b["throughput"]
        dec = [i for i in range(first, n) if kind[i] == 1 and throughput[i] == throughput[i]]
        collapse = False
        if len(dec) >= 6:
            half = len(dec) // 2
            early = [throughput[i] for i in dec[:half]]
            late = [throughput[i] for i in dec[-max(2, half // 2):]]
            peak = sum(early) / len(early)
            recent = sum(late) / len(late)
            collapse = peak > 0 and recent < self.t.throughput_drop * peak and b["running"][-1] > 0
        notes += self._warn("throughput_collapse", collapse, line,
                            "generation throughput fell under a quarter of what it was a moment ago while requests are running",
                            {"running": b["running"][-1]})
        return notes

    def _stuck(self) -> list[Note]:
        last = self.parser.batches.last() if len(self.parser.batches) else None
        if last is None or not (last["running"] > 0):
            self._armed["stuck"] = False
            return []
        silent = self.clock() - (self._arrival[-1] if self._arrival else self._last_line_at)
        return self._warn("stuck", silent >= self.t.stuck_after, self._stream_line(last["line"]),
                          f"no batch line for {silent:.0f} s while {last['running']:.0f} request(s) were running: the scheduler may be stuck",
                          {"running": last["running"], "silent_s": round(silent, 1)})


def follow(path: str, watcher: Watcher, emit, interval: float = 0.5, idle_exit: float | None = None,
           exit_on=None, from_end: bool = False, stop=lambda: False, sleep=time.sleep) -> None:
    """The loop: poll, feed, tick, emit, until `stop()`, `exit_on(note)` or `idle_exit` seconds
    without a new line (then what is pending is diagnosed)."""
    follower = Follower(path, from_end=from_end)
    waited = opened = False
    last = time.monotonic()
    try:
        while not stop():
            lines = follower.read()
            for n in follower.notes:
                if n in ("rotated", "truncated"):
                    emit(Note(n, watcher.line + 1, f"the log was {n}; reading it from its start"))
                elif n == "opened" and not opened:
                    opened = True
                    emit(Note("opened", None, f"watching {path}"))
            follower.notes.clear()
            if follower._f is None and not waited:
                waited = True
                emit(Note("waiting", None, f"waiting for {path} to appear"))
            notes = watcher.feed(lines) if lines else []
            if lines:
                last = time.monotonic()
            idle = idle_exit is not None and time.monotonic() - last >= idle_exit
            if not lines and time.monotonic() - last >= watcher.settle:
                tail = follower.flush()        # a last line without its newline
                if tail:
                    notes += watcher.feed(tail)
            notes += watcher.tick(final=idle)
            for note in notes:
                emit(note)
                if exit_on is not None and exit_on(note):
                    return
            if idle:
                return
            sleep(interval)
    finally:
        follower.close()
