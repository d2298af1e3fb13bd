"""Command line: diag analyze | rules | flags check | mem | serve.

Exit codes (report contract): 0 clean, 1 findings at or above --fail-on, 2 usage error
or unreadable input, 3 inconclusive. Errors are one line on stderr, never a traceback.
"""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Root causes, evidence, memory arithmetic and flag fixes for SGLang server failures.")
rules_app = typer.Typer(add_completion=False, no_args_is_help=True, help="The rules diag knows.")
flags_app = typer.Typer(add_completion=False, no_args_is_help=True, help="SGLang flags per version.")
app.add_typer(rules_app, name="rules")
app.add_typer(flags_app, name="flags")
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    slack = "slack"
    slack_blocks = "slack-blocks"
    html = "html"


class FailOn(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"
    never = "never"


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"diag: error: {message}", err=True)
    raise typer.Exit(code)


def _write(text: str, output: Optional[Path]) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{output}: cannot write ({exc.strerror or exc})")
    typer.echo(f"diag: wrote {output}", err=True)


def _render(report, fmt: Format, redact: bool, color: bool) -> str:
    if redact:
        from .redact import redact_report
        report = redact_report(report)
    if fmt is Format.json:
        return report.dumps()
    if fmt is Format.text:
        from .render.text import render
        return render(report, color=color)
    from importlib import import_module
    module = import_module(f".render.{fmt.value.replace('-', '_')}", __package__)
    return module.render(report)


@app.command(context_settings=PASSTHROUGH)
def analyze(
    ctx: typer.Context,
    files: List[str] = typer.Argument(..., help="Server logs ('-' for stdin, .gz accepted) and nvidia-smi outputs; the kind is detected."),
    smi: List[str] = typer.Option([], "--smi", help="An nvidia-smi output (any format); may repeat."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the output to this file."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML incident report here."),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a finding is at least this severe."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version, when the log does not show it."),
    launch: Optional[str] = typer.Option(None, "--launch", help="The launch command, when the log does not show it."),
    model_config: Optional[str] = typer.Option(None, "--model-config", help="The model's config.json (or its folder), for models diag does not know."),
    redact: Optional[bool] = typer.Option(None, "--redact/--no-redact", help="Redact secrets, user names, hosts (default: on for markdown, slack, html)."),
) -> None:
    """Find the root cause of an SGLang failure, with evidence and the flag changes to make."""
    from .analyze import Options, analyze as run
    from .read import InputError

    if ctx.args:
        fail(f"unexpected arguments: {' '.join(ctx.args)}")
    if files.count("-") > 1:
        fail("stdin ('-') can be read only once")
    try:
        if model_config and not Path(model_config).exists():
            fail(f"{model_config}: no such file")
        report = run(files, smi, Options(sglang_version=sglang_version, launch=launch, model_config=model_config))
    except InputError as exc:
        fail(str(exc))
    sharing = fmt in (Format.markdown, Format.slack, Format.slack_blocks, Format.html)
    do_redact = sharing if redact is None else redact
    color = fmt is Format.text and output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    if fmt is Format.html and output is None:
        output = Path("reports") / "incident.html"
    _write(_render(report, fmt, do_redact, color), output)
    if html is not None:
        _write(_render(report, Format.html, True if redact is None else redact, False), html)
    raise typer.Exit(exit_code(report, fail_on.value))


def exit_code(report, fail_on: str) -> int:
    from .report import severity_at_least
    if report.status == "inconclusive":
        return 3
    if fail_on != "never" and any(severity_at_least(f.severity, fail_on) for f in report.findings):
        return 1
    return 0


@rules_app.command("list")
def rules_list(fmt: Format = typer.Option(Format.text, "--format", "-f")) -> None:
    """Every rule: id, category, severity, name."""
    from .rules_v1 import load_rules
    rules = load_rules()
    if fmt is Format.json:
        import json
        typer.echo(json.dumps([{"id": r.id, "name": r.name, "category": r.category, "severity": r.severity,
                                "title": r.title} for r in rules], indent=2))
        return
    width = max(len(r.category) for r in rules)
    for r in rules:
        typer.echo(f"{r.id:<16} {r.category:<{width}}  {r.severity:<8} {r.name}")


