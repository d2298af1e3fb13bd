"""Every rule file is valid and its own examples behave as the file says."""
from __future__ import annotations

import re

import pytest

from diag import flags as F
from diag.analyze import analyze, analyze_with_facts
from diag.rules_v1 import load_rules, required_literals
from diag.taxonomy import CATEGORIES

RULES = load_rules()
EXAMPLES = [(r, i, ex) for r in RULES for i, ex in enumerate(r.examples)]


def test_rule_ids_and_files_agree():
    for r in RULES:
        assert r.path.endswith(f"{r.id}.toml"), f"{r.path}: file name must be the rule id"
        assert re.fullmatch(r"SGL-[A-Z]+-\d{3}", r.id)
        assert re.fullmatch(r"[a-z0-9-]+", r.name)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_is_documented_and_categorised(rule):
    assert rule.category in CATEGORIES, f"{rule.id}: unknown category {rule.category}"
    assert rule.severity in ("info", "warning", "error", "critical")
    assert rule.detects.strip() and rule.why.strip(), f"{rule.id}: says what it detects and why"
    assert rule.examples, f"{rule.id}: has examples"
    assert any(ex.get("expect") in ("top", "match") for ex in rule.examples), f"{rule.id}: has a positive example"
    from diag.remedies import REMEDIES
    for name in rule.remedy:
        assert name in REMEDIES, f"{rule.id}: remedy helper {name} does not exist"


@pytest.mark.parametrize("rule,index,example", EXAMPLES, ids=lambda x: x.id if hasattr(x, "id") else (str(x) if isinstance(x, int) else ""))
def test_rule_example(rule, index, example, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(example["log"].lstrip("\n"))
    report = analyze([str(log)])
    matched = report.matched
    expect = example["expect"]
    name = example.get("name", index)
    if expect == "top":
        assert report.findings, f"{rule.id} example {name!r}: no finding"
        assert report.findings[0].rule == rule.id, f"{rule.id} example {name!r}: top finding is {report.findings[0].rule}"
    elif expect == "match":
        assert rule.id in matched, f"{rule.id} example {name!r}: rule did not match ({matched})"
    else:
        assert rule.id not in matched, f"{rule.id} example {name!r}: rule matched but should not"
    for f in report.findings:
        for text in (f.title, f.summary):
            assert not re.search(r"\{[a-z_0-9]+\}", text), f"{f.rule}: unfilled template in {text!r}"
        assert f.evidence, f"{f.rule}: a finding without evidence"


@pytest.mark.parametrize("rule,index,example", [e for e in EXAMPLES if e[2]["expect"] != "no-match"],
                         ids=lambda x: x.id if hasattr(x, "id") else (str(x) if isinstance(x, int) else ""))
def test_suggested_flags_exist_in_the_detected_version(rule, index, example, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(example["log"].lstrip("\n"))
    report, facts = analyze_with_facts([str(log)])
    cat = facts.catalog
    for f in report.findings:
        for fx in f.fix:
            if fx.flag:
                assert cat.has(fx.flag), f"{f.rule}: {fx.flag} not in SGLang {cat.label}"
            if fx.env:
                assert cat.has_env(fx.env), f"{f.rule}: {fx.env} not read by SGLang {cat.label}"


def test_required_literals_prefilter():
    assert required_literals(r"Not enough memory\. Please try") == ["Not enough memory. Please try"]
    assert required_literals(r"(?P<x>Prefill|Decode) out of memory") == [" out of memory"]
    assert required_literals(r"abc|Killed") is None  # a short alternative: no safe pre-check
    assert sorted(required_literals(r"EADDRINUSE|address already in use")) == ["EADDRINUSE", "address already in use"]


def test_every_rule_pattern_compiles_and_prefilter_never_hides_a_match():
    # the literal pre-check must be implied by the regex: test on each example's lines
    for r in RULES:
        for ex in r.examples:
            for line in ex["log"].splitlines():
                for group in ("lines", "all_lines", "unless_lines"):
                    for p in getattr(r, group):
                        if p.regex.search(line):
                            assert p.search(line), f"{r.id}: pre-check hides a match of {p.regex.pattern!r}"


def test_catalog_versions_cover_renames():
    cat = F.for_version("0.5.23")
    assert cat.translate("--mamba-scheduler-strategy", "extra_buffer") == [("--mamba-radix-cache-strategy", "extra_buffer")]
    old = F.for_version("0.5.10")
    assert old.translate("--mamba-radix-cache-strategy", "extra_buffer") == [("--mamba-scheduler-strategy", "extra_buffer")]
