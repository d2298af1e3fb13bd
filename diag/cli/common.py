"""What every subcommand shares: formats, one-line errors, output files, colour, the config file."""
from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

__all__ = ["typer", "Format", "FailOn", "Color", "STATE", "fail", "write_output", "settings"]


def __getattr__(name: str):
    """`C.typer` (and `from .common import typer`) imports typer when first asked for: a plain
    `diag analyze` runs without it (diag/cli/__init__.py, `_direct`), ~20 ms of start-up."""
    if name == "typer":
        import typer
        return typer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    slack = "slack"
    slack_blocks = "slack-blocks"
    html = "html"
    sarif = "sarif"
    github = "github"


SHARED = {Format.markdown, Format.slack, Format.slack_blocks, Format.html, Format.sarif, Format.github}


class FailOn(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"
    never = "never"


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


@dataclass
class State:
    quiet: bool = False
    verbose: bool = False
    color: Color = Color.auto


STATE = State()

FORMAT_HELP = "Output format: text, json, markdown, slack, slack-blocks, html, sarif, github (as each command supports)."


def format_option(default: Format = Format.text):
    import typer
    return typer.Option(default, "--format", "-f", help=FORMAT_HELP, case_sensitive=False)


def check_format(fmt: Format, allowed: tuple[Format, ...], command: str) -> None:
    """The same one-line error in every subcommand for a format it does not write."""
    if fmt not in allowed:
        fail(f"diag {command} writes --format {' or '.join(f.value for f in allowed)}, not {fmt.value}")


class OutputError(Exception):
    """An output that cannot be written (one line, exit 2)."""


def say_error(message: str, prefix: str = "diag: error: ") -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.write(f"{prefix}{message}\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr closed: the exit code still tells


def note(message: str) -> None:
    """A note on stderr (not with --quiet)."""
    if not STATE.quiet:
        say_error(message, prefix="diag: ")


def verbose(message: str) -> None:
    if STATE.verbose:
        say_error(message, prefix="diag: ")


def fail(message: str, code: int = 2) -> None:
    say_error(message)
    import typer
    raise typer.Exit(code)


def silence_stdout() -> None:
    """After a closed pipe (`diag … | head`): later writes and the final flush go nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def use_color(fmt: Format, to_file: bool) -> bool:
    if fmt is not Format.text or to_file:
        return False
    if STATE.color is Color.always:
        return True
    if STATE.color is Color.never or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") not in (None, "", "0"):
        return True
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except (ValueError, OSError):
        return False


# -- output ---------------------------------------------------------------------------------

def _same_file(a: Path, b: str) -> bool:
    try:
        return b != "-" and os.path.exists(b) and a.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output(output: str | None, inputs: list[str], what: str = "--output") -> None:
    """Refuse an output that is one of the inputs (it would overwrite the user's log)."""
    if output is None or output == "-":
        return
    target = Path(output)
    for path in inputs:
        if _same_file(target, path) or (path != "-" and os.path.abspath(path) == os.path.abspath(output)):
            fail(f"{what} {output} is one of the inputs; it would be overwritten (choose another file)")


def write_output(text: str, output: str | None) -> None:
    """To stdout (no output, or `-`) or to a file; one-line errors for closed or full streams."""
    if not text.endswith("\n"):
        text += "\n"
    if output is None or output == "-":
        stream = sys.stdout
        if stream is None:
            raise OutputError("standard output is closed")
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            silence_stdout()
        except UnicodeEncodeError:
            stream.buffer.write(text.encode("utf-8", "backslashreplace"))
        except OSError as exc:
            raise OutputError(f"cannot write to standard output ({exc.strerror or exc})") from None
        except ValueError:
            raise OutputError("standard output is closed") from None
        return
    path = Path(output)
    try:
        if path.is_dir():
            raise OutputError(f"{output}: is a directory; give a file name")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise OutputError(f"{output}: cannot write ({exc.strerror or exc})") from None
    note(f"wrote {output}")


# -- usage errors ------------------------------------------------------------------------------

def click_exceptions():
    """click's exception classes (typer >= 0.26 vendors click as typer._click)."""
    try:
        from typer._click import exceptions
    except ImportError:  # an older typer on the real click
        from click import exceptions
    return exceptions


def usage_message(exc, argv: list[str]) -> str:
    """click's usage error as one line, with did-you-mean for options and subcommands."""
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_exceptions().NoSuchOption):
        name = exc.option_name
        msg = f"no such option: {name}"
        hint = ""
        if exc.possibilities:
            hint = f" (did you mean {', '.join(sorted(exc.possibilities)[:3])}?)"
        elif ctx is not None:
            opts = [o for p in ctx.command.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])]
            close = difflib.get_close_matches(name, opts, n=2, cutoff=0.6)
            if close:
                hint = f" (did you mean {', '.join(close)}?)"
        arg = next((a for a in argv if a.startswith(name)), name)
        if os.path.exists(arg) or "." in arg or "/" in arg:
            hint = f" (to name a file that starts with '-', write ./{arg} or put it after --: diag analyze -- {arg})"
        return msg + hint
    text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    text = " ".join(text.split())
    if text.startswith("No such command"):
        bad = text.split("'")[1] if "'" in text else ""
        names = list(ctx.command.commands) if ctx is not None and hasattr(ctx.command, "commands") else []
        close = difflib.get_close_matches(bad, names, n=1, cutoff=0.5)
        cmd = ctx.command_path if ctx is not None else "diag"
        return f"no such command: {bad}" + (f" (did you mean `{cmd} {close[0]}`?)" if close else f" (see `{cmd} --help`)")
    if ctx is not None and ctx.command_path and ctx.command_path != "diag":
        text = f"{text} (see `{ctx.command_path} --help`)"
    return text[0].lower() + text[1:] if text else "usage error"


