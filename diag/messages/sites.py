"""Checks recognised by where they fire and what they test, for failures that carry no message.

A bare `AssertionError` (an `assert` without a message, or one whose message was lost) says
nothing in words; its traceback still names the place (the innermost frame's module and
function) and the test (the quoted source line). The catalog records, for every message it
extracted, where it is raised and the names its check reads. A bare assert that tests the same
names at the same place, or the same names in a check of another release, is the same check:

    >>> source_names("assert self.mamba_track_interval >= self.speculative_num_draft_tokens")
    ['mamba_track_interval', 'speculative_num_draft_tokens']

`resolve` gives the catalog entry of that check, or None when nothing or more than one family
fits. Used by the parser for exceptions whose message is empty.
"""
from __future__ import annotations

import io
import keyword
import tokenize

# names a check reads that say nothing about what it tests
NOISE = frozenset({"self", "cls", "view", "cfg", "args", "server_args", "kwargs", "params", "config", "len", "isinstance",
                   "None", "True", "False", "int", "float", "str", "bool", "list", "dict", "tuple", "set", "any", "all"})


def source_names(code: str) -> list[str]:
    """The names a quoted source line reads, in order: the last part of each dotted chain
    (self.page_size -> page_size), calls left out, as the catalog's extractor records them."""
    code = (code or "").strip()
    if code.startswith("assert "):
        code = code[len("assert "):]
    elif code == "assert":
        return []
    toks = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(code).readline):
            if t.type in (tokenize.NAME, tokenize.OP):
                toks.append((t.type, t.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass                       # an unclosed bracket: the tokens read so far are enough
    out: list[str] = []
    i = 0
    while i < len(toks):
        typ, s = toks[i]
        if typ != tokenize.NAME or keyword.iskeyword(s):
            i += 1
            continue
        chain = [s]
        j = i + 1
        while j + 1 < len(toks) and toks[j] == (tokenize.OP, ".") and toks[j + 1][0] == tokenize.NAME:
            chain.append(toks[j + 1][1])
            j += 2
        called = j < len(toks) and toks[j] == (tokenize.OP, "(")
        name = chain[-1]
        if not called and name not in NOISE and name not in out and not (len(chain) == 1 and name in NOISE):
            out.append(name)
        i = j
    return out


def module_of(path: str) -> str | None:
    """'/usr/lib/python3/site-packages/sglang/srt/server_args.py' -> 'sglang.srt.server_args'."""
    p = (path or "").replace("\\", "/")
    if not p.endswith(".py"):
        return None
    parts = p[:-3].split("/")
    if "sglang" in parts:
        parts = parts[len(parts) - 1 - parts[::-1].index("sglang"):]
    elif "srt" in parts:
        parts = ["sglang"] + parts[parts.index("srt"):]
    else:
        parts = parts[-1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(x for x in parts if x) or None


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def resolve(cat, module: str | None, function: str | None, names: list[str]):
    """The catalog entry of the check a bare assertion at (module, function) testing `names`
    is, or None. Candidates are the catalog's assertions whose check reads these names:
    the same names at the same place first, then the same names anywhere; one family must
    remain (or, at the very same place, the newest wording of a check reworded over releases)."""
    want = {n for n in names if n not in NOISE}
    if not want:
        return None
    func = _last(function or "")
    db = cat.db
    assert_kind = db.execute("SELECT n FROM vocab WHERE text = 'assert'").fetchone()
    if assert_kind is None:
        return None
    scored: dict[int, tuple] = {}
    for message, mod, fn, names_ids in db.execute(
            "SELECT message, module, function, names FROM locations WHERE kind = ? AND names != ''", (assert_kind[0],)):
        got = {_last(cat._word(int(x)) or "") for x in names_ids.split(",") if x} - NOISE
        if not got or not (got & want):
            continue
        same_place = (module is not None and cat._word(mod) == module) + (bool(func) and _last(cat._word(fn) or "") == func)
        exact = got == want
        if not exact and same_place < 2:
            continue                      # a partial overlap counts only at the very same place
        key = (same_place, exact, len(got & want))
        if key > scored.get(message, (-1,)):
            scored[message] = key
    if not scored:
        return None
    best = max(scored.values())
    top = [n for n, k in scored.items() if k == best]
    entries = cat._entries_for(top)
    if len({e.family for e in entries}) == 1:
        return min(entries, key=lambda e: e.n)
    if best[:2] == (2, True):
        # the same names tested at the very same place: one check reworded across releases;
        # the newest wording stands for it
        order = {v: i for i, v in enumerate(cat.releases("sglang"))}
        return max(entries, key=lambda e: (max((order.get(v, -1) for v in e.versions), default=-1), -e.n))
    return None


def template_flags(template: str) -> list[str]:
    """The command-line flags a message's own words name (not its placeholders), in order:
    '--a is incompatible with speculative decoding (--b {x})' -> ['--a', '--b']."""
    text, depth, out = [], 0, []
    for ch in template or "":
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif not depth:
            text.append(ch)
    words = "".join(" " if c in "()[],;:'\"`=<>|/" else c for c in "".join(text)).split()
    for w in words:
        w = w.rstrip(".")
        if w.startswith("--") and len(w) > 3 and w[2].isalpha() and w[2].islower() and \
                all(c.isalnum() or c == "-" for c in w[2:]) and w not in out:
            out.append(w)
    return out
