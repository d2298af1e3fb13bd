"""`diag rules show`: everything a rule's finding can say, from the rule file, its fix library and
the catalog messages it names (nothing is left to Python code)."""
from __future__ import annotations

import textwrap

from . import schema as S
from .registry import Registry


def _cond(c) -> str:
    return c.describe() if c.subject != "version" else f"SGLang version {c.target}"


def _messages(names: tuple[str, ...]) -> list[dict]:
    out = []
    try:
        from ..messages import Catalog
        cat = Catalog.open()
    except Exception:
        return [{"name": n} for n in names]
    for name in names:
        entry = {"name": name}
        if not name.endswith(".*"):
            info = cat.family_info(name)
            if info:
                entries = cat.family(name)
                entry.update(templates=sorted({e.template for e in entries if e.template})[:4],
                             versions=(info["versions"][0] if len(info["versions"]) == 1 else
                                       f"{info['versions'][0]}–{info['versions'][-1]}" if info["versions"] else None),
                             component=info["component"])
            else:
                e = cat.get(name)
                if e is not None:
                    entry.update(templates=[e.template or e.regex], component=e.component)
        out.append(entry)
    return out


def describe(reg: Registry, rule: S.Rule) -> dict:
    """The rule as data: what it matches, reads, says and can suggest."""
    fixes = []
    for f in rule.fixes:
        if f.use:
            lib = reg.library[f.use]
            fixes.append({"use": f.use, "title": lib.title, "arithmetic": lib.arithmetic, "notes": list(lib.notes),
                          "changes": [{c.kind: c.name, "direction": c.direction, "why": c.why} for c in lib.changes],
                          "when": [_cond(c) for c in f.when], "applies_to": f.applies_to,
                          "offered": "when the explainer computes it and it fits"})
        else:
            kind = "flag" if f.flag else ("env" if f.env else "external_env")
            fixes.append({k: v for k, v in {
                "option": f.option, "title": f.title or None, "cost": f.cost, kind: f.name, "value": f.value,
                "action": f.action, "direction": f.direction, "why": f.why, "when": [_cond(c) for c in f.when] or None,
                "applies_to": f.applies_to}.items() if v is not None})
    return {
        "id": rule.id, "slug": rule.slug, "category": rule.category, "severity": rule.severity, "role": rule.role,
        "priority": rule.priority, "applies_to": rule.applies_to, "file": rule.path,
        "detects": rule.detects, "explainers": [dict(name=e.name, **e.kwargs) for e in rule.explainers],
        "match": {
            "messages": _messages(rule.messages), "all_messages": _messages(rule.all_messages),
            "unless_messages": list(rule.unless_messages), "events": list(rule.events),
            "unless_events": list(rule.unless_events), "where": [_cond(c) for c in rule.where],
            "where_any": [_cond(c) for c in rule.where_any], "unless": [_cond(c) for c in rule.unless],
            "fallback": rule.fallback,
        },
        "confidence": {"base": rule.confidence, "by_phase_basis": rule.by_phase_basis, "max": rule.confidence_max,
                       "generic": rule.generic},
        "texts": {"title": rule.title, "summary": rule.summary, "why": rule.why, "fix_safety": rule.fix_safety},
        "tables": rule.tables, "evidence": list(rule.evidence),
        "fixes": fixes,
        "fix_other": [{"text": o.text, "option": o.option, "when": [_cond(c) for c in o.when] or None} for o in rule.fix_other],
        "cases": [{"name": c.name, "expect": c.expect, "want": c.want} for c in rule.cases],
        "see": list(rule.see),
    }


