"""SGLang version strings: parsing, ordering, ranges."""
from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(post|rc|dev)(\d+))?")


def parse(v: str) -> tuple[int, int, int, int] | None:
    """'0.5.10.post1' -> (0, 5, 10, 1); rc/dev releases sort before the release."""
    m = _VERSION.match(v.strip())
    if not m:
        return None
    major, minor, patch = int(m[1]), int(m[2]), int(m[3] or 0)
    kind, n = m[4], int(m[5] or 0)
    extra = n if kind == "post" else (-1000 + n if kind in ("rc", "dev") else 0)
    return (major, minor, patch, extra)


def key(v: str) -> tuple[int, int, int, int]:
    return parse(v) or (0, 0, 0, 0)


@dataclass(frozen=True)
class VersionRange:
    """What the log tells about the SGLang version: exact, or a range from message templates."""
    low: str | None = None   # inclusive
    high: str | None = None  # inclusive
    exact: str | None = None
    source: str = ""

    def contains(self, v: str) -> bool:
        if self.exact:
            return key(self.exact)[:3] == key(v)[:3] or key(self.exact) == key(v)
        if self.low and key(v) < key(self.low):
            return False
        if self.high and key(v) > key(self.high):
            return False
        return True

    def describe(self) -> str:
        if self.exact:
            return self.exact
        if self.low and self.high:
            return self.low if self.low == self.high else f"{self.low}–{self.high}"
        if self.low:
            return f">= {self.low}"
        if self.high:
            return f"<= {self.high}"
        return "unknown"

    def intersect(self, other: "VersionRange") -> "VersionRange | None":
        lows = [v for v in (self.low, other.low) if v]
        highs = [v for v in (self.high, other.high) if v]
        low = max(lows, key=key) if lows else None
        high = min(highs, key=key) if highs else None
        if low and high and key(low) > key(high):
            return None
        sources = []
        for part in "; ".join(x for x in (self.source, other.source) if x).split("; "):
            if part and part not in sources:
                sources.append(part)
        return VersionRange(low=low, high=high, source="; ".join(sources))
