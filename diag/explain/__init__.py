"""Explainers: the arithmetic behind a finding, by name. The one registry is EXPLAINERS below.

An explainer is a pure function of the facts and the events that matched a rule. It returns
values — numbers, names, flag values, a memory budget, computed fix options — never text,
never a veto, never a category: a case that needs another category is another rule with a
condition on an explainer's value (``{fact = "memory.goal", eq = "mamba"}``).

    @dataclass Explainer(name, fn, provides, options, args)
      provides: the value names it may return (``weights_gib``, ``option.*`` ...), checked
                against every rule that reads them when the rules load
      options:  the fix-option kinds it computes; their texts are in rules/_fixes/<name>.toml
      args:     the arguments a rule may pass (``{name = "memory", goal = "cuda_graph"}``)
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class OptionValue:
    """A fix option an explainer computed: its kind (names its texts), the changes, the numbers."""
    kind: str
    cost: int
    changes: list[dict]                       # {"flag"|"env"|"external_env": name, "value": str|None, "action": "set"|"remove"}
    values: dict = field(default_factory=dict)
    fits: bool | None = None
    order: int = 0


@dataclass
class Values:
    values: dict = field(default_factory=dict)
    options: list[OptionValue] = field(default_factory=list)
    evidence: list[tuple[int, int, str]] = field(default_factory=list)   # (input, line, role)

    def option(self, kind: str) -> OptionValue | None:
        return next((o for o in self.options if o.kind == kind), None)


@dataclass(frozen=True)
class Explainer:
    name: str
    fn: Callable
    provides: tuple[str, ...]
    options: tuple[str, ...] = ()
    args: tuple[str, ...] = ()

    def provides_value(self, name: str) -> bool:
        exact, prefixes, globs = _split_globs(self.provides)
        return (name in exact or name.startswith(prefixes)
                or any(fnmatch.fnmatchcase(name, p) for p in globs))


_GLOBS: dict = {}


def _split_globs(patterns: tuple[str, ...]) -> tuple[frozenset, tuple[str, ...], tuple[str, ...]]:
    """(literal names, prefixes of 'name.*' patterns, other globs) of fnmatch patterns: the same
    answers as fnmatchcase without compiling a regular expression per pattern (~0.1 ms each, on
    every run: the rules ask about a hundred of them)."""
    got = _GLOBS.get(patterns)
    if got is None:
        special = "*?["
        exact = frozenset(p for p in patterns if not any(c in p for c in special))
        prefixes = tuple(p[:-1] for p in patterns if p.endswith("*") and not any(c in p[:-1] for c in special))
        globs = tuple(p for p in patterns if p not in exact and not (p.endswith("*") and p[:-1] in prefixes))
        got = _GLOBS[patterns] = (exact, prefixes, globs)
    return got


MODULES = ("memory", "flags", "env", "runtime")        # one explainer per module of this package, by name


def _registry() -> dict[str, Explainer]:
    import importlib
    found = [importlib.import_module(f".{name}", __name__).EXPLAINER for name in MODULES]
    return {e.name: e for e in found}


_EXPLAINERS: dict[str, Explainer] | None = None


def explainers() -> dict[str, Explainer]:
    global _EXPLAINERS
    if _EXPLAINERS is None:
        _EXPLAINERS = _registry()
    return _EXPLAINERS


@dataclass
class ExplainContext:
    """What an explainer reads: the facts and the events the rule matched (read-only)."""
    facts: object
    hits: list
