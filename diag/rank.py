"""Matched rules -> the ordered findings of a report.

Runs each rule's remedy helpers, fills its texts, quotes its evidence, checks every
suggested flag against the user's SGLang version, then orders the findings: the most
likely root cause first, symptoms of it folded in as evidence.
"""
from __future__ import annotations

import re

from .remedies import REMEDIES
from .report import Evidence, Finding, Fix, Report
from .rules_v1 import Context, fill

MAX_EVIDENCE = 8
SEVERITY_WEIGHT = {"critical": 3, "error": 2, "warning": 1, "info": 0}


def finalize(report: Report, contexts: list[Context], facts) -> None:
    findings: list[Finding] = []
    for ctx in contexts:
        if _complete(ctx, facts):
            findings.append(ctx.finding)
    report.matched = [f.rule for f in findings]
    findings = _merge_same_category(findings)
    report.findings = _order(findings)
    report.status = _status(report.findings, facts)
    report.unchecked = _unchecked(facts, report)


def _complete(ctx: Context, facts) -> bool:
    rule, finding = ctx.rule, ctx.finding
    for hit in ctx.hits:
        if len([e for e in finding.evidence if e.role == "trigger"]) >= 6:
            break
        finding.evidence.append(Evidence(hit.input, hit.line, hit.text, "trigger"))
    for ev in ctx.events[:3]:
        ctx.evidence(ev, role="trigger")
    for name in rule.remedy:
        try:
            keep = REMEDIES[name](ctx)
        except (ValueError, TypeError, OverflowError, ZeroDivisionError, ArithmeticError):
            # a number in the log that the remedy could not read (5,000 digits, '1.2.3', inf):
            # the finding stands, without the arithmetic that needed it
            note = "some numbers in the log could not be read, so the fix is not computed from them"
            if note not in finding.confidence_notes:
                finding.confidence_notes.append(note)
            continue
        if keep is False:  # the helper found that this rule does not apply after all
            return False
    for spec in rule.fix:
        ctx.add_fix(flag=spec.get("flag"), env=spec.get("env"), external_env=spec.get("external_env"),
                    value=fill(str(spec["value"]), ctx.values) if "value" in spec else None,
                    why=fill(spec.get("why", ""), ctx.values), action=spec.get("action", "set"), option=spec.get("option", 1))
    finding.fix_other.extend(fill(t, ctx.values) for t in rule.fix_other)
    finding.title = fill(finding.title, ctx.values)
    finding.summary = fill(finding.summary, ctx.values)
    finding.explanation = fill(finding.explanation, ctx.values)
    _check_fixes(finding, facts)
    _renumber_options(finding)
    _partial_evidence(finding, facts)
    finding.evidence.sort(key=lambda e: (e.role != "trigger", e.input, e.line))
    unique: dict = {}
    for e in finding.evidence:
        unique.setdefault((e.input, e.line), e)
    finding.evidence = list(unique.values())[:MAX_EVIDENCE]
    finding.evidence.sort(key=lambda e: (e.input, e.line))
    finding.confidence = max(0.05, min(0.99, finding.confidence))
    finding.rank_score = ctx.rule.priority + 10 * finding.confidence + SEVERITY_WEIGHT.get(finding.severity, 0)
    return True


def _check_fixes(finding: Finding, facts) -> None:
    """Every flag and SGLang variable spelled for the user's version; those it lacks are dropped."""
    cat = facts.catalog
    out: list[Fix] = []
    seen = set()
    for fix in finding.fix:
        if fix.flag:
            spelled = cat.translate(fix.flag, fix.value if fix.action != "remove" else None)
            if not spelled:
                finding.confidence_notes.append(f"{fix.flag} does not exist in SGLang {cat.label}, so it is not suggested")
                continue
            for name, value in spelled:
                key = (name, fix.option)
                if key in seen:
                    continue
                seen.add(key)
                was = fix.was
                if was is None and fix.action != "remove":
                    current = facts.flags.get(name)
                    was = None if current is None else str(current)
                out.append(Fix(flag=name, value=value if fix.action != "remove" else None, was=was, why=fix.why,
                               action=fix.action, option=fix.option))
        elif fix.env:
            if not cat.has_env(fix.env):
                finding.confidence_notes.append(f"{fix.env} is not read by SGLang {cat.label}, so it is not suggested")
                continue
            out.append(fix)
        else:
            out.append(fix)
    finding.fix = out


