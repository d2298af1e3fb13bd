"""Helpers for the hostile-input tests: run the CLI in-process and measure it, and build the
large hostile inputs (decompression bombs, event-dense logs) at a chosen size.

`make fuzz` builds them at the sizes of the issue (tests/fuzz_big.py); the suite at small ones.
"""
from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

HOSTILE = Path(__file__).parent / "data" / "hostile"


@dataclass
class Run:
    code: int
    out: str
    err: str
    cpu_s: float
    peak_mib: float | None


def diag(*argv: str, memory: bool = False, stdin: bytes | None = None) -> Run:
    """`diag argv…` in this process: exit code, stdout, stderr, CPU seconds, Python heap peak (MiB)."""
    import sys

    from diag.cli import _run
    from diag.cli import common as C
    C.STATE.quiet = C.STATE.verbose = False
    C.STATE.color = C.Color.auto
    C._SETTINGS = None
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:  # a real file, as a shell redirection gives
        import tempfile
        tmp = tempfile.TemporaryFile()
        tmp.write(stdin)
        tmp.seek(0)
        sys.stdin = io.TextIOWrapper(tmp)
    if memory:
        tracemalloc.start()
    t0 = time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = _run(list(argv))
    finally:
        cpu = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20) if memory else None
        if memory:
            tracemalloc.stop()
        sys.stdin = old_stdin
    return Run(code, out.getvalue(), err.getvalue(), cpu, peak)


# -- large hostile inputs, sized -----------------------------------------------------------

def bomb(path: Path, kind: str, expanded: int, byte: bytes = b"A") -> Path:
    """A compressed file that expands to `expanded` bytes of one repeated byte (a few KB on disk)."""
    block = byte * (1 << 20)
    if kind == "gz":
        member = gzip.compress(block, 9)
        path.write_bytes(member * max(1, expanded >> 20))
    elif kind == "bz2":
        member = bz2.compress(block, 9)
        path.write_bytes(member * max(1, expanded >> 20))
    else:
        member = lzma.compress(block, preset=1)
        path.write_bytes(member * max(1, expanded >> 20))
    return path


DENSE = {
    "killed": "Killed\n",
    "oomline": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
               "79.19 GiB of which 11.06 MiB is free.\n",
    "http500": 'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 500 Internal Server Error\n',
    "exc": "RuntimeError: boom\n",
    "tiny": "x\n",
    "empty": "\n",
    "plain": "[2026-05-14 09:12:05 TP0] Some ordinary informational message about the scheduler\n",
}


def dense(path: Path, kind: str, lines: int) -> Path:
    path.write_text(DENSE[kind] * lines)
    return path
