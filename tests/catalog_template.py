"""A small reference implementation of the catalog's template language (diag/messages/README.md).

The test of the hand-written message lists uses it to turn each `template` into an RE2 regex and
to read typed fields back; the catalog builder has its own implementation, which must agree
with this one on every example in the hand lists.

Placeholders: {name} (any text, as little as possible), {name:int}, {name:float} / {name:num},
{name:size}, {name:word}, {name:ident}, {name:hex}, {name:text} (the rest of the line, greedy),
{*} (any text, not captured), {{ and }} (literal braces). A run of whitespace matches any run of
whitespace; everything else is literal. A template matches anywhere in a line (search, not a
full match), because log lines carry prefixes (timestamps, rank tags, exception class names).
"""
from __future__ import annotations

import re

from diag.numbers import to_bytes, to_float, to_int

NUMBER = r"-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
SIZE_UNITS = r"(?:bytes|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)"

PATTERNS = {
    None: r".*?",
    "int": r"-?\d+",
    "float": NUMBER,
    "num": NUMBER,
    "size": rf"\d+(?:\.\d+)?\s?{SIZE_UNITS}\b",
    "word": r"\S+",
    "ident": r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*",
    "hex": r"0x[0-9a-fA-F]+",
    "text": r".*",
}

_TOKEN = re.compile(r"\{\{|\}\}|\{\*\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?\}|\s+|[{}]|[^{}\s]+")


class TemplateError(ValueError):
    """A template that the language cannot read (a stray brace, an unknown type, a repeated name)."""


def compile_template(template: str) -> tuple[str, dict[str, str | None]]:
    """The RE2-compatible regex of a template, and each field's type (None for plain text)."""
    if not template.strip():
        raise TemplateError("empty template")
    parts: list[str] = []
    fields: dict[str, str | None] = {}
    for m in _TOKEN.finditer(template.strip()):
        tok = m.group(0)
        if tok == "{{":
            parts.append(r"\{")
        elif tok == "}}":
            parts.append(r"\}")
        elif tok == "{*}":
            parts.append(r".*?")
        elif m.group(1):
            name, kind = m.group(1), m.group(2)
            if kind not in PATTERNS:
                raise TemplateError(f"unknown placeholder type {kind!r} in {tok}")
            if name in fields:
                raise TemplateError(f"field {name!r} appears twice")
            fields[name] = kind
            parts.append(f"(?P<{name}>{PATTERNS[kind]})")
        elif tok.isspace():
            parts.append(r"\s+")
        elif tok in "{}":
            raise TemplateError(f"stray {tok!r} (write {tok}{tok} for a literal brace)")
        else:
            parts.append(re.escape(tok))
    return "".join(parts), fields


def convert(kind: str | None, text: str):
    """A field's value as its placeholder type reads it (None when the text is not a sane value)."""
    if kind == "int" or kind == "hex":
        return to_int(text)
    if kind in ("float", "num"):
        return to_float(text)
    if kind == "size":
        return to_bytes(text)
    return text