def text(reg: Registry, rule: S.Rule, width: int = 100) -> str:
    d = describe(reg, rule)
    out: list[str] = []

    def para(head: str, body: str | None, indent: int = 2) -> None:
        if not body:
            return
        out.append(head)
        for part in str(body).strip().split("\n"):
            out.extend(textwrap.wrap(part, width - indent, initial_indent=" " * indent, subsequent_indent=" " * indent) or [""])
        out.append("")

    out.append(f"{rule.id}  {rule.slug}")
    out.append(f"category {rule.category} · severity {rule.severity} · role {rule.role} · priority {rule.priority}"
               + (f" · SGLang {rule.applies_to}" if rule.applies_to else ""))
    out.append("")
    para("What it detects", rule.detects)
    out.append("Matches")
    m = d["match"]
    for key in ("messages", "all_messages"):
        for msg in m[key]:
            line = f"  {'any of' if key == 'messages' else 'each of'}: {msg['name']}"
            if msg.get("versions"):
                line += f"  (SGLang {msg['versions']})"
            out.append(line)
            for t in msg.get("templates") or []:
                out.extend(textwrap.wrap(t, width - 8, initial_indent="      | ", subsequent_indent="      | "))
    for key, label in (("unless_messages", "not when"), ("events", "event"), ("unless_events", "not with event"),
                       ("where", "where"), ("where_any", "where any of"), ("unless", "unless")):
        for item in m[key]:
            out.append(f"  {label}: {item}")
    if m.get("fallback"):
        out.append("  fallback: the finding goes when a specific rule's finding quotes the lines it rests on")
    if d["explainers"]:
        out.append("  explainers: " + ", ".join(
            e["name"] + (f"({', '.join(f'{k}={v}' for k, v in e.items() if k != 'name')})" if len(e) > 1 else "")
            for e in d["explainers"]))
    c = d["confidence"]
    out.append(f"  confidence: {c['base']}" + (f", by step basis {c['by_phase_basis']}" if c["by_phase_basis"] else "")
               + (" (generic: at most 0.6)" if c["generic"] else "") + f", at most {c['max']}")
    out.append("")
    para("Title", rule.title)
    para("Summary", rule.summary)
    para("Why it happens", rule.why)
    para("Fix safety", rule.fix_safety)
    if d["fixes"]:
        out.append("Fixes (ranked by cost, then in this order)")
        for f in d["fixes"]:
            if "use" in f:
                out.append(f"  option {f['use']}: {f['title']}")
                for ch in f["changes"]:
                    name = next(v for k, v in ch.items() if k in ("flag", "env", "external_env"))
                    out.append(f"    {name} ({ch['direction']}): {ch['why']}")
                if f["arithmetic"]:
                    out.extend(textwrap.wrap(f"arithmetic: {f['arithmetic']}", width - 4, initial_indent="    ",
                                             subsequent_indent="      "))
                for n in f["notes"]:
                    out.append(f"    note: {n}")
                out.append(f"    offered {f['offered']}" + (f"; when {', '.join(f['when'])}" if f["when"] else ""))
            else:
                name = f.get("flag") or f.get("env") or f.get("external_env")
                value = "" if f.get("value") is None else f" {f['value']}"
                out.append(f"  option {f['option']}{': ' + f['title'] if f.get('title') else ''}")
                out.append(f"    {'remove ' if f['action'] == 'remove' else ''}{name}{value} ({f['direction']}): {f['why']}")
                if f.get("when"):
                    out.append(f"    when {', '.join(f['when'])}")
                if f.get("applies_to"):
                    out.append(f"    in SGLang {f['applies_to']}")
        out.append("")
    if d["fix_other"]:
        out.append("Other actions")
        for o in d["fix_other"]:
            out.extend(textwrap.wrap(f"- {o['text']}" + (f" (with option {o['option']})" if o["option"] else "")
                                     + (f" (when {', '.join(o['when'])})" if o["when"] else ""), width - 2,
                                     initial_indent="  ", subsequent_indent="    "))
        out.append("")
    if rule.cases:
        out.append("Cases")
        for case in rule.cases:
            out.append(f"  {case.expect}: {case.name}")
        out.append("")
    out.append(f"file: {rule.path}")
    return "\n".join(out)
