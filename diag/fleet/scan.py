"""`diag scan`: many logs diagnosed in parallel, one row per server run, as a polars table.

Each file is diagnosed on its own (`analyze_with_facts`, so a file that holds restarts gives
one row per run) in a pool of worker processes, one per core by default; the rows are built
into a polars DataFrame (imported lazily: the plain CLI never loads it), grouped by a stable
failure fingerprint (the rule, the category and the first error line with its numbers, paths
and hex masked), and written as a terminal table, CSV, Parquet, JSON Lines or JSON.

The same `scan_files` runs on each node of a Ray cluster (diag/fleet/ray.py).
"""
from __future__ import annotations

import glob
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from .. import rx

COLUMNS = ["node", "file", "server", "run", "first_line", "last_line", "status", "state", "category", "rule",
           "severity", "confidence", "model", "gpu", "version", "key", "key_value", "first_error_line",
           "first_error", "fingerprint", "group_size", "error"]
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".xz", ".bz2")
# the parts of a first error line that differ between replicas failing the same way
MASK = rx.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\]\s*|0x[0-9a-fA-F]+|(?:/[\w.@+-]+)+/?|\d+(?:\.\d+)?")
SPACES = rx.compile(r"\s+")
PREFIX = rx.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\]\s*")


@dataclass
class Options:
    jobs: int = 0                  # worker processes; 0: one per core
    sglang_version: str | None = None
    max_bytes: int | None = None
    max_lines: int | None = None
    only_sglang: bool = False      # leave out files with nothing of SGLang in them (Ray's own logs)
    start_method: str | None = None  # worker processes: fork (default where there is one), spawn (inside Ray)


# -- which files ---------------------------------------------------------------------------------

def expand(patterns: Iterable[str]) -> tuple[list[str], list[str]]:
    """(files, patterns that matched nothing): globs (** included), folders (their log files,
    recursively), plain paths; each file once, in a stable order."""
    files: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for pat in patterns:
        if os.path.isdir(pat):
            found = sorted(log_files(pat))
        elif any(c in pat for c in "*?["):
            found = sorted(p for p in glob.glob(pat, recursive=True) if os.path.isfile(p))
        elif os.path.exists(pat):
            found = [pat]
        else:
            found = []
        if not found:
            missing.append(pat)
        for p in found:
            add(p)
    return files, missing


def log_files(folder: str) -> Iterable[str]:
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for n in names:
            low = n.lower()
            if low.endswith(LOG_SUFFIXES) or ".log." in low:
                yield os.path.join(root, n)


# -- one file ------------------------------------------------------------------------------------

def fingerprint(rule: str | None, category: str | None, state: str | None, first_error: str | None) -> str:
    """The same for replicas that failed the same way: numbers, paths, hex and the log prefix masked."""
    shape = SPACES.sub(" ", MASK.sub("#", first_error or "")).strip()[:160]
    text = "\x1f".join([rule or "", category or "", "" if rule else (state or ""), shape])
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:12]


def rows_of(path: str, opts: Options) -> list[dict]:
    """One row per server run of this file (an error row when the file cannot be read)."""
    from ..analyze import Options as AOptions, analyze_with_facts
    from ..read import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, InputError, Limits
    from .servers import outcome
    limits = Limits(max_bytes=opts.max_bytes or DEFAULT_MAX_BYTES, max_lines=opts.max_lines or DEFAULT_MAX_LINES)
    try:
        report, facts = analyze_with_facts([path], None, AOptions(sglang_version=opts.sglang_version, limits=limits))
    except InputError as exc:
        return [_row(path, error=str(exc))]
    except Exception as exc:  # a bug in diag on one file: that row says so, the scan goes on
        return [_row(path, error=f"internal error: {type(exc).__name__}: {str(exc)[:200]}")]
    if opts.only_sglang and facts.state in ("not_sglang", "empty") and not report.runs:
        return []
    runs = report.runs or [dict(outcome(report, facts, report.ranks), server=0, run=0,
                                inputs=[{"input": 0, "first_line": 1, "last_line": report.inputs[0].lines}])]
    return [_row(path, r) for r in runs]


