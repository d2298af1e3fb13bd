"""All rules, fix libraries and text tables, loaded once and checked against each other.

    rules/<family>/<ID>-<slug>.toml     the rules (family = the category's first part)
    rules/_fixes/<explainer>.toml       texts of the fix options an explainer computes
    rules/_text/<name>.toml             shared text tables for {path@table}

Checks at load, each failing with the file (and line, where it can be found): unknown keys,
categories, operators (schema.py); unknown explainers and arguments; value names that no fact
path, matched-message field or declared explainer provides; tables that do not exist; option
kinds no explainer computes or no library describes; duplicate ids; messages the catalog lacks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import schema as S
from . import text as T

LIB_KEYS = {"title", "arithmetic", "notes", "change"}
CHANGE_KEYS = {"flag", "env", "external_env", "direction", "why"}
OPTION_NAMESPACES = ("opt", "after", "before")       # what a library text may read besides facts and explainer values


@dataclass(frozen=True)
class LibChange:
    name: str
    kind: str            # flag | env | external_env
    direction: str
    why: str


@dataclass(frozen=True)
class LibOption:
    explainer: str
    kind: str
    title: str
    arithmetic: str
    notes: tuple[str, ...]
    changes: tuple[LibChange, ...]
    path: str

    def change(self, name: str) -> LibChange | None:
        return next((c for c in self.changes if c.name == name), None)


@dataclass
class Registry:
    rules: list[S.Rule]
    library: dict[str, LibOption] = field(default_factory=dict)     # "memory.raise_fraction" -> texts
    tables: dict[str, dict] = field(default_factory=dict)

    def get(self, rule_id: str) -> S.Rule | None:
        key = rule_id.strip()
        return next((r for r in self.rules if r.id == key.upper() or r.slug == key or f"{r.id}-{r.slug}" == key), None)


def rules_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("diag_rules")
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parent.parent.parent / "rules"


def _load_library(path: Path) -> dict[str, LibOption]:
    import tomllib                    # only when the start-up cache is cold
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    explainer = path.stem
    out = {}
    for kind, body in data.items():
        where = f"{path} [{kind}]"
        if not isinstance(body, dict):
            raise S.RuleError(f"{where}: an option is a table")
        extra = set(body) - LIB_KEYS
        if extra:
            raise S.RuleError(f"{where}: unknown key(s) {sorted(extra)}")
        changes = []
        for c in body.get("change") or []:
            bad = set(c) - CHANGE_KEYS
            names = [k for k in ("flag", "env", "external_env") if c.get(k)]
            if bad or len(names) != 1:
                raise S.RuleError(f"{where}: a change names one of flag/env/external_env and takes direction, why")
            direction = c.get("direction", "set")
            if direction not in S.DIRECTIONS:
                raise S.RuleError(f"{where}: direction must be one of {S.DIRECTIONS}")
            changes.append(LibChange(c[names[0]], names[0], direction, S._template(c.get("why"), where)))
        out[f"{explainer}.{kind}"] = LibOption(explainer, kind, S._template(body.get("title"), where),
                                               S._template(body.get("arithmetic"), where),
                                               tuple(S._template(n, where) for n in body.get("notes") or []),
                                               tuple(changes), str(path))
    return out


def _load_tables(path: Path) -> dict[str, dict]:
    import tomllib
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    for name, table in data.items():
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise S.RuleError(f"{path} [{name}]: a text table maps values to strings")
    return data


def _libraries(root: Path) -> tuple[dict[str, LibOption], dict[str, dict]]:
    library: dict[str, LibOption] = {}
    for p in sorted((root / "_fixes").glob("*.toml")):
        library.update(_load_library(p))
    tables: dict[str, dict] = {}
    for p in sorted((root / "_text").glob("*.toml")):
        for name, table in _load_tables(p).items():
            if name in tables:
                raise S.RuleError(f"{p}: text table {name!r} is defined twice")
            tables[name] = table
    return library, tables


def load(root: Path | None = None, check_messages: bool = True) -> Registry:
    root = root or rules_dir()
    library, tables = _libraries(root)
    rules = [S.load_rule(p) for p in sorted(root.glob("*/*.toml")) if not p.parent.name.startswith("_")]
    seen: dict[str, str] = {}
    for r in rules:
        if r.id in seen:
            raise S.RuleError(f"{r.path}: rule id {r.id} is also used by {seen[r.id]}")
        seen[r.id] = r.path
    reg = Registry(rules=rules, library=library, tables=tables)
    for r in rules:
        check_rule(reg, r, check_messages)
    for key, lib in library.items():
        _check_library(lib)
    return reg


def _namespace_ok(rule: S.Rule, path: str, extra: tuple[str, ...] = ()) -> str | None:
    """None when the path can be read by this rule, else why not."""
    from ..explain import explainers
    from ..facts import known_path
    ns, _, rest = path.partition(".")
    if ns == "hit":
        return None if rest else "hit.<field> names a field of the matched message"
    if ns in extra:
        return None
    used = {e.name for e in rule.explainers}
    ex = explainers().get(ns)
    if ex is not None and (ex.provides_value(rest) or not known_path(path)):
        # an explainer's name may also be a fact prefix (env.<VARIABLE>): its own values win,
        # any other name under it is the fact
        if ns not in used:
            return f"{path}: the rule reads explainer {ns!r} without declaring it in explainers"
        return None if ex.provides_value(rest) else f"{path}: explainer {ns!r} provides no value {rest!r}"
    return None if known_path(path) else f"{path}: no fact, matched-message field or explainer value has this name"


def check_rule(reg: Registry, rule: S.Rule, check_messages: bool = True) -> None:
    from ..explain import explainers
    known = explainers()
    for e in rule.explainers:
        ex = known.get(e.name)
        if ex is None:
            raise S.RuleError(f"{rule.path}: unknown explainer {e.name!r} (known: {', '.join(sorted(known))})")
        bad = [k for k, _ in e.args if k not in ex.args]
        if bad:
            raise S.RuleError(f"{rule.path}: explainer {e.name!r} takes no argument {bad} (takes: {list(ex.args)})")
    per_item = {f"fix[{i}]" for i, fx in enumerate(rule.fixes) if fx.each}
    for where, template in rule.templates():
        extra = (S.ITEM,) if where.split(".", 1)[0] in per_item else ()
        for f in T.fields(template):
            problem = _namespace_ok(rule, f.path, extra)
            if problem:
                raise S.RuleError(f"{rule.path}: {where}: {problem}")
            if f.table and f.table not in rule.tables and f.table not in reg.tables:
                raise S.RuleError(f"{rule.path}: {where}: no text table {f.table!r}")
    item_conds = {id(c) for fx in rule.fixes if fx.each for c in fx.when}
    for c in rule.conditions():
        if c.subject == "fact":
            problem = _namespace_ok(rule, c.target, (S.ITEM,) if id(c) in item_conds else ())
            if problem:
                raise S.RuleError(f"{rule.path}: condition {c.describe()}: {problem}")
    for i, fx in enumerate(rule.fixes):
        if fx.each:
            problem = _namespace_ok(rule, fx.each)
            if problem:
                raise S.RuleError(f"{rule.path}: fix[{i}] each = {fx.each!r}: {problem}")
    for path in rule.evidence:
        problem = _namespace_ok(rule, path)
        if problem:
            raise S.RuleError(f"{rule.path}: evidence {path}: {problem}")
    for fx in rule.fixes:
        if fx.use:
            ns, kind = fx.use.split(".", 1)
            ex = known.get(ns)
            if ex is None or ns not in {e.name for e in rule.explainers}:
                raise S.RuleError(f"{rule.path}: fix use = {fx.use!r}: the rule does not declare explainer {ns!r}")
            if kind not in ex.options:
                raise S.RuleError(f"{rule.path}: fix use = {fx.use!r}: explainer {ns!r} computes no option {kind!r}")
            if fx.use not in reg.library:
                raise S.RuleError(f"{rule.path}: fix use = {fx.use!r}: no texts for it in rules/_fixes/{ns}.toml")
    options = {fx.option for fx in rule.fixes}
    for o in rule.fix_other:
        if o.option and o.option not in options:
            raise S.RuleError(f"{rule.path}: fix_other names option {o.option!r}, which no [[fix]] declares")
    if check_messages:
        _check_messages(rule)


def _check_messages(rule: S.Rule) -> None:
    try:
        from ..messages import known_name
    except ImportError:      # the catalog is optional while it is being built
        return
    for name in rule.messages + rule.all_messages + rule.unless_messages:
        if not known_name(name):
            raise S.RuleError(f"{rule.path}: message {name!r} is not in the catalog (diag/messages)")


def _check_library(lib: LibOption) -> None:
    from ..explain import explainers
    ex = explainers().get(lib.explainer)
    if ex is None:
        raise S.RuleError(f"{lib.path}: no explainer {lib.explainer!r} for this library")
    if lib.kind not in ex.options:
        raise S.RuleError(f"{lib.path}: explainer {lib.explainer!r} computes no option {lib.kind!r}")
    texts = [lib.title, lib.arithmetic, *lib.notes, *(c.why for c in lib.changes)]
    for t in texts:
        for f in T.fields(t):
            ns = f.path.split(".", 1)[0]
            if ns in OPTION_NAMESPACES:
                continue
            from ..facts import known_path
            if ns == lib.explainer:
                if not ex.provides_value(f.path.split(".", 1)[1]):
                    raise S.RuleError(f"{lib.path} [{lib.kind}]: {f.path}: explainer provides no such value")
            elif not known_path(f.path):
                raise S.RuleError(f"{lib.path} [{lib.kind}]: {f.path}: unknown value")


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The rules as the product runs them (message names are checked against the catalog by the
    tests, not on every start-up), from the start-up cache (diag/cache.py) while neither the rule
    files nor diag's code have changed."""
    from ..cache import cached
    root = rules_dir()
    return cached("registry", root, (".toml",), lambda: load(root, check_messages=False))


@lru_cache(maxsize=1)
def libraries() -> tuple[dict[str, LibOption], dict[str, dict]]:
    """The fix libraries and shared text tables alone, without reading every rule (for the
    option texts v1 and `diag mem` render); `load` checks them against the explainers."""
    return _libraries(rules_dir())
