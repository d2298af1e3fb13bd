"""Rules -> findings: match, run the declared explainers, fill the rule's own texts and fixes.

Nothing here decides a category, a title or a fix: the rule file does. The engine only
  1. selects the events the rule's [match] names (catalog message names or event kinds),
  2. checks its conditions over facts (before the explainers) and over explainer values (after),
  3. renders its texts, quotes its evidence, and offers each declared fix whose values are known
     and whose conditions hold, grouped into options ordered by cost,
  4. computes the confidence from the rule's declared base and adjustments.
Spelling flags for the user's version, the `was` values and the direction check happen once,
for all findings, in diag/findings.
"""
from __future__ import annotations

import copy

from dataclasses import dataclass, field

from ..events import Event
from ..explain import ExplainContext, Values, explainers
from ..facts import lookup as fact_lookup
from ..parse.spans import KIND as SPAN_MESSAGE, message_span
from ..report import Evidence, Finding, Fix
from ..versions import could_be
from . import conditions as C
from . import schema as S
from . import text as T
from .registry import Registry

MAX_TRIGGERS = 6
FRAGMENT_PENALTY = 0.05            # per sign that the paste is a piece of a longer log (at most two)
GENERIC_CAP = 0.6


def event_names(ev) -> tuple:
    m = getattr(ev, "msg", None)
    if m is None:
        return ()
    return tuple(x for x in (getattr(m, "name", None), getattr(m, "family", None), getattr(m, "id", None)) if x)


def matches_name(ev, name: str) -> bool:
    m = getattr(ev, "msg", None)
    if m is None:
        return False
    if name.endswith(".*"):
        prefix = name[:-1]
        return any(n.startswith(prefix) for n in event_names(ev)) or (getattr(m, "component", None) or "") + "." == prefix
    return name in event_names(ev)


# the parser's own kinds that a catalog event kind also names
PARSER_KINDS = {"oom": "device_oom", "argparse": "argparse", "retract": "retract", "watchdog": "watchdog"}


def event_kinds(ev) -> set:
    kinds = {ev.kind}
    if ev.kind in PARSER_KINDS:
        kinds.add(PARSER_KINDS[ev.kind])
    m = getattr(ev, "msg", None)
    if m is not None and getattr(m, "event", None):
        kinds.add(m.event)
    return kinds


@dataclass
class Context:
    rule: S.Rule
    facts: object
    hits: list
    values: dict = field(default_factory=dict)        # explainer name -> Values
    tables: dict = field(default_factory=dict)

    def lookup(self, path: str, extra: dict | None = None):
        ns, _, rest = path.partition(".")
        if extra and ns in extra:
            return _dig(extra[ns], rest)
        if ns == "hit":
            for ev in self.hits:
                fields = getattr(getattr(ev, "msg", None), "fields", None) or {}
                if rest in fields and fields[rest] is not None:
                    return fields[rest]
                if rest in ev.data and ev.data[rest] is not None:
                    return ev.data[rest]
            return T.MISSING
        if ns in self.values and _provides(ns, rest):
            return _dig(self.values[ns].values, rest)
        try:
            v = fact_lookup(self.facts, path)
        except KeyError:
            return T.MISSING
        return T.MISSING if v is None else v

    def flag(self, names: list[str]):
        for n in names:
            if n in self.facts.flags:
                v = self.facts.flags[n]
                return True if v is None else v   # written without a value (a switch): present
        return None

    def version_ok(self, spec: str) -> bool:
        return could_be(self.facts.version, spec)

    def holds(self, cond: C.Condition, extra: dict | None = None) -> bool:
        return C.holds(cond, lambda p: self.lookup(p, extra), self.flag, self.version_ok)

    def render(self, template: str, extra: dict | None = None) -> str:
        return T.render(template, lambda p: self.lookup(p, extra), {**self.tables, **self.rule.tables})


def _dig(obj, rest: str):
    if not rest:
        return obj if obj is not None else T.MISSING
    cur = obj
    for part in rest.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif hasattr(cur, part) and not part.startswith("_"):
            cur = getattr(cur, part)
        else:
            return T.MISSING
    return T.MISSING if cur is None else cur


def _provides(ns: str, rest: str) -> bool:
    """Whether explainer `ns` provides value `rest` (else the path is a fact under the same prefix)."""
    ex = explainers().get(ns)
    return ex is None or ex.provides_value(rest.split(".", 1)[0]) or ex.provides_value(rest)


