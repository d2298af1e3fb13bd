"""The text render (diag.render.text, no colour) of every rule case, stored under
tests/snapshots/<rule id>/<case>.txt, so a reviewer sees wording and numbers change in the diff.

A mismatch fails with a unified diff; `pytest --update-snapshots` rewrites them (review, commit).
Cases marked xfail are known gaps and are not snapshotted (their output is what is wrong).
Each case's render is compared in tests/test_rule_cases.py, on the report its checks read (one
analysis per case); the tests here keep the snapshot folder and the helper honest.
"""
from __future__ import annotations

import pytest

from diag.rules.registry import registry

from rulecases import run_case
from snapshots import ROOT, compare, render_text, snapshot_name, updating

CASES = [(r, c) for r in registry().rules for c in r.cases if not c.xfail]


def rendered(rule, case, tmp_path) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return render_text(run_case(case, tmp_path), tmp_path)


def test_snapshot_names_are_unique():
    names = [snapshot_name(r, c) for r, c in CASES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_no_stale_snapshots():
    """A snapshot whose case is gone (renamed, removed, now xfail) is an orphan; --update-snapshots removes it."""
    want = {snapshot_name(r, c) for r, c in CASES}
    stale = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.txt") if str(p.relative_to(ROOT)) not in want)
    if updating():
        for name in stale:
            (ROOT / name).unlink()
        return
    assert not stale, f"snapshots without a case (run pytest --update-snapshots): {stale}"


def test_a_changed_render_fails_with_a_readable_diff(tmp_path, monkeypatch):
    """The helper itself bites: a stored render that differs by one number fails, the diff shows
    the old and the new line; a missing snapshot fails instead of being written silently."""
    monkeypatch.delenv("DIAG_UPDATE_SNAPSHOTS", raising=False)
    rule, case = next((r, c) for r, c in CASES if r.id == "SGL-OOM-004" and c.launch)
    text = rendered(rule, case, tmp_path / "a")
    assert "<tmp>" in text and "diag <version>" in text          # the volatile parts are normalised
    assert text == rendered(rule, case, tmp_path / "b")           # and nothing else varies between runs
    (tmp_path / "snap" / "X").mkdir(parents=True)
    (tmp_path / "snap" / "X" / "c.txt").write_text(text.replace("0.915", "0.925"), encoding="utf-8")
    with pytest.raises(AssertionError) as err:
        compare("X/c.txt", text, root=tmp_path / "snap")
    msg = str(err.value)
    assert "--update-snapshots" in msg
    assert any(line.startswith("-") and "0.925" in line for line in msg.splitlines())
    assert any(line.startswith("+") and "0.915" in line for line in msg.splitlines())
    with pytest.raises(AssertionError, match="no snapshot"):
        compare("X/missing.txt", text, root=tmp_path / "snap")
    assert not (tmp_path / "snap" / "X" / "missing.txt").exists()
