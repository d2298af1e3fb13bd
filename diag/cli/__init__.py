"""Command line: diag analyze | rules | flags check | mem | events | serve | version.

Exit codes (report contract): 0 clean, 1 findings at or above --fail-on, 2 usage error or
unreadable input, 3 inconclusive (also: diag could not finish, with one line saying why).
Every error is one line on stderr, never a traceback (DIAG_DEBUG=1 shows it); Ctrl-C is 130.

Adding a subcommand takes one small module and one line here:

    # diag/cli/serve.py
    from . import common as C

    def register(app):
        @app.command()
        def serve(port: int = C.typer.Option(8080, "--port")) -> None:
            '''Serve reports over HTTP.'''
            from ..serve import run          # heavy imports inside the command, never at module level
            raise C.typer.Exit(run(port))

    # below: COMMANDS = [..., "serve"]

The module's `register(app)` adds its commands (or a sub-app); use `C.fail` for one-line
errors, `C.write_output` for output files (`-o -`, refusing an input as output, full disks),
`C.FORMAT` / `C.check_format` so that `--format` means the same in every subcommand, and
`C.settings()` for the config file ([tool.diag] in pyproject.toml or .diag.toml).
"""
from __future__ import annotations

import errno
import gc
import os
import sys
from importlib import import_module

from . import common as C

COMMANDS = ["analyze", "rules", "flags", "mem", "events", "scan", "watch", "run", "serve", "version"]


def _version(value: bool) -> None:
    if value:
        from .version import version_line
        C.typer.echo(version_line())
        raise C.typer.Exit(0)


def _global_options():
    """The callback of the group: the global options (typer is imported by then)."""
    typer = C.typer

    def _global(
        version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version, expose_value=True,
                                     help="Print diag's version and exit."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the output and errors on stderr, no notes."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Notes on stderr: inputs read, caps reached, config used."),
        color: C.Color = typer.Option(C.Color.auto, "--color", help="Colour in text output (FORCE_COLOR / NO_COLOR are honoured)."),
    ) -> None:
        if quiet and verbose:
            C.fail("--quiet and --verbose cannot be given together")
        C.STATE.quiet, C.STATE.verbose, C.STATE.color = quiet, verbose, color

    return _global


_APPS: dict[tuple[str, ...], object] = {}


def app_for(names: tuple[str, ...]):
    """The typer app with these subcommands (built once each): a run of one subcommand builds
    only its own (typer builds every registered command's click command on each call, ~4 ms for
    all of them); `diag --help`, completion and a name to correct get every one."""
    app = _APPS.get(names)
    if app is None:
        app = C.typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                            context_settings={"help_option_names": ["-h", "--help"]},
                            help="Root causes, evidence, memory arithmetic and flag fixes for SGLang server failures.")
        app.callback()(_global_options())
        for name in names:
            import_module(f".{name}", __name__).register(app)
        _APPS[names] = app
    return app


def __getattr__(name: str):
    if name == "app":               # `from diag.cli import app`: every subcommand
        return app_for(tuple(COMMANDS))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the global options that take a value (the next argument is not the subcommand)
_VALUED = ("--color",)
_ALL = ("-h", "--help", "-V", "--version", "--install-completion", "--show-completion")


def _subcommand(argv: list[str]) -> str | None:
    """The subcommand argv runs, when it alone needs building; None: every one."""
    if os.environ.get("_DIAG_COMPLETE"):
        return None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _ALL or a == "--":
            return None
        if a in _VALUED:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a if a in COMMANDS else None
    return None


from .analyze import exit_code  # noqa: E402,F401 - used by diag.serve: the same exit codes as the CLI


def main(argv: list[str] | None = None) -> None:
    """The entry point: click's usage errors and every exception become one line and an exit code 0-3."""
    import atexit
    registered = getattr(atexit, "_ncallbacks", None)   # CPython's count of the handlers
    if registered is not None and registered() == 0:   # the first one runs last: none is skipped
        atexit.register(_exit_now)
    code = _run(sys.argv[1:] if argv is None else argv)
    _flush()
    _EXIT.append(code)
    sys.exit(code)


_EXIT: list[int] = []      # main's exit code, once it has one


