"""The report model: the one object every renderer reads (schema diag.report/1)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "diag.report/1"
SEVERITIES = ("info", "warning", "error", "critical")


@dataclass
class Evidence:
    input: int
    line: int
    text: str
    role: str = "trigger"  # trigger | context | symptom

    def to_json(self) -> dict:
        return {"input": self.input, "line": self.line, "text": self.text, "role": self.role}


@dataclass
class Fix:
    """One change to make. Exactly one of flag / env / external_env is set."""
    flag: str | None = None
    env: str | None = None           # an environment variable SGLang reads
    external_env: str | None = None  # a variable of another component (NCCL, PyTorch, shell)
    value: str | None = None
    was: str | None = None
    why: str = ""
    action: str = "set"              # set | remove
    option: int = 1                  # fixes with the same option number go together
    direction: str = "set"           # raise | lower | set | remove | on: what the change does to the value in use

    @property
    def name(self) -> str:
        return self.flag or self.env or self.external_env or ""

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        if self.flag:
            out["flag"] = self.flag
        elif self.env:
            out["env"] = self.env
        else:
            out["external_env"] = self.external_env
        if self.action == "remove":
            out["value"] = None
            out["action"] = "remove"
        elif self.value is not None:
            out["value"] = self.value
        if self.was is not None:
            out["was"] = self.was
        out["why"] = self.why
        out["option"] = self.option
        out["direction"] = self.direction
        return out


@dataclass
class Finding:
    rule: str
    category: str
    severity: str
    confidence: float
    title: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    memory: dict = field(default_factory=dict)
    fix: list[Fix] = field(default_factory=list)
    fix_other: list[str] = field(default_factory=list)
    explanation: str = ""
    confidence_notes: list[str] = field(default_factory=list)
    options: list[dict] = field(default_factory=list)  # ranked options: {"option", "title", "cost"}
    role: str = "root"          # root | secondary | symptom (see diag/rules/schema.py)
    fix_safety: str = ""
    rank_score: float = 0.0

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "category": self.category,
            "severity": self.severity,
            "confidence": round(self.confidence, 2),
            "title": self.title,
            "summary": self.summary,
            "explanation": self.explanation,
            "evidence": [e.to_json() for e in self.evidence],
            "memory": self.memory,
            "fix": [f.to_json() for f in self.fix],
            "options": self.options,
            "fix_other": self.fix_other,
            "confidence_notes": self.confidence_notes,
            "fix_safety": self.fix_safety,
        }


@dataclass
class InputInfo:
    path: str
    kind: str  # sglang-log | nvidia-smi | unknown
    lines: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        if not d["notes"]:
            d.pop("notes")
        return d


@dataclass
class Report:
    status: str  # findings | clean | inconclusive
    inputs: list[InputInfo]
    findings: list[Finding]
    facts: dict
    unchecked: list[str] = field(default_factory=list)  # what could not be checked
    tool_version: str = ""
    generated_at: str = ""
    extras: dict = field(default_factory=dict)  # renderer-only data (timeline, budget), not in JSON
    matched: list = field(default_factory=list)  # every rule that matched, before folding (not in JSON)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "status": self.status,
            "tool": {"name": "diag", "version": self.tool_version},
            "generated_at": self.generated_at,
            "inputs": [i.to_json() for i in self.inputs],
            "findings": [f.to_json() for f in self.findings],
            "facts": self.facts,
            "unchecked": self.unchecked,
        }


def severity_at_least(severity: str, threshold: str) -> bool:
    return SEVERITIES.index(severity) >= SEVERITIES.index(threshold)
