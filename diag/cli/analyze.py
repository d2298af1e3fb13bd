"""diag analyze: the root cause of a failure in server logs and nvidia-smi outputs."""
from __future__ import annotations

import sys
from typing import List, Optional

from . import common as C
from .common import Format


def register(app) -> None:
    from .common import typer

    def analyze(
        files: Optional[List[str]] = typer.Argument(None, help="Server logs (.gz/.xz/.bz2 accepted) and nvidia-smi outputs; "
                                                    "'-' or nothing when piped: standard input. A file named like an option: ./-x.log or after --."),
        smi: List[str] = typer.Option([], "--smi", help="An nvidia-smi output (any format); may repeat."),
        fmt: Format = C.format_option(),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the output to this file ('-': standard output)."),
        html: Optional[str] = typer.Option(None, "--html", help="Also write a self-contained HTML incident report here."),
        fail_on: Optional[C.FailOn] = typer.Option(None, "--fail-on", help="Exit 1 when a finding is at least this severe (default: error)."),
        sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version, when the log does not show it."),
        launch: Optional[str] = typer.Option(None, "--launch", help="The launch command, when the log does not show it."),
        model_config: Optional[str] = typer.Option(None, "--model-config", help="The model's config.json (or its folder), for models diag does not know."),
        redact: Optional[bool] = typer.Option(None, "--redact/--no-redact", help="Redact secrets, user names, hosts (default: on for markdown, slack, html, sarif, github)."),
        ignore: List[str] = typer.Option([], "--ignore", help="Leave out the findings of this rule (id or name); may repeat."),
        select: List[str] = typer.Option([], "--select", help="Only findings of this category (or category prefix, e.g. oom); may repeat."),
        max_bytes: Optional[int] = typer.Option(None, "--max-bytes", min=1, help="Read at most this many bytes of text per input (default 1 GiB)."),
        max_lines: Optional[int] = typer.Option(None, "--max-lines", min=1, help="Read at most this many lines per input (default 2,000,000)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr (as `diag -q analyze`)."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Notes on stderr: inputs, caps reached, config used."),
    ) -> None:
        """Find the root cause of an SGLang failure, with evidence and the flag changes to make."""
        raise typer.Exit(command(files, smi, fmt, output, html, fail_on, sglang_version, launch, model_config, redact,
                                 ignore, select, max_bytes, max_lines, quiet, verbose))

    app.command(context_settings={"help_option_names": ["-h", "--help"]})(analyze)


# analyze's options as typer declares them above: name -> (parameter, the type of its value, or a flag's constant)
_OPTIONS = {
    "--smi": ("smi", str), "--format": ("fmt", Format), "-f": ("fmt", Format), "--output": ("output", str),
    "-o": ("output", str), "--html": ("html", str), "--fail-on": ("fail_on", C.FailOn),
    "--sglang-version": ("sglang_version", str), "--launch": ("launch", str), "--model-config": ("model_config", str),
    "--redact": ("redact", True), "--no-redact": ("redact", False), "--ignore": ("ignore", str),
    "--select": ("select", str), "--max-bytes": ("max_bytes", int), "--max-lines": ("max_lines", int),
    "--quiet": ("quiet", True), "-q": ("quiet", True), "--verbose": ("verbose", True), "-v": ("verbose", True),
}
_REPEATED = ("smi", "ignore", "select")
_DEFAULTS = {"smi": [], "fmt": Format.text, "output": None, "html": None, "fail_on": None, "sglang_version": None,
             "launch": None, "model_config": None, "redact": None, "ignore": [], "select": [], "max_bytes": None,
             "max_lines": None, "quiet": False, "verbose": False}


def direct_args(argv: list[str]) -> dict | None:
    """The arguments typer would call `command` with for `diag analyze ARGV`, when ARGV holds only
    files and analyze's options, each spelt out whole, given once (repeatable ones aside), with a
    value that typer would take as it is; None for anything else (a cluster like -qv, --opt=value,
    --help, a typo, a value to check or convert): typer parses those, errors and help included.
    Lets a plain run skip importing typer and building its command (~20 ms of a paste's start-up);
    tests/test_cli.py checks it against typer's own parse."""
    kw = {k: (list(v) if isinstance(v, list) else v) for k, v in _DEFAULTS.items()}
    files: list[str] = []
    given: set[str] = set()
    i, n = 0, len(argv)
    while i < n:
        a = argv[i]
        i += 1
        if a == "--":
            files.extend(argv[i:])
            break
        if a == "-" or not a.startswith("-"):
            files.append(a)
            continue
        spec = _OPTIONS.get(a)
        if spec is None:
            return None
        name, kind = spec
        if isinstance(kind, bool):
            value = kind
        else:
            if i >= n:
                return None
            value = argv[i]
            i += 1
            if value.startswith("-") and value != "-":
                return None
            if kind is int:
                if not (value.isascii() and value.isdigit()) or int(value) < 1:
                    return None
                value = int(value)
            elif kind is not str:
                if value not in kind._value2member_map_:
                    return None
                value = kind(value)
        if name in _REPEATED:
            kw[name].append(value)
        elif name in given:
            return None
        else:
            given.add(name)
            kw[name] = value
    kw["files"] = files or None
    return kw


def command(files: Optional[List[str]], smi: List[str], fmt: Format, output: Optional[str], html: Optional[str],
            fail_on: Optional[C.FailOn], sglang_version: Optional[str], launch: Optional[str], model_config: Optional[str],
            redact: Optional[bool], ignore: List[str], select: List[str], max_bytes: Optional[int], max_lines: Optional[int],
            quiet: bool, verbose: bool) -> int:
    """diag analyze; its exit code."""
    from pathlib import Path
    if quiet and verbose:
        C.fail("--quiet and --verbose cannot be given together")
    C.STATE.quiet = C.STATE.quiet or quiet
    C.STATE.verbose = C.STATE.verbose or verbose

    from ..read import Limits
    cfg = C.settings()
    if cfg.source:
        C.verbose(f"config: {cfg.source}")
    files = list(files or [])
    if not files and not smi:
        if _stdin_piped():
            files = ["-"]
        else:
            C.fail("give a server log (or pipe one in: … | diag analyze); see `diag analyze --help`")
    if (files + smi).count("-") > 1:
        C.fail("standard input ('-') can be read only once")
    version = C.check_sglang_version(sglang_version or cfg.sglang_version)
    fail_level = fail_on.value if fail_on else (cfg.fail_on or "error")
    ignored = _rule_ids(list(cfg.ignore) + list(ignore))
    selected = _categories(list(cfg.select) + list(select))
    if model_config and not Path(model_config).exists():
        C.fail(f"{model_config}: no such file")
    if fmt is Format.html and output is None:
        output = str(Path("reports") / "incident.html")
    C.check_output(output, files + smi)
    C.check_output(html, files + smi, "--html")
    from ..analyze import Options, analyze as run
    from ..read import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, InputError
    limits = Limits(max_bytes=max_bytes or DEFAULT_MAX_BYTES, max_lines=max_lines or DEFAULT_MAX_LINES)
    try:
        report = run(files, smi, Options(sglang_version=version, launch=launch, model_config=model_config, limits=limits))
    except InputError as exc:
        C.fail(str(exc))
    _filter(report, ignored, selected)
    for info in report.inputs:
        for n in info.notes:
            C.verbose(f"{info.path}: {n}")
    sharing = fmt in C.SHARED
    default_redact = cfg.redact if cfg.redact is not None else None
    do_redact = (sharing if default_redact is None else default_redact) if redact is None else redact
    to_file = output not in (None, "-")
    C.write_output(render(report, fmt, do_redact, C.use_color(fmt, to_file)), output)
    if html is not None:
        C.write_output(render(report, Format.html, True if redact is None else redact, False), html)
    return exit_code(report, fail_level)


def _stdin_piped() -> bool:
    try:
        return sys.stdin is not None and not sys.stdin.closed and not sys.stdin.isatty()
    except (ValueError, OSError):
        return False


def _rule_ids(names: list[str]) -> set[str]:
    if not names:
        return set()
    import difflib

    from ..rules.registry import registry
    rules = registry().rules
    by_name = {r.id: r.id for r in rules} | {r.slug: r.id for r in rules}
    out = set()
    for n in names:
        rid = by_name.get(n) or by_name.get(n.upper())
        if rid is None:
            close = difflib.get_close_matches(n, list(by_name), n=1, cutoff=0.6)
            C.fail(f"--ignore {n}: no such rule" + (f" (did you mean {close[0]}?)" if close else " (see `diag rules list`)"))
        out.add(rid)
    return out


def _categories(names: list[str]) -> list[str]:
    if not names:
        return []
    import difflib

    from ..rules.registry import registry
    cats = sorted({r.category for r in registry().rules})
    for n in names:
        if not any(c == n or c.startswith(n + ".") for c in cats):
            close = difflib.get_close_matches(n, cats + sorted({c.split(".")[0] for c in cats}), n=1, cutoff=0.6)
            C.fail(f"--select {n}: no such category" + (f" (did you mean {close[0]}?)" if close else " (see `diag rules list`)"))
    return names


def _filter(report, ignored: set[str], selected: list[str]) -> None:
    if not ignored and not selected:
        return
    keep = [f for f in report.findings if f.rule not in ignored
            and (not selected or any(f.category == s or f.category.startswith(s + ".") for s in selected))]
    if len(keep) != len(report.findings):
        report.findings[:] = keep
        if report.status == "findings" and not keep:
            report.status = "clean"


def render(report, fmt: Format, redact: bool, color: bool) -> str:
    if redact:
        from ..redact import redact_report
        report = redact_report(report)
    if fmt is Format.json:
        return report.dumps()
    if fmt is Format.text:
        from ..render.text import render as text
        return text(report, color=color)
    from importlib import import_module
    module = import_module(f"..render.{fmt.value.replace('-', '_')}", __package__)
    return module.render(report)


def exit_code(report, fail_on: str) -> int:
    from ..report import severity_at_least
    if report.status == "inconclusive":
        return 3
    if fail_on != "never" and any(severity_at_least(f.severity, fail_on) for f in report.findings):
        return 1
    return 0
