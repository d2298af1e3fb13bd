"""Typed events the parsers produce. Every event knows its input and line."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Event:
    kind: str            # see KINDS
    input: int
    line: int
    text: str            # the cleaned line (first line for multi-line events)
    rank: str | None = None
    ts: str | None = None
    data: dict = field(default_factory=dict)
    end_line: int | None = None
    msg: object = None   # the catalog's Match for this line's message (diag.messages), or None


KINDS = {
    "milestone": "a start-up step (data['phase'], memory figures)",
    "server_args": "the server_args dump (data['fields'])",
    "launch": "a launch command line (data['argv'])",
    "capacity": "the max_total_num_tokens=… summary line",
    "batch": "a prefill/decode statistics line (kept as columns in BatchSeries, not as events)",
    "exception": "an exception: data type, message, frames, partial_head/partial_tail, chained",
    "oom": "a CUDA/NPU out-of-memory error with its numbers",
    "signal": "the process tree reacting to a failure (sigquit, scheduler died, Killed, segfault)",
    "error": "an SGLang error or refusal message without a traceback",
    "warning": "an SGLang warning worth reporting",
    "argparse": "an argparse usage error",
    "http": "an HTTP access line (counted, not kept)",
    "watchdog": "a watchdog timeout or py-spy dump",
    "graph_buffers": "custom all-reduce's 'Registering N cuda graph addresses' at the end of a graph capture (data n)",
    "retract": "KV cache full, requests retracted",
    "version": "a line naming a component version",
    "nohup": "nohup's own message",
    "smi": "an nvidia-smi output inside the input",
    "message": "a line the message catalog knows (its event kind is msg.event), not otherwise typed",
}


@dataclass
class Frame:
    file: str
    line: int | None
    func: str
    code: str = ""

    @property
    def short(self) -> str:
        tail = "/".join(self.file.replace("\\", "/").split("/")[-2:])
        return f"{tail}:{self.line} {self.func}"


@dataclass
class Traceback:
    """A Python traceback as it appeared (possibly only a piece of it)."""
    input: int
    start: int
    rank: str | None = None
    frames: list[Frame] = field(default_factory=list)
    exc_type: str | None = None
    message: str = ""
    end: int | None = None
    partial_head: bool = False   # started mid-traceback (no "Traceback (most recent call last):")
    chained: bool = False        # raised while handling an earlier exception
    header_text: str = ""        # e.g. "Scheduler hit an exception:"
    ts: str | None = None        # the header line's timestamp


class EventStore:
    """The parser's events, bounded per kind whatever the log holds: the first FIRST and the last
    LAST events of each kind are kept, the others only counted (`counts`). A log of a million
    `Killed` lines keeps 2 x 100 of them, not a million.

    It reads like the list it replaces: `len()` is the number of events ever appended (so
    `len()` before and after a line tells whether the line made events), `store[n:]` the events
    appended since `len()` was n (the last few, always kept), iteration the kept events in the
    order they were appended."""

    FIRST = 100
    LAST = 100
    RECENT = 64     # the last events appended, for store[n:]

    def __init__(self) -> None:
        from collections import Counter, deque
        self.counts: Counter = Counter()
        self.total = 0
        self._first: dict[str, list] = {}
        self._last: dict[str, deque] = {}
        self._recent: deque = deque(maxlen=self.RECENT)
        self._deque = deque

    def append(self, ev: Event) -> None:
        seq = self.total
        self.total += 1
        self.counts[ev.kind] += 1
        first = self._first.setdefault(ev.kind, [])
        if len(first) < self.FIRST:
            first.append((seq, ev))
        else:
            last = self._last.get(ev.kind)
            if last is None:
                last = self._last[ev.kind] = self._deque(maxlen=self.LAST)
            last.append((seq, ev))
        self._recent.append((seq, ev))

    def __len__(self) -> int:
        return self.total

    def of_kind(self, kind: str) -> list[Event]:
        """The kept events of one kind (its first FIRST and last LAST), in the order they came."""
        return [ev for _, ev in self._first.get(kind, ())] + [ev for _, ev in self._last.get(kind, ())]

    def __bool__(self) -> bool:
        return self.total > 0

    @property
    def dropped(self) -> int:
        """Events counted but not kept."""
        return self.total - sum(len(v) for v in self._first.values()) - sum(len(v) for v in self._last.values())

    def __getitem__(self, item):
        if isinstance(item, slice) and item.step is None and item.stop is None:
            start = item.start or 0
            if start < 0:
                start += self.total
            return [ev for seq, ev in self._recent if seq >= start]
        return list(self)[item]

    def __iter__(self):
        kept = [x for v in self._first.values() for x in v] + [x for v in self._last.values() for x in v]
        kept.sort(key=lambda x: x[0])
        return iter([ev for _, ev in kept])

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None