def _explainer_paths(cond: C.Condition) -> bool:
    if cond.subject != "fact":
        return False
    ns, _, rest = cond.target.partition(".")
    return ns in explainers() and _provides(ns, rest)


class _EventIndex:
    """The facts' events by the names rules match them on (message name, family, id; component) and
    by kind, built once per analysis: the rules ask for a few names each, the log holds a few events."""

    def __init__(self, events: list) -> None:
        self.events, self.size = events, len(events)
        self.names: dict[str, list[int]] = {}
        self.components: dict[str, list[int]] = {}
        self.kinds: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            for n in event_names(e):
                self.names.setdefault(n, []).append(i)
            m = getattr(e, "msg", None)
            if m is not None:
                self.components.setdefault(getattr(m, "component", None) or "", []).append(i)
            for k in event_kinds(e):
                self.kinds.setdefault(k, []).append(i)

    def named(self, name: str) -> set[int]:
        """The events matches_name(e, name) is true of."""
        if name.endswith(".*"):
            prefix = name[:-1]
            out = {i for k, v in self.names.items() if k.startswith(prefix) for i in v}
            out.update(self.components.get(prefix[:-1], ()))
            return out
        return set(self.names.get(name, ()))

    def of_kinds(self, kinds) -> set[int]:
        return {i for k in kinds for i in self.kinds.get(k, ())}


def _index(facts) -> _EventIndex:
    idx = getattr(facts, "_event_index", None)
    if idx is None or idx.events is not facts.events or idx.size != len(facts.events):
        idx = _EventIndex(facts.events)
        try:
            facts._event_index = idx
        except AttributeError:          # facts without a __dict__ (a test's stand-in): no cache
            pass
    return idx


_RULE_NAMES: dict[str, tuple[frozenset, tuple]] = {}


def _names_of(rule: S.Rule) -> tuple[frozenset, tuple]:
    """A rule's [match] messages as (exact names, 'component.*' patterns)."""
    key = rule.id + "\0" + "\0".join(rule.messages)
    got = _RULE_NAMES.get(key)
    if got is None:
        got = _RULE_NAMES[key] = (frozenset(n for n in rule.messages if not n.endswith(".*")),
                                  tuple(n for n in rule.messages if n.endswith(".*")))
    return got


def select(rule: S.Rule, facts) -> list | None:
    """The events the rule's [match] selects (possibly none when it matches on facts only), or
    None when the match fails."""
    events = facts.events
    if not (rule.messages or rule.all_messages or rule.unless_messages or rule.events or rule.unless_events):
        return []
    idx = _index(facts)
    hits: list = []
    if rule.messages:
        exact, wild = _names_of(rule)
        got = {i for n in exact & idx.names.keys() for i in idx.names[n]}
        for n in wild:
            got |= idx.named(n)
        if not got:
            return None
        hits = [events[i] for i in sorted(got)]
    for name in rule.all_messages:
        found = sorted(idx.named(name))
        if not found:
            return None
        hits.extend(events[i] for i in found[:2])
    if any(idx.named(n) for n in rule.unless_messages):
        return None
    if rule.events:
        found = sorted(idx.of_kinds(set(rule.events)))
        if not found:
            return None
        hits.extend(events[i] for i in found if events[i] not in hits)
    if rule.unless_events and idx.of_kinds(set(rule.unless_events)):
        return None
    hits.sort(key=lambda e: (e.input, e.line))
    return hits


def run_explainers(ctx: Context, cache: dict) -> None:
    known = explainers()
    for use in ctx.rule.explainers:
        key = (use.name, use.args, tuple(id(h) for h in ctx.hits))
        if key not in cache:
            ex = known[use.name]
            cache[key] = ex.fn(ExplainContext(facts=ctx.facts, hits=ctx.hits), **use.kwargs) or Values()
        ctx.values[use.name] = cache[key]


def evaluate(reg: Registry, facts, cache: dict | None = None) -> list[Finding]:
    cache = {} if cache is None else cache
    out = []
    fallback = set()
    for rule in reg.rules:
        f = evaluate_rule(reg, rule, facts, cache)
        if f is not None:
            out.append(f)
            if rule.fallback:
                fallback.add(rule.id)
    if fallback:
        generic = {r.id for r in reg.rules if r.generic or r.fallback}
        claimed = {(e.input, e.line) for f in out if f.rule not in generic for e in f.evidence}
        out = [f for f in out if f.rule not in fallback
               or not {(e.input, e.line) for e in f.evidence if e.role == "trigger"} <= claimed]
    return out


