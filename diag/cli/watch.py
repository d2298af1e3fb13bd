"""diag watch: follow a live server log; findings the moment they complete, early warnings."""
from __future__ import annotations

import signal
import sys
from typing import Optional

from . import common as C
from .common import Format, typer


def register(app) -> None:
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(watch)


def watch(
    file: str = typer.Argument(..., help="The server's log file (waited for when it does not exist yet; rotation and truncation are followed)."),
    fmt: Format = C.format_option(),
    interval: float = typer.Option(0.5, "--interval", min=0.01, help="Seconds between two looks at the file."),
    settle: float = typer.Option(1.0, "--settle", min=0.0, help="Seconds without a new line after which a failure's message is taken as complete."),
    idle_exit: Optional[float] = typer.Option(None, "--idle-exit", min=0.0, help="Stop after this many seconds without a new line (default: never)."),
    exit_on_finding: bool = typer.Option(False, "--exit-on-finding", help="Stop at the first finding at or above --fail-on (exit 1): for a sidecar that restarts the server."),
    fail_on: Optional[C.FailOn] = typer.Option(None, "--fail-on", help="The severity that makes the exit code 1 (default: error; early warnings are 'warning')."),
    from_end: bool = typer.Option(False, "--from-end", help="Start at the end of the file (default: read it from its start)."),
    stuck_after: float = typer.Option(120.0, "--stuck-after", min=0.0, help="Warn when no batch line came for this long while requests were running."),
    window: float = typer.Option(60.0, "--window", min=1.0, help="Seconds of batch lines the queue and throughput warnings compare."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version, when the log does not show it."),
) -> None:
    """Follow a live SGLang log: print each finding the moment its signature completes, and warn
    early from the batch lines (KV pool full with retractions, queue growth, throughput collapse,
    stuck requests). Exit 0, or 1 when a finding at or above --fail-on was seen; on SIGTERM/SIGINT too."""
    C.check_format(fmt, (Format.text, Format.json), "watch")
    from ..fleet.watch import Thresholds, Watcher, follow
    from ..jsonout import dumps
    from ..report import severity_at_least
    version = C.check_sglang_version(sglang_version or C.settings().sglang_version)
    level = fail_on.value if fail_on else (C.settings().fail_on or "error")
    stopping = {"now": False}

    def on_signal(signum, frame):
        stopping["now"] = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    seen = {"fail": False}

    def failing(note) -> bool:
        return note.type in ("finding", "warning") and level != "never" and severity_at_least(note.severity, level)

    def emit(note) -> None:
        if failing(note):
            seen["fail"] = True
        if fmt is Format.json:
            line = dumps(note.to_json(), indent=None)
        else:
            line = _text(note)
            if line is None:
                return
            if note.type not in ("finding", "warning"):
                C.note(line.removeprefix("diag: "))
                return
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            C.silence_stdout()
            stopping["now"] = True

    watcher = Watcher(Thresholds(stuck_after=stuck_after, window_s=window), settle=settle, sglang_version=version)
    try:
        follow(file, watcher, emit, interval=interval, idle_exit=idle_exit,
               exit_on=failing if exit_on_finding else None, from_end=from_end, stop=lambda: stopping["now"])
    finally:
        watcher.close()
        for s, h in old.items():
            signal.signal(s, h)
    raise typer.Exit(1 if seen["fail"] else 0)


def _text(note) -> str | None:
    at = f"line {note.line}: " if note.line else ""
    if note.type == "finding":
        f = note.data["finding"]
        head = f"FINDING {f['severity']} {f['category']} [{f['rule']}] {at}{f['title']}"
        rest = []
        if f.get("summary"):
            rest.append("  " + f["summary"])
        for fx in f.get("fix") or []:
            if fx.get("option", 1) == 1 and (fx.get("flag") or fx.get("env") or fx.get("external_env")):
                name = fx.get("flag") or fx.get("env") or fx.get("external_env")
                rest.append(f"  fix: {name} {fx.get('value') if fx.get('value') is not None else ''}".rstrip())
        return "\n".join([head] + rest)
    if note.type == "warning":
        return f"WARNING {note.data.get('warning')} {at}{note.message}"
    if note.type in ("ready", "run", "rotated", "truncated", "waiting", "opened"):
        return f"diag: {at}{note.message}"
    return None
