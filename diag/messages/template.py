"""The template language of the message catalog (README "Template language").

One module for the builder and the runtime: a template is parsed into segments, turned into
an RE2 pattern with named groups, rendered with sample values (tests), and cut into the
literal tokens the pre-filter indexes. Pure Python, no third-party import.
"""
from __future__ import annotations

import re

# type -> RE2 sub-pattern of the value (README table)
_NUM = r"-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_UNIT = r"(?:bytes|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)"
TYPES = {
    "str": r".*?",
    # a number or address a paste redacted ('...', '…', 'xxx') still fills its place
    "int": r"-?\d+|\.\.\.|…|[xX*]{3,}",
    "float": _NUM,
    "num": _NUM,
    "size": r"\d+(?:\.\d+)?\s?" + _UNIT + r"\b",
    "word": r"\S+",
    "ident": r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*",
    "hex": r"0[xX](?:[0-9a-fA-F]+|\.\.\.|…|[xX*]{3,})|\.\.\.|…",
    "text": r".*",
}
# a sample value of each type, for the self-test of every entry
SAMPLES = {
    "str": "some value", "int": "42", "float": "0.75", "num": "12.5", "size": "1.50 GiB",
    "word": "tok_7", "ident": "pkg.mod_name", "hex": "0x1f", "text": "the rest of it",
}

_FIELD = re.compile(r"\{(\*|[A-Za-z_]\w*)(?::([a-z]+))?\}")
_WS = re.compile(r"\s+")
# the pre-filter's tokenizer: identifiers of 3+ characters (same on templates and log lines)
TOKEN = re.compile(r"[A-Za-z_]\w{2,}")


class TemplateError(ValueError):
    pass


def parse(template: str) -> list[tuple]:
    """'a {x:int} b' -> [('lit', 'a '), ('field', 'x', 'int'), ('lit', ' b')]; ('any',) for {*}."""
    out: list[tuple] = []
    lit: list[str] = []
    i, n = 0, len(template)
    while i < n:
        c = template[i]
        if c == "{":
            if template.startswith("{{", i):
                lit.append("{")
                i += 2
                continue
            m = _FIELD.match(template, i)
            if not m:
                raise TemplateError(f"bad placeholder at {i}: {template[i:i + 30]!r}")
            if lit:
                out.append(("lit", "".join(lit)))
                lit = []
            if m[1] == "*":
                out.append(("any",))
            else:
                typ = m[2] or "str"
                if typ not in TYPES:
                    raise TemplateError(f"unknown placeholder type {typ!r}")
                out.append(("field", m[1], typ))
            i = m.end()
            continue
        if c == "}":
            if template.startswith("}}", i):
                lit.append("}")
                i += 2
                continue
            raise TemplateError(f"single '}}' at {i}")
        lit.append(c)
        i += 1
    if lit:
        out.append(("lit", "".join(lit)))
    return out


def escape(text: str) -> str:
    """Literal text -> template text (braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


# Sentence punctuation run into the next word ("no_buffer.To use"): SGLang's source often joins two
# literals without a space, and a paste or a wrapped line puts one back. There the text may or may not
# have whitespace.
_RUN_ON = re.compile(r"(?<=[a-z0-9_)\]'\"])([.;:,!?])(?=[A-Z])")


def _re_literal(text: str) -> str:
    parts = []
    pos = 0
    for m in _WS.finditer(text):
        parts.append(_re_word(text[pos:m.start()]))
        parts.append(r"\s+")
        pos = m.end()
    parts.append(_re_word(text[pos:]))
    return "".join(parts)


def _re_word(word: str) -> str:
    out, pos = [], 0
    for m in _RUN_ON.finditer(word):
        out.append(re.escape(word[pos:m.end()]))
        out.append(r"\s*")
        pos = m.end()
    out.append(re.escape(word[pos:]))
    return "".join(out)


def _lines(segs: list[tuple]) -> list[list[tuple]]:
    """Segments cut at the line breaks of the literal text (the break itself is dropped)."""
    lines: list[list[tuple]] = [[]]
    for seg in segs:
        if seg[0] == "lit" and "\n" in seg[1]:
            pieces = seg[1].split("\n")
            for j, piece in enumerate(pieces):
                if j:
                    lines.append([])
                if piece:
                    lines[-1].append(("lit", piece))
        else:
            lines[-1].append(seg)
    return lines


def to_regex(template: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The RE2 pattern of a template and its fields [(group, name, type)].

    Group names are the field names made unique (a repeated name gets _2, _3 ...). Whitespace at
    either end matches optionally, so a stripped log line still matches. The last plain
    ``{name}`` of a line takes as much as it can (to the end of the line, or to the last place the
    literal after it occurs), so a match never stops short of the line's end. A template of several lines also matches its
    first line alone: each further line is optional, in order (a log line holds one line)."""
    # blank lines are part of the separator (a whitespace run) between the lines around them
    lines = [ln for ln in _lines(parse(template)) if any(s[0] != "lit" or s[1].strip() for s in ln)] or [[]]
    fields: list[tuple[str, str, str]] = []
    seen: dict[str, int] = {}
    chunks: list[str] = []
    for li, segs in enumerate(lines):
        parts: list[str] = []
        last = len(segs) - 1
        last_field = max((k for k, seg in enumerate(segs) if seg[0] != "lit"), default=-1)
        for k, seg in enumerate(segs):
            if seg[0] == "lit":
                text = seg[1]
                if k == 0:
                    text = text.lstrip()
                if k == last:
                    text = text.rstrip()
                parts.append(_re_literal(text))
            elif seg[0] == "any":
                parts.append(r".*?" if k < last else r".*")
            else:
                _, name, typ = seg
                group = _group(name, seen)
                fields.append((group, name, typ))
                sub = TYPES[typ]
                if typ == "str" and k == last_field:
                    sub = r".*"
                parts.append(f"(?P<{group}>{sub})")
        chunks.append("".join(parts))
    pattern = chunks[-1]
    for chunk in reversed(chunks[:-1]):
        pattern = chunk + (r"(?:\s+" + pattern + ")?" if pattern else "")
    return pattern, fields


