"""Adversarial strings built from a regular expression itself, to expose super-linear matching.

For a pattern, `attacks(pattern, size)` returns strings of about `size` characters that make a
backtracking engine work hardest: each quantified sub-pattern's example pumped (after what comes
before it, then cut short or followed by a near miss), long runs of every character its classes
accept, its literals repeated, and a whole match repeated (for findall/sub). A linear engine
takes time proportional to the size on every one of them.

The pattern is read with Python's own regex parser (RE2's syntax for what diag uses is the same).
"""
from __future__ import annotations

try:
    from re import _constants as C
    from re import _parser as P
except ImportError:  # Python < 3.11
    import sre_constants as C  # type: ignore
    import sre_parse as P  # type: ignore

REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT}
if hasattr(C, "POSSESSIVE_REPEAT"):
    REPEATS.add(C.POSSESSIVE_REPEAT)
CATEGORY_CHARS = {
    C.CATEGORY_DIGIT: "1", C.CATEGORY_NOT_DIGIT: "a", C.CATEGORY_SPACE: " ", C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a", C.CATEGORY_NOT_WORD: "-", C.CATEGORY_LINEBREAK: "\n", C.CATEGORY_NOT_LINEBREAK: "a",
}
PROBES = "a1 -._:/=\"'x[](){}|\\,;@#%+*?!<>\t"


def _in_chars(items) -> list[str]:
    """Characters a character class accepts (a few), or, negated, a few it does not."""
    negate = any(op is C.NEGATE for op, _ in items)
    accepted: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            accepted.append(chr(av))
        elif op is C.RANGE:
            accepted += [chr(av[0]), chr((av[0] + av[1]) // 2)]
        elif op is C.CATEGORY:
            accepted.append(CATEGORY_CHARS.get(av, "a"))
    if not negate:
        return list(dict.fromkeys(accepted))[:4] or ["a"]
    import re
    cls = re.compile("[" + "".join(re.escape(c) for c in accepted) + "]") if accepted else None
    return [c for c in PROBES if cls is None or not cls.match(c)][:4] or ["a"]


def example(tree) -> str:
    """A short string that the (sub)pattern matches, or nearly (lookarounds ignored)."""
    out = []
    for op, av in tree:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append("a" if chr(av) != "a" else "b")
        elif op is C.ANY:
            out.append("a")
        elif op is C.IN:
            out.append(_in_chars(av)[0])
        elif op in REPEATS:
            lo, _hi, body = av
            out.append(example(body) * max(lo, 1))
        elif op is C.SUBPATTERN:
            out.append(example(av[-1]))
        elif op is C.BRANCH:
            out.append(example(av[1][0]))
        elif op is getattr(C, "ATOMIC_GROUP", None):
            out.append(example(av))
    return "".join(out)


def _walk(tree, prefix: str, found: list):
    """(prefix before it, the repeat's body) for every quantified sub-pattern, and class chars."""
    done = ""
    for op, av in tree:
        here = prefix + done
        if op in REPEATS:
            lo, hi, body = av
            if hi is C.MAXREPEAT or hi > 1:
                found.append(("pump", here, example(body)))
            _walk(body, here, found)
        elif op is C.SUBPATTERN:
            _walk(av[-1], here, found)
        elif op is C.BRANCH:
            for alt in av[1]:
                _walk(alt, here, found)
        elif op is C.IN:
            for ch in _in_chars(av):
                found.append(("run", here, ch))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _walk(av[1], here, found)
        done += example([(op, av)])


def literals(tree) -> list[str]:
    """Runs of literal characters in the pattern (e.g. 'graph begin.')."""
    runs, cur = [], []

    def flush():
        if len(cur) >= 3:
            runs.append("".join(cur))
        cur.clear()

    for op, av in tree:
        if op is C.LITERAL:
            cur.append(chr(av))
            continue
        flush()
        if op is C.SUBPATTERN:
            runs += literals(av[-1])
        elif op is C.BRANCH:
            for alt in av[1]:
                runs += literals(alt)
        elif op in REPEATS:
            runs += literals(av[2])
    flush()
    return runs


def attacks(pattern: str, size: int, limit: int = 14) -> list[str]:
    tree = P.parse(pattern)
    found: list = []
    _walk(tree, "", found)
    out: list[str] = []
    seen = set()

    def add(s: str):
        s = s[:size]
        if s and s not in seen:
            seen.add(s)
            out.append(s)

    whole = example(tree)
    for kind, prefix, unit in found:
        if not unit:
            continue
        body = unit * (size // len(unit) + 1)
        if kind == "pump":
            if prefix:
                add(prefix * (size // len(prefix) + 1))   # what leads to it, again and again (search restarts)
            add(prefix + body)                # pumped after its prefix, then the text just ends
            add(prefix + body[: size - len(prefix) - 1] + "\x00")  # ... or is followed by a near miss
            add(body)
        else:
            add(prefix + body)
            add(body)
    for lit in literals(tree)[:4]:
        add(lit * (size // len(lit) + 1))
    if whole:
        add((whole + " ") * (size // (len(whole) + 1) + 1))   # many matches (findall, sub)
        add(whole * (size // len(whole) + 1))
    # keep a spread: the first of each kind, then the rest
    return out[:limit]
