"""The report model: the one object every renderer reads (schema diag.report/2).

Everything a view shows is here, and so in the JSON: the findings with their evidence and
the lines around it, the fixes and the launch command before and after each option, the
memory budget with the source of every number, the timeline. `Report.from_json` reads the
JSON back into the same model, so a view of the JSON is the view of the live report.
The JSON Schema is diag/schema/report-2.json; docs/report.md describes the additions to v1.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "diag.report/2"
SEVERITIES = ("info", "warning", "error", "critical")
# Where a number came from (memory budget items and `memory.sources`).
SOURCES = ("log", "nvidia-smi", "model-catalog", "gpu-catalog", "flag-catalog", "launch-command", "estimate",
           "formula", "default")
TIMELINE_PARTS = ("first_timestamp", "last_timestamp", "startup", "batches", "gpu_memory")


@dataclass
class Evidence:
    input: int
    line: int
    text: str
    role: str = "trigger"  # trigger | context | symptom
    # the lines around it as the input has them: [{"line", "text", "cut"}], `cut` characters left off
    context: list[dict] = field(default_factory=list)
    # what the parser knows of `text`: (start, end, kind). Sensitive parts, kind one of host, ip,
    # user, email, pod, path, or a secret's kind (token, password, api-key, ...): redaction
    # replaces these first and runs its patterns over the rest as a backstop. Kind `message`:
    # the catalog-matched message of a trigger line (diag/parse/spans.py), which the views
    # highlight; redaction keeps it, moved onto the redacted text.
    spans: list[tuple[int, int, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"input": self.input, "line": self.line, "text": self.text, "role": self.role,
                "context": [dict(c) for c in self.context], "spans": [list(s) for s in self.spans]}

    @classmethod
    def from_json(cls, d: dict) -> "Evidence":
        return cls(d["input"], d["line"], d["text"], d.get("role", "trigger"), [dict(c) for c in d.get("context") or []],
                   [(int(a), int(b), str(k)) for a, b, k in d.get("spans") or []])


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

    @classmethod
    def from_json(cls, d: dict) -> "Fix":
        return cls(flag=d.get("flag"), env=d.get("env"), external_env=d.get("external_env"), value=d.get("value"),
                   was=d.get("was"), why=d.get("why", ""), action=d.get("action", "set"), option=d.get("option", 1),
                   direction=d.get("direction", "set"))


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
    # (input, line) of exceptions whose message quotes this finding's trigger (a nested catalog message)
    inside: set = field(default_factory=set, repr=False, compare=False)
    # per option with changes: {"option", "before", "after", "changes"} (diag/commands.py)
    commands: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "category": self.category,
            "severity": self.severity,
            "confidence": round(self.confidence, 2),
            "role": self.role,
            "title": self.title,
            "summary": self.summary,
            "explanation": self.explanation,
            "evidence": [e.to_json() for e in self.evidence],
            "memory": self.memory,
            "fix": [f.to_json() for f in self.fix],
            "options": self.options,
            "fix_other": self.fix_other,
            "commands": self.commands,
            "confidence_notes": self.confidence_notes,
            "fix_safety": self.fix_safety,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        return cls(rule=d["rule"], category=d["category"], severity=d["severity"], confidence=d["confidence"],
                   title=d["title"], summary=d["summary"], evidence=[Evidence.from_json(e) for e in d.get("evidence") or []],
                   memory=d.get("memory") or {}, fix=[Fix.from_json(f) for f in d.get("fix") or []],
                   fix_other=list(d.get("fix_other") or []), explanation=d.get("explanation", ""),
                   confidence_notes=list(d.get("confidence_notes") or []), options=list(d.get("options") or []),
                   role=d.get("role", "root"), fix_safety=d.get("fix_safety", ""), commands=list(d.get("commands") or []))


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

    @classmethod
    def from_json(cls, d: dict) -> "InputInfo":
        return cls(d["path"], d["kind"], d.get("lines", 0), d.get("bytes", 0), list(d.get("notes") or []))


@dataclass
class Launch:
    """The user's launch command as the log (or --launch) showed it."""
    argv: list[str]                                        # the words, as a shell would split them
    written: dict[str, str] = field(default_factory=dict)  # flag (this version's name) -> the spelling used
    env: dict[str, str] = field(default_factory=dict)      # VAR=value prefixes
    entry: str = ""                                        # the launcher: python -m sglang.launch_server
    source: str = "log"                                    # log | option (--launch)
    input: int | None = None                               # where the log shows it
    line: int | None = None

    def to_json(self) -> dict:
        return {"source": self.source, "input": self.input, "line": self.line, "entry": self.entry,
                "argv": list(self.argv), "env": dict(self.env), "written": dict(self.written)}

    @classmethod
    def from_json(cls, d: dict) -> "Launch":
        return cls(argv=list(d["argv"]), written=dict(d.get("written") or {}), env=dict(d.get("env") or {}),
                   entry=d.get("entry", ""), source=d.get("source", "log"), input=d.get("input"), line=d.get("line"))


