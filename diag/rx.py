"""Regular expressions for log text, in time linear in the line whatever the line holds.

Every pattern diag applies to input text is compiled here:

    TOKEN = rx.compile(r"\\bhf_[A-Za-z0-9]{20,}")                      # RE2: linear by construction
    HOST = rx.compile(r"(?<![\\w.-])node\\d+", backtrack="lookbehind")  # `regex`, with a timeout

By default the pattern goes to RE2 (the maintained `google-re2` binding): an automaton, so
the time is linear in the text for every pattern it accepts, and it accepts everything that
needs no backreference and no lookaround. The few patterns that need a lookaround say why
(``backtrack=``); they are compiled by the `regex` module and every call carries a timeout
(`TIMEOUT` seconds), after which ``rx.Timeout`` is raised for the caller to handle (a
redaction that cannot finish redacts the whole text). `PATTERNS` lists every pattern
compiled here with its engine, for the linear-time test (tests/test_linear.py) and for
review. RE2 is imported on first use, so commands that never read a log do not pay for it.

RE2 differs from `re` in small ways that matter here: ``\\w``, ``\\d``, ``\\s`` and ``\\b``
are ASCII; ``$`` matches only at the very end (lines carry no newline); no ``\\Z`` (use
``$`` or ``\\z``). Match objects are RE2's: ``m.start(name)`` takes a group number, so use
``span_of(m, name)``.
"""
from __future__ import annotations

from dataclasses import dataclass

TIMEOUT = 0.25  # seconds, per call, for the backtracking patterns (a real line takes microseconds)

IGNORECASE = 2   # the values of re.IGNORECASE / re.MULTILINE / re.DOTALL
MULTILINE = 8
DOTALL = 16


class Timeout(Exception):
    """A backtracking pattern ran past its timeout on this text."""


@dataclass(frozen=True)
class Registered:
    pattern: str
    flags: int
    engine: str          # "re2" | "regex"
    reason: str | None   # why a backtracking engine is needed
    where: str           # the module that compiled it


PATTERNS: list[Registered] = []
_re2 = None


def _engine():
    global _re2
    if _re2 is None:
        import re2 as _module
        _re2 = _module
    return _re2


def _prefix(flags: int) -> str:
    inline = "".join(c for bit, c in ((IGNORECASE, "i"), (MULTILINE, "m"), (DOTALL, "s")) if flags & bit)
    return f"(?{inline})" if inline else ""


