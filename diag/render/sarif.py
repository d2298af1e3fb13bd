"""SARIF 2.1.0 for code-scanning UIs and CI: one result per finding, located at its evidence lines."""
from __future__ import annotations

from ..jsonout import dumps

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "note"}


URI_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/:._-~")


def _uri(path: str) -> str:
    """A relative URI reference for a path: RFC 3986 percent-encoding of its UTF-8 bytes."""
    if path == "<stdin>":
        return "stdin"
    return "".join(c if c in URI_SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape"))
                   for c in path)


def sarif(report) -> dict:
    rules, seen = [], {}
    results = []
    for f in report.findings:
        if f.rule not in seen:
            seen[f.rule] = len(rules)
            rules.append({"id": f.rule, "name": f.category, "shortDescription": {"text": f.title},
                          "defaultConfiguration": {"level": LEVEL.get(f.severity, "warning")},
                          "properties": {"category": f.category, "severity": f.severity}})
        locations = []
        for e in f.evidence[:10]:
            if 0 <= e.input < len(report.inputs) and e.line and e.line > 0:
                locations.append({"physicalLocation": {
                    "artifactLocation": {"uri": _uri(report.inputs[e.input].path)},
                    "region": {"startLine": int(e.line), "snippet": {"text": e.text[:500]}}}})
        result = {"ruleId": f.rule, "ruleIndex": seen[f.rule], "level": LEVEL.get(f.severity, "warning"),
                  "message": {"text": f"{f.title}. {f.summary}".strip()},
                  "properties": {"confidence": round(f.confidence, 2), "category": f.category}}
        if locations:
            result["locations"] = locations
        fixes = [x.to_json() for x in f.fix]
        if fixes:
            result["properties"]["fix"] = fixes
        results.append(result)
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "diag", "version": report.tool_version or "0",
                            "rules": rules}},
        "artifacts": [{"location": {"uri": _uri(i.path)}} for i in report.inputs],
        "results": results,
        "properties": {"status": report.status, "unchecked": report.unchecked},
    }]}


def render(report) -> str:
    return dumps(sarif(report))