def to_cut_regex(template: str, min_literal: int = 40) -> tuple[str, list[tuple[str, str, str]]] | None:
    """The pattern of a template's first line cut short: the leading segments that hold
    `min_literal` letters of literal text must match, each later segment may follow in order,
    and the line must end there (a paste that stops inside the message). None for templates
    too short to tell apart once cut (they must match whole)."""
    segs = _lines(parse(template))[0]
    total = sum(len(s[1]) - s[1].count(" ") for s in segs if s[0] == "lit")
    if total < min_literal + 10:
        return None
    fields: list[tuple[str, str, str]] = []
    seen: dict[str, int] = {}
    pieces: list[str] = []
    need, lit = None, 0
    for k, seg in enumerate(segs):
        if seg[0] == "lit":
            text = seg[1].lstrip() if k == 0 else seg[1]
            # a literal of several sentences may be cut after any of them (the paster kept the
            # first sentence, the values after it dropped): each sentence is a piece of its own
            parts = text.split(". ")
            for j, part in enumerate(parts):
                part = part + (". " if j < len(parts) - 1 else "")
                if not part:
                    continue
                body = part.rstrip()
                if body.endswith(".") and len(body) > 1:
                    # a sentence's full stop may be what the paste lost ('… didn't finish loading')
                    pieces.append(_re_literal(body[:-1]) + r"\.?" + (r"\s*" if part != body else ""))
                else:
                    pieces.append(_re_literal(body) + (r"\s*" if part != body else ""))
                lit += len(part) - part.count(" ")
                if need is None and lit >= min_literal:
                    need = len(pieces)      # the pieces up to here must all match
            continue
        elif seg[0] == "any":
            pieces.append(r".*?")
        else:
            _, name, typ = seg
            group = _group(name, seen)
            fields.append((group, name, typ))
            # a value without spaces: a cut line must not let a value swallow the text after it
            pieces.append(f"(?P<{group}>{TYPES[typ] if typ != 'str' else r'[^ ]*?'})")
        if need is None and lit >= min_literal:
            need = len(pieces)      # the pieces up to here must all match
    pattern = ""
    for piece in reversed(pieces[need:]):
        pattern = f"(?:{piece}{pattern})?"
    return "".join(pieces[:need]) + pattern + r"\s*$", fields


def _group(name: str, seen: dict[str, int]) -> str:
    group, n = name, 1
    while group in seen:
        n += 1
        group = f"{name}_{n}"
    seen[group] = 1
    return group


def render(template: str, values: dict[str, str] | None = None) -> str:
    """Fill a template with sample values of each placeholder's type, or with the values given
    by group name (the names to_regex gives: a repeated field's second group is name_2)."""
    out = []
    seen: dict[str, int] = {}
    for seg in parse(template):
        if seg[0] == "lit":
            out.append(seg[1])
        elif seg[0] == "any":
            out.append("anything")
        else:
            group = _group(seg[1], seen)
            out.append((values or {}).get(group, SAMPLES[seg[2]]))
    return "".join(out)


