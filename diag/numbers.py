"""The one number parser for log text.

Every number diag reads from a log, a launch command or an nvidia-smi snapshot goes through
these functions. They never raise and never return a non-finite float: a value that is not a
plain number of a sane size (``1.2.3``, 5,000 digits, ``1e999``, ``nan``) is unknown (None).
"""
from __future__ import annotations

import math
import re

MAX_DIGITS = 30          # more digits than any real count, size or address a log prints
MAX_ABS = 1e30           # a value above this is a corrupt or hostile token, not a measurement

SIZE_UNITS = {
    "b": 1, "byte": 1, "bytes": 1,
    "k": 1000, "kb": 1000, "kib": 1 << 10,
    "m": 1000**2, "mb": 1000**2, "mib": 1 << 20,
    "g": 1000**3, "gb": 1000**3, "gib": 1 << 30,
    "t": 1000**4, "tb": 1000**4, "tib": 1 << 40,
}
# SGLang and PyTorch print "GB" for GiB-based figures (torch.cuda.mem_get_info() / (1 << 30)),
# so "GB" in their messages is 2**30. Callers that know better pass binary=False.
BINARY_GB = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}


_GROUPED = re.compile(r"^[+-]?\d{1,3}(?:[,_]\d{3})+(?:\.\d+)?$")


def _clean(text) -> str | None:
    """The text of a number: stripped, thousands separators ('59,862', '1_000') removed."""
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        text = repr(text)
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s or len(s) > MAX_DIGITS + 12:
        return None
    if _GROUPED.match(s):
        s = s.replace(",", "").replace("_", "")
    return s


def to_int(text, lo: int | None = None, hi: int | None = None) -> int | None:
    """'4096' -> 4096; '0x1f' -> 31; '4096.0' -> 4096; anything else (or out of [lo, hi]) -> None."""
    s = _clean(text)
    if s is None:
        return None
    try:
        if s.lower().startswith(("0x", "-0x")):
            digits = s.lower().lstrip("-")[2:]
            if not digits or len(digits) > MAX_DIGITS:
                return None
            value = int(s, 16)
        else:
            body = s.lstrip("+-")
            if body.isdigit():
                if len(body) > MAX_DIGITS:
                    return None
                value = int(s)
            else:
                f = to_float(s)
                if f is None or f != int(f):
                    return None
                value = int(f)
    except (ValueError, OverflowError):
        return None
    if abs(value) > MAX_ABS:
        return None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return None
    return value


def to_float(text, lo: float | None = None, hi: float | None = None) -> float | None:
    """'0.85' -> 0.85, '85%' -> 85.0; 'inf', 'nan', '1e999', '1.2.3', huge digit strings -> None."""
    s = _clean(text)
    if s is None:
        return None
    if s.endswith("%"):
        s = s[:-1]
    mantissa = s.lower().split("e")[0].lstrip("+-")
    if not mantissa or len(mantissa.replace(".", "")) > MAX_DIGITS or mantissa.count(".") > 1:
        return None
    if not mantissa.replace(".", "").isdigit():
        return None
    try:
        value = float(s)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(value) or abs(value) > MAX_ABS:
        return None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return None
    return value


def to_bytes(value, unit: str | None = None, binary_gb: bool = True) -> int | None:
    """A size: to_bytes('1.50', 'GiB'), to_bytes('1.50 GiB'), to_bytes('512 MB') -> bytes, or None.

    With binary_gb (the default) 'GB'/'MB' mean GiB/MiB, as SGLang and PyTorch print them."""
    if unit is None and isinstance(value, str):
        s = value.strip()
        i = len(s)
        while i > 0 and (s[i - 1].isalpha()):
            i -= 1
        value, unit = s[:i].strip(), s[i:]
    number = to_float(value)
    if number is None or number < 0:
        return None
    key = (unit or "b").strip().lower()
    factor = (BINARY_GB.get(key) if binary_gb else None) or SIZE_UNITS.get(key)
    if factor is None:
        return None
    result = number * factor
    if not math.isfinite(result) or result > MAX_ABS:
        return None
    return int(round(result))


def to_gib(value, unit: str | None = None, binary_gb: bool = True) -> float | None:
    b = to_bytes(value, unit, binary_gb)
    return None if b is None else b / (1 << 30)


def finite(value):
    """A float that JSON can carry: NaN and infinities become None; other values pass through."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
