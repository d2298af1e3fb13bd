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


def test_two_equally_supported_causes_of_different_categories_are_not_a_confident_answer(tmp_path):
    """'no kernel image for this GPU' and a JIT build's missing header in one paste: whichever leads,
    the answer is held under the confident mark and names the other."""
    from diag.analyze import analyze
    p = tmp_path / "two.log"
    p.write_text("no kernel image is available for execution on the device\n[...]\n"
                 "fatal error: flashinfer/page.cuh: No such file or directory\n")
    report = analyze([str(p)])
    top, second = report.findings[0], report.findings[1]
    assert top.category != second.category and second.confidence >= 0.85
    assert top.confidence < 0.85
    assert any("another explanation is as well supported" in n and second.category in n for n in top.confidence_notes)
    # one cause alone keeps its confidence
    q = tmp_path / "one.log"
    q.write_text("no kernel image is available for execution on the device\n")
    assert analyze([str(q)]).findings[0].confidence >= 0.85
