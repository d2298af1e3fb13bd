"""The one JSON writer: strict JSON (no NaN or Infinity) and every string valid UTF-8."""
from __future__ import annotations

import json

from .numbers import finite


def clean(obj):
    """A copy JSON can carry: non-finite floats -> null, strings with lone surrogates (bytes a file
    name could not decode) escaped as \\xNN / \\uNNNN text, keys as strings."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, float):
        return finite(obj)
    if isinstance(obj, dict):
        return {(text(k) if isinstance(k, str) else k if isinstance(k, (int, float, bool)) or k is None else text(str(k))):
                clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [clean(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int)):
        return obj
    return text(str(obj))


def text(s: str) -> str:
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        # surrogateescape'd bytes (an undecodable file name) read as \xNN; other lone surrogates as \uNNNN
        return s.encode("utf-8", "surrogateescape" if _escaped_only(s) else "backslashreplace").decode("utf-8", "backslashreplace")


def _escaped_only(s: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in s)


def dumps(obj, indent: int | None = 2) -> str:
    return json.dumps(clean(obj), indent=indent, ensure_ascii=False, allow_nan=False)
