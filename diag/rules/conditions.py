"""Conditions of rule files: one subject, one operator, checked at load and evaluated over facts.

    {fact = "oom.phase", in = ["cuda_graph"]}          a fact, a matched message's field (hit.*),
                                                       or an explainer's value (memory.*)
    {flag = "--speculative-algorithm", present = true} a launch flag (any of a list of names)
    {version = ">=0.5.10,<0.5.14"}                     the log's SGLang version can be in this range

Operators (exactly one per condition): eq, ne, in, not_in, gt, gte, lt, lte, present, has.
``has`` takes a list of names or shell-style patterns (``"*mamba_track*"``) and holds when the
value (a list of names, or one name) holds an item that one of them matches.
A comparison with an unknown value is false (``ne`` and ``not_in`` included): a rule that
needs a number does not fire when the number is not known.
"""
from __future__ import annotations

from dataclasses import dataclass

from .text import MISSING

OPERATORS = ("eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "present", "has")
SUBJECTS = ("fact", "flag", "version")


class ConditionError(ValueError):
    pass


@dataclass(frozen=True)
class Condition:
    subject: str          # fact | flag | version
    target: object        # the path, the flag name(s), or the version range text
    op: str | None
    arg: object

    @property
    def path(self) -> str | None:
        return self.target if self.subject == "fact" else None

    def describe(self) -> str:
        t = self.target if not isinstance(self.target, list) else "|".join(self.target)
        if self.subject == "version":
            return f"SGLang version {t}"
        name = f"flag {t}" if self.subject == "flag" else str(t)
        return f"{name} {self.op} {self.arg!r}"


def parse(raw: dict, where: str) -> Condition:
    if not isinstance(raw, dict):
        raise ConditionError(f"{where}: a condition is a table, got {raw!r}")
    subjects = [k for k in SUBJECTS if k in raw]
    ops = [k for k in OPERATORS if k in raw]
    unknown = [k for k in raw if k not in SUBJECTS and k not in OPERATORS]
    if unknown:
        raise ConditionError(f"{where}: unknown key(s) {unknown} in condition {raw!r}")
    if len(subjects) != 1:
        raise ConditionError(f"{where}: a condition names exactly one of {SUBJECTS}, got {raw!r}")
    subject = subjects[0]
    if subject == "version":
        if ops:
            raise ConditionError(f"{where}: a version condition takes no operator: {raw!r}")
        from ..versions import parse_spec
        parse_spec(raw["version"])          # raises on a bad range
        return Condition("version", raw["version"], None, None)
    if len(ops) != 1:
        raise ConditionError(f"{where}: a condition has exactly one operator of {OPERATORS}, got {raw!r}")
    op = ops[0]
    arg = raw[op]
    if op == "has" and (not isinstance(arg, list) or not arg or not all(isinstance(a, str) and a for a in arg)):
        raise ConditionError(f"{where}: 'has' takes a list of names or patterns: {raw!r}")
    if op in ("in", "not_in") and not isinstance(arg, list):
        raise ConditionError(f"{where}: '{op}' takes a list: {raw!r}")
    if op in ("gt", "gte", "lt", "lte") and (not isinstance(arg, (int, float)) or isinstance(arg, bool)):
        raise ConditionError(f"{where}: '{op}' takes a number: {raw!r}")
    if op == "present" and not isinstance(arg, bool):
        raise ConditionError(f"{where}: 'present' takes true or false: {raw!r}")
    target = raw[subject]
    if subject == "flag":
        target = target if isinstance(target, list) else [target]
        if not all(isinstance(t, str) and t.startswith("--") for t in target):
            raise ConditionError(f"{where}: flag names start with '--': {raw!r}")
    elif not isinstance(target, str) or not target:
        raise ConditionError(f"{where}: 'fact' names a path: {raw!r}")
    return Condition(subject, target, op, arg)


def _known(v) -> bool:
    return v is not None and v is not MISSING


def holds(cond: Condition, lookup, flag_lookup, version_check) -> bool:
    if cond.subject == "version":
        return version_check(cond.target)
    value = flag_lookup(cond.target) if cond.subject == "flag" else lookup(cond.target)
    op, arg = cond.op, cond.arg
    if op == "present":
        present = _known(value) and value not in (False, "", [], {}, 0)
        return present == arg
    if not _known(value):
        return False
    if op == "has":
        return _has(value, arg)
    if op == "eq":
        return value == arg or (isinstance(value, str) and value == str(arg))
    if op == "ne":
        return not (value == arg or (isinstance(value, str) and value == str(arg)))
    if op == "in":
        return value in arg or (isinstance(value, str) and value in [str(a) for a in arg])
    if op == "not_in":
        return value not in arg and not (isinstance(value, str) and value in [str(a) for a in arg])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if op == "gt":
        return value > arg
    if op == "gte":
        return value >= arg
    if op == "lt":
        return value < arg
    return value <= arg


def _has(value, patterns: list[str]) -> bool:
    from fnmatch import fnmatchcase
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)):
        return False
    return any(isinstance(v, str) and any(fnmatchcase(v, p) for p in patterns) for v in items)
