"""Every case of every rule (rules/<family>/*.toml): category, fixes and their direction,
evidence lines, confidence bounds, and the texts, through the whole pipeline."""
from __future__ import annotations

import pytest

from diag.rules.registry import registry

from rulecases import case_id, case_problems

CASES = [(r, c) for r in registry().rules for c in r.cases]


@pytest.mark.parametrize("rule,case", CASES, ids=[case_id(r, c) for r, c in CASES])
def test_case(rule, case, tmp_path):
    if case.xfail:
        pytest.xfail(case.xfail)
    problems = case_problems(rule, case, tmp_path)
    assert not problems, "\n".join(problems)


def test_every_rule_has_a_top_case():
    missing = [r.id for r in registry().rules if not any(c.expect == "top" for c in r.cases)]
    assert not missing


def test_registry_checks_message_names_against_the_catalog():
    from diag.rules.registry import load
    load(check_messages=True)
