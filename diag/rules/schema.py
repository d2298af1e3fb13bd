"""Rule files as strict data: the schema, checked at load with the file and line of a mistake.

A rule file (rules/<family>/<ID>-<slug>.toml) declares:

    id, slug, category, severity, role, priority        who it is
    applies_to = ">=0.5.14"                              SGLang versions it applies to (optional)
    explainers = ["memory"] | [{name = "memory", goal = "cuda_graph"}]
    title, summary, why, detects, fix_safety, see         what a finding says (text language: diag/rules/text.py)
    [match]       messages / all_messages / unless_messages (catalog names, family ids, 'component.*'),
                  events / unless_events (event kinds), where / where_any / unless (conditions),
                  fallback = true: the finding goes when a specific (neither fallback nor generic)
                  rule's finding quotes the lines it rests on
    [confidence]  base, by_phase_basis = {basis = delta}, max, generic
    [text.<table>] value -> text tables for {path@table}
    evidence = ["failure.event", "memory.lines"]          facts or explainer values to quote as well
    [[fix]]       option, title, cost, flag | env | external_env, value, action, direction, why, when, applies_to
                  or use = "<explainer>.<option kind>" (its texts in rules/_fixes/<explainer>.toml);
                  each = "<path to a list>": the fix is offered once per item of a list value, its
                  texts, value, flag and conditions reading the item as {item.<key>};
                  flag = "{path}": a flag name computed by an explainer (must render to --a-flag)
    [[fix_other]] text, option, when                      actions that are not flags
    [[case]]      name, expect, log, smi, launch, sglang_version, model_config, [case.want]

Nothing else: an unknown key, category, explainer, value name or operator is an error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import rx
from . import conditions as C
from . import text as T
from ..taxonomy import CATEGORIES

SEVERITIES = ("info", "warning", "error", "critical")
ROLES = ("root", "secondary", "symptom")
DIRECTIONS = ("raise", "lower", "set", "remove", "on")
PHASE_BASES = ("frames", "message", "milestones", "numbers", "model", "none")
EXPECT = ("top", "match", "no-match")

TOP_KEYS = {"id", "slug", "category", "severity", "role", "priority", "applies_to", "explainers", "title", "summary",
            "why", "detects", "fix_safety", "see", "match", "confidence", "text", "evidence", "fix", "fix_other", "case"}
MATCH_KEYS = {"messages", "all_messages", "unless_messages", "events", "unless_events", "where", "where_any", "unless",
              "fallback"}
CONF_KEYS = {"base", "by_phase_basis", "max", "generic"}
FIX_KEYS = {"option", "title", "cost", "flag", "env", "external_env", "value", "action", "direction", "why", "when",
            "applies_to", "use", "each"}
FLAG_NAME = rx.compile(r"^--[a-z0-9][a-z0-9-]*$")   # rule files, and flags explainers compute
ITEM = "item"                      # the namespace of a list item in a fix with `each`
FIX_OTHER_KEYS = {"text", "option", "when"}
CASE_KEYS = {"name", "expect", "log", "smi", "launch", "sglang_version", "model_config", "want", "xfail"}
WANT_KEYS = {"category", "rule", "fix", "no_fix", "evidence", "severity", "confidence_at_least", "confidence_below",
             "text", "no_text"}
WANT_FIX_KEYS = {"flag", "env", "external_env", "direction", "min", "max", "value", "option"}


class RuleError(ValueError):
    pass


@dataclass(frozen=True)
class FixSpec:
    option: str
    title: str = ""
    cost: int = 2
    flag: str | None = None
    env: str | None = None
    external_env: str | None = None
    value: object = None            # a template string, a literal, or None (a switch)
    action: str = "set"
    direction: str = "set"
    why: str = ""
    when: tuple = ()
    applies_to: str | None = None
    use: str | None = None          # "<explainer>.<option kind>"
    each: str | None = None         # a path to a list: one fix per item ({item.<key>})

    @property
    def name(self) -> str:
        return self.flag or self.env or self.external_env or ""

    @property
    def computed_flag(self) -> bool:
        return bool(self.flag and "{" in self.flag)


@dataclass(frozen=True)
class OtherSpec:
    text: str
    option: str | None = None
    when: tuple = ()


@dataclass(frozen=True)
class ExplainerUse:
    name: str
    args: tuple = ()                # (key, value) pairs

    @property
    def kwargs(self) -> dict:
        return dict(self.args)


@dataclass
class Case:
    name: str
    expect: str
    log: str
    smi: str | None = None
    launch: str | None = None
    sglang_version: str | None = None
    model_config: str | None = None
    want: dict = field(default_factory=dict)
    xfail: str | None = None


@dataclass
class Rule:
    id: str
    slug: str
    category: str
    severity: str
    role: str
    priority: int
    title: str
    summary: str
    why: str
    detects: str
    fix_safety: str
    path: str
    applies_to: str | None = None
    explainers: tuple[ExplainerUse, ...] = ()
    see: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    all_messages: tuple[str, ...] = ()
    unless_messages: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    unless_events: tuple[str, ...] = ()
    where: tuple[C.Condition, ...] = ()
    where_any: tuple[C.Condition, ...] = ()
    unless: tuple[C.Condition, ...] = ()
    confidence: float = 0.7
    by_phase_basis: dict = field(default_factory=dict)
    confidence_max: float = 0.95
    generic: bool = False
    fallback: bool = False
    tables: dict = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    fixes: tuple[FixSpec, ...] = ()
    fix_other: tuple[OtherSpec, ...] = ()
    cases: list[Case] = field(default_factory=list)

    @property
    def family(self) -> str:
        return self.category.split(".")[0]

    def templates(self) -> list[tuple[str, str]]:
        """(where, template) for every text the rule can say."""
        out = [("title", self.title), ("summary", self.summary), ("why", self.why), ("fix_safety", self.fix_safety)]
        for i, f in enumerate(self.fixes):
            out += [(f"fix[{i}].title", f.title), (f"fix[{i}].why", f.why)]
            if isinstance(f.value, str):
                out.append((f"fix[{i}].value", f.value))
            if f.computed_flag:
                out.append((f"fix[{i}].flag", f.flag))
        out += [(f"fix_other[{i}]", o.text) for i, o in enumerate(self.fix_other)]
        return [(w, t) for w, t in out if t]

    def conditions(self) -> list[C.Condition]:
        out = list(self.where) + list(self.where_any) + list(self.unless)
        for f in self.fixes:
            out += list(f.when)
        for o in self.fix_other:
            out += list(o.when)
        return out


class _Where:
    """'file:line' of a key in a rule file, for error messages."""

    def __init__(self, path: Path, source: str):
        self.path, self.lines = path, source.splitlines()

    def at(self, needle: str) -> "_At":
        return _At(self, needle)

    def find(self, needle: str) -> str:
        pat = re.compile(rf"^\s*\[*\s*{re.escape(needle)}\b|{re.escape(needle)}\s*=")
        for i, line in enumerate(self.lines, 1):
            if pat.search(line):
                return f"{self.path}:{i}"
        return str(self.path)


class _At:
    """A 'file:line' found only when an error message is written (loading a valid rule never
    searches its lines)."""
    __slots__ = ("where", "needle")

    def __init__(self, where: _Where, needle: str):
        self.where, self.needle = where, needle

    def __str__(self) -> str:
        return self.where.find(self.needle)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _strs(value, where: str, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RuleError(f"{where}: {what} is a list of strings")
    return tuple(value)


def _unknown(keys, allowed: set, where: str, what: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        raise RuleError(f"{where}: unknown key(s) in {what}: {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})")


def _conds(raw, where: str) -> tuple[C.Condition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RuleError(f"{where}: conditions are a list of tables")
    try:
        return tuple(C.parse(c, where) for c in raw)
    except (C.ConditionError, ValueError) as exc:
        raise RuleError(str(exc)) from None


def _template(text, where: str) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise RuleError(f"{where}: text must be a string")
    try:
        T.parse(text)
    except T.TemplateError as exc:
        raise RuleError(f"{where}: {exc}") from None
    return text.strip()


def _version_spec(spec, where: str) -> str | None:
    if spec is None:
        return None
    from ..versions import parse_spec
    try:
        parse_spec(spec)
    except (ValueError, TypeError) as exc:
        raise RuleError(f"{where}: {exc}") from None
    return spec


def _bool(v, where: str, what: str) -> bool:
    if not isinstance(v, bool):
        raise RuleError(f"{where}: {what} is true or false")
    return v


def load_rule(path: Path) -> Rule:
    import tomllib                    # only when the start-up cache is cold (diag/cache.py)
    source = path.read_text(encoding="utf-8")
    w = _Where(path, source)
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{path}: {exc}") from None
    _unknown(data, TOP_KEYS, str(path), "the rule")
    for key in ("id", "slug", "category", "title"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise RuleError(f"{path}: '{key}' is required")
    rid = data["id"]
    if not re.match(r"^SGL-[A-Z]+-\d{3}$", rid):
        raise RuleError(f"{w.at('id')}: rule id {rid!r} is not of the form SGL-XXX-NNN")
    if path.stem != f"{rid}-{data['slug']}":
        raise RuleError(f"{path}: the file must be named {rid}-{data['slug']}.toml")
    category = data["category"]
    if category not in CATEGORIES:
        raise RuleError(f"{w.at('category')}: unknown category {category!r} (see diag/taxonomy.py)")
    if path.parent.name != category.split(".")[0]:
        raise RuleError(f"{path}: a rule of category {category} lives in rules/{category.split('.')[0]}/")
    severity = data.get("severity", "error")
    if severity not in SEVERITIES:
        raise RuleError(f"{w.at('severity')}: severity must be one of {SEVERITIES}")
    role = data.get("role", "root")
    if role not in ROLES:
        raise RuleError(f"{w.at('role')}: role must be one of {ROLES}")
    priority = data.get("priority", 50)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise RuleError(f"{w.at('priority')}: priority is an integer")

    explainers = []
    for e in data.get("explainers") or []:
        if isinstance(e, str):
            explainers.append(ExplainerUse(e))
        elif isinstance(e, dict) and isinstance(e.get("name"), str):
            explainers.append(ExplainerUse(e["name"], tuple(sorted((k, v) for k, v in e.items() if k != "name"))))
        else:
            raise RuleError(f"{w.at('explainers')}: explainers are names or {{name = ..., args...}} tables")

    match = data.get("match") or {}
    if not isinstance(match, dict):
        raise RuleError(f"{w.at('match')}: [match] is a table")
    _unknown(match, MATCH_KEYS, w.at("match"), "[match]")

    conf = data.get("confidence") or {}
    if isinstance(conf, (int, float)) and not isinstance(conf, bool):
        conf = {"base": conf}
    if not isinstance(conf, dict):
        raise RuleError(f"{w.at('confidence')}: confidence is a number or a table")
    _unknown(conf, CONF_KEYS, w.at("confidence"), "[confidence]")
    base = conf.get("base", 0.7)
    cmax = conf.get("max", 0.95)
    for name, v in (("base", base), ("max", cmax)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 1:
            raise RuleError(f"{w.at('confidence')}: confidence {name} is a number in (0, 1]")
    by_basis = conf.get("by_phase_basis") or {}
    if not isinstance(by_basis, dict) or any(k not in PHASE_BASES or not isinstance(v, (int, float)) for k, v in by_basis.items()):
        raise RuleError(f"{w.at('by_phase_basis')}: by_phase_basis maps {PHASE_BASES} to numbers")

    tables = data.get("text") or {}
    if not isinstance(tables, dict) or not all(isinstance(t, dict) and all(isinstance(v, str) for v in t.values())
                                               for t in tables.values()):
        raise RuleError(f"{w.at('text')}: [text.<table>] tables map values to strings")

    fixes = tuple(_fix(f, i, w) for i, f in enumerate(data.get("fix") or []))
    others = []
    for i, o in enumerate(data.get("fix_other") or []):
        if isinstance(o, str):
            o = {"text": o}
        if not isinstance(o, dict):
            raise RuleError(f"{w.at('fix_other')}: fix_other entries are strings or tables")
        _unknown(o, FIX_OTHER_KEYS, w.at("fix_other"), f"fix_other[{i}]")
        others.append(OtherSpec(_template(o.get("text"), w.at("fix_other")), o.get("option"), _conds(o.get("when"), w.at("fix_other"))))

    rule = Rule(
        id=rid, slug=data["slug"], category=category, severity=severity, role=role, priority=priority,
        title=_template(data["title"], w.at("title")), summary=_template(data.get("summary"), w.at("summary")),
        why=_template(data.get("why"), w.at("why")), detects=str(data.get("detects", "")).strip(),
        fix_safety=_template(data.get("fix_safety"), w.at("fix_safety")), path=str(path),
        applies_to=_version_spec(data.get("applies_to"), w.at("applies_to")), explainers=tuple(explainers),
        see=_strs(data.get("see"), w.at("see"), "see"),
        messages=_strs(match.get("messages"), w.at("messages"), "messages"),
        all_messages=_strs(match.get("all_messages"), w.at("all_messages"), "all_messages"),
        unless_messages=_strs(match.get("unless_messages"), w.at("unless_messages"), "unless_messages"),
        events=_strs(match.get("events"), w.at("events"), "events"),
        unless_events=_strs(match.get("unless_events"), w.at("unless_events"), "unless_events"),
        where=_conds(match.get("where"), w.at("where")), where_any=_conds(match.get("where_any"), w.at("where_any")),
        unless=_conds(match.get("unless"), w.at("unless")),
        fallback=_bool(match.get("fallback", False), w.at("fallback"), "fallback"),
        confidence=float(base), by_phase_basis=dict(by_basis), confidence_max=float(cmax), generic=bool(conf.get("generic", False)),
        tables=tables, evidence=_strs(data.get("evidence"), w.at("evidence"), "evidence"),
        fixes=fixes, fix_other=tuple(others), cases=[_case(c, i, w) for i, c in enumerate(data.get("case") or [])],
    )
    if not (rule.messages or rule.all_messages or rule.events or rule.where or rule.where_any):
        raise RuleError(f"{path}: [match] needs messages, events or conditions")
    if rule.generic and rule.confidence > 0.6:
        raise RuleError(f"{w.at('generic')}: a generic rule's confidence is at most 0.6")
    return rule


def _fix(raw, i: int, w: _Where) -> FixSpec:
    where = w.at("fix")
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: [[fix]] entries are tables")
    _unknown(raw, FIX_KEYS, where, f"fix[{i}]")
    if "use" in raw:
        bad = set(raw) - {"use", "when", "applies_to", "option"}
        if bad:
            raise RuleError(f"{where}: fix[{i}] with 'use' takes only when/applies_to/option, not {sorted(bad)}")
        if not re.match(r"^\w+\.\w+$", str(raw["use"])):
            raise RuleError(f"{where}: fix[{i}]: use = '<explainer>.<option kind>'")
        return FixSpec(option=raw.get("option") or raw["use"], use=raw["use"], when=_conds(raw.get("when"), where),
                       applies_to=_version_spec(raw.get("applies_to"), where))
    names = [k for k in ("flag", "env", "external_env") if raw.get(k)]
    if len(names) != 1:
        raise RuleError(f"{where}: fix[{i}] names exactly one of flag, env, external_env")
    if not isinstance(raw.get("option"), str) or not raw["option"]:
        raise RuleError(f"{where}: fix[{i}] needs an 'option' (the group of changes it belongs to)")
    flag = raw.get("flag")
    if isinstance(flag, str) and "{" in flag:
        _template(flag, where)
        if not re.match(r"^\{[^{}]+\}$", flag):
            raise RuleError(f"{where}: fix[{i}]: a computed flag is one placeholder, e.g. \"{{flags.backend.flag}}\"")
    elif flag is not None and not FLAG_NAME.match(flag):
        raise RuleError(f"{where}: fix[{i}]: {flag!r} is not a flag name (dashes, lower case)")
    each = raw.get("each")
    if each is not None and (not isinstance(each, str) or not re.match(r"^[A-Za-z_][\w.\-]*$", each)):
        raise RuleError(f"{where}: fix[{i}]: each names a path to a list (e.g. \"flags.unknown\")")
    # SGLang's own variables are upper case; other programs' may not be (no_proxy, http_proxy)
    for key, pattern in (("env", r"^[A-Z][A-Z0-9_]+$"), ("external_env", r"^[A-Za-z_][A-Za-z0-9_]+$")):
        if raw.get(key) is not None and not re.match(pattern, raw[key]):
            raise RuleError(f"{where}: fix[{i}]: {raw[key]!r} is not an environment variable name")
    action = raw.get("action", "set")
    if action not in ("set", "remove"):
        raise RuleError(f"{where}: fix[{i}]: action is set or remove")
    direction = raw.get("direction", "remove" if action == "remove" else None)
    value = raw.get("value")
    if direction is None:
        direction = "on" if value is None else "set"
    if direction not in DIRECTIONS:
        raise RuleError(f"{where}: fix[{i}]: direction must be one of {DIRECTIONS}")
    if action == "remove" and (value is not None or direction != "remove"):
        raise RuleError(f"{where}: fix[{i}]: a removal has no value and direction 'remove'")
    if direction in ("raise", "lower") and value is None:
        raise RuleError(f"{where}: fix[{i}]: a '{direction}' fix needs a value")
    if isinstance(value, str):
        _template(value, where)
    elif value is not None and not isinstance(value, (int, float, bool)):
        raise RuleError(f"{where}: fix[{i}]: value is a string, a number or a boolean")
    cost = raw.get("cost", 2)
    if not isinstance(cost, int) or not 1 <= cost <= 5:
        raise RuleError(f"{where}: fix[{i}]: cost is 1 (a flag tweak) … 5 (information only)")
    return FixSpec(option=raw["option"], title=_template(raw.get("title"), where), cost=cost, flag=flag, env=raw.get("env"),
                   external_env=raw.get("external_env"), value=value, action=action, direction=direction,
                   why=_template(raw.get("why"), where), when=_conds(raw.get("when"), where),
                   applies_to=_version_spec(raw.get("applies_to"), where), each=each)


def _case(raw, i: int, w: _Where) -> Case:
    where = w.at("case")
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: [[case]] entries are tables")
    _unknown(raw, CASE_KEYS, where, f"case[{i}]")
    if not isinstance(raw.get("log"), str):
        raise RuleError(f"{where}: case[{i}] needs a log")
    expect = raw.get("expect", "top")
    if expect not in EXPECT:
        raise RuleError(f"{where}: case[{i}]: expect is one of {EXPECT}")
    want = raw.get("want") or {}
    _unknown(want, WANT_KEYS, where, f"case[{i}].want")
    for j, fx in enumerate(want.get("fix") or []):
        _unknown(fx, WANT_FIX_KEYS, where, f"case[{i}].want.fix[{j}]")
        if fx.get("direction") is not None and fx["direction"] not in DIRECTIONS:
            raise RuleError(f"{where}: case[{i}].want.fix[{j}]: direction must be one of {DIRECTIONS}")
    if want.get("category") and want["category"] not in CATEGORIES:
        raise RuleError(f"{where}: case[{i}]: unknown category {want['category']!r}")
    return Case(name=str(raw.get("name") or f"case {i + 1}"), expect=expect, log=raw["log"], smi=raw.get("smi"),
                launch=raw.get("launch"), sglang_version=raw.get("sglang_version"), model_config=raw.get("model_config"),
                want=want, xfail=raw.get("xfail"))
