"""Running one rule case: the log (and nvidia-smi snapshot, launch command, version) through the
whole pipeline, strict (a fix the version lacks, or one pointing the wrong way, raises)."""
from __future__ import annotations

from pathlib import Path

from diag.analyze import Options, analyze
from diag.numbers import to_float


def run_case(case, tmp: Path):
    log = tmp / "case.log"
    log.write_text(case.log, encoding="utf-8")
    smi = []
    if case.smi:
        p = tmp / "case-smi.txt"
        p.write_text(case.smi, encoding="utf-8")
        smi = [str(p)]
    opts = Options(sglang_version=case.sglang_version, launch=case.launch, model_config=case.model_config,
                   strict=True)
    return analyze([str(log)], smi, opts)


def _fix_matches(fix, want: dict) -> bool:
    for key in ("flag", "env", "external_env"):
        if key in want and getattr(fix, key) != want[key]:
            return False
    if not any(k in want for k in ("flag", "env", "external_env")):
        return False
    if "direction" in want and fix.direction != want["direction"]:
        return False
    if "option" in want and fix.option != want["option"]:
        return False
    if "value" in want and str(fix.value) != str(want["value"]):
        return False
    v = to_float(fix.value)
    if "min" in want and (v is None or v < want["min"]):
        return False
    if "max" in want and (v is None or v > want["max"]):
        return False
    return True


# Directions that hold for every case of a category, whatever its want says (issue 8: on a
# graph-capture OOM diag lowers the fraction; on a weights OOM it never raises it). Each OOM here
# needs more memory outside the static pools (graphs, draft graphs, activations), so no option
# may raise --mem-fraction-static; for weights the fraction cannot help at all.
NEVER_RAISES_THE_FRACTION = ("oom.cuda_graph", "oom.speculative", "oom.runtime_prefill", "oom.multimodal")
NEVER_TOUCHES_THE_FRACTION = ("oom.weights",)


def direction_problems(finding) -> list[str]:
    out = []
    for f in finding.fix:
        if f.flag != "--mem-fraction-static":
            continue
        if finding.category in NEVER_TOUCHES_THE_FRACTION:
            out.append(f"{finding.category}: option {f.option} changes --mem-fraction-static ({f.value}), which cannot help")
        elif finding.category in NEVER_RAISES_THE_FRACTION and f.direction != "lower":
            out.append(f"{finding.category}: option {f.option} would {f.direction} --mem-fraction-static to {f.value} "
                       "(this OOM needs more memory outside the static pools)")
    return out


def check_want(report, rule_id: str, want: dict) -> list[str]:
    """What the report gets wrong against the case's expectations (empty when right)."""
    problems = []
    top = report.findings[0] if report.findings else None
    if top is None:
        return ["no finding"]
    if top.rule != rule_id and "rule" not in want:
        problems.append(f"top finding is {top.rule} ({top.category}: {top.title}), not {rule_id}")
    if want.get("rule") and top.rule != want["rule"]:
        problems.append(f"top finding is {top.rule}, not {want['rule']}")
    if want.get("category") and top.category != want["category"]:
        problems.append(f"category {top.category}, want {want['category']}")
    problems += direction_problems(top)
    if want.get("severity") and top.severity != want["severity"]:
        problems.append(f"severity {top.severity}, want {want['severity']}")
    for w in want.get("fix") or []:
        if not any(_fix_matches(f, w) for f in top.fix):
            got = [(f.name, f.value, f.direction, f.option) for f in top.fix]
            problems.append(f"no fix like {w}; fixes: {got}")
    for name in want.get("no_fix") or []:
        if any(f.name == name for f in top.fix):
            problems.append(f"{name} is suggested but must not be")
    lines = {e.line for e in top.evidence if e.input == 0}
    for n in want.get("evidence") or []:
        if n not in lines:
            problems.append(f"line {n} not in the evidence {sorted(lines)}")
    if "confidence_at_least" in want and top.confidence < want["confidence_at_least"]:
        problems.append(f"confidence {top.confidence:.2f} < {want['confidence_at_least']}")
    if "confidence_below" in want and top.confidence >= want["confidence_below"]:
        problems.append(f"confidence {top.confidence:.2f} >= {want['confidence_below']}")
    text = " ".join([top.title, top.summary, top.explanation] + [f.why for f in top.fix] + top.fix_other)
    for t in want.get("text") or []:
        if t not in text:
            problems.append(f"text lacks {t!r}")
    for t in want.get("no_text") or []:
        if t in text:
            problems.append(f"text has {t!r}")
    for f in report.findings:
        for where, t in (("title", f.title), ("summary", f.summary), ("explanation", f.explanation)):
            if "?" in t.replace("?)", "").replace("'?'", ""):
                if " ? " in f" {t} " or t.endswith("?") or "(?" in t:
                    problems.append(f"{f.rule} {where} has an unknown value: {t!r}")
    return problems


def case_problems(rule, case, tmp: Path, report=None) -> list[str]:
    """What test_rule_cases.test_case would fail on for this case (empty when it passes): the
    suite's own check, callable in-process (the mutation meta-tests run it under a mutation).
    An exception of the strict pipeline (a fix the version lacks, one pointing the wrong way) is
    a problem too."""
    from diag.findings import FixError
    if report is None:
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            report = run_case(case, tmp)
        except FixError as e:
            return [f"strict: {e}"]
    if case.expect == "no-match":
        return [f"{rule.id} matched: {[f.title for f in report.findings]}"] if rule.id in report.matched else []
    if case.expect == "match":
        return [] if rule.id in report.matched else [f"{rule.id} did not match; matched {report.matched}"]
    return check_want(report, rule.id, case.want)


def case_id(rule, case) -> str:
    """A test id for a case, ASCII only: pytest escapes other characters in node ids, and tools
    that pass the ids back (mutmut's test selection, -k by copy and paste) then miss them."""
    import re
    return re.sub(r"[^\x20-\x7e]", "_", f"{rule.id}:{case.name}")