def _row(path: str, r: dict | None = None, error: str | None = None) -> dict:
    r = r or {}
    seg = (r.get("inputs") or [{}])[0]
    err = r.get("first_error") or {}
    key = r.get("key") or {}
    status = "error" if error else r.get("status")
    row = {"node": None, "file": path, "server": r.get("server"), "run": r.get("run"),
           "first_line": seg.get("first_line"), "last_line": seg.get("last_line"), "status": status,
           "state": r.get("state"), "category": r.get("category"), "rule": r.get("rule"), "severity": r.get("severity"),
           "confidence": r.get("confidence"), "model": r.get("model"), "gpu": r.get("gpu"),
           "version": r.get("sglang_version"), "key": key.get("name"), "key_value": key.get("value"),
           "first_error_line": err.get("line"), "first_error": err.get("text"), "fingerprint": None,
           "group_size": None, "error": error}
    if not error and (row["rule"] or row["state"] == "failed"):
        row["fingerprint"] = fingerprint(row["rule"], row["category"], row["state"], row["first_error"])
    return row


# -- many files ----------------------------------------------------------------------------------

def _warm() -> None:
    """Load the rules and the message catalog once, before the workers are forked from this process."""
    from ..rules.registry import registry
    registry()
    from ..parse.sglang import _catalog
    _catalog()


