"""The one number parser: hostile tokens are unknown, never a crash or a non-finite value."""
import math

import pytest

from diag.numbers import finite, to_bytes, to_float, to_gib, to_int


@pytest.mark.parametrize("text,want", [("4096", 4096), ("-1", -1), ("0x1f", 31), ("4096.0", 4096), ("59,862", 59862),
                                       ("1_000", 1000), (" 7 ", 7)])
def test_int_ok(text, want):
    assert to_int(text) == want


@pytest.mark.parametrize("text", ["1.2.3", "9" * 5000, "1e999", "inf", "nan", "", None, "0x", "4.5", "abc", True, "1e40"])
def test_int_unknown(text):
    assert to_int(text) is None


@pytest.mark.parametrize("text,want", [("0.85", 0.85), ("85%", 85.0), ("1e3", 1000.0), ("-0.5", -0.5), ("3", 3.0)])
def test_float_ok(text, want):
    assert to_float(text) == want


@pytest.mark.parametrize("text", ["1.2.3", "9" * 5000, "1e999", "inf", "-inf", "nan", "NaN", "", "..", "1e", "0x10"])
def test_float_unknown(text):
    assert to_float(text) is None


def test_bounds():
    assert to_int("5", lo=0, hi=4) is None
    assert to_float("0.95", lo=0, hi=1) == 0.95
    assert to_float("1.5", lo=0, hi=1) is None


def test_sizes():
    assert to_bytes("1.50", "GiB") == 3 * (1 << 29)
    assert to_bytes("1.50 GiB") == 3 * (1 << 29)
    assert to_bytes("512 MiB") == 512 << 20
    assert to_bytes("2 GB") == 2 << 30                      # SGLang's and PyTorch's "GB" is GiB
    assert to_bytes("2 GB", binary_gb=False) == 2 * 10**9
    assert to_bytes("12 bytes") == 12
    assert to_gib("1024 MiB") == 1.0
    for bad in ("1e999 GiB", "5 parsecs", "-1 GiB", "1.2.3 MiB", "9" * 5000 + " B"):
        assert to_bytes(bad) is None


def test_finite():
    assert finite(float("inf")) is None and finite(float("nan")) is None and finite(1.5) == 1.5 and finite("x") == "x"
    assert all(math.isfinite(to_float(t)) for t in ("1e29", "-1e29"))