# -- SGLang version ------------------------------------------------------------------------

VERSION_SHAPE = __import__("re").compile(r"\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:[.-]?(?:post|rc|dev)\d{1,3})?")


def check_sglang_version(version: str | None) -> str | None:
    """A version SGLang could have: one the catalog knows, or a well-formed one near them."""
    if version is None:
        return None
    from .. import versions as V
    from ..flags import catalog_versions
    known = catalog_versions()
    v = version.strip().lstrip("v")
    parsed = V.parse(v) if VERSION_SHAPE.fullmatch(v) else None
    if parsed is None:
        close = difflib.get_close_matches(v, known, n=2, cutoff=0.5)
        fail(f"--sglang-version {version!r} is not an SGLang version"
             + (f" (did you mean {' or '.join(close)}?)" if close else f" (known: {known[0]} … {known[-1]})"))
    if parsed[0] > 1 or (parsed[0] == 0 and parsed[1] < 1):
        fail(f"--sglang-version {version!r} is outside the SGLang releases diag knows ({known[0]} … {known[-1]})")
    return v


# -- config file ---------------------------------------------------------------------------

@dataclass
class Settings:
    sglang_version: str | None = None
    fail_on: str | None = None
    redact: bool | None = None
    ignore: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    source: str | None = None


KEYS = {"sglang-version": "sglang_version", "sglang_version": "sglang_version", "fail-on": "fail_on",
        "fail_on": "fail_on", "redact": "redact", "ignore": "ignore", "select": "select"}
_SETTINGS: Settings | None = None


def settings() -> Settings:
    """[tool.diag] in pyproject.toml or .diag.toml, the nearest one walking up from the current folder."""
    global _SETTINGS
    if _SETTINGS is None:
        _SETTINGS = _load_settings(Path.cwd())
    return _SETTINGS


def _load_settings(start: Path) -> Settings:
    if os.environ.get("DIAG_NO_CONFIG"):
        return Settings()
    for folder in [start, *start.parents]:
        for name in (".diag.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            import tomllib
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                fail(f"{path}: cannot read the config ({str(exc).splitlines()[0][:120]})")
            table = data.get("tool", {}).get("diag") if name == "pyproject.toml" else data.get("tool", {}).get("diag", data)
            if table is None:
                continue
            return _settings_from(table, path)
    return Settings()


def _settings_from(table: dict, path: Path) -> Settings:
    out = Settings(source=str(path))
    for key, value in table.items():
        attr = KEYS.get(key)
        if attr is None:
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            fail(f"{path}: unknown key {key!r} in the diag config" + (f" (did you mean {close[0]!r}?)" if close else ""))
        if attr in ("ignore", "select"):
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                fail(f"{path}: {key} must be a list of strings")
        elif attr == "redact":
            if not isinstance(value, bool):
                fail(f"{path}: redact must be true or false")
        elif not isinstance(value, str):
            fail(f"{path}: {key} must be a string")
        if attr == "fail_on" and value not in [f.value for f in FailOn]:
            fail(f"{path}: fail-on must be one of {', '.join(f.value for f in FailOn)}")
        setattr(out, attr, value)
    return out
