"""The suggested launch command: the user's command before and after the first option's changes.

Shared by the chat and HTML views. Flags are replaced where the user wrote them (matched
by the spelling the log shows, so `--tp 2` becomes `--tp-size 2` in place), SGLang
variables become `VAR=value` prefixes, other components' variables `export` lines.
"""
from __future__ import annotations

import difflib
import re
import shlex

from ..launch import ENV_ASSIGN, SHELL_STOP, find_entry
from ..report import Finding, Fix, Report
from .text import option_groups

SAFE = re.compile(r"^[\w@%+=:,./-]+$")
PROMPTS = ("$", "#", ">", "%")


def shell_word(text: str) -> str:
    """A word quoted for a POSIX shell; `$VARS` stay expandable."""
    if SAFE.match(text):
        return text
    if "$" in text and not re.search(r'["`\\]', text):
        return f'"{text}"'
    return shlex.quote(text)


def first_option(finding: Finding) -> tuple[int, str, list[Fix]] | None:
    """The ranked-first option (number, title, fixes), or None when the finding has none."""
    groups = option_groups(finding)
    return groups[0] if groups else None


def option_title(title: str, fixes: list[Fix]) -> str:
    """An option's title, or what its changes are for when the rule gave none."""
    return title or "; ".join(dict.fromkeys(fx.why for fx in fixes if fx.why))


def fix_text(fx: Fix) -> str:
    """One change, short: `--flag value`, `VAR=value`, `export VAR=value`, `remove --flag`."""
    value = "" if fx.value is None else shell_word(str(fx.value))
    if fx.flag:
        return f"remove {fx.flag}" if fx.action == "remove" else f"{fx.flag} {value}".rstrip()
    name = fx.env or fx.external_env
    if fx.action == "remove":
        return f"unset {name}"
    return f"{name}={value}" if fx.env else f"export {name}={value}"


def fragment(fixes: list[Fix]) -> list[str]:
    """The changes alone, one per line, for when there is no command to apply them to."""
    lines = [fix_text(fx) for fx in fixes if fx.external_env]
    lines += [fix_text(fx) for fx in fixes if fx.env]
    lines += [f"# {fix_text(fx)}" if fx.action == "remove" else fix_text(fx) for fx in fixes if fx.flag]
    return lines


def before_after(report: Report) -> tuple[list[str] | None, list[str]]:
    """(the user's launch command, the command with option 1 applied), as shell lines.

    Without a launch command in the log, `before` is None and `after` is the fragment.
    Without a root cause or option, both are empty.
    """
    finding = report.findings[0] if report.findings else None
    option = first_option(finding) if finding else None
    if not option or not option[2]:
        return None, []
    fixes = _ordered(option[2])
    facts = report.extras.get("facts")
    launch = getattr(facts, "launch", None)
    if launch is None or find_entry(launch.argv) < 0:
        return None, fragment(fixes)
    cmd = _Command(launch)
    before = cmd.lines()
    for fx in fixes:
        cmd.apply(fx)
    return before, cmd.lines()


def diff(before: list[str], after: list[str]) -> list[tuple[str, str]]:
    """(' ' | '-' | '+', line) pairs; lines compare without their trailing backslash."""
    strip = [line.removesuffix(" \\") for line in before], [line.removesuffix(" \\") for line in after]
    out: list[tuple[str, str]] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=strip[0], b=strip[1], autojunk=False).get_opcodes():
        if op == "equal":
            out += [(" ", line) for line in before[a1:a2]]
            continue
        out += [("-", line) for line in before[a1:a2]]
        out += [("+", line) for line in after[b1:b2]]
    return out


def _ordered(fixes: list[Fix]) -> list[Fix]:
    """A variable whose value reads another one of the same option (`$CUDA_HOME`) comes after it."""
    return sorted(fixes, key=lambda fx: any(f"${o.name}" in str(fx.value) for o in fixes if o is not fx))


def _norm(flag: str) -> str:
    return flag.split("=", 1)[0].replace("_", "-")


class _Command:
    """A launch command as exports, env prefixes, the launcher, flag chunks and a shell tail."""

    def __init__(self, launch) -> None:
        argv = list(launch.argv)
        while argv and argv[0] in PROMPTS:
            argv.pop(0)
        start = find_entry(argv)
        head = argv[:start]
        self.written = {k: _norm(v) for k, v in launch.written.items()}
        self.exports: list[str] = []
        self.env = [t for t in head if ENV_ASSIGN.match(t)]
        self.launcher = [t for t in head if not ENV_ASSIGN.match(t) and not t.endswith(":")]  # not "Launch:"
        self.chunks: list[list[str]] = []
        self.tail: list[str] = []
        for i, tok in enumerate(argv[start:]):
            if tok in SHELL_STOP or tok.startswith((">", "2>", "1>")):
                self.tail = argv[start + i:]
                break
            if tok.startswith("-") and not re.match(r"-\d", tok) or not self.chunks:
                self.chunks.append([tok])
            else:
                self.chunks[-1].append(tok)

    def apply(self, fx: Fix) -> None:
        if fx.flag:
            self._flag(fx)
        elif fx.env or fx.name in self._env_names():
            self._env(fx)
        else:
            self.exports.append(fix_text(fx))

    def _env_names(self) -> list[str]:
        return [t.split("=", 1)[0] for t in self.env]

    def _env(self, fx: Fix) -> None:
        self.env = [t for t in self.env if t.split("=", 1)[0] != fx.name]
        if fx.action != "remove":
            self.env.append(f"{fx.name}={fx.value or ''}")

    def _flag(self, fx: Fix) -> None:
        names = {_norm(fx.flag), self.written.get(fx.flag, _norm(fx.flag))}
        at = [i for i, c in enumerate(self.chunks) if c[0].startswith("-") and _norm(c[0]) in names]
        new = [fx.flag] + ([] if fx.value is None else [str(fx.value)])
        for i in reversed(at[1:] if fx.action != "remove" else at):
            del self.chunks[i]
        if fx.action == "remove":
            return
        if at:
            self.chunks[at[0]] = new
        else:
            self.chunks.append(new)

    def lines(self) -> list[str]:
        env = [f"{n}={shell_word(v)}" for n, _, v in (t.partition("=") for t in self.env)]
        first = " ".join(env + [shell_word(t) for t in self.launcher])
        body = [first] + ["  " + " ".join(shell_word(t) for t in c) for c in self.chunks]
        if self.tail:
            body.append("  " + " ".join(self.tail))
        return self.exports + [line + " \\" for line in body[:-1]] + body[-1:]