def required(pattern: str, flags: int = 0) -> tuple[str, ...] | None:
    """Literals one of which every match contains (None: no such set found). A text holding
    none of them cannot match, so the engine is not called: `in` costs nanoseconds where a
    call into RE2 through its binding costs microseconds."""
    import re
    try:
        from re import _constants as C
        from re import _parser as P
    except ImportError:  # Python < 3.11
        import sre_constants as C  # type: ignore
        import sre_parse as P  # type: ignore
    try:
        tree = P.parse(pattern, flags & (IGNORECASE | MULTILINE | DOTALL))
    except re.error:
        return None
    if tree.state.flags & re.IGNORECASE:
        return None

    def seq(items) -> tuple[str, ...] | None:
        best: tuple[str, ...] | None = None
        run: list[str] = []

        def consider(cand):
            nonlocal best
            if cand and all(cand) and (best is None or min(map(len, cand)) > min(map(len, best))
                                       or (len(cand) < len(best) and min(map(len, cand)) >= min(map(len, best)))):
                best = cand

        for op, av in items:
            if op is C.LITERAL:
                run.append(chr(av))
                continue
            consider(("".join(run),) if run else None)
            run = []
            if op is C.SUBPATTERN:
                consider(seq(av[-1]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
                consider(seq(av[2]))
            elif op is C.BRANCH:
                alts = [seq(b) for b in av[1]]
                if all(alts):
                    consider(tuple(sorted({x for a in alts for x in a})))
            elif getattr(C, "ATOMIC_GROUP", None) is op:
                consider(seq(av))
        consider(("".join(run),) if run else None)
        return best

    found = seq(tree)
    if found is None:
        return None
    # a literal that holds another of the set adds nothing ('AssertionError' when 'rror' is there)
    found = tuple(x for x in found if not any(y != x and y in x for y in found))
    if len(found) > 16:
        return None
    return found


_KEPT = None
_NONE = ("\0none",)      # a kept None (a memo's get returns None for a missing key)


def _required_kept(pattern: str, flags: int) -> tuple[str, ...] | None:
    """required(), from the memo kept between runs (diag/cache.py): parsing a pattern with the
    standard library's parser costs ~0.1 ms, and a run uses a few hundred patterns."""
    global _KEPT
    if _KEPT is None:
        from .cache import Kept
        _KEPT = Kept("rx-required", [__file__], limit=8192)
    key = (pattern, flags)
    found = _KEPT.get(key)
    if found is None:
        found = required(pattern, flags)
        _KEPT.put(key, _NONE if found is None else found)
        return found
    return None if found == _NONE else found


class _Lazy:
    """A pattern compiled on first use (module import stays cheap), behind a literal pre-check."""

    __slots__ = ("pattern", "flags", "_compiled", "_groupindex", "_needs")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags, self._compiled, self._groupindex = pattern, flags, None, None
        self._needs = False  # not computed yet

    def _get(self):
        if self._compiled is None:
            self._compiled = _engine().compile(_prefix(self.flags) + self.pattern)
            self._needs = _required_kept(self.pattern, self.flags)
        return self._compiled

    def _hopeless(self, text) -> bool:
        needs = self._needs
        if needs is False:
            self._get()
            needs = self._needs
        if needs is None:
            return False
        if len(needs) == 1:
            return needs[0] not in text
        for n in needs:
            if n in text:
                return False
        return True

    @property
    def groupindex(self):
        if self._groupindex is None:  # the binding builds a new dict on every access
            self._groupindex = dict(self._get().groupindex)
        return self._groupindex

    # search and match are the calls made on every line: the pre-check inline (one Python call
    # less per pattern per line; the same test as _hopeless)
    def search(self, text, pos=0, endpos=None):
        needs = self._needs
        if needs is not None:
            if needs is False:
                self._get()
                return self.search(text, pos, endpos)
            for n in needs:
                if n in text:
                    break
            else:
                return None
        return self._compiled.search(text, pos, len(text) if endpos is None else endpos)

    def match(self, text, pos=0, endpos=None):
        needs = self._needs
        if needs is not None:
            if needs is False:
                self._get()
                return self.match(text, pos, endpos)
            for n in needs:
                if n in text:
                    break
            else:
                return None
        return self._compiled.match(text, pos, len(text) if endpos is None else endpos)

    def fullmatch(self, text, pos=0, endpos=None):
        if self._hopeless(text):
            return None
        return self._compiled.fullmatch(text, pos, len(text) if endpos is None else endpos)

    def finditer(self, text, pos=0, endpos=None):
        if self._hopeless(text):
            return iter(())
        return self._compiled.finditer(text, pos, len(text) if endpos is None else endpos)

    def findall(self, text, pos=0, endpos=None):
        if self._hopeless(text):
            return []
        return self._compiled.findall(text, pos, len(text) if endpos is None else endpos)

    def sub(self, repl, text, count=0):
        if self._hopeless(text):
            return text
        return self._compiled.sub(repl, text, count)

    def subn(self, repl, text, count=0):
        if self._hopeless(text):
            return text, 0
        return self._compiled.subn(repl, text, count)

    def split(self, text, maxsplit=0):
        if self._hopeless(text):
            return [text]
        return self._compiled.split(text, maxsplit)

    def __repr__(self) -> str:
        return f"rx.compile({self.pattern!r})"


class _Bounded:
    """A `regex` pattern whose every call carries the timeout."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags, self._compiled = pattern, flags, None

    def _get(self):
        if self._compiled is None:
            import regex
            self._compiled = regex.compile(_prefix(self.flags) + self.pattern, regex.VERSION0)
        return self._compiled

    @property
    def groupindex(self):
        return self._get().groupindex

    def _call(self, name, *args, **kw):
        try:
            return getattr(self._get(), name)(*args, timeout=TIMEOUT, **kw)
        except TimeoutError:
            raise Timeout(self.pattern) from None

    def search(self, text, pos=0, endpos=None):
        return self._call("search", text, pos, endpos)

    def match(self, text, pos=0, endpos=None):
        return self._call("match", text, pos, endpos)

    def fullmatch(self, text, pos=0, endpos=None):
        return self._call("fullmatch", text, pos, endpos)

    def finditer(self, text, pos=0, endpos=None):
        return self._finditer(text, pos, endpos)

    def _finditer(self, text, pos, endpos):
        try:
            yield from self._get().finditer(text, pos, endpos, timeout=TIMEOUT)
        except TimeoutError:
            raise Timeout(self.pattern) from None

    def findall(self, text, pos=0, endpos=None):
        return self._call("findall", text, pos, endpos)

    def sub(self, repl, text, count=0):
        return self._call("sub", repl, text, count)

    def subn(self, repl, text, count=0):
        return self._call("subn", repl, text, count)

    def split(self, text, maxsplit=0):
        return self._call("split", text, maxsplit)

    def __repr__(self) -> str:
        return f"rx.compile({self.pattern!r}, backtrack=...)"


def compile(pattern: str, flags: int = 0, *, backtrack: str | None = None, register: bool = True):  # noqa: A001
    """A pattern for log text: RE2 unless `backtrack` says why it needs lookaround.

    `register=False` is for patterns built at run time from literals (they are RE2 all the same)."""
    if register:
        import sys
        where = sys._getframe(1).f_globals.get("__name__", "?")
        PATTERNS.append(Registered(pattern, flags, "regex" if backtrack else "re2", backtrack, where))
    return _Bounded(pattern, flags) if backtrack else _Lazy(pattern, flags)


class _LazyBytes:
    """An RE2 pattern for raw bytes (one pass over a whole input, not a call per line), compiled on
    first use."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags, self._compiled = pattern, flags, None

    def finditer(self, data: bytes):
        if self._compiled is None:
            self._compiled = _engine().compile((_prefix(self.flags) + self.pattern).encode())
        return self._compiled.finditer(data)

    def __repr__(self) -> str:
        return f"rx.compile_bytes({self.pattern!r})"


def compile_bytes(pattern: str, flags: int = 0):
    """A pattern for raw UTF-8 bytes of log text (RE2; registered like `compile`): the binding's calls
    on bytes skip the character-offset bookkeeping it does on str, which over a whole input costs
    more than the search."""
    import sys
    where = sys._getframe(1).f_globals.get("__name__", "?")
    PATTERNS.append(Registered(pattern, flags, "re2", None, where))
    return _LazyBytes(pattern, flags)


def escape(text: str) -> str:
    """re.escape, for building RE2 patterns from literals."""
    import re
    return re.escape(text)


def span_of(m, group) -> tuple[int, int]:
    """m.span(group) for a group name or number, on RE2 and `regex` matches alike."""
    if isinstance(group, str):
        group = m.re.groupindex[group]  # (a plain dict on `regex`; built per call on RE2: rare use)
    return m.span(group)
