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