def scan_files(files: list[str], opts: Options, progress: Callable[[int, int, int], None] | None = None) -> list[dict]:
    """Every file's rows, in file order. Files go to a pool of worker processes (fork: they
    inherit the loaded rules); one worker or one file runs here."""
    jobs = opts.jobs or os.cpu_count() or 1
    jobs = max(1, min(jobs, len(files)))
    rows_by_file: list[list[dict]] = [[] for _ in files]
    failed = 0
    if jobs == 1:
        for k, f in enumerate(files):
            rows_by_file[k] = rows_of(f, opts)
            failed += sum(1 for r in rows_by_file[k] if r["state"] == "failed")
            if progress:
                progress(k + 1, len(files), failed)
        return [r for rows in rows_by_file for r in rows]
    import multiprocessing as mp
    _warm()
    method = opts.start_method or ("fork" if "fork" in mp.get_all_start_methods() else None)
    ctx = mp.get_context(method)
    chunk = max(1, min(16, len(files) // (jobs * 8) or 1))
    with ctx.Pool(jobs) as pool:
        done = 0
        for k, rows in pool.imap_unordered(_indexed, [(k, f, opts) for k, f in enumerate(files)], chunksize=chunk):
            rows_by_file[k] = rows
            done += 1
            failed += sum(1 for r in rows if r["state"] == "failed")
            if progress:
                progress(done, len(files), failed)
    return [r for rows in rows_by_file for r in rows]


def _indexed(args: tuple[int, str, Options]) -> tuple[int, list[dict]]:
    k, f, opts = args
    return k, rows_of(f, opts)


class Progress:
    """'scanned 120/1000 files, 37 failed runs' on stderr, at most every `every` seconds, and at the end."""

    def __init__(self, stream=None, every: float = 0.5):
        self.stream = stream or sys.stderr
        self.every = every
        self.last = 0.0

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < self.every:
            return
        self.last = now
        try:
            self.stream.write(f"diag: scanned {done}/{total} files, {failed} failed run(s)\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


# -- the table -----------------------------------------------------------------------------------

def frame(rows: list[dict]):
    """The rows as a polars DataFrame with every column, and group_size filled per fingerprint."""
    import polars as pl
    schema = {"node": pl.Utf8, "file": pl.Utf8, "server": pl.Int64, "run": pl.Int64, "first_line": pl.Int64,
              "last_line": pl.Int64, "status": pl.Utf8, "state": pl.Utf8, "category": pl.Utf8, "rule": pl.Utf8,
              "severity": pl.Utf8, "confidence": pl.Float64, "model": pl.Utf8, "gpu": pl.Utf8, "version": pl.Utf8,
              "key": pl.Utf8, "key_value": pl.Float64, "first_error_line": pl.Int64, "first_error": pl.Utf8,
              "fingerprint": pl.Utf8, "group_size": pl.Int64, "error": pl.Utf8}
    df = pl.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], schema=schema, orient="row")
    sizes = df.filter(pl.col("fingerprint").is_not_null()).group_by("fingerprint").len()
    df = df.drop("group_size").join(sizes.rename({"len": "group_size"}), on="fingerprint", how="left")
    return df.select([pl.col(c).cast(schema[c]) for c in COLUMNS])


def groups(df) -> list[dict]:
    """Runs that failed the same way, largest group first: fingerprint, count, files, rule,
    category and one first error line as an example."""
    import polars as pl
    failed = df.filter(pl.col("fingerprint").is_not_null())
    if failed.is_empty():
        return []
    g = (failed.group_by("fingerprint", maintain_order=True)
         .agg(pl.len().alias("runs"), pl.col("file").n_unique().alias("files"), pl.col("rule").first(),
              pl.col("category").first(), pl.col("state").first(), pl.col("first_error").drop_nulls().first().alias("example"))
         .sort(["runs", "fingerprint"], descending=[True, False]))
    return g.to_dicts()


def write(df, fmt: str, output: str | None, redact: bool = False) -> str | None:
    """The table in a format: text (returned), csv / jsonl / json (returned, or written to output),
    parquet (written to output)."""
    if redact:
        df = _redacted(df)
    if fmt == "parquet":
        df.write_parquet(output)
        return None
    if fmt == "csv":
        return df.write_csv()
    if fmt == "jsonl":
        return df.write_ndjson()
    if fmt == "json":
        return df.write_json()
    return text(df)


def _redacted(df):
    import polars as pl
    from ..redact import Redactor
    r = Redactor()
    cols = [c for c in ("node", "file", "model", "first_error", "error")]
    return df.with_columns([pl.col(c).map_elements(r.redact, return_dtype=pl.Utf8) for c in cols])


def text(df) -> str:
    """A terminal table (rich), one row per run, then the groups of runs that failed the same way."""
    import polars as pl
    from io import StringIO
    from rich.console import Console
    from rich.table import Table
    t = Table(show_edge=False, pad_edge=False, header_style="bold")
    show = ["file", "run", "state", "category", "rule", "confidence", "model", "gpu", "version", "key", "first_error"]
    if df["node"].drop_nulls().len():
        show.insert(0, "node")
    import shutil
    width = max(100, shutil.get_terminal_size((200, 24)).columns if _tty(sys.stdout) else 200)
    widths = {"file": 36, "model": 24, "gpu": 14, "version": 12, "category": 24, "key": 20, "node": 14, "rule": 13,
              "state": 18, "run": 4, "confidence": 4}
    widths["first_error"] = max(24, width - sum(widths[c] + 3 for c in show if c in widths))
    for c in show:
        t.add_column("conf" if c == "confidence" else c, overflow="ellipsis", no_wrap=True, max_width=widths.get(c))
    names = df["file"].to_list()
    try:
        common = os.path.commonpath([os.path.dirname(n) or "." for n in names]) if names else ""
    except ValueError:   # absolute and relative paths mixed
        common = ""
    for r in df.iter_rows(named=True):
        key = f"{r['key']}={_num(r['key_value'])}" if r["key"] else ""
        cells = {"node": r["node"] or "", "file": os.path.relpath(r["file"], common) if common else r["file"], "run": "" if r["run"] is None else str(r["run"] + 1),
                 "state": r["state"] or r["status"] or "", "category": r["category"] or (r["error"] or ""),
                 "rule": r["rule"] or "", "confidence": "" if r["confidence"] is None else f"{r['confidence']:.2f}",
                 "model": r["model"] or "", "gpu": r["gpu"] or "", "version": r["version"] or "", "key": key,
                 "first_error": "" if r["first_error_line"] is None else
                 f"{r['first_error_line']}: {PREFIX.sub('', r['first_error'] or '')}"}
        t.add_row(*[cells[c] for c in show])
    buf = StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None, highlight=False)
    console.print(t)
    files = df["file"].n_unique()
    failed = df.filter(pl.col("state") == "failed").height
    lines = ([f"files under {common}/"] if common not in ("", ".") else []) + [
        buf.getvalue().rstrip(), "", f"{df.height} run(s) in {files} file(s); {failed} failed"]
    total = df.height
    alike = [g for g in groups(df) if g["runs"] > 1]
    once = sum(1 for g in groups(df) if g["runs"] == 1)
    if alike:
        lines.append("Runs that failed the same way:")
    for g in alike:
        what = " ".join(x for x in (g["rule"], g["category"]) if x) or g["state"] or "failed"
        example = (g["example"] or "")[:100]
        lines.append(f"  {g['runs']} of {total} runs ({g['files']} file(s)): {what}" + (f" — {example}" if example else "")
                     + f"  [{g['fingerprint']}]")
    if once:
        lines.append(f"  {once} other failure(s), each seen once" if alike else f"  {once} failure(s), none alike")
    return "\n".join(lines)


def _tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def _num(v) -> str:
    if v is None:
        return ""
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"