def evaluate_rule(reg: Registry, rule: S.Rule, facts, cache: dict) -> Finding | None:
    if rule.applies_to and not could_be(facts.version, rule.applies_to):
        return None
    hits = select(rule, facts)
    if hits is None:
        return None
    ctx = Context(rule=rule, facts=facts, hits=hits, tables=reg.tables)
    early = [c for c in rule.where if not _explainer_paths(c)]
    if not all(ctx.holds(c) for c in early):
        return None
    early_any = [c for c in rule.where_any if not _explainer_paths(c)]
    if early_any and len(early_any) == len(rule.where_any) and not any(ctx.holds(c) for c in early_any):
        return None
    if any(ctx.holds(c) for c in rule.unless if not _explainer_paths(c)):
        return None
    run_explainers(ctx, cache)
    if not all(ctx.holds(c) for c in rule.where):
        return None
    if rule.where_any and not any(ctx.holds(c) for c in rule.where_any):
        return None
    if any(ctx.holds(c) for c in rule.unless):
        return None
    return assemble(reg, ctx)


def assemble(reg: Registry, ctx: Context) -> Finding:
    rule = ctx.rule
    finding = Finding(rule=rule.id, category=rule.category, severity=rule.severity, confidence=0.0,
                      title=ctx.render(rule.title), summary=ctx.render(rule.summary), explanation=ctx.render(rule.why),
                      role=rule.role)
    finding.fix_safety = ctx.render(rule.fix_safety)
    _evidence(ctx, finding)
    _fixes(reg, ctx, finding)
    finding.confidence = _confidence(ctx)
    finding.memory = _memory(ctx)
    finding.inside = {(ev.input, ev.data["inside"]) for ev in ctx.hits[:MAX_TRIGGERS]
                      if isinstance(ev, Event) and ev.data.get("inside") is not None}
    finding.rank_score = rule.priority + 10 * finding.confidence + {"critical": 3, "error": 2, "warning": 1}.get(rule.severity, 0)
    return finding


def _evidence(ctx: Context, finding: Finding) -> None:
    seen = set()

    def add(inp: int, line: int, text: str, role: str, spans=()) -> None:
        if (inp, line) in seen:
            return
        seen.add((inp, line))
        finding.evidence.append(Evidence(inp, line, text, role, spans=list(spans)))

    for ev in ctx.hits[:MAX_TRIGGERS]:
        # the catalog-matched message's place in the line, for the views to highlight
        at = message_span(ev) if isinstance(ev, Event) else None
        add(ev.input, ev.line, ev.text, "trigger", [(at[0], at[1], SPAN_MESSAGE)] if at else ())
    for path in ctx.rule.evidence:
        v = ctx.lookup(path)
        for item in (v if isinstance(v, list) else [v]):
            if item is T.MISSING or item is None:
                continue
            if hasattr(item, "line") and hasattr(item, "text"):
                add(item.input, item.line, item.text, "trigger" if not ctx.hits else "context")
    for vals in ctx.values.values():
        for inp, line, role in vals.evidence:
            text = ctx.facts.context.get((inp, line), "")
            if text:
                add(inp, line, text, role)
    finding.evidence.sort(key=lambda e: (e.input, e.line))


def _fixes(reg: Registry, ctx: Context, finding: Finding) -> None:
    rule = ctx.rule
    groups: dict[str, dict] = {}
    order = 0
    for spec in rule.fixes:
        order += 1
        if spec.applies_to and not ctx.version_ok(spec.applies_to):
            continue
        if spec.use:
            if not all(ctx.holds(c) for c in spec.when):
                continue
            _use(reg, ctx, spec, groups, order)
            continue
        if spec.each:
            items = ctx.lookup(spec.each)
            items = items if isinstance(items, (list, tuple)) else []
            for item in items:
                extra = {S.ITEM: item}
                if all(ctx.holds(c, extra) for c in spec.when):
                    _plain(ctx, spec, groups, order, extra)
            continue
        if not all(ctx.holds(c) for c in spec.when):
            continue
        _plain(ctx, spec, groups, order, None)
    ranked = sorted(groups.items(), key=lambda kv: (kv[1]["cost"], kv[1]["order"]))
    numbers = {}
    for n, (key, g) in enumerate(ranked, 1):
        numbers[key] = n
        for fx in g["fixes"]:
            fx.option = n
            finding.fix.append(fx)
        finding.options.append({"option": n, "title": g["title"], "cost": g["cost"], "arithmetic": g["arithmetic"],
                                "fits": g.get("fits")})
        for note in g.get("notes", []):
            finding.fix_other.append(f"option {n}: {note}")
    for o in rule.fix_other:
        if not all(ctx.holds(c) for c in o.when):
            continue
        if o.option is not None and o.option not in numbers:
            continue
        text = ctx.render(o.text)
        finding.fix_other.append(f"option {numbers[o.option]}: {text}" if o.option else text)


