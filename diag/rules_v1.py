"""The rule engine: declarative rule files (rules/*.toml) -> findings.

A rule file says what it detects and why, its signature, its remedy and its own examples:

    id = "SGL-OOM-003"             name = "cuda-graph-capture-oom"
    category = "oom.cuda_graph"    severity = "critical"   confidence = 0.85
    priority = 80                  # among root causes, higher is more specific
    role = "root"                  # root | secondary (a root only when nothing else is) | symptom (folded into the root)
    title, summary                 # text; {name} fills from captures, facts and remedy values
    detects, why, fix_safety       # documentation shown by `diag rules show`
    remedy = ["oom_cuda_graph"]    # helpers in diag/remedies.py (arithmetic, flag values)
    fix = [{flag = "--x", value = "{captured}", why = "..."}]   fix_other = ["..."]
    [match]
    lines = ['regex', ...]         # any line matches one of them (the lines become evidence)
    all_lines = [...]              # each must match some line
    unless_lines = [...]           # none may match
    events = ["oom"]               # an event of one of these kinds exists
    facts = [{fact = "oom.phase", in = ["cuda_graph"]}, ...]   # all must hold
    any_facts = [...]              # at least one must hold
    [[examples]]                   # run by the test suite
    expect = "top" | "match" | "no-match"
    log = '''...'''
"""
from __future__ import annotations

import re
import string
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import rx
from .events import Event
from .report import Evidence, Finding, Fix

ROLES = ("root", "secondary", "symptom")


@dataclass
class Pattern:
    regex: re.Pattern
    literals: list[str] | None  # any must be a substring for the regex to be tried; None = always try

    def search(self, text: str):
        if self.literals is not None and not any(lit in text for lit in self.literals):
            return None
        return self.regex.search(text)


@dataclass
class Rule:
    id: str
    name: str
    category: str
    severity: str
    confidence: float
    priority: int
    role: str
    title: str
    summary: str
    detects: str
    why: str
    fix_safety: str
    remedy: list[str]
    fix: list[dict]
    fix_other: list[str]
    lines: list[Pattern]
    all_lines: list[Pattern]
    unless_lines: list[Pattern]
    events: list[str]
    facts: list[dict]
    any_facts: list[dict]
    examples: list[dict]
    path: str
    see: list[str] = field(default_factory=list)


# -- loading -------------------------------------------------------------------------

def rules_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("diag_rules")
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parent.parent / "rules"


def _tokens(src: str) -> list[str]:
    """A regex as tokens: escapes ('\\.') stay together."""
    return re.findall(r"\\.|.", src, re.S)


def _split_alternatives(src: str) -> list[str]:
    """Top-level '|' alternatives of a regex."""
    alts, cur, depth, in_class = [], [], 0, False
    for tok in _tokens(src):
        if in_class:
            in_class = tok != "]"
        elif tok == "[":
            in_class = True
        elif tok in "()":
            depth += 1 if tok == "(" else -1
        elif tok == "|" and depth == 0:
            alts.append("".join(cur))
            cur = []
            continue
        cur.append(tok)
    alts.append("".join(cur))
    return alts


def _whole_group(alt: str) -> str | None:
    """The inside of an alternative that is one group, '(?P<n>…)' or '(?:…)', else None."""
    m = re.match(r"^\((?:\?P<\w+>|\?:)?(.*)\)$", alt)
    if not m:
        return None
    inner, depth = m[1], 0
    for c in inner:  # the closing paren must be the group's own
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return None
    return inner


def _longest_literal(alt: str) -> str:
    tokens = _tokens(alt)
    best, run, depth, in_class = "", "", 0, False
    for j, tok in enumerate(tokens):
        nxt = tokens[j + 1] if j + 1 < len(tokens) else ""
        optional = nxt[:1] in ("?", "*", "{")
        if in_class:
            in_class = tok != "]"
            continue
        lit = None
        if tok == "[":
            in_class = True
        elif tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0 and len(tok) == 2 and tok[0] == "\\" and not tok[1].isalnum():
            lit = tok[1]
        elif depth == 0 and len(tok) == 1 and tok not in ".^$*+?{}|":
            lit = tok
        if lit is not None and not optional:
            run += lit
        else:
            best = max(best, run, key=len)
            run = ""
    return max(best, run, key=len)


