"""Findings -> the ordered findings of a report, every fix spelled once for the user's version.

Done once, for all findings, after the rules ran:
  - each flag and SGLang variable spelled the way the user's SGLang version spells it (renamed
    flags translated; a flag the version lacks is dropped with a note — the test suite treats
    that as a failure of the rule that proposed it);
  - `was`: the value in use, from the launch command or the server_args dump;
  - the direction check: a fix that says it raises a value must propose a larger one than the
    value in use, one that lowers it a smaller one, and none may propose the value in use;
    a fix that fails the check is dropped with a note (and fails the tests);
  - merging findings of one category, ordering (root cause first, symptoms folded into it),
    status and what could not be checked.
"""
from __future__ import annotations

import re

from .numbers import to_float
from .report import Evidence, Finding, Fix, Report

MAX_EVIDENCE = 8


class FixError(AssertionError):
    """Raised instead of dropping a fix when strict (the tests run strict)."""


def finalize(report: Report, findings: list[Finding], facts, strict: bool = False) -> None:
    for f in findings:
        _spell(f, facts, strict)
        _directions(f, facts, strict)
        _renumber(f)
        _notes(f, facts)
        _cap_evidence(f)
    report.matched = [f.rule for f in findings]
    findings = _merge_same_category(findings)
    report.findings = _order(findings, facts)
    report.status = _status(report.findings, facts)
    report.unchecked = _unchecked(facts, report)


def _spell(finding: Finding, facts, strict: bool) -> None:
    cat = facts.catalog
    out: list[Fix] = []
    seen = set()
    for fix in finding.fix:
        if fix.flag:
            value = fix.value if fix.action != "remove" else None
            spelled = cat.translate(fix.flag, value) if cat else [(fix.flag, fix.value)]
            undated = getattr(getattr(facts, "version", None), "describe", lambda: "")() == "unknown"
            wide = None
            if cat and undated:
                from .flags import broadest_spelling, widest_spelling
                wide = widest_spelling(fix.flag, value)
                every = wide is not None
                wide = wide or broadest_spelling(fix.flag, value)
            if wide is not None and spelled and [wide] != spelled:
                # the log does not date SGLang: a spelling every catalogued release accepts (the newest as
                # deprecated) works whatever the user runs, else the one most releases accept; the newest
                # release's own name is noted
                newest = " ".join(f"{n} {v}" if v not in (None, "") else n for n, v in spelled)
                note = (f"{wide[0]} is accepted by every SGLang release diag knows; {cat.versions[-1]} prefers {newest}" if every else
                        f"{wide[0]} is how the SGLang releases before {cat.versions[-1]} spell it (the log does not date its "
                        f"release); {cat.versions[-1]} and later take {newest}")
                if note not in finding.confidence_notes:
                    finding.confidence_notes.append(note)
                spelled = [wide]
            if not spelled and cat and len(cat.versions) > 1:
                # the log narrows the version only to a range over which the flag was renamed or added:
                # spelled as the newest release of the range spells it
                from .flags import for_version
                newest = for_version(cat.versions[-1])
                spelled = newest.translate(fix.flag, value)
                if spelled:
                    note = (f"{spelled[0][0]} is spelled as SGLang {cat.versions[-1]} spells it; the log narrows the version "
                            f"only to {cat.label}, across which the flag changed")
                    if note not in finding.confidence_notes:
                        finding.confidence_notes.append(note)
            if not spelled and cat and cat.legacy(fix.flag):
                spelled = [(fix.flag, value)]          # a flag of releases before the catalog, which the log's version can be
            if not spelled:
                msg = f"{fix.flag} does not exist in SGLang {cat.label}, so it is not suggested"
                if strict:
                    raise FixError(f"{finding.rule}: {msg}")
                finding.confidence_notes.append(msg)
                continue
            for name, value in spelled:
                canon = name
                written = getattr(getattr(facts, "launch", None), "written", None) or {}
                if written.get(name, name) != name:
                    # the command spells this flag another way its SGLang accepts (--tp for --tp-size): keep that spelling
                    name = written[name]
                if (name, fix.option) in seen:
                    continue
                seen.add((name, fix.option))
                out.append(Fix(flag=name, value=value if fix.action != "remove" else None, was=_was(facts, canon, fix),
                               why=fix.why, action=fix.action, option=fix.option, direction=fix.direction))
        elif fix.env:
            if cat and not cat.has_env(fix.env):
                msg = f"{fix.env} is not read by SGLang {cat.label}, so it is not suggested"
                if strict:
                    raise FixError(f"{finding.rule}: {msg}")
                finding.confidence_notes.append(msg)
                continue
            if fix.was is None and fix.env in facts.env:
                fix.was = str(facts.env[fix.env])
            out.append(fix)
        else:
            if fix.was is None and fix.external_env in facts.env:
                fix.was = str(facts.env[fix.external_env])
            out.append(fix)
    finding.fix = out


