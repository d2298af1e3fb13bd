"""The spelling and direction steps every fix passes through (diag/findings.py), on their own:
what `make mutate` found the rule cases did not pin (see docs/mutation.md)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from diag import findings as FD
from diag import flags as F
from diag.report import Finding, Fix


def facts(version, flags=None, env=None, readings=None):
    return SimpleNamespace(catalog=F.for_version(version), flags=dict(flags or {}), env=dict(env or {}),
                           readings=dict(readings or {}))


def finding(*fixes):
    return Finding(rule="SGL-TEST-001", category="oom.kv_pool", severity="critical", confidence=0.9, title="t",
                   summary="s", fix=list(fixes))


def test_one_flag_spelled_as_two_keeps_both():
    """--disable-cuda-graph is two flags in 0.5.23: both are proposed, once each per option."""
    f = finding(Fix(flag="--disable-cuda-graph", direction="on", option=1),
                Fix(flag="--cuda-graph-backend-decode", value="disabled", option=1),
                Fix(flag="--disable-cuda-graph", direction="on", option=2))
    FD._spell(f, facts("0.5.23"), strict=True)
    got = [(x.flag, x.value, x.option) for x in f.fix]
    assert got == [("--cuda-graph-backend-decode", "disabled", 1), ("--cuda-graph-backend-prefill", "disabled", 1),
                   ("--cuda-graph-backend-decode", "disabled", 2), ("--cuda-graph-backend-prefill", "disabled", 2)]


def test_a_variable_the_version_does_not_read():
    """Strict: an error naming the variable and the version; otherwise dropped with that note,
    and the fixes after it are kept."""
    fixes = [Fix(env="SGLANG_ENABLE_SPEC_V2", value="1", option=1), Fix(flag="--tp-size", value="2", option=1,
                                                                        direction="raise")]
    with pytest.raises(FD.FixError, match="SGLANG_ENABLE_SPEC_V2 is not read by SGLang 0.5.23"):
        FD._spell(finding(*fixes), facts("0.5.23"), strict=True)
    f = finding(*fixes)
    FD._spell(f, facts("0.5.23"), strict=False)
    assert [x.name for x in f.fix] == ["--tp-size"]
    assert f.confidence_notes == ["SGLANG_ENABLE_SPEC_V2 is not read by SGLang 0.5.23, so it is not suggested"]
    f = finding(*fixes)
    FD._spell(f, facts("0.5.10", env={"SGLANG_ENABLE_SPEC_V2": "0"}), strict=True)
    assert [(x.name, x.was) for x in f.fix] == [("SGLANG_ENABLE_SPEC_V2", "0"), ("--tp-size", None)]


def test_a_flag_the_version_lacks():
    with pytest.raises(FD.FixError, match="--no-such-flag does not exist in SGLang 0.5.23"):
        FD._spell(finding(Fix(flag="--no-such-flag", value="1")), facts("0.5.23"), strict=True)
    f = finding(Fix(flag="--no-such-flag", value="1"), Fix(flag="--tp-size", value="4", direction="raise"))
    FD._spell(f, facts("0.5.23", flags={"--tp-size": 2}), strict=False)
    assert [(x.name, x.value, x.was) for x in f.fix] == [("--tp-size", "4", "2")]
    assert f.confidence_notes == ["--no-such-flag does not exist in SGLang 0.5.23, so it is not suggested"]


def test_another_components_variable_gets_the_value_in_use():
    f = finding(Fix(external_env="NCCL_P2P_DISABLE", value="1"), Fix(external_env="NCCL_DEBUG", value="INFO", was="WARN"))
    FD._spell(f, facts("0.5.23", env={"NCCL_P2P_DISABLE": "0", "NCCL_DEBUG": "TRACE"}), strict=True)
    assert [(x.name, x.was) for x in f.fix] == [("NCCL_P2P_DISABLE", "0"), ("NCCL_DEBUG", "WARN")]


def test_a_removed_flag_carries_no_value():
    f = finding(Fix(flag="--speculative-algorithm", value="EAGLE", action="remove", direction="remove"))
    FD._spell(f, facts("0.5.23", flags={"--speculative-algorithm": "EAGLE"}), strict=True)
    assert [(x.flag, x.value, x.was, x.action) for x in f.fix] == [("--speculative-algorithm", None, "EAGLE", "remove")]


@pytest.mark.parametrize("fix,note", [
    (Fix(flag="--mem-fraction-static", value="0.90", was="0.85", direction="lower"),
     "--mem-fraction-static 0.90 would not lower the value in use (0.85), so it is not suggested"),
    (Fix(flag="--mem-fraction-static", value="0.80", was="0.85", direction="raise"),
     "--mem-fraction-static 0.80 would not raise the value in use (0.85), so it is not suggested"),
    (Fix(flag="--kv-cache-dtype", value="fp8_e4m3", was="fp8_e4m3", direction="set"),
     "--kv-cache-dtype is already fp8_e4m3, so it is not suggested"),
])
def test_a_fix_pointing_the_wrong_way(fix, note):
    """Strict: an error with the note; otherwise dropped with it, the right ones kept."""
    good = Fix(flag="--tp-size", value="2", was="1", direction="raise")
    with pytest.raises(FD.FixError, match="^SGL-TEST-001: " + note.replace("(", r"\(").replace(")", r"\)")):
        FD._directions(finding(fix, good), None, strict=True)
    f = finding(fix, good)
    FD._directions(f, None, strict=False)
    assert f.fix == [good]
    assert f.confidence_notes == [note]


@pytest.mark.parametrize("direction", ["on", "remove"])
def test_switches_are_not_compared_with_the_value_in_use(direction):
    """'on' and 'remove' say what to do to a switch; only raise/lower/set compare values (a
    switch a server_args dump shows as its default is still worth naming)."""
    assert FD.direction_ok(Fix(flag="--x", value="true", was="true", direction=direction)) is True


def test_a_flag_added_within_the_versions_the_log_allows():
    """The log narrows the version to 0.5.13-0.5.14 and the flag exists only from 0.5.14 (and not
    in the newest release): it is spelled as the range's newest release spells it, with a note."""
    from diag.versions import VersionRange
    fx = SimpleNamespace(catalog=F.for_version(VersionRange(low="0.5.13", high="0.5.14")), flags={}, env={}, readings={})
    assert fx.catalog.versions == ["0.5.13", "0.5.14"]
    assert not F.for_version(None).translate("--cuda-graph-tc-compiler", "1")      # gone again later
    f = finding(Fix(flag="--cuda-graph-tc-compiler", value="1"))
    FD._spell(f, fx, strict=True)
    assert [(x.flag, x.value) for x in f.fix] == [("--cuda-graph-tc-compiler", "1")]
    assert len(f.confidence_notes) == 1 and "as SGLang 0.5.14 spells it" in f.confidence_notes[0]


