"""`diag …` in this process, answering as `subprocess.run(capture_output=True)` would.

The CLI tests run the command line in process (the same `diag.cli._run` that the entry point
calls before `sys.exit`), which saves a Python start-up and diag's imports per call; a few tests
keep a real subprocess for what only a process shows: piped stdin, the exit status of the entry
point, closed or full streams and the start-up imports.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run(argv: list, *, stdin: bytes | None = None, env: dict | None = None,
        cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Exit code and the bytes written to stdout and stderr, as a child process's would be.

    stdin is a real file holding `stdin` (as a shell redirection gives), else an empty
    non-terminal one (as CI gives); bytes arguments are decoded as Python decodes argv."""
    from diag.cli import _run
    from diag.cli import common as C

    args = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in argv]
    C.STATE.quiet = C.STATE.verbose = False
    C.STATE.color = C.Color.auto
    C._SETTINGS = None                   # the config file is looked up from the working folder
    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding="utf-8", errors="surrogateescape", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="backslashreplace", write_through=True)
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(tempfile.TemporaryFile())
        raw.write(stdin or b"")
        raw.seek(0)
        stack.enter_context(_environ(dict(env or {})))
        here = os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
            stack.callback(os.chdir, here)
        old_stdin = sys.stdin
        sys.stdin = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
        stack.callback(setattr, sys, "stdin", old_stdin)
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        code = _run(args)
        out.flush()
        err.flush()
    C._SETTINGS = None
    return subprocess.CompletedProcess(["diag", *args], code, out_b.getvalue(), err_b.getvalue())


def subprocess_run(argv: list, *, stdin: bytes | None = None, env: dict | None = None,
                   cwd: str | os.PathLike | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real `python -m diag …` process (the entry point, its exit status, real pipes)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "diag", *argv], input=stdin, capture_output=True,
                          cwd=cwd or Path.cwd(), env=e, timeout=timeout)