def literal_chars(template: str, spaces: bool | None = None) -> int:
    """How much of the message is fixed: letters and digits of the literal text, or with
    spaces=False every literal character but whitespace."""
    lits = (seg[1] for seg in parse(template) if seg[0] == "lit")
    if spaces is None:
        return sum(ch.isalnum() for t in lits for ch in t)
    return sum(not ch.isspace() for t in lits for ch in t)


def closed_tokens(template: str, first_line_only: bool = True) -> list[list[str]]:
    """Runs of tokens that appear verbatim, bounded by literal non-word characters (or the ends
    of the template), in any rendering of the template: one list per literal segment.

    A token that touches a placeholder could merge with the value (``{n}GB`` -> ``12GB``), so it
    is left out. With first_line_only, only the template's first line counts (a log line holds
    one line of a multi-line message)."""
    segs = parse(template)
    runs: list[list[str]] = []
    for k, seg in enumerate(segs):
        if seg[0] != "lit":
            continue
        text = seg[1]
        stop = False
        if first_line_only and "\n" in text:
            text = text.split("\n", 1)[0]
            stop = True
        run = []
        for m in TOKEN.finditer(text):
            a, b = m.start(), m.end()
            left_ok = (a > 0 and not (text[a - 1].isalnum() or text[a - 1] == "_")) or (a == 0 and k == 0)
            right_ok = (b < len(text) and not (text[b].isalnum() or text[b] == "_")) or (b == len(text) and (k == len(segs) - 1 or stop))
            if left_ok and right_ok:
                run.append(m[0])
            else:
                if run:
                    runs.append(run)
                run = []
        if run:
            runs.append(run)
        if stop:
            break
    return runs


def anchor_keys(template: str) -> set[str]:
    """The pre-filter keys a template can be found by: single tokens and adjacent token pairs."""
    keys: set[str] = set()
    for run in closed_tokens(template):
        keys.update(run)
        keys.update(f"{a} {b}" for a, b in zip(run, run[1:]))
    return keys


def first_sentence(template: str) -> str | None:
    """The template up to the end of its first sentence ('. ' in literal text, 24+ characters in),
    when the first line has more after it; None for a one-sentence message."""
    first = template.split("\n", 1)[0]
    depth = 0
    for k, ch in enumerate(first):
        if ch == "{" and first[k + 1:k + 2] != "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif ch == "." and not depth and k >= 24 and first[k + 1:k + 2] == " " and first[k + 2:].strip():
            return first[:k + 1]
    return None


def line_keys(text: str, limit: int = 400) -> list[str]:
    """The same keys of a log line (tokens and adjacent pairs), bounded for hostile lines."""
    toks = TOKEN.findall(text[:8192])
    keys = dict.fromkeys(toks)
    keys.update(dict.fromkeys(f"{a} {b}" for a, b in zip(toks, toks[1:])))
    out = list(keys)
    return out[:limit]


def normalize(template: str) -> str:
    """Placeholders without names and types, whitespace collapsed: the family key."""
    out = []
    for seg in parse(template):
        if seg[0] == "lit":
            out.append(escape(seg[1]))
        else:
            out.append("{}")
    return _WS.sub(" ", "".join(out)).strip()


def needles(template: str, k: int = 12) -> tuple[str, ...]:
    """The k longest pieces of literal text without whitespace (3+ characters) on the template's
    first line: every rendering holds each of them verbatim (a cheap `in` test before the regex)."""
    pieces: list[str] = []
    for seg in _lines(parse(template))[0]:
        if seg[0] == "lit":
            for word in seg[1].split():
                pieces.extend(p for p in _RUN_ON.sub(r"\1 ", word).split() if len(p) >= 3)
    pieces.sort(key=lambda p: (-len(p), p))
    return tuple(pieces[:k])


IDENT = re.compile(r"(?<![\w.])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w(])")
FIELD = re.compile(r"\{[^{}]*\}")


def identifiers(text: str) -> list[str]:
    """The snake_case names a text holds outside its fields ('output_partition_size', 'block_n'),
    each once, in order: what a person copies exactly when they retype a message around it. Names
    of six characters or more, or with two underscores."""
    seen: list[str] = []
    for name in IDENT.findall(FIELD.sub(" ", text)):
        if (len(name) >= 6 or name.count("_") >= 2) and name not in seen:
            seen.append(name)
    return seen


def head_text(template: str) -> str:
    """The literal text a template starts with, up to its first placeholder (its first line)."""
    first = template.split("\n", 1)[0]
    cut = first.find("{")
    while cut >= 0 and first[cut:cut + 2] == "{{":
        cut = first.find("{", cut + 2)
    return first if cut < 0 else first[:cut]
