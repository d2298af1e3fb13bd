"""A suggested flag the user's SGLang version lacks fails the rule's cases (the tests run
strict) instead of being dropped; outside the tests it is dropped with a note that says so."""
from __future__ import annotations

import shutil

import diag.rules.registry as REG
from diag.analyze import Options, analyze

from rulecases import case_problems

BOGUS = "--disable-radix-cache-for-mamba"      # a flag no SGLang release has


def test_a_fix_the_version_lacks_fails_the_case(tmp_path, monkeypatch):
    """SGL-CFG-008's second option (no radix cache) renamed to a flag no version has: every
    top case of the rule fails, though none pins that option; without strict the option's flag
    is dropped and a note names it."""
    root = tmp_path / "rules"
    shutil.copytree(REG.rules_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    (path,) = root.glob("config/SGL-CFG-008-*.toml")
    text = path.read_text(encoding="utf-8")
    assert 'flag = "--disable-radix-cache"\nwhy = "no prefix caching' in text
    path.write_text(text.replace('flag = "--disable-radix-cache"\nwhy = "no prefix caching',
                                 f'flag = "{BOGUS}"\nwhy = "no prefix caching'), encoding="utf-8")
    reg = REG.load(root, check_messages=False)
    monkeypatch.setattr(REG, "registry", lambda: reg)
    rule = reg.get("SGL-CFG-008")
    cases = [c for c in rule.cases if c.expect == "top" and not c.xfail]
    assert cases
    for i, case in enumerate(cases):
        problems = case_problems(rule, case, tmp_path / str(i))
        assert any(BOGUS in p and "does not exist" in p for p in problems), (case.name, problems)
    case = cases[0]
    (tmp_path / "lax").mkdir()
    log = tmp_path / "lax" / "case.log"
    log.write_text(case.log, encoding="utf-8")
    report = analyze([str(log)], [], Options(sglang_version=case.sglang_version, launch=case.launch))
    top = next(f for f in report.findings if f.rule == "SGL-CFG-008")
    assert all(f.flag != BOGUS for f in top.fix)
    assert any(BOGUS in n for n in top.confidence_notes), top.confidence_notes
