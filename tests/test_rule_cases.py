"""Every case of every rule (rules/<family>/*.toml): category, fixes and their direction,
evidence lines, confidence bounds, and the texts, through the whole pipeline; then the same
report's text render against its snapshot (tests/snapshots, see test_rule_snapshots.py) and its
JSON against the shipped schema, read back. One analysis per case serves all three checks."""
from __future__ import annotations

import pytest

from diag.findings import FixError
from diag.report import Report
from diag.rules.registry import registry

from rulecases import case_id, case_problems, run_case
from schemacheck import check
from snapshots import compare, render_text, snapshot_name

CASES = [(r, c) for r in registry().rules for c in r.cases]


@pytest.mark.parametrize("rule,case", CASES, ids=[case_id(r, c) for r, c in CASES])
def test_case(rule, case, tmp_path):
    if case.xfail:
        pytest.xfail(case.xfail)
    try:
        report = run_case(case, tmp_path)
    except FixError as e:
        pytest.fail(f"strict: {e}")
    problems = case_problems(rule, case, tmp_path, report=report)
    assert not problems, "\n".join(problems)
    compare(snapshot_name(rule, case), render_text(report, tmp_path))
    if case.expect != "no-match":
        data = check(report)
        assert Report.from_json(data).to_json() == data


def test_every_rule_has_a_top_case():
    missing = [r.id for r in registry().rules if not any(c.expect == "top" for c in r.cases)]
    assert not missing


def test_registry_checks_message_names_against_the_catalog():
    from diag.rules.registry import load
    load(check_messages=True)


def test_placeholder_values_need_no_shell_quoting():
    """A value the user fills in ('<the interface on ...>') is shown in the patched launch command,
    single-quoted: an apostrophe or a backtick in it turns into '"'"' there."""
    bad = [f"{r.id}: {f.value}" for r in registry().rules for f in r.fixes
           if isinstance(f.value, str) and f.value.startswith("<") and any(c in f.value for c in "'`\"")]
    assert not bad, bad
