"""The tests bite (issue 8, part 3): each of the four mutations the issue names, applied here
(a monkeypatched function or value, or a temporary copy of a rule file), makes the suite's own
checks fail: the rule-case check (rulecases.case_problems, what test_rule_cases runs) and the
after-fix check (afterfix). Each test first shows the same checks pass without the mutation, so
the failure is the mutation's.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import diag.rules.registry as REG
from diag import findings as FD
from diag.memory import options as MO

import afterfix
from rulecases import case_problems, run_case


def pinned(flag: str, direction: str | None = None, reg=None) -> list:
    """(rule, case) of the top cases that pin a fix on `flag` (with this direction)."""
    reg = reg or REG.registry()
    return [(r, c) for r in reg.rules for c in r.cases if c.expect == "top" and not c.xfail
            and any(w.get("flag") == flag and (direction is None or w.get("direction") == direction)
                    for w in c.want.get("fix") or [])]


def failures(pairs, tmp: Path) -> dict[str, list[str]]:
    """The suite's rule-case check on each case: {rule:case -> problems} for those that fail."""
    out = {}
    for i, (r, c) in enumerate(pairs):
        problems = case_problems(r, c, tmp / str(i))
        if problems:
            out[f"{r.id}:{c.name}"] = problems
    return out


def after_fix_failures(pairs, tmp: Path) -> dict[str, str]:
    """The after-fix memory-model check (test_after_fix) on each case that it can judge."""
    out = {}
    for i, (r, c) in enumerate(pairs):
        ch = afterfix.run(c, tmp / f"af{i}")
        if not ch.after:
            continue
        b = afterfix.model_budget(ch, ch.after, ch.before)
        if b.fits is False:
            out[f"{r.id}:{c.name}"] = f"{ch.changes}: {b.problems}"
    return out


@pytest.fixture
def rules_copy(tmp_path, monkeypatch):
    """A temporary copy of rules/; edit(path_glob, old, new) changes one file there and makes the
    pipeline run on the copy (what `registry()` returns), returning the copy's registry."""
    root = tmp_path / "rules"
    shutil.copytree(REG.rules_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))

    def edit(glob: str, old: str, new: str):
        (path,) = root.glob(glob)
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {path.name}: the mutation no longer applies"
        path.write_text(text.replace(old, new), encoding="utf-8")
        reg = REG.load(root, check_messages=False)
        monkeypatch.setattr(REG, "registry", lambda: reg)
        return reg
    return edit


# -- 1. "lower --mem-fraction-static" raises it ------------------------------------------------

def _fed_by_lower_fraction(cases, tmp: Path, monkeypatch, real) -> set[str]:
    """The cases whose top finding proposes the very fraction _lower_fraction computed."""
    seen: list = []

    def recording(dep, b, extra_gib=0.0):
        opt = real(dep, b, extra_gib)
        if opt is not None:
            seen.append(opt.changes[0]["value"])
        return opt
    out = set()
    with monkeypatch.context() as m:
        m.setattr(MO, "_lower_fraction", recording)
        for i, (r, c) in enumerate(cases):
            seen.clear()
            (tmp / str(i)).mkdir(parents=True)
            top = run_case(c, tmp / str(i)).findings[0]
            if any(f.flag == "--mem-fraction-static" and f.value in seen for f in top.fix):
                out.add(f"{r.id}:{c.name}")
    return out


def test_lowering_the_fraction_made_to_raise_it_is_caught(tmp_path, monkeypatch):
    cases = pinned("--mem-fraction-static", "lower")
    assert len(cases) >= 1, "no case pins a lowered --mem-fraction-static"
    assert not failures(cases, tmp_path / "clean")
    real = MO._lower_fraction
    fed = _fed_by_lower_fraction(cases, tmp_path / "record", monkeypatch, real)
    assert fed, "no case's lowered fraction comes from the memory model's option"

    def raised(dep, b, extra_gib=0.0):          # the one-line slip: was + step instead of was - step
        opt = real(dep, b, extra_gib)
        if opt is not None:
            up = round(2 * b.mem_fraction_static - opt.values["fraction"], 3)
            opt.changes = [dict(c, value=f"{up:.3f}") if c["flag"] == "--mem-fraction-static" else c for c in opt.changes]
            opt.values["fraction"] = up
        return opt
    monkeypatch.setattr(MO, "_lower_fraction", raised)
    got = failures(cases, tmp_path / "mutated")
    # every case whose lowered fraction the memory model's option computed catches it (the others
    # take a rule's own fallback value, which the option does not feed)
    assert fed <= set(got), (fed, got)
    assert any("would not lower" in p for ps in got.values() for p in ps), got