def required_literals(src: str) -> list[str] | None:
    """Literal substrings one of which any match must contain (a cheap pre-check), or None."""
    if "(?i" in src:
        return None
    out: list[str] = []
    for alt in _split_alternatives(src):
        inner = _whole_group(alt)
        if inner is not None:
            sub = required_literals(inner)
            if sub is None:
                return None
            out.extend(sub)
            continue
        lit = _longest_literal(alt)
        if len(lit) < 4:
            return None
        out.append(lit)
    return out


def _pattern(src: str) -> Pattern:
    return Pattern(rx.compile(src), required_literals(src))


def load_rule(path: Path) -> Rule:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    match = data.get("match", {})
    role = data.get("role", "root")
    if role not in ROLES:
        raise ValueError(f"{path.name}: role must be one of {ROLES}")
    return Rule(
        id=data["id"], name=data["name"], category=data["category"], severity=data.get("severity", "error"),
        confidence=float(data.get("confidence", 0.7)), priority=int(data.get("priority", 50)), role=role,
        title=data["title"], summary=data.get("summary", ""), detects=data.get("detects", ""), why=data.get("why", ""),
        fix_safety=data.get("fix_safety", ""), remedy=list(data.get("remedy", [])), fix=list(data.get("fix", [])),
        fix_other=list(data.get("fix_other", [])),
        lines=[_pattern(p) for p in match.get("lines", [])], all_lines=[_pattern(p) for p in match.get("all_lines", [])],
        unless_lines=[_pattern(p) for p in match.get("unless_lines", [])], events=list(match.get("events", [])),
        facts=list(match.get("facts", [])), any_facts=list(match.get("any_facts", [])),
        examples=list(data.get("examples", [])), path=str(path), see=list(data.get("see", [])),
    )


@lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    rules = [load_rule(p) for p in sorted(rules_dir().glob("*.toml"))]
    ids = [r.id for r in rules]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate rule ids: {sorted(dup)}")
    return tuple(rules)


# -- matching --------------------------------------------------------------------------

@dataclass
class Hit:
    input: int
    line: int
    text: str
    groups: dict


class LineMatcher:
    """Runs every rule's line patterns over the stream once, keeping a few hits per pattern."""
    KEEP = 12

    def __init__(self, rules: tuple[Rule, ...]):
        self.rules = rules
        self.table: list[tuple[str, str, int, Pattern]] = []
        for r in rules:
            for group in ("lines", "all_lines", "unless_lines"):
                for i, p in enumerate(getattr(r, group)):
                    self.table.append((r.id, group, i, p))
        self.hits: dict[tuple[str, str, int], list[Hit]] = {}
        literals = sorted({lit for *_, p in self.table for lit in (p.literals or [])}, key=len, reverse=True)
        self._any_literal = rx.compile("|".join(rx.escape(x) for x in literals), register=False) if literals else None
        self._always = [row for row in self.table if row[3].literals is None]

    def scan(self, input_index: int, lineno: int, text: str, msg: str) -> bool:
        found = False
        table = self.table if self._any_literal is not None and self._any_literal.search(msg) else self._always
        for rid, group, i, p in table:
            m = p.search(msg)
            if m:
                bucket = self.hits.setdefault((rid, group, i), [])
                if len(bucket) < self.KEEP:
                    bucket.append(Hit(input_index, lineno, text, {k: v for k, v in m.groupdict().items() if v is not None}))
                found = True
        return found

    def of(self, rule: Rule, group: str) -> list[list[Hit]]:
        return [self.hits.get((rule.id, group, i), []) for i in range(len(getattr(rule, group)))]