def _renumber_options(finding: Finding) -> None:
    """Options numbered 1, 2, … in their order (some may have been dropped for the version)."""
    used = sorted({f.option for f in finding.fix} | {o["option"] for o in finding.options if o.get("option") in {f.option for f in finding.fix}})
    new = {old: i for i, old in enumerate(used, 1)}
    for f in finding.fix:
        f.option = new[f.option]
    finding.options = [dict(o, option=new[o["option"]]) for o in finding.options if o.get("option") in new]
    for i, text in enumerate(finding.fix_other):
        m = re.match(r"option (\d+): ", text)
        if m:
            n = new.get(int(m[1]))
            finding.fix_other[i] = f"option {n}: {text[m.end():]}" if n else text[m.end():]


def _partial_evidence(finding: Finding, facts) -> None:
    if facts.fragment and finding.role != "symptom":
        finding.confidence -= 0.05 * min(2, len(facts.fragment))
        for note in facts.fragment:
            msg = f"partial evidence: {note}"
            if msg not in finding.confidence_notes:
                finding.confidence_notes.append(msg)
    if facts.catalog and "unknown" in facts.catalog.requested and any(f.flag or f.env for f in finding.fix):
        note = facts.catalog.note
        if note not in finding.confidence_notes:
            finding.confidence_notes.append(note)


def _merge_same_category(findings: list[Finding]) -> list[Finding]:
    by_cat: dict[str, Finding] = {}
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: -f.rank_score):
        first = by_cat.get(f.category)
        if first is None or f.role != "root":
            by_cat.setdefault(f.category, f)
            out.append(f)
            continue
        for e in f.evidence:  # a second rule seeing the same cause: its lines support the first
            if not any(x.line == e.line and x.input == e.input for x in first.evidence) and len(first.evidence) < MAX_EVIDENCE:
                first.evidence.append(Evidence(e.input, e.line, e.text, "context"))
        first.evidence.sort(key=lambda e: (e.input, e.line))
        for fx in f.fix:
            if not any(x.name == fx.name for x in first.fix):
                fx.option = max([x.option for x in first.fix] + [0]) + 1
                first.fix.append(fx)
    return out


def _order(findings: list[Finding]) -> list[Finding]:
    primary = [f for f in findings if f.role == "root"]
    secondary = [f for f in findings if f.role == "secondary"]
    symptoms = [f for f in findings if f.role == "symptom"]
    if not primary:
        primary, secondary = secondary, []
    if not primary:
        primary, symptoms = symptoms[:1], symptoms[1:]
    primary.sort(key=lambda f: (-f.rank_score, _first_line(f)))
    if primary:
        top = primary[0]
        for s in secondary + symptoms:
            for e in s.evidence[:2]:
                if not any(x.line == e.line and x.input == e.input for x in top.evidence):
                    top.evidence.append(Evidence(e.input, e.line, e.text, "symptom"))
            note = f"followed by: {s.title.rstrip('.')}"
            if s.title and note not in top.confidence_notes:
                top.confidence_notes.append(note)
        top.evidence.sort(key=lambda e: (e.input, e.line))
    return primary


def _first_line(f: Finding) -> tuple:
    return min(((e.input, e.line) for e in f.evidence), default=(99, 10**9))


def _status(findings: list[Finding], facts) -> str:
    if findings and findings[0].category == "env.empty_log":
        return "inconclusive"
    if any(f.severity in ("warning", "error", "critical") for f in findings):
        return "findings"
    if facts.state in ("serving", "ready") or facts.smi:
        return "findings" if findings else "clean"
    return "findings" if findings else "inconclusive"


def _unchecked(facts, report: Report) -> list[str]:
    out = []
    if facts.catalog:
        out.append(facts.catalog.note)
    if facts.model_note:
        out.append(facts.model_note)
    memory = any(f.category.startswith("oom.") for f in report.findings)
    if memory and facts.model is None:
        out.append("model architecture not identified: the memory arithmetic uses only the numbers the log printed "
                   "(name the model with --launch or a log that shows --model-path)")
    if memory and not facts.gpus:
        out.append("no nvidia-smi snapshot: other processes on the GPUs and their capacity were not checked (pass one with --smi)")
    return out
