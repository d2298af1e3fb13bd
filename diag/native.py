"""The optional C part of diag (diag/_lines.c: the fast reader's line classifier and the fold of batch
rows into buckets). `lines()` is the module, or None where it was not built (no C compiler at
install) or DIAG_NO_NATIVE is set; then diag/scan.py and diag/parse/batches.py do the same work in
polars and Python (tests/test_native.py checks that both give the same)."""
from __future__ import annotations

import os

_module: object = False


def lines():
    global _module
    if os.environ.get("DIAG_NO_NATIVE"):
        return None
    if _module is False:
        try:
            from . import _lines
            _module = _lines
        except ImportError:
            _module = None
    return _module