def _plain(ctx: Context, spec: S.FixSpec, groups: dict, order: int, extra: dict | None) -> None:
    """One fix written out in the rule (for a fix with `each`: one per list item)."""
    value = spec.value
    if isinstance(value, str):
        if T.fields(value):
            rendered = ctx.render(value, extra)
            if "?" in rendered and not _all_known(ctx, value, extra):
                return                            # a computed value that is not known: no fix
            value = rendered
    elif isinstance(value, bool):
        value = "true" if value else "false"
    elif value is not None:
        value = f"{value:g}" if isinstance(value, float) else str(value)
    flag = spec.flag
    if spec.computed_flag:
        flag = ctx.render(flag, extra)
        if not S.FLAG_NAME.match(flag):
            return                                # the explainer named no flag: no fix
    g = groups.setdefault(spec.option, {"title": "", "cost": spec.cost, "order": order, "fixes": [], "arithmetic": ""})
    if spec.title and not g["title"]:
        g["title"] = ctx.render(spec.title, extra)
    g["fixes"].append(Fix(flag=flag, env=spec.env, external_env=spec.external_env, value=value,
                          why=ctx.render(spec.why, extra), action=spec.action, direction=spec.direction))


def _all_known(ctx: Context, template: str, extra: dict | None = None) -> bool:
    return all(ctx.lookup(f.path, extra) is not T.MISSING for f in T.fields(template))


def _use(reg: Registry, ctx: Context, spec: S.FixSpec, groups: dict, order: int) -> None:
    ns, kind = spec.use.split(".", 1)
    vals: Values = ctx.values.get(ns) or Values()
    opt = vals.option(kind)
    if opt is None or opt.fits is False:
        return
    lib = reg.library[spec.use]
    extra = {"opt": opt.values, "after": opt.values.get("after") or {}, "before": opt.values.get("before") or {}}
    g = groups.setdefault(spec.option, {"title": "", "cost": opt.cost, "order": order + opt.order / 1000, "fixes": [],
                                        "arithmetic": "", "fits": opt.fits, "notes": []})
    g["title"] = g["title"] or ctx.render(lib.title, extra)
    g["arithmetic"] = g["arithmetic"] or ctx.render(lib.arithmetic, extra)
    g["notes"].extend(ctx.render(n, extra) for n in lib.notes)
    for ch in opt.changes:
        name = ch.get("flag") or ch.get("env") or ch.get("external_env")
        text = lib.change(name)
        if text is None:
            raise S.RuleError(f"{lib.path} [{kind}]: explainer {ns!r} changed {name}, which the library does not describe")
        g["fixes"].append(Fix(flag=ch.get("flag"), env=ch.get("env"), external_env=ch.get("external_env"),
                              value=ch.get("value"), why=ctx.render(text.why, extra), action=ch.get("action", "set"),
                              direction=text.direction))


def _confidence(ctx: Context) -> float:
    rule = ctx.rule
    c = rule.confidence
    basis = ctx.lookup("failure.phase_basis")
    if isinstance(basis, str):
        c += rule.by_phase_basis.get(basis, 0.0)
    fragment = ctx.lookup("fragment")
    if isinstance(fragment, list) and rule.role != "symptom":
        c -= FRAGMENT_PENALTY * min(2, len(fragment))
    if rule.generic:
        c = min(c, GENERIC_CAP)
    return max(0.05, min(rule.confidence_max, c))


def _memory(ctx: Context) -> dict:
    vals = ctx.values.get("memory")
    if vals is None:
        return {}
    # each finding owns its copy: the explainer's values are shared by every rule that named it,
    # and the report builder moves the provenance into `sources` per finding
    return copy.deepcopy(vals.values.get("budget_json") or {})
