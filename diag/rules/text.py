"""The text language of rule files: titles, summaries, explanations, fix reasons.

    {path}            a value: a fact (``oom.tried_gib``), a field of the matched message
                      (``hit.mem_fraction_static``) or an explainer's value (``memory.weights_gib``)
    {path:.2f}        with a Python format spec (``.1f``, ``,``, ``.0%``, ``,.0f`` ...)
    {path:gib}        a size in GiB shown as ``1.50 GiB`` or ``512 MiB``
    {path:list}       a list joined with commas
    {path@table}      the value looked up in a text table (``[text.table]`` in the rule file, or
                      a shared table in rules/_text/), e.g. a phase id -> "while loading the weights"
    [[ ... ]]         an optional part: shown only when every value inside it is known
    {{ }} [[[ ]]]     literal braces / brackets

Values are never prose produced by Python: explainers return numbers, names and flag values;
every sentence a finding says is written in a rule file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\{\{|\}\}|\[\[\[|\]\]\]|\[\[|\]\]|\{[^{}]*\}")
_FIELD = re.compile(r"^\{(?P<path>[A-Za-z_][\w.\-]*)(?:@(?P<table>[A-Za-z_]\w*))?(?::(?P<spec>[^{}]*))?\}$")
MISSING = object()


class TemplateError(ValueError):
    pass


@dataclass(frozen=True)
class Field:
    path: str
    table: str | None
    spec: str | None


def parse(template: str) -> list:
    """A template as a tree: str pieces, Field objects and lists (optional parts)."""
    root: list = []
    stack = [root]
    pos = 0
    stray = False
    for m in _TOKEN.finditer(template):
        if m.start() > pos:
            gap = template[pos:m.start()]
            stray = stray or "{" in gap or "}" in gap
            stack[-1].append(gap)
        tok = m.group()
        if tok == "{{":
            stack[-1].append("{")
        elif tok == "}}":
            stack[-1].append("}")
        elif tok == "[[[":
            stack[-1].append("[[")
        elif tok == "]]]":
            stack[-1].append("]]")
        elif tok == "[[":
            part: list = []
            stack[-1].append(part)
            stack.append(part)
        elif tok == "]]":
            if len(stack) == 1:
                raise TemplateError(f"']]' without '[[' in {template!r}")
            stack.pop()
        else:
            f = _FIELD.match(tok)
            if not f:
                raise TemplateError(f"bad placeholder {tok} in {template!r}")
            stack[-1].append(Field(f["path"], f["table"], f["spec"]))
        pos = m.end()
    if pos < len(template):
        stack[-1].append(template[pos:])
        stray = stray or "{" in template[pos:] or "}" in template[pos:]
    if len(stack) != 1:
        raise TemplateError(f"'[[' without ']]' in {template!r}")
    if stray:          # a brace outside a placeholder that is not written {{ or }}
        raise TemplateError(f"stray brace in {template!r} (write {{{{ or }}}} for a literal one)")
    return root


def _flat(tree: list):
    for x in tree:
        if isinstance(x, list):
            yield from _flat(x)
        else:
            yield x


def fields(template: str) -> list[Field]:
    """Every placeholder of a template (for validation at load)."""
    return [x for x in _flat(parse(template)) if isinstance(x, Field)]


def _known(value) -> bool:
    return value is not None and value is not MISSING and value != "" and value != [] and value != {}


def format_value(value, spec: str | None) -> str:
    if spec == "gib":
        gib = float(value)
        return f"{gib:.2f} GiB" if abs(gib) >= 1 else f"{gib * 1024:.0f} MiB"
    if spec == "list":
        return ", ".join(str(v) for v in value) if isinstance(value, (list, tuple, set)) else str(value)
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def render(template: str | None, lookup, tables: dict | None = None) -> str:
    """Fill a template. `lookup(path)` returns a value or MISSING. A placeholder outside an
    optional part that has no value renders as '?' (the tests look for it)."""
    if not template:
        return ""
    tables = tables or {}

    def text_of(f: Field):
        """The text of a placeholder, or MISSING."""
        v = lookup(f.path)
        if not _known(v):
            return MISSING
        if f.table is not None:
            table = tables.get(f.table) or {}
            return table.get(str(v).lower() if isinstance(v, bool) else str(v), MISSING)
        return format_value(v, f.spec)

    def walk(tree: list, optional: bool) -> str | None:
        out = []
        for x in tree:
            if isinstance(x, str):
                out.append(x)
            elif isinstance(x, Field):
                t = text_of(x)
                if t is MISSING:
                    if optional:
                        return None
                    out.append("?")
                else:
                    out.append(t)
            else:
                part = walk(x, True)
                if part is not None:
                    out.append(part)
        return "".join(out)

    text = walk(parse(template), False) or ""
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r" +([.,;:)])", r"\1", text)
    return text.strip()
