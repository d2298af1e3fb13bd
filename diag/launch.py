"""Launch commands and server_args dumps -> effective SGLang flags.

`parse_launch` reads an argv the way SGLang's argparse would (unique prefixes accepted,
switches take no value, nargs lists) and records every problem argparse or the
version's catalog would raise. `parse_server_args` reads the `server_args=ServerArgs(...)`
(<= 0.5.14) or `server_args={...}` (0.5.19+) dump.
"""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field

from .flags import Catalog

SHELL_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "1>", "2>", "&>", "|&"}
ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


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


MD_AUTOLINK = re.compile(r"\[([^\]\s]+)\]\((?:https?://)?([^)\s]+?)/?\)")


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
    """Field -> value from the text after `server_args=`. Cut or odd dumps give what parses."""
    text = text.strip()
    if text.startswith("ServerArgs("):
        body = text[len("ServerArgs("):]
        try:
            tree = ast.parse("f(" + body, mode="eval")
            call = tree.body
            return {kw.arg: _literal(kw.value, "f(" + body) for kw in call.keywords if kw.arg}
        except SyntaxError:
            return _split_pairs(body.rstrip(")"), "=")
    if text.startswith("{"):
        try:
            value = ast.literal_eval(text)
            if isinstance(value, dict):
                return {str(k): v for k, v in value.items()}
        except (ValueError, SyntaxError):
            pass
        return {k.strip("'\""): v for k, v in _split_pairs(text[1:].rstrip("}"), ":").items()}
    return {}


def _literal(node: ast.AST, source: str) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return ast.get_source_segment(source, node)


def _split_pairs(body: str, sep: str) -> dict[str, object]:
    """Bracket- and quote-aware split on top-level commas (fallback for cut dumps)."""
    out: dict[str, object] = {}
    depth, quote, cur = 0, "", []
    parts = []
    for ch in body:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if cur and not quote and depth == 0:
        parts.append("".join(cur))
    for part in parts:
        key, s, val = part.partition(sep)
        if not s:
            continue
        key = key.strip()
        try:
            out[key] = ast.literal_eval(val.strip())
        except (ValueError, SyntaxError):
            out[key] = val.strip()
    return out


def server_args_to_flags(fields: dict[str, object], catalog: Catalog) -> dict[str, object]:
    """Field names -> flag names of this catalog; fields without a flag are left out."""
    out: dict[str, object] = {}
    for name, value in fields.items():
        flag = catalog.flag_for_dest(name)
        if flag:
            out[flag] = value
    return out