def test_an_undated_log_gets_the_spelling_every_release_accepts():
    """No version in the input: --cuda-graph-backend-decode disabled (0.5.12+) is offered as
    --disable-cuda-graph, which every catalogued release accepts (0.5.23 as deprecated), with a note;
    a flag no spelling of which every release accepts takes the one most releases accept (the graph
    batch flag before 0.5.23 split it), with the newest's in a note."""
    from diag.versions import VersionRange
    undated = SimpleNamespace(catalog=F.for_version(None), flags={}, env={}, readings={}, version=VersionRange())
    f = finding(Fix(flag="--cuda-graph-backend-decode", value="disabled", option=1),
                Fix(flag="--cuda-graph-max-bs-decode", value="64", option=2, direction="lower"))
    FD._spell(f, undated, strict=True)
    assert [(x.flag, x.value) for x in f.fix] == [("--disable-cuda-graph", None), ("--cuda-graph-max-bs", "64")]
    assert any("accepted by every SGLang release" in n for n in f.confidence_notes)
    assert any("0.5.23 and later take --cuda-graph-max-bs-decode 64" in n for n in f.confidence_notes)
    # a dated log keeps its release's own spelling
    dated = SimpleNamespace(catalog=F.for_version("0.5.23"), flags={}, env={}, readings={}, version=VersionRange(exact="0.5.23"))
    g = finding(Fix(flag="--cuda-graph-backend-decode", value="disabled", option=1))
    FD._spell(g, dated, strict=True)
    assert [(x.flag, x.value) for x in g.fix] == [("--cuda-graph-backend-decode", "disabled")]
