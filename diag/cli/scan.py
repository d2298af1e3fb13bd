"""diag scan: many logs at once, in parallel, one row per server run (here or on a Ray cluster)."""
from __future__ import annotations

import sys
from enum import Enum
from typing import List, Optional

from . import common as C
from .common import typer


class ScanFormat(str, Enum):
    text = "text"
    csv = "csv"
    parquet = "parquet"
    jsonl = "jsonl"
    json = "json"


def register(app) -> None:
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(scan)


def scan(
    paths: Optional[List[str]] = typer.Argument(None, help="Log files, folders (their *.log, *.out, *.err, *.txt, compressed too) "
                                                "or globs ('logs/**/*.log', quoted so that diag expands them)."),
    fmt: ScanFormat = typer.Option(ScanFormat.text, "--format", "-f", case_sensitive=False,
                                   help="text (a table and the groups of runs that failed alike), csv, parquet, jsonl, json."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the table to this file ('-': standard output; parquet needs a file)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Worker processes (default: one per core)."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress on stderr (default: when stderr is a terminal)."),
    fail_on: Optional[C.FailOn] = typer.Option(None, "--fail-on", help="Exit 1 when a run's finding is at least this severe (default: error)."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="SGLang version, when the logs do not show it."),
    redact: bool = typer.Option(False, "--redact/--no-redact", help="Redact secrets, users and hosts in the table."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Scan on every node of a Ray cluster at this address ('auto': the local "
                                      "cluster's); each node reads its own log folders (Ray's session logs when no path is given). "
                                      "Needs the extra: pip install 'diag[ray]'."),
    max_bytes: Optional[int] = typer.Option(None, "--max-bytes", min=1, help="Read at most this many bytes of text per log."),
    max_lines: Optional[int] = typer.Option(None, "--max-lines", min=1, help="Read at most this many lines per log."),
) -> None:
    """Diagnose many logs in parallel: one row per server run, replicas that failed alike grouped."""
    import os
    from ..fleet import scan as S
    paths = list(paths or [])
    if ray is not None and ray != "auto" and ":" not in ray and (os.path.exists(ray) or any(c in ray for c in "*?[/")):
        paths.insert(0, ray)   # `--ray logs/*.log`: the shell's first word was a path, not an address
        ray = "auto"
    if fmt is ScanFormat.parquet and output in (None, "-"):
        C.fail("--format parquet writes a file: give --output FILE.parquet")
    C.check_output(output, paths)
    version = C.check_sglang_version(sglang_version or C.settings().sglang_version)
    opts = S.Options(jobs=jobs, sglang_version=version, max_bytes=max_bytes, max_lines=max_lines)
    show = progress if progress is not None else _tty(sys.stderr)
    meter = S.Progress() if show and not C.STATE.quiet else None
    if ray is not None:
        from ..fleet import ray as RAY
        try:
            rows = RAY.scan_cluster(ray, paths, opts, progress=meter)
        except RAY.RayUnavailable as exc:
            C.fail(str(exc))
    else:
        if not paths:
            C.fail("give log files, folders or globs to scan (see `diag scan --help`)")
        files, missing = S.expand(paths)
        for m in missing:
            C.note(f"{m}: no such file or no log file matched")
        if not files:
            C.fail("no log file to scan")
        C.verbose(f"scanning {len(files)} file(s)")
        rows = S.scan_files(files, opts, progress=meter)
    df = S.frame(rows)
    text = S.write(df, fmt.value, output, redact=redact)
    if text is not None:
        C.write_output(text, output)
    else:
        C.note(f"wrote {output}")
    raise typer.Exit(_exit_code(df, fail_on.value if fail_on else (C.settings().fail_on or "error")))


def _exit_code(df, fail_on: str) -> int:
    from ..report import SEVERITIES
    if fail_on == "never":
        return 0
    worst = [s for s in df["severity"].drop_nulls().to_list() if s in SEVERITIES]
    return 1 if any(SEVERITIES.index(s) >= SEVERITIES.index(fail_on) for s in worst) else 0


def _tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False