def _was(facts, name: str, fix: Fix) -> str | None:
    if fix.was is not None:
        return fix.was
    current = facts.flags.get(name)
    if current is None and facts.catalog is not None:      # the command may spell it another way (an alias)
        current = next((facts.flags[n] for n in facts.catalog.other_spellings(name) if n in facts.flags), None)
    if current is None and name == "--mem-fraction-static" and facts.readings.get("mem_fraction_static") is not None:
        current = facts.readings["mem_fraction_static"]
    if current is None:
        return None
    return str(current).lower() if isinstance(current, bool) else str(current)


def direction_ok(fix: Fix) -> bool:
    """Whether a fix does what it says to the value in use (unknown values pass)."""
    if fix.direction in ("raise", "lower"):
        new, old = to_float(fix.value), to_float(fix.was)
        if new is None:
            return False
        if old is None:
            return True
        return new > old if fix.direction == "raise" else new < old
    if fix.direction == "set" and fix.was is not None and fix.value is not None:
        return str(fix.value) != str(fix.was)
    return True


def _directions(finding: Finding, facts, strict: bool) -> None:
    keep = []
    for fix in finding.fix:
        if direction_ok(fix):
            if fix.direction in ("raise", "lower") and fix.was is None and fix.value is not None:
                # the direction is sure, the starting point is not: say what the number is relative to
                mem = finding.memory or {}
                assumed = mem.get("mem_fraction_static") if fix.flag == "--mem-fraction-static" else None
                if assumed is not None and mem.get("mem_fraction_static_auto") and mem.get("total_gib") is None:
                    assumed = None          # no GPU capacity known: SGLang's automatic value is not known either
                    default = ("SGLang's automatic value, which depends on the GPU (about 0.80–0.88 on GPUs of "
                               "24–80 GiB, higher on larger ones; the input names no GPU)")
                else:
                    default = "SGLang's default"
                word = "lower" if fix.direction == "lower" else "higher"
                note = (f"the input shows no value in use for {fix.name}: {fix.value} is {word} than "
                        + (f"the {assumed:g} diag assumed (SGLang's default for this version and GPU)"
                           if isinstance(assumed, (int, float)) else default)
                        + f"; if you set one, {fix.direction} that instead")
                if note not in finding.confidence_notes:
                    finding.confidence_notes.append(note)
            keep.append(fix)
            continue
        msg = (f"{fix.name} {fix.value} would not {fix.direction} the value in use ({fix.was}), so it is not suggested"
               if fix.direction in ("raise", "lower") else f"{fix.name} is already {fix.was}, so it is not suggested")
        if strict:
            raise FixError(f"{finding.rule}: {msg}")
        finding.confidence_notes.append(msg)
    finding.fix = keep


def _renumber(finding: Finding) -> None:
    """Options numbered 1, 2, … in their order (some may have lost every change)."""
    with_changes = {f.option for f in finding.fix}
    info_only = {o["option"] for o in finding.options if any(t.startswith(f"option {o['option']}: ") for t in finding.fix_other)}
    used = sorted(with_changes | (info_only - with_changes))
    new = {old: i for i, old in enumerate(used, 1)}
    for f in finding.fix:
        f.option = new[f.option]
    finding.options = [dict(o, option=new[o["option"]]) for o in finding.options if o.get("option") in new]
    out = []
    for text in finding.fix_other:
        m = re.match(r"option (\d+): ", text)
        if m:
            n = new.get(int(m[1]))
            if n is None:
                continue
            text = f"option {n}: {text[m.end():]}"
        if text not in out:
            out.append(text)
    finding.fix_other = out


def _notes(finding: Finding, facts) -> None:
    if facts.fragment and finding.role != "symptom":
        for note in facts.fragment:
            msg = f"partial evidence: {note}"
            if msg not in finding.confidence_notes:
                finding.confidence_notes.append(msg)
    if facts.catalog and "unknown" in facts.catalog.requested and any(f.flag or f.env for f in finding.fix):
        if facts.catalog.note not in finding.confidence_notes:
            finding.confidence_notes.append(facts.catalog.note)


def _cap_evidence(finding: Finding) -> None:
    unique: dict = {}
    for e in sorted(finding.evidence, key=lambda e: (e.role != "trigger", e.input, e.line)):
        unique.setdefault((e.input, e.line), e)
    finding.evidence = sorted(list(unique.values())[:MAX_EVIDENCE], key=lambda e: (e.input, e.line))


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
    return out


