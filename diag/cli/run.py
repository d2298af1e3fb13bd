"""diag run -- <launch command>: check it, start the server without losing output, diagnose its end."""
from __future__ import annotations

import signal
import sys
from typing import List, Optional

from . import common as C
from .common import Format, typer


def register(app) -> None:
    app.command(context_settings={"help_option_names": ["-h", "--help"], "allow_interspersed_args": False})(run)


def run(
    argv: Optional[List[str]] = typer.Argument(None, help="The launch command, after --: diag run -- python -m sglang.launch_server …"),
    log: Optional[str] = typer.Option(None, "--log", "-l", help="The log file (appended to, never truncated; default: sglang-DATE-TIME.log here)."),
    force: bool = typer.Option(False, "--force", help="Start even when the pre-flight check finds errors."),
    detach: bool = typer.Option(False, "--detach", help="Run the server in a session of its own: a closed terminal or ssh (SIGHUP) does not end it."),
    exit_when_ready: bool = typer.Option(False, "--exit-when-ready", help="Return once the server is ready (exit 0), leaving it running (use with --detach)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU model for the memory budget (default: nvidia-smi's, when there is one)."),
    model_config: Optional[str] = typer.Option(None, "--model-config", help="The model's config.json, for models diag does not know."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="Check against this SGLang version (default: the installed one)."),
    fmt: Format = C.format_option(),
    fail_on: Optional[C.FailOn] = typer.Option(None, "--fail-on", help="Exit 1 when the diagnosis has a finding this severe (default: error)."),
    interval: float = typer.Option(0.5, "--interval", min=0.01, help="Seconds between two looks at the log and the process."),
) -> None:
    """Check a launch command, start the server so that no output is lost, and diagnose it the
    moment it dies (or say when it is ready). Exit: 0 clean, 1 findings (or the pre-flight stop), 2 usage, 3 inconclusive."""
    C.check_format(fmt, (Format.text, Format.json), "run")
    argv = list(argv or [])
    if not argv:
        C.fail("give the launch command after `--`, e.g. diag run -- python -m sglang.launch_server --model-path …")
    if len(argv) == 1 and " " in argv[0].strip():
        from ..launch import split_command
        argv = split_command(argv[0])
    version = C.check_sglang_version(sglang_version or C.settings().sglang_version) if (sglang_version or C.settings().sglang_version) else None
    level = fail_on.value if fail_on else (C.settings().fail_on or "error")
    from ..fleet import runner as RN
    from ..jsonout import dumps

    def out(obj: dict, text: str | None) -> None:
        try:
            sys.stdout.write((dumps(obj, indent=None) if fmt is Format.json else text) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            C.silence_stdout()

    pf = RN.preflight(argv, version, gpu, model_config)
    for n in pf.notes:
        C.note(n)
    for p in pf.problems:
        C.note(f"{p['severity']}: {p['message']}" + (f" (did you mean {p['suggestion']}?)" if p.get("suggestion") else ""))
    if fmt is Format.json:
        out({"type": "preflight", "problems": pf.problems, "notes": pf.notes, "sglang_version": pf.version,
             "memory_fits": pf.memory.get("fits") if pf.memory else None}, None)
    if pf.blocking and not force:
        C.say_error(f"not starting the server: the pre-flight check found {len(pf.blocking)} error(s) that would stop it "
                    "(fix the command, or --force to start anyway)")
        raise typer.Exit(1)
    log = log or RN.default_log()
    C.check_output(log, [])
    from ..fleet.watch import Note
    from .watch import _text

    def emit(note: Note) -> None:
        if fmt is Format.json:
            out(note.to_json(), None)
            return
        line = _text(note)
        if line is None:
            return
        if note.type in ("finding", "warning"):
            out({}, line)
        else:
            C.note(line.removeprefix("diag: "))

    runner = RN.Runner(argv, log, detach=detach, emit=emit, interval=interval, sglang_version=version or pf.version)
    try:
        runner.start()
    except OSError as exc:
        C.fail(f"cannot start {argv[0]}: {exc.strerror or exc}")
    C.note(f"started pid {runner.proc.pid}; log: {log}" + (" (own session: hang-ups do not reach it)" if detach else ""))

    def on_signal(signum, frame):
        runner.stop(signal.SIGTERM if signum == signal.SIGTERM else signal.SIGINT)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        ending = runner.supervise(exit_when_ready=exit_when_ready)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if ending is None:
        C.note(f"the server (pid {runner.proc.pid}) is running; its log: {log}")
        raise typer.Exit(0)
    report = runner.report()
    from .analyze import exit_code, render
    if fmt is Format.json:
        out({"type": "ended", **ending.to_json(), "report": report.to_json()}, None)
    else:
        C.note(ending.describe() + (f"; the kernel: {ending.oom_kill}" if ending.oom_kill else ""))
        out({}, render(report, Format.text, False, C.use_color(Format.text, False)))
    code = exit_code(report, level)
    if runner._stop and ending.returncode in (0, -signal.SIGTERM, -signal.SIGINT) and code == 3:
        code = 0   # stopped when asked: a log without a failure is no puzzle
    elif code == 0 and ending.returncode != 0 and not runner._stop:
        code = 3   # it died and nothing explains why
    raise typer.Exit(code)
