"""The direction check and the version spelling that every fix passes through (diag/findings.py)."""
from __future__ import annotations

import pytest

from diag.findings import direction_ok
from diag.report import Fix


@pytest.mark.parametrize("direction,value,was,ok", [
    ("lower", "0.80", "0.88", True), ("lower", "0.90", "0.88", False), ("lower", "0.88", "0.88", False),
    ("raise", "0.90", "0.88", True), ("raise", "0.80", "0.88", False), ("raise", "0.88", "0.88", False),
    ("raise", "4", "2", True), ("lower", "2048", "8192", True), ("lower", "16384", "8192", False),
    ("raise", "0.9", None, True), ("lower", "abc", "0.8", False),
    ("set", "fp8_e4m3", "auto", True), ("set", "auto", "auto", False), ("set", "x", None, True),
    ("on", None, None, True), ("remove", None, "EAGLE", True),
])
def test_direction(direction, value, was, ok):
    assert direction_ok(Fix(flag="--x", value=value, was=was, direction=direction)) is ok
