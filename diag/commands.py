"""The user's launch command before and after each option of a finding's fixes (a report-building step).

Flags are replaced where the user wrote them (matched by the spelling the log shows, so
`--tp 2` becomes `--tp-size 2` in place), SGLang variables become `VAR=value` prefixes,
other components' variables `export` lines. Where the log shows no command, only the
changes (a fragment) are given. The result goes into the report (`finding.commands`), so
every view shows the same command and the JSON carries it.
"""
from __future__ import annotations

import re
import shlex

from .launch import ENV_ASSIGN, SHELL_STOP, find_entry
from .report import Finding, Fix, Launch

SAFE = re.compile(r"^[\w@%+=:,./-]+$")
PROMPTS = ("$", "#", ">", "%")


def shell_word(text: str) -> str:
    """A word quoted for a POSIX shell; `$VARS` stay expandable."""
    if SAFE.match(text):
        return text
    if "$" in text and not re.search(r'["`\\]', text):
        return f'"{text}"'
    return shlex.quote(text)


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


def option_fixes(finding: Finding) -> list[tuple[int, list[Fix]]]:
    """(option number, its fixes) in option order, for the options that change something."""
    groups: dict[int, list[Fix]] = {}
    for fx in finding.fix:
        groups.setdefault(fx.option, []).append(fx)
    return sorted(groups.items())


def commands(launch: Launch | None, finding: Finding) -> list[dict]:
    """Per option: the command before and after it (None where the log shows no command) and the changes alone."""
    out = []
    for n, fixes in option_fixes(finding):
        fixes = _ordered(fixes)
        entry = {"option": n, "before": None, "after": None, "changes": fragment(fixes)}
        if launch is not None and find_entry(launch.argv) >= 0:
            cmd = _Command(launch)
            entry["before"] = cmd.lines()
            for fx in fixes:
                cmd.apply(fx)
            entry["after"] = cmd.lines()
        out.append(entry)
    return out


def attach(report) -> None:
    """Compute every finding's commands from the report's launch command (again, after fixes changed)."""
    for f in report.findings:
        f.commands = commands(report.launch, f)


def _ordered(fixes: list[Fix]) -> list[Fix]:
    """A variable whose value reads another one of the same option (`$CUDA_HOME`) comes after it."""
    return sorted(fixes, key=lambda fx: any(f"${o.name}" in str(fx.value) for o in fixes if o is not fx))


def _norm(flag: str) -> str:
    return flag.split("=", 1)[0].replace("_", "-")


class _Command:
    """A launch command as exports, env prefixes, the launcher, flag chunks and a shell tail."""

    def __init__(self, launch: Launch) -> None:
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
