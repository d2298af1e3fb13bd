"""Launch commands and server_args dumps -> effective SGLang flags.

`parse_launch` reads an argv the way SGLang's argparse would (unique prefixes accepted,
switches take no value, nargs lists) and records every problem argparse or the
version's catalog would raise. `parse_server_args` reads the `server_args=ServerArgs(...)`
(<= 0.5.14) or `server_args={...}` (0.5.19+) dump.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from . import rx
from .flags import Catalog
from .numbers import to_float, to_int

SHELL_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "1>", "2>", "&>", "|&"}
ENV_ASSIGN = rx.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass
class Problem:
    kind: str        # unknown_flag | ambiguous | invalid_value | deprecated | renamed | abbreviation | underscore
    flag: str
    message: str
    value: str | None = None
    suggestion: str | None = None


@dataclass
class LaunchCommand:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    flags: dict[str, object] = field(default_factory=dict)   # catalog name -> value (True for switches)
    written: dict[str, str] = field(default_factory=dict)    # catalog name -> spelling used
    problems: list[Problem] = field(default_factory=list)
    entry: str = ""

    def value(self, name: str, default=None):
        return self.flags.get(name, default)


MD_AUTOLINK = rx.compile(r"\[([^\]\s]+)\]\((?:https?://)?([^)\s]+?)/?\)")


def split_command(text: str) -> list[str]:
    """argv of a pasted command: line continuations joined, Markdown auto-links and `code` marks undone."""
    text = text.replace("\\\n", " ")
    text = MD_AUTOLINK.sub(lambda m: m[1] if m[1].rstrip("/") == m[2].rstrip("/") else m[0], text)
    try:
        tokens = shlex.split(text, posix=True)
    except ValueError:
        tokens = text.split()
    return [t.strip("`") for t in tokens if t.strip("`")]


def find_entry(tokens: list[str]) -> int:
    """Index of the first argument after the launcher (python -m sglang.launch_server, sglang serve)."""
    for i, tok in enumerate(tokens):
        if tok in ("sglang.launch_server", "sglang.srt.server") or tok.endswith("launch_server.py"):
            return i + 1
        if tok.endswith("sglang") and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return i + 2
    return -1


def parse_launch(text_or_argv: str | list[str], catalog: Catalog) -> LaunchCommand:
    tokens = split_command(text_or_argv) if isinstance(text_or_argv, str) else list(text_or_argv)
    start = find_entry(tokens)
    cmd = LaunchCommand(argv=tokens)
    head = tokens[:start] if start >= 0 else []
    for tok in head:
        m = ENV_ASSIGN.match(tok)
        if m:
            cmd.env[m[1]] = m[2]
    cmd.entry = " ".join(t for t in head if not ENV_ASSIGN.match(t))
    args = tokens[start:] if start >= 0 else tokens
    _parse_args(args, catalog, cmd)
    return cmd


# argparse adds -h/--help to every parser (add_help=True): no flag catalog lists them
ARGPARSE_OWN = frozenset({"-h", "--help"})


def _parse_args(args: list[str], catalog: Catalog, cmd: LaunchCommand) -> None:
    i = 0
    while i < len(args):
        tok = args[i]
        if tok in SHELL_STOP or tok.startswith((">", "2>", "1>")):
            break
        if not tok.startswith("-") or tok == "-":
            i += 1
            continue
        written, _, inline = tok.partition("=")
        has_inline = "=" in tok
        if written in ARGPARSE_OWN:      # argparse's own help option, on every parser SGLang builds
            i += 1
            continue
        name, problem = _resolve(written, catalog)
        info = catalog.flag(name) if name else None
        # values that follow
        values: list[str] = [inline] if has_inline else []
        j = i + 1
        if not has_inline:
            takes = "many" if (info and info.nargs in ("+", "*")) else ("none" if (info and info.switch) else "one")
            if info is None:
                takes = "many"  # argparse lists the words after an unknown flag as unrecognized too
            if info and info.nargs == "?":
                takes = "optional"
            while j < len(args) and not args[j].startswith("--") and args[j] not in SHELL_STOP:
                if takes == "none" or (takes in ("one", "optional") and len(values) == 1):
                    break
                values.append(args[j])
                j += 1
        value: object
        if info and info.switch and not values:
            value = True
        else:
            value = " ".join(values) if values else None
        if problem:
            problem.value = value if isinstance(value, str) else None
            cmd.problems.append(problem)
        if name and info:
            if written.startswith("--no-") and info.negatable and name != written:
                value = False
            cmd.flags[name] = value
            cmd.written[name] = written
            if info.deprecated:
                new = catalog.translate(name, value if isinstance(value, str) else None)
                repl = " ".join(f"{f} {v}" if v else f for f, v in new if f != name) or info.replaced_by
                cmd.problems.append(Problem("deprecated", written, f"{written} is deprecated in SGLang {catalog.label}"
                                            + (f"; use {repl}" if repl else ""), suggestion=repl))
            if isinstance(value, str):
                bad = catalog.check_value(name, value)
                if bad:
                    cmd.problems.append(Problem("invalid_value", written, f"argument {written}: {bad}", value=value,
                                                suggestion=closest_choice(value, info.choices)))
            elif value is None and not info.switch and info.nargs not in ("?", "*"):
                cmd.problems.append(Problem("invalid_value", written, f"argument {written}: expected one argument"))
        i = j


def closest_choice(value: str, choices: list[str] | None) -> str | None:
    if not choices:
        return None
    import difflib
    low = value.lower()
    starts = [c for c in choices if c.lower().startswith(low) or low.startswith(c.lower())]
    if starts:
        return starts[0]
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return close[0] if close else None


def _resolve(written: str, catalog: Catalog) -> tuple[str | None, Problem | None]:
    """Catalog name for a written flag, and the problem argparse would report, if any."""
    primary = catalog.primary(written)
    if primary:
        return primary, None
    if written.startswith("--no-") and catalog.has(written):
        return catalog.primary("--" + written[5:]), None
    if "_" in written:
        dashed = "--" + written.lstrip("-").replace("_", "-")
        if catalog.has(dashed):
            return None, Problem("unknown_flag", written,
                                 f"unrecognized arguments: {written} (SGLang flags use dashes: {catalog.primary(dashed)})",
                                 suggestion=catalog.primary(dashed))
    matches = catalog.abbreviations(written) if written.startswith("--") else []
    if len(matches) == 1:
        return matches[0], Problem("abbreviation", written, f"{written} is accepted only as an abbreviation of {matches[0]}",
                                   suggestion=matches[0])
    if len(matches) > 1:
        renamed = catalog.translate_name(written)
        return None, Problem("ambiguous", written,
                             f"ambiguous option: {written} could match {', '.join(matches)}",
                             suggestion=renamed or matches[0])
    renamed = catalog.translate_name(written)
    if renamed:
        return None, Problem("renamed", written, f"unrecognized arguments: {written} (renamed {renamed} in SGLang {catalog.label})",
                             suggestion=renamed)
    guesses = catalog.did_you_mean(written)
    hint = f" (did you mean {guesses[0]}?)" if guesses else ""
    return None, Problem("unknown_flag", written, f"unrecognized arguments: {written}{hint}",
                         suggestion=guesses[0] if guesses else None)


# -- server_args dump ------------------------------------------------------------

def parse_server_args(text: str) -> dict[str, object]:
    """Field -> value from the text after `server_args=`. Cut or odd dumps give what parses.

    A small reader for the literals a dataclass repr or a dict prints (strings, numbers, None,
    True/False, lists, tuples, dicts), in one pass over the text, nesting bounded by MAX_DEPTH.
    A value it cannot read as a literal (an enum repr, `Obj(1)`, `-----1`, `not not x`) is kept
    as its source text, cut at MAX_RAW characters; numbers go through diag.numbers, so 5,000
    digits, `1e999` or a huge hex literal stay text that no later step reads as a number.
    """
    text = text.strip()
    if text.startswith("ServerArgs("):
        reader = _Literals(text, len("ServerArgs("))
        return reader.pairs(")", keyword=True)
    if text.startswith("{"):
        reader = _Literals(text, 1)
        return reader.pairs("}", keyword=False)
    return {}


MAX_DEPTH = 16
MAX_RAW = 200
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NAMES = {"None": None, "True": True, "False": False}


class _NotLiteral(Exception):
    pass


class _Literals:
    def __init__(self, text: str, start: int) -> None:
        self.s, self.i, self.n = text, start, len(text)

    def _ws(self) -> None:
        s, i, n = self.s, self.i, self.n
        while i < n and s[i] in " \t\r\n":
            i += 1
        self.i = i

    def _peek(self) -> str:
        self._ws()
        return self.s[self.i] if self.i < self.n else ""

    def pairs(self, close: str, keyword: bool) -> dict[str, object]:
        out: dict[str, object] = {}
        while True:
            c = self._peek()
            if not c or c == close:
                return out
            start = self.i
            key = self._key(keyword)
            if key is None:  # a positional value, or not a key at all: skip this item
                self._skip()
            else:
                value = self._value_or_raw()
                if value is not _CUT:
                    out[key] = value
            c = self._peek()
            if c == ",":
                self.i += 1
            elif c != close or self.i == start:
                return out

    def _key(self, keyword: bool) -> str | None:
        s = self.s
        if keyword:
            j = self.i
            while j < self.n and (s[j].isalnum() or s[j] == "_"):
                j += 1
            if j == self.i:
                return None
            key = s[self.i:j]
            self.i = j
            if self._peek() != "=":
                return None
            self.i += 1
            return key
        if self._peek() not in ("'", '"'):
            return None
        try:
            key = self._string()
        except _NotLiteral:
            return None
        if self._peek() != ":":
            return None
        self.i += 1
        return key

    def _value_or_raw(self) -> object:
        self._ws()
        start = self.i
        try:
            value = self._value(0)
            if self._peek() in (",", ")", "}", "]", ""):
                if self.i >= self.n and not isinstance(value, (str, int, float, bool, type(None))):
                    return _CUT
                return value
        except _NotLiteral:
            pass
        self.i = start
        self._skip()
        if self.i >= self.n and self._unbalanced(start):
            return _CUT  # a dump cut inside this value
        return self.s[start:self.i].strip()[:MAX_RAW]

    def _unbalanced(self, start: int) -> bool:
        depth, quote = 0, ""
        for ch in self.s[start:self.i]:
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
        return depth > 0 or bool(quote)

    def _value(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise _NotLiteral
        c = self._peek()
        if c in ("'", '"'):
            return self._string()
        if c in ("[", "("):
            items = self._items(_CLOSE[c], depth)
            return items if c == "[" else tuple(items)
        if c == "{":
            return self._braces(depth)
        if c.isdigit() or c in "+-.":
            return self._number()
        if c.isalpha() or c == "_":
            j = self.i
            while j < self.n and (self.s[j].isalnum() or self.s[j] == "_"):
                j += 1
            word = self.s[self.i:j]
            if word in _NAMES:
                self.i = j
                return _NAMES[word]
        raise _NotLiteral

    def _items(self, close: str, depth: int) -> list:
        self.i += 1
        out = []
        while True:
            c = self._peek()
            if c == close:
                self.i += 1
                return out
            if not c:
                raise _NotLiteral
            out.append(self._value(depth + 1))
            c = self._peek()
            if c == ",":
                self.i += 1
            elif c != close:
                raise _NotLiteral

    def _braces(self, depth: int) -> object:
        self.i += 1
        if self._peek() == "}":
            self.i += 1
            return {}
        first = self._value(depth + 1)
        if self._peek() != ":":  # a set: kept as a list (its items may be unhashable)
            items = [first]
            while True:
                c = self._peek()
                if c == "}":
                    self.i += 1
                    return items
                if c != ",":
                    raise _NotLiteral
                self.i += 1
                if self._peek() == "}":
                    continue
                items.append(self._value(depth + 1))
        out: dict = {}
        key = first
        while True:
            self.i += 1  # the ':'
            value = self._value(depth + 1)
            if isinstance(key, (str, int, float, bool, type(None), tuple)):
                try:
                    out[key] = value
                except TypeError:  # a tuple holding a list
                    out[str(key)] = value
            else:
                out[str(key)[:MAX_RAW]] = value
            c = self._peek()
            if c == "}":
                self.i += 1
                return out
            if c != ",":
                raise _NotLiteral
            self.i += 1
            if self._peek() == "}":
                self.i += 1
                return out
            key = self._value(depth + 1)
            if self._peek() != ":":
                raise _NotLiteral

    def _string(self) -> str:
        s, quote = self.s, self.s[self.i]
        i = self.i + 1
        out: list[str] = []
        while i < self.n:
            ch = s[i]
            if ch == "\\" and i + 1 < self.n:
                nxt = s[i + 1]
                out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt if nxt in "\\'\"" else "\\" + nxt))
                i += 2
                continue
            if ch == quote:
                self.i = i + 1
                return "".join(out)
            out.append(ch)
            i += 1
        raise _NotLiteral

    def _number(self) -> object:
        s, j = self.s, self.i
        if j < self.n and s[j] in "+-":
            j += 1
        while j < self.n and (s[j].isalnum() or s[j] in "._" or (s[j] in "+-" and s[j - 1] in "eE")):
            j += 1
        token = s[self.i:j]
        body = token.lstrip("+-").lower()
        value: object
        if body.startswith("0x") or body.replace("_", "").isdigit():
            value = to_int(token.replace("_", ""))
        else:
            value = to_float(token.replace("_", ""))
        if value is None:
            raise _NotLiteral
        self.i = j
        return value

    def _skip(self) -> None:
        """To the next comma or closing bracket at this level (quotes and brackets respected)."""
        s, i, n = self.s, self.i, self.n
        depth, quote = 0, ""
        while i < n:
            ch = s[i]
            if quote:
                if ch == "\\":
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                break
            i += 1
        self.i = i


_CUT = object()


def server_args_to_flags(fields: dict[str, object], catalog: Catalog) -> dict[str, object]:
    """Field names -> flag names of this catalog; fields without a flag are left out."""
    out: dict[str, object] = {}
    for name, value in fields.items():
        flag = catalog.flag_for_dest(name)
        if flag:
            out[flag] = value
    return out