@dataclass
class Report:
    status: str  # findings | clean | inconclusive
    # the launch command first: redaction numbers aliases in field order, so its hosts are host-1, ...
    launch: Launch | None = None
    inputs: list[InputInfo] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)  # what could not be checked
    tool_version: str = ""
    generated_at: str = ""
    timeline: dict = field(default_factory=dict)        # see TIMELINE_PARTS and docs/report.md
    matched: list[str] = field(default_factory=list)    # every rule that matched, before folding (JSON: matched_rules)
    redacted: bool = False
    # several servers or runs in the inputs (diag/fleet): one entry per run / per server, and the
    # first failing rank with its cascade; empty (null) for one server run on one rank
    runs: list[dict] = field(default_factory=list)
    servers: list[dict] = field(default_factory=list)
    ranks: dict | None = None

    def to_json(self) -> dict:
        """The JSON object: finite numbers only (NaN and infinities become null) and valid UTF-8 text."""
        return json_safe({
            "schema": SCHEMA,
            "status": self.status,
            "tool": {"name": "diag", "version": self.tool_version},
            "generated_at": self.generated_at,
            "redacted": self.redacted,
            "inputs": [i.to_json() for i in self.inputs],
            "findings": [f.to_json() for f in self.findings],
            "facts": self.facts,
            "unchecked": self.unchecked,
            "matched_rules": self.matched,
            "launch": self.launch.to_json() if self.launch else None,
            "timeline": {k: self.timeline.get(k) for k in TIMELINE_PARTS},
            "runs": self.runs,
            "servers": self.servers,
            "ranks": self.ranks,
        })

    def dumps(self, indent: int | None = 2) -> str:
        """The JSON text, through diag's one JSON writer: NaN and infinities become null first and
        json then refuses any left (allow_nan=False); every string is valid UTF-8."""
        from .jsonout import dumps
        return dumps(self.to_json(), indent=indent)

    @classmethod
    def from_json(cls, d: dict) -> "Report":
        """The report back from its JSON (diag.report/2)."""
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} report: schema {d.get('schema')!r}")
        return cls(status=d["status"], inputs=[InputInfo.from_json(i) for i in d.get("inputs") or []],
                   findings=[Finding.from_json(f) for f in d.get("findings") or []], facts=d.get("facts") or {},
                   unchecked=list(d.get("unchecked") or []), tool_version=(d.get("tool") or {}).get("version", ""),
                   generated_at=d.get("generated_at", ""),
                   launch=Launch.from_json(d["launch"]) if d.get("launch") else None,
                   timeline=dict(d.get("timeline") or {}), matched=list(d.get("matched_rules") or []),
                   redacted=bool(d.get("redacted")), runs=list(d.get("runs") or []),
                   servers=list(d.get("servers") or []), ranks=d.get("ranks"))


def json_schema() -> dict:
    """The JSON Schema of this report (diag/schema/report-2.json, shipped with the package)."""
    from importlib.resources import files
    return json.loads(files("diag").joinpath("schema", "report-2.json").read_text(encoding="utf-8"))


def json_safe(value):
    """A copy JSON can carry as is: non-finite floats -> None, tuples -> lists, keys -> str, text -> valid UTF-8."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, dict):
        return {_utf8(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _utf8(text: str) -> str:
    """Lone surrogates (from undecodable bytes) cannot be written as UTF-8: they become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def severity_at_least(severity: str, threshold: str) -> bool:
    return SEVERITIES.index(severity) >= SEVERITIES.index(threshold)