def _order(findings: list[Finding], facts=None) -> list[Finding]:
    outlived = _outlived(findings, facts)           # ids of findings
    primary = [f for f in findings if f.role == "root" and id(f) not in outlived]
    secondary = [f for f in findings if f.role == "secondary" or id(f) in outlived]
    symptoms = [f for f in findings if f.role == "symptom"]
    if not primary:
        primary, secondary = secondary, []
        bystanders = _after_first_failure(primary, facts)
    else:
        bystanders = set()
    if not primary:
        primary, symptoms = symptoms[:1], symptoms[1:]
    primary.sort(key=lambda f: (id(f) in bystanders, -f.rank_score, _first_line(f)))
    _inner_first(primary)
    _contested(primary)
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


def _triggers(f: Finding) -> list[tuple[int, int]]:
    return [(e.input, e.line) for e in f.evidence if e.role == "trigger"]


def _outlived(findings: list[Finding], facts) -> set[int]:
    """Root findings whose every trigger the server went on past: a start-up step or a served batch
    of the same log comes after them, and a root finding of its own stands at a failure after that
    step (a transfer error at start-up, then a crash three minutes into serving). The later failure
    is the one the process died of; the earlier finding stays, as a secondary one."""
    if facts is None:
        return set()
    roots = [f for f in findings if f.role == "root" and _triggers(f)]
    out = set()
    for f in roots:
        last = max(_triggers(f))
        step = _progress_after(facts, *last)
        if step is None:
            continue
        if any(g is not f and g.category != f.category and min(_triggers(g))[0] == last[0] and min(_triggers(g))[1] > step
               for g in roots):
            out.add(id(f))
            note = f"the server went on after it (line {step}) and failed later"
            if note not in f.confidence_notes:
                f.confidence_notes.append(note)
    return out


PROGRESS_STEPS = ("dist_end", "load_begin", "load_end", "kv_alloc", "pool_end", "graph_begin", "graph_end", "ready", "http_up")


def _progress_after(facts, inp: int, line: int) -> int | None:
    """The first line after `line` of input `inp` that shows the server went on: a start-up step
    or a batch it served."""
    steps = [m.line for m in getattr(facts, "milestones", ()) if m.input == inp and m.line > line
             and m.data.get("phase") in PROGRESS_STEPS]
    batches = getattr(facts, "batches", ())
    if inp < len(batches) and len(batches[inp]) and (batches[inp].last_line or 0) > line:
        b = batches[inp]
        if b.first_line > line:
            steps.append(b.first_line)
        else:           # rows before and after it: the first kept row after it (older rows live in buckets)
            steps.append(min((x for x in b.line if x > line), default=b.last_line))
    return min(steps) if steps else None


def _after_first_failure(secondary: list[Finding], facts) -> set[int]:
    """Secondary findings (bystanders, generic readings) whose triggers all come after the log's
    first failure, when another one stands at that failure: the first error in time is the one to
    fix (a peer's closed connection after the rank that failed first)."""
    ev = getattr(facts, "failure_event", None)
    if ev is None:
        return set()
    first = (ev.input, ev.line)
    at_first = [f for f in secondary if first in _triggers(f)]
    if not at_first:
        return set()
    return {id(f) for f in secondary if all(f is not g for g in at_first) and _triggers(f) and min(_triggers(f)) > first}


CONTESTED = 0.05        # a runner-up of another category this close is as strong an explanation
CONTESTED_CAP = 0.8     # and the leading finding is then not a confident answer


def _contested(primary: list[Finding]) -> None:
    """Two root causes of different categories, each as well supported as the other ('no kernel
    image for this GPU' and a JIT build's missing header in one paste): the one that leads by
    priority is not a confident answer. Its confidence is held under the confident mark and a
    note names the other. Two rules reading the same line are not two causes."""
    if len(primary) < 2:
        return
    top, other = primary[0], primary[1]
    if top.category == other.category:
        return
    lines = {(e.input, e.line) for e in top.evidence if e.role == "trigger"}
    if lines & {(e.input, e.line) for e in other.evidence if e.role == "trigger"}:
        return                  # two readings of the same line: the more specific rule leads by priority
    if other.confidence >= top.confidence - CONTESTED and top.confidence > CONTESTED_CAP:
        top.confidence = CONTESTED_CAP
        note = f"another explanation is as well supported: {other.title.rstrip('.')} ({other.category})"
        if note not in top.confidence_notes:
            top.confidence_notes.append(note)


def _inner_first(primary: list[Finding]) -> None:
    """A specific cause quoted inside an exception's message (Triton's dtype check inside its
    CompilationError, NCCL's detail inside a DistBackendError) leads over the finding about the
    wrapping exception itself, whatever their priorities."""
    for i in range(1, len(primary)):
        f = primary[i]
        if not f.inside or f.category == "runtime.other":
            continue
        j = next((k for k in range(i) if any((e.input, e.line) in f.inside for e in primary[k].evidence
                                              if e.role == "trigger")), None)
        if j is not None:
            primary.insert(j, primary.pop(i))


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


__all__ = ["finalize", "direction_ok", "FixError", "to_float"]