def check(cond: dict, values: dict, facts) -> bool:
    """One condition over the flat facts (`fact`) or a launch flag (`flag`)."""
    if "flag" in cond:
        names = cond["flag"] if isinstance(cond["flag"], list) else [cond["flag"]]
        value = facts.flag(*names)
    elif "version_between" in cond:
        low, high = cond["version_between"]
        from .versions import VersionRange
        return facts.version.describe() != "unknown" and facts.version.intersect(VersionRange(low=low, high=high)) is not None \
            if not facts.version.exact else VersionRange(low=low, high=high).contains(facts.version.exact)
    else:
        value = values.get(cond["fact"])
    if "present" in cond:
        return (value not in (None, False, "", [], {})) == bool(cond["present"])
    if "eq" in cond:
        return value == cond["eq"] or (isinstance(value, str) and str(cond["eq"]) == value)
    if "in" in cond:
        return value in cond["in"]
    if "not_in" in cond:
        return value not in cond["not_in"]
    if "gte" in cond:
        return isinstance(value, (int, float)) and value >= cond["gte"]
    if "lte" in cond:
        return isinstance(value, (int, float)) and value <= cond["lte"]
    if "lt" in cond:
        return isinstance(value, (int, float)) and value < cond["lt"]
    raise ValueError(f"condition without a test: {cond}")


class _Blank(dict):
    def __missing__(self, key):
        return ""


def fill(template: str, values: dict) -> str:
    """str.format with missing names left empty; doubled spaces from empty names collapsed."""
    if "{" not in template:
        return template
    out = string.Formatter().vformat(template, (), _Blank(values))
    return re.sub(r"  +", " ", out).replace(" .", ".").replace(" ,", ",").strip()


@dataclass
class Context:
    """What a remedy helper sees and fills in."""
    rule: Rule
    facts: object
    finding: Finding
    hits: list[Hit]
    events: list[Event]
    values: dict  # template values: captures + facts + remedy output

    def add_fix(self, flag: str | None = None, value=None, why: str = "", env: str | None = None,
                external_env: str | None = None, action: str = "set", option: int = 1, was=None) -> None:
        self.finding.fix.append(Fix(flag=flag, env=env, external_env=external_env,
                                    value=None if value is None else str(value), why=why, action=action, option=option,
                                    was=None if was is None else str(was)))

    def evidence(self, event_or_line, text: str | None = None, role: str = "context", input_index: int = 0) -> None:
        if isinstance(event_or_line, Event):
            ev = Evidence(event_or_line.input, event_or_line.line, event_or_line.text, role)
        else:
            ev = Evidence(input_index, int(event_or_line), text or "", role)
        if not any(e.line == ev.line and e.input == ev.input for e in self.finding.evidence):
            self.finding.evidence.append(ev)


def evaluate(rule: Rule, matcher: LineMatcher, facts) -> Context | None:
    """A Context when the rule matches, else None."""
    values = facts.values
    hits: list[Hit] = []
    if rule.lines:
        for bucket in matcher.of(rule, "lines"):
            hits.extend(bucket)
        if not hits:
            return None
    for bucket in matcher.of(rule, "all_lines"):
        if not bucket:
            return None
        hits.extend(bucket[:2])
    if any(matcher.of(rule, "unless_lines")[i] for i in range(len(rule.unless_lines))):
        return None
    events: list[Event] = []
    if rule.events:
        events = [e for e in facts.events if e.kind in rule.events]
        if not events:
            return None
    if not all(check(c, values, facts) for c in rule.facts):
        return None
    if rule.any_facts and not any(check(c, values, facts) for c in rule.any_facts):
        return None
    if not rule.lines and not rule.all_lines and not rule.events and not rule.facts and not rule.any_facts:
        return None
    hits.sort(key=lambda h: (h.input, h.line))
    finding = Finding(rule=rule.id, category=rule.category, severity=rule.severity, confidence=rule.confidence,
                      title=rule.title, summary=rule.summary, explanation=rule.why.strip(), role=rule.role)
    tvalues = dict(values)
    for h in hits:
        for k, v in h.groups.items():
            tvalues.setdefault(k, v)
    return Context(rule=rule, facts=facts, finding=finding, hits=hits, events=events, values=tvalues)