def test_the_lower_fraction_option_declared_as_raise_is_caught(tmp_path, rules_copy, monkeypatch):
    """The same slip in the option's declaration (rules/_fixes/memory.toml): the strict pipeline
    refuses a 'raise' whose value is below the one in use."""
    cases = pinned("--mem-fraction-static", "lower")
    fed = _fed_by_lower_fraction(cases, tmp_path / "record", monkeypatch, MO._lower_fraction)
    cases = [(r, c) for r, c in cases if f"{r.id}:{c.name}" in fed]
    assert cases and not failures(cases, tmp_path / "clean")
    rules_copy("_fixes/memory.toml", '''[[lower_fraction.change]]
flag = "--mem-fraction-static"
direction = "lower"''', '''[[lower_fraction.change]]
flag = "--mem-fraction-static"
direction = "raise"''')
    got = failures(cases, tmp_path / "mutated")
    assert set(got) == {f"{r.id}:{c.name}" for r, c in cases}, got


# -- 2. CUDA-graph OOMs sent to the raise-the-fraction goal ------------------------------------

def _graph_cases(reg):
    return [(r, c) for r in reg.rules if r.id == "SGL-OOM-004" for c in r.cases if c.expect == "top" and not c.xfail]


def test_cuda_graph_oom_sent_to_the_kv_pool_goal_is_caught(tmp_path, rules_copy):
    """The rule's explainer goal (rules/oom/SGL-OOM-004-*.toml) changed from cuda_graph to
    kv_pool and its first option to that goal's raise-the-fraction one. (The goal alone changes
    nothing a user sees: the rule's options are the ones it lists, and without the memory
    model's lower_fraction its own fallback still lowers the fraction.)"""
    assert len(_graph_cases(REG.registry())) >= 2
    assert not failures(_graph_cases(REG.registry()), tmp_path / "clean")
    rules_copy("oom/SGL-OOM-004-*.toml", 'goal = "cuda_graph"', 'goal = "kv_pool"')
    reg = rules_copy("oom/SGL-OOM-004-*.toml", 'use = "memory.lower_fraction"', 'use = "memory.raise_fraction"')
    cases = _graph_cases(reg)
    got = failures(cases, tmp_path / "mutated")
    assert got, "every CUDA-graph case still passes with the KV-pool (raise the fraction) goal"
    # the case with a launch command is caught by its pinned direction too
    assert any("--mem-fraction-static" in p or "strict" in p for ps in got.values() for p in ps), got


# -- 3. a Mamba-strategy fix swapped for an unrelated flag -------------------------------------

@pytest.mark.parametrize("glob", ["config/SGL-CFG-008-*.toml", "config/SGL-CFG-009-*.toml"])
def test_a_mamba_strategy_fix_swapped_for_an_unrelated_flag_is_caught(glob, tmp_path, rules_copy):
    rule_id = glob.split("/")[1][:11]
    cases = [(r, c) for r, c in pinned("--mamba-scheduler-strategy") if r.id == rule_id]
    assert cases, f"no {rule_id} case pins the strategy flag"
    assert not failures(cases, tmp_path / "clean")
    reg = rules_copy(glob, 'flag = "--mamba-scheduler-strategy"', 'flag = "--served-model-name"')
    cases = [(r, c) for r, c in pinned("--mamba-scheduler-strategy", reg=reg) if r.id == rule_id]
    got = failures(cases, tmp_path / "mutated")
    assert set(got) == {f"{r.id}:{c.name}" for r, c in cases}, got
    assert all(any("no fix like" in p for p in ps) for ps in got.values()), got


# -- 4. a suggested flag the catalog lacks, dropped silently -----------------------------------

def test_a_silently_dropped_unknown_flag_is_caught(tmp_path, monkeypatch):
    """The mutation: the spelling step drops a flag the version lacks without a word, strict or
    not (the v1 behaviour). The suite's own test of that step must then fail."""
    from test_strict_fixes import test_a_fix_the_version_lacks_fails_the_case
    real = FD._spell

    def silent(finding, facts, strict):
        cat = facts.catalog
        if cat is not None:
            finding.fix = [f for f in finding.fix if not f.flag or cat.translate(f.flag, f.value)]
        real(finding, facts, False)
        finding.confidence_notes = [n for n in finding.confidence_notes if "so it is not suggested" not in n]

    with pytest.MonkeyPatch.context() as m:
        test_a_fix_the_version_lacks_fails_the_case(tmp_path / "clean", m)
    monkeypatch.setattr(FD, "_spell", silent)
    with pytest.MonkeyPatch.context() as m, pytest.raises(AssertionError):
        test_a_fix_the_version_lacks_fails_the_case(tmp_path / "mutated", m)
    assert REG.registry().get("SGL-CFG-008") is not None