@rules_app.command("show")
def rules_show(rule_id: str = typer.Argument(..., help="A rule id (e.g. SGL-OOM-001) or name.")) -> None:
    """What a rule detects, why it happens, its signature, fix and examples."""
    from .rules_v1 import load_rules
    rule = next((r for r in load_rules() if rule_id.upper() == r.id or rule_id == r.name), None)
    if rule is None:
        fail(f"no rule {rule_id!r} (see `diag rules list`)")
    from .render.text import rule_doc
    typer.echo(rule_doc(rule))


@flags_app.command("check", context_settings=PASSTHROUGH)
def flags_check(
    ctx: typer.Context,
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="Check against this SGLang version (default: newest known)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model id or path, when the command does not name one."),
    fmt: Format = typer.Option(Format.text, "--format", "-f"),
) -> None:
    """Lint a launch command: diag flags check -- python -m sglang.launch_server ..."""
    from .lint import lint_command, render_lint
    argv = list(ctx.args)
    if not argv:
        fail("give the launch command after `--`, e.g. diag flags check -- python -m sglang.launch_server --model-path ...")
    result = lint_command(argv, sglang_version, model)
    typer.echo(render_lint(result, fmt.value))
    raise typer.Exit(1 if any(p["severity"] in ("error", "critical") for p in result["problems"]) else 0)


@app.command(context_settings=PASSTHROUGH)
def mem(
    ctx: typer.Context,
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU model, e.g. 'H100', 'RTX PRO 6000'."),
    model_config: Optional[str] = typer.Option(None, "--model-config", help="A model's config.json (or its folder)."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version (default: newest known)."),
    fmt: Format = typer.Option(Format.text, "--format", "-f"),
) -> None:
    """GPU memory budget of a launch command: diag mem --gpu H100 -- python -m sglang.launch_server ..."""
    from .mem_cmd import run
    if fmt not in (Format.text, Format.json):
        fail("diag mem supports --format text or json")
    text, code = run(list(ctx.args), gpu, model_config, sglang_version, fmt.value)
    if code == 2:
        fail(text.strip())
    typer.echo(text)
    raise typer.Exit(code)


@app.command()
def events(
    file: str = typer.Argument(..., help="A server log ('-' for stdin)."),
    kinds: List[str] = typer.Option([], "--kind", "-k", help="Only these event kinds (milestone, exception, oom, batch, plain, …)."),
) -> None:
    """What diag sees in a log: one JSON event per line (after chat-paste clean-up), streamed."""
    import json
    import math
    from .clean import Cleaner
    from .parse.sglang import iter_events
    from .read import InputError, iter_lines, open_input
    try:
        opened = open_input(file)
    except InputError as exc:
        fail(str(exc))
    for ev in iter_events(Cleaner().run(iter_lines(opened))):
        if kinds and ev.kind not in kinds:
            continue
        data = {k: v for k, v in ev.data.items() if k != "oom_event"}
        if "frames" in data:
            data["frames"] = [f.short for f in data["frames"]]
        data = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}
        sys.stdout.write(json.dumps({"line": ev.line, "kind": ev.kind, "rank": ev.rank, "ts": ev.ts, "text": ev.text,
                                     "data": data}, default=str, ensure_ascii=False) + "\n")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: all interfaces)."),
    port: int = typer.Option(8787, "--port", help="Port to listen on."),
    config: Optional[str] = typer.Option(None, "--config", help="A TOML config file (default: $DIAG_CONFIG); the environment overrides it."),
) -> None:
    """Run the chat-ops bot and HTTP API: Slack, Mattermost, POST /v1/analyze (needs the serve extra)."""
    from .serve import main as serve_main
    raise typer.Exit(serve_main(host, port, config))


@app.command()
def version() -> None:
    """Print diag's version and the SGLang versions it knows."""
    from . import __version__
    from .flags import catalog_versions
    vs = catalog_versions()
    typer.echo(f"diag {__version__} (SGLang flag catalogs {vs[0]} … {vs[-1]}, {len(vs)} versions)")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("diag: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as exc:  # a bug in diag: one line, the traceback only on request
        if os.environ.get("DIAG_DEBUG"):
            raise
        sys.stderr.write(f"diag: internal error: {type(exc).__name__}: {exc} (set DIAG_DEBUG=1 for the traceback)\n")
        sys.exit(4)