def _exit_now() -> None:
    """The process's end without the interpreter's teardown (freeing every object and module one
    by one, a full collection: ~25 ms of CPU after a paste's ~170): the last atexit handler, so
    Python has joined the threads and run every other handler (diag.cache's write-back among
    them); the standard streams are flushed here, and the exit status is main's. Anything
    unusual (no code yet, a thread left, a tracer or profiler, a stream that will not flush):
    the interpreter ends as usual."""
    threading = sys.modules.get("threading")     # not imported: no thread was started
    if not _EXIT or (threading is not None and threading.active_count() > 1) or sys.gettrace() is not None \
            or sys.getprofile() is not None:
        return
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except Exception:
        return
    os._exit(_EXIT[-1])


def _run(argv: list[str]) -> int:
    # the except clauses name typer's and click's classes only when an exception is raised (a
    # plain `diag analyze` runs without importing typer: `_direct`)
    try:
        name = _subcommand(argv)
        if name == "analyze" and argv[0] == "analyze":
            code = _direct(argv)
            if code is not None:
                return code
        app = app_for((name,) if name else tuple(COMMANDS))
        code = app(args=argv, prog_name="diag", standalone_mode=False)  # an Exit's code is returned
        return code if isinstance(code, int) else 0
    except C.typer.Exit as exc:
        return exc.exit_code
    except C.typer.Abort:
        C.say_error("interrupted")
        return 130
    except C.click_exceptions().NoArgsIsHelpError:  # `diag`, `diag rules`: typer has shown the help
        return 0
    except C.click_exceptions().UsageError as exc:
        C.say_error(C.usage_message(exc, argv))
        return 2
    except C.click_exceptions().ClickException as exc:
        C.say_error(exc.format_message())
        return 2
    except KeyboardInterrupt:
        C.say_error("interrupted")
        return 130
    except BrokenPipeError:
        C.silence_stdout()
        return 0
    except C.OutputError as exc:
        C.say_error(str(exc))
        return 2
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC
            C.say_error(f"cannot write the output: no space left on the device")
            return 2
        return _internal(exc)
    except Exception as exc:  # a bug in diag: one line, the traceback only on request
        return _internal(exc)


def _direct(argv: list[str]) -> int | None:
    """`diag analyze …` without typer, for an argument list that `analyze.direct_args` reads as
    typer would (None: typer parses it): the group's callback with its defaults, then the command,
    its exceptions handled as typer's `main` handles them (standalone_mode=False)."""
    from .analyze import command, direct_args
    kw = direct_args(argv[1:])
    if kw is None:
        return None
    C.STATE.quiet, C.STATE.verbose, C.STATE.color = False, False, C.Color.auto
    paused = gc.isenabled() and _small_inputs((kw["files"] or []) + kw["smi"])
    if paused:
        gc.disable()
    try:
        return command(**kw)
    except EOFError as exc:
        try:
            sys.stderr.write("\n")
        except (OSError, ValueError, AttributeError):
            pass
        raise C.typer.Abort() from exc
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            from typer._click.utils import PacifyFlushWrapper
            sys.stdout, sys.stderr = PacifyFlushWrapper(sys.stdout), PacifyFlushWrapper(sys.stderr)
            sys.exit(1)
        raise
    finally:
        if paused:
            gc.enable()


# inputs up to this size (uncompressed files) are analysed with the cycle collector paused: the
# small reader's rows, the facts and the report are ~10^5 objects that live to the end of the run,
# and the collections that walked them again and again were ~10 ms of a 10,000-line paste
GC_PAUSE_MAX = 4 << 20


def _small_inputs(paths: list[str]) -> bool:
    """Whether every input is a plain file of at most GC_PAUSE_MAX bytes (not standard input, not compressed)."""
    from ..read import _sniff_packed
    if not paths:
        return False
    for path in paths:
        try:
            if path == "-" or not os.path.isfile(path) or os.path.getsize(path) > GC_PAUSE_MAX:
                return False
            with open(path, "rb") as f:
                if _sniff_packed(f.read(10)):
                    return False
        except (OSError, ValueError):
            return False
    return True


def _internal(exc: BaseException) -> int:
    if os.environ.get("DIAG_DEBUG"):
        raise exc
    C.say_error(f"internal error, nothing concluded: {type(exc).__name__}: {str(exc)[:200]} "
                "(set DIAG_DEBUG=1 for the traceback)", prefix="diag: ")
    return 3


def _flush() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        C.silence_stdout()
    except OSError:
        pass
