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


def parse_spec(spec: str) -> VersionRange:
    """'>=0.5.10,<=0.5.13' (also '<0.5.14', '==0.5.9', '0.5.10-0.5.13') -> a VersionRange.

    '<X' is stored as an inclusive high bound just below X (X with a -1 extra part), so that
    post releases of the previous version are inside and X itself is not."""
    spec = (spec or "").strip()
    if not spec:
        raise ValueError("empty version range")
    low = high = None
    if re.match(r"^v?\d[\w.]*\s*[-–]\s*v?\d[\w.]*$", spec):
        a, b = re.split(r"\s*[-–]\s*", spec)
        if parse(a) is None or parse(b) is None:
            raise ValueError(f"bad version range {spec!r}")
        return VersionRange(low=a, high=b, source=spec)
    for part in (p.strip() for p in spec.split(",")):
        m = re.match(r"^(>=|<=|==|>|<)\s*(v?\d[\w.]*)$", part)
        if not m or parse(m[2]) is None:
            raise ValueError(f"bad version range {spec!r}: {part!r}")
        op, v = m[1], m[2]
        if op == "==":
            low = high = v
        elif op in (">=", ">"):
            low = v if op == ">=" else _just_above(v)
        else:
            high = v if op == "<=" else _just_below(v)
    return VersionRange(low=low, high=high, source=spec)


def _just_below(v: str) -> str:
    major, minor, patch, _ = key(v)
    return f"{major}.{minor}.{patch}rc0" if patch or minor or major else v


def _just_above(v: str) -> str:
    major, minor, patch, extra = key(v)
    return f"{major}.{minor}.{patch}.post{max(1, extra + 1)}"


def could_be(found: VersionRange, spec: str) -> bool:
    """True when the version the log shows can lie in the spec's range (an unknown version can)."""
    want = parse_spec(spec)
    if found.exact:
        return want.contains(found.exact)
    if found.describe() == "unknown":
        return True
    return found.intersect(want) is not None
