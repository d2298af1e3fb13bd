"""Prefill/decode batch statistics ("Decode batch, #running-req: 2, token usage: 0.41, ..."), as columns.

The lines that dominate a serving log: kept as compact arrays, never as events.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from ..numbers import to_float

NAN = float("nan")
_DAY_CACHE: dict[str, float] = {}


def ts_seconds(ts: str | None) -> float:
    """'2025-01-06 02:58:11(.123)' -> seconds since the epoch (UTC); nan when absent or odd."""
    if not ts:
        return NAN
    day = ts[:10]
    base = _DAY_CACHE.get(day)
    try:
        if base is None:
            import datetime
            base = datetime.datetime(int(day[0:4]), int(day[5:7]), int(day[8:10]), tzinfo=datetime.timezone.utc).timestamp()
            _DAY_CACHE[day] = base
        return base + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + float(ts[17:].replace(",", ".") or 0)
    except ValueError:
        return NAN


def batch_fields(msg: str) -> dict[str, str]:
    """'Decode batch, #running-req: 2, token usage: 0.4, …' -> {'#running-req': '2', 'token usage': '0.4', …}"""
    out = {}
    for part in msg.split(", "):
        key, sep, value = part.rpartition(": ")
        if sep:
            out[key.rsplit(". ", 1)[-1]] = value.rstrip(", ")
    return out


@dataclass
class BatchSeries:
    """Prefill/decode statistics of one rank, as columns (cheap for millions of lines)."""
    rank: str | None = None
    kind: array = field(default_factory=lambda: array("b"))      # 0 prefill, 1 decode
    line: array = field(default_factory=lambda: array("l"))
    ts: array = field(default_factory=lambda: array("d"))        # seconds since epoch, nan when absent
    running: array = field(default_factory=lambda: array("d"))
    queue: array = field(default_factory=lambda: array("d"))
    usage: array = field(default_factory=lambda: array("d"))     # token usage (full pool for hybrids)
    tokens: array = field(default_factory=lambda: array("d"))    # #token / #new-token
    throughput: array = field(default_factory=lambda: array("d"))
    mamba_usage: array = field(default_factory=lambda: array("d"))
    accept_len: array = field(default_factory=lambda: array("d"))

    def __len__(self) -> int:
        return len(self.kind)

    def add(self, lineno: int, ts: str | None, msg: str) -> None:
        """One batch line (the message after the log prefix)."""
        vals = batch_fields(msg)
        self.kind.append(1 if msg.startswith("Decode") else 0)
        self.line.append(lineno)
        self.ts.append(ts_seconds(ts))
        self.running.append(_f(vals.get("#running-req")))
        self.queue.append(_f(vals.get("#queue-req")))
        self.usage.append(_f(vals.get("token usage", vals.get("full token usage"))))
        self.tokens.append(_f(vals.get("#token", vals.get("#full token", vals.get("#new-token")))))
        self.throughput.append(_f(vals.get("gen throughput (token/s)", vals.get("input throughput (token/s)"))))
        self.mamba_usage.append(_f(vals.get("mamba usage")))
        self.accept_len.append(_f(vals.get("accept len")))




_DAY_CACHE: dict[str, float] = {}


def _ts_seconds(ts: str | None) -> float:
    """'2025-01-06 02:58:11(.123)' -> seconds since the epoch (UTC); nan when absent or odd."""
    if not ts:
        return NAN
    day = ts[:10]
    base = _DAY_CACHE.get(day)
    try:
        if base is None:
            import datetime
            base = datetime.datetime(int(day[0:4]), int(day[5:7]), int(day[8:10]), tzinfo=datetime.timezone.utc).timestamp()
            _DAY_CACHE[day] = base
        return base + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + float(ts[17:].replace(",", ".") or 0)
    except ValueError:
        return NAN


def _batch_fields(msg: str) -> dict[str, str]:
    """'Decode batch, #running-req: 2, token usage: 0.4, …' -> {'#running-req': '2', 'token usage': '0.4', …}"""
    out = {}
    for part in msg.split(", "):
        key, sep, value = part.rpartition(": ")
        if sep:
            out[key.rsplit(". ", 1)[-1]] = value.rstrip(", ")
    return out




def _f(v: str | None) -> float:
    if v is None:
        return NAN
    if v in ("True", "False"):
        return 1.0 if v == "True" else 0.0
    f = to_float(v)
    return NAN if f is None else f


