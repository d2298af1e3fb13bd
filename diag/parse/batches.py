"""Prefill/decode batch statistics ("Decode batch, #running-req: 2, token usage: 0.41, ..."), bounded.

The lines that dominate a serving log, never kept as events. What is kept, whatever the log's
length (memory is flat):

- the last `KEEP` rows in full (every column), which is every row of all but the longest logs:
  the timeline is then computed from the rows exactly, and the readers (the last row, the last
  decode rows, the kind of the batch before a failure) see real rows;
- every row also lands in fine buckets of equal width on two axes (seconds since the epoch and
  log line numbers; `FINE` buckets at most, the width doubling as the log grows), with the
  count, the mean position and min/max/last of each series: a log with more than `KEEP` rows
  gets its timeline from these buckets;
- the kind of the last batch before each line that made an event (`mark`), for the first and
  the last `MARKS` events, so the phase of a failure long before the end is still known;
- count, first/last line, the highest number of running requests.

Rows arrive one at a time from the parser (`add`, pure Python, no heavy import) or a chunk at a
time from the fast reader (`add_frame`, a polars DataFrame with the columns of `COLUMNS`;
diag/scan.py).
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
import sys
from array import array
from collections import OrderedDict

from ..native import lines as _native
from ..numbers import to_float

NAN = float("nan")
_DAY_CACHE: dict[str, float] = {}

KEEP = 32768      # rows kept in full (the last ones)
FINE = 2048       # fine buckets per axis at most
MARKS = 2048      # event lines whose preceding batch kind is remembered (first and last)
COLUMNS = ("kind", "line", "ts", "running", "queue", "usage", "tokens", "throughput", "mamba_usage", "accept_len")
SERIES = ("running", "queue", "usage", "throughput", "mamba_usage")  # the timeline's series (throughput: decode rows)
STATS = ("min", "max", "last")
_TYPES = {"kind": "b", "line": "q"}


def ts_seconds(ts: str | None) -> float:
    """'2025-01-06 02:58:11(.123)' -> seconds since the epoch (UTC); nan when absent or odd."""
    if not ts:
        return NAN
    day = ts[:10]
    base = _DAY_CACHE.get(day)
    try:
        if base is None:
            import datetime
            base = datetime.datetime(int(day[0:4]), int(day[5:7]), int(day[8:10]), tzinfo=datetime.timezone.utc).timestamp()
            _DAY_CACHE[day] = base
        return base + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + float(ts[17:].replace(",", ".") or 0)
    except ValueError:
        return NAN


def batch_fields(msg: str) -> dict[str, str]:
    """'Decode batch, #running-req: 2, token usage: 0.4, …' -> {'#running-req': '2', 'token usage': '0.4', …}"""
    out = {}
    for part in msg.split(", "):
        key, sep, value = part.rpartition(": ")
        if sep:
            out[key.rsplit(". ", 1)[-1]] = value.rstrip(", ")
    return out


def row_of(msg: str) -> tuple:
    """The values of one batch line (the message after the log prefix), in COLUMNS order less kind/line/ts."""
    vals = batch_fields(msg)
    return (_f(vals.get("#running-req")), _f(vals.get("#queue-req")),
            _f(vals.get("token usage", vals.get("full token usage"))),
            _f(vals.get("#token", vals.get("#full token", vals.get("#new-token")))),
            _f(vals.get("gen throughput (token/s)", vals.get("input throughput (token/s)"))),
            _f(vals.get("mamba usage")), _f(vals.get("accept len")))


_PLAIN = re.compile(r"[0-9]{1,30}(?:\.[0-9]{1,30})?").fullmatch


def _f(v: str | None) -> float:
    if v is None:
        return NAN
    if len(v) <= 31 and _PLAIN(v):      # at most 30 digits: what to_float reads as float(v)
        return float(v)
    if v in ("True", "False"):
        return 1.0 if v == "True" else 0.0
    f = to_float(v)
    return NAN if f is None else f


class _Fine:
    """Fine buckets of equal width on one axis: key = floor(x / width), the width a power of two
    that doubles (neighbours merge) whenever the keys would span more than FINE buckets. The grid
    does not depend on the order rows came in: the same rows give the same cells."""

    __slots__ = ("width", "cells", "lo", "hi")

    def __init__(self, width: float = 1.0) -> None:
        self.width = width
        self.cells: dict[int, list] = {}
        self.lo = math.inf
        self.hi = -math.inf

    def _fit(self, lo: float, hi: float) -> None:
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        while self.hi // self.width - self.lo // self.width >= FINE:
            self.width *= 2
            merged: dict[int, list] = {}
            for k, cell in self.cells.items():
                have = merged.get(k // 2)
                if have is None:
                    merged[k // 2] = cell          # the old grid is dropped: its cells are taken, not copied
                else:
                    _merge(merged, k // 2, cell)
            self.cells = merged

    def key(self, x: float) -> int:
        return int(x // self.width)

    def add_cells(self, lo: float, hi: float, cells) -> None:
        """cells: (x, (n, sum_x, last_line, [min, max, last] * SERIES, thr_sum, thr_n)) for x in the cell."""
        self._fit(lo, hi)
        for x, cell in cells:
            _merge(self.cells, self.key(x), cell)


def _cell(n, sum_x, line, values, kind) -> list:
    """A cell of one row: values in SERIES order (throughput counted on decode rows only)."""
    out = [n, sum_x, line]
    for name, v in zip(SERIES, values):
        if name == "throughput" and kind != 1:
            v = NAN
        out += [v, v, v] if v == v else [math.inf, -math.inf, NAN]
    thr = values[3]
    known = kind == 1 and thr == thr
    out += [thr if known else 0.0, 1 if known else 0]
    return out


def _merge(cells: dict, key: int, cell: list) -> None:
    have = cells.get(key)
    if have is None:
        cells[key] = list(cell)
        return
    later = cell[2] >= have[2]
    have[0] += cell[0]
    have[1] += cell[1]
    for i in range(3, 3 + 3 * len(SERIES), 3):
        if cell[i] < have[i]:
            have[i] = cell[i]
        if cell[i + 1] > have[i + 1]:
            have[i + 1] = cell[i + 1]
        if cell[i + 2] == cell[i + 2] and (later or have[i + 2] != have[i + 2]):
            have[i + 2] = cell[i + 2]
    if later:
        have[2] = cell[2]
    have[-2] += cell[-2]
    have[-1] += cell[-1]


class BatchSeries:
    """Prefill/decode statistics of one rank: the last rows in full, the rest in fine buckets."""

    def __init__(self, rank: str | None = None) -> None:
        self.rank = rank
        self.count = 0
        self.untimed = 0                      # rows without a timestamp
        self.first_line: int | None = None
        self.last_line: int | None = None
        self.max_running = NAN
        self._cols = {c: array(_TYPES.get(c, "d")) for c in COLUMNS}   # the last rows, in full
        self._frames: list = []               # the fast reader's rows, not yet folded in (polars)
        self._framed = 0
        self._time = _Fine(1 / 64)     # seconds
        self._line = _Fine(1.0)        # line numbers
        self._spilled = 0                     # rows that left the full rows (they are in the buckets only)
        self._unsorted = False                # full rows out of line order (two readers added them)
        self._marks_first: dict[int, int] = {}
        self._marks_last: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        return self.count

    # -- input ---------------------------------------------------------------------------
    def add(self, lineno: int, ts: str | None, msg: str) -> None:
        """One batch line (the message after the log prefix)."""
        self._flush_frames()
        sec = ts_seconds(ts)
        vals = row_of(msg)
        c = self._cols
        if len(c["line"]) and lineno < c["line"][-1]:
            self._unsorted = True
        kind = 1 if msg.startswith("Decode") else 0
        c["kind"].append(kind)
        c["line"].append(lineno)
        c["ts"].append(sec)
        for name, v in zip(COLUMNS[3:], vals):
            c[name].append(v)
        self._count_row(lineno, sec, vals[0])
        if len(c["line"]) >= 2 * KEEP:
            self._spill(len(c["line"]) - KEEP)

    def add_rows(self, kinds: list, lines: list, secs: list, values: list) -> None:
        """Rows in line order, column by column (the small reader, diag/scan.py): kinds 0/1, line
        numbers, seconds (nan when untimed), and `values` the lists of COLUMNS[3:] in that order.
        The same state as `add` called row by row (the full rows, the counts, the spill at 2*KEEP)."""
        if not lines:
            return
        self._add_columns(len(lines), lines[0], lines[-1], sum(1 for s in secs if s != s),
                          max((r for r in values[0] if r == r), default=NAN),
                          [kinds, lines, secs, *values], "extend")

    def add_arrays(self, rows: tuple) -> None:
        """Rows in line order from the C classifier (diag/_lines.c: classify's rows): (count, line
        numbers int64, kinds int8, seconds float64, the 7 value columns of COLUMNS[3:] as float64
        bytes, untimed rows, the highest running, first line, last line). The same state as
        add_rows with those columns."""
        n, lines, kinds, secs, values, untimed, top, first, last = rows
        if n:
            self._add_columns(n, first, last, untimed, top, [kinds, lines, secs, *values], "frombytes")

    def _add_columns(self, n: int, first: int, last: int, untimed: int, top: float, cols: list, how: str) -> None:
        """n rows, one column each of COLUMNS in order, appended with the arrays' `how` (extend for
        lists, frombytes for machine values), and the counts `add` would have kept."""
        self._flush_frames()
        c = self._cols
        if len(c["line"]) and first < c["line"][-1]:
            self._unsorted = True
        for name, col in zip(COLUMNS, cols):
            getattr(c[name], how)(col)
        self.count += n
        self.untimed += untimed
        if self.first_line is None or first < self.first_line:
            self.first_line = first
        if self.last_line is None or last > self.last_line:
            self.last_line = last
        if top == top and not top <= self.max_running:
            self.max_running = top
        while len(c["line"]) >= 2 * KEEP:      # where `add` would have spilled, row by row
            self._spill(KEEP)

    def _count_row(self, lineno: int, sec: float, running: float) -> None:
        self.count += 1
        if sec != sec:
            self.untimed += 1
        if self.first_line is None or lineno < self.first_line:
            self.first_line = lineno
        if self.last_line is None or lineno > self.last_line:
            self.last_line = lineno
        if running == running and not running <= self.max_running:
            self.max_running = running

    def add_frame(self, df) -> None:
        """Rows of one chunk from the fast reader: a polars DataFrame with the COLUMNS (kind 0/1, line,
        ts in seconds or null, the series as floats or null), in line order."""
        n = df.height
        if not n:
            return
        import polars as pl
        self.count += n
        self.untimed += df["ts"].null_count() + int(df["ts"].is_nan().sum() or 0)
        lines = df["line"]
        lo, hi = int(lines.min()), int(lines.max())
        self.first_line = lo if self.first_line is None else min(self.first_line, lo)
        self.last_line = hi if self.last_line is None else max(self.last_line, hi)
        top = df["running"].max()
        if top is not None and top == top and not top <= self.max_running:
            self.max_running = float(top)
        self._frames.append(df.select([pl.col(c).cast(pl.Int8 if c == "kind" else pl.Int64 if c == "line" else pl.Float64)
                                       for c in COLUMNS]))
        self._framed += n
        if self._framed >= 2 * KEEP:
            self._fold_frames(keep=KEEP)

    def mark(self, lineno: int, kind: int | None = None) -> None:
        """An event was made at this line: remember the kind of the batch before it (given by the fast
        reader, which adds a chunk's rows before its events; else the last row added)."""
        if kind is None:
            self._flush_frames()
            kind = self._cols["kind"][-1] if len(self._cols["kind"]) else -1
        if len(self._marks_first) < MARKS:
            self._marks_first[lineno] = kind
            return
        self._marks_last[lineno] = kind
        if len(self._marks_last) > MARKS:
            self._marks_last.popitem(last=False)

    # -- the bounded store -------------------------------------------------------------------
    def _spill(self, n: int) -> None:
        """The oldest n full rows go to the buckets only."""
        c = self._cols
        native = _native()
        if native is not None:
            # the same cells in C (diag/_lines.c: fold), the fine grid fitted first as add_cells does
            series = [c[s] for s in SERIES]
            for fine, by_line, xs in ((self._time, False, c["ts"]), (self._line, True, c["line"])):
                lo, hi, count = native.span(xs, n)
                if count:
                    fine._fit(lo, hi)
                    native.fold(c["kind"], c["line"], c["ts"], series, n, by_line, fine.width, fine.cells)
        else:
            rows = [(c["kind"][i], c["line"][i], c["ts"][i], tuple(c[s][i] for s in SERIES)) for i in range(n)]
            self._bucket_list(rows)
        for name in COLUMNS:
            del c[name][:n]
        self._spilled += n

    def _bucket_list(self, rows) -> None:
        timed = [(r[2], _cell(1, r[2], r[1], r[3], r[0])) for r in rows if r[2] == r[2]]
        if timed:
            xs = [t for t, _ in timed]
            self._time.add_cells(min(xs), max(xs), timed)
        lines = [(float(r[1]), _cell(1, float(r[1]), r[1], r[3], r[0])) for r in rows]
        if lines:
            self._line.add_cells(min(x for x, _ in lines), max(x for x, _ in lines), lines)

    def _fold_frames(self, keep: int) -> None:
        """Rows of the fast reader beyond the last `keep` go to the buckets (vectorised)."""
        import polars as pl
        df = pl.concat(self._frames, rechunk=False)
        self._frames = []
        self._framed = 0
        cut = max(0, df.height - keep)
        if cut:
            old = df.slice(0, cut)
            self._bucket_frame(old, "ts", self._time)
            self._bucket_frame(old.with_columns(pl.col("line").cast(pl.Float64).alias("x")), "x", self._line)
            self._spilled += cut
            df = df.slice(cut)
        if df.height:
            self._frames = [df.rechunk()]
            self._framed = df.height

    def _bucket_frame(self, df, xcol: str, fine: _Fine) -> None:
        import polars as pl
        df = df.filter(pl.col(xcol).is_not_null() & pl.col(xcol).is_not_nan())
        if not df.height:
            return
        fine._fit(float(df[xcol].min()), float(df[xcol].max()))
        key = (pl.col(xcol) / fine.width).floor().cast(pl.Int64).alias("_k")
        thr = pl.when(pl.col("kind") == 1).then(pl.col("throughput")).otherwise(None)
        aggs = [pl.len().alias("_n"), pl.col(xcol).sum().alias("_sx"), pl.col("line").max().alias("_line")]
        for name in SERIES:
            col = (thr if name == "throughput" else pl.col(name)).fill_nan(None)
            aggs += [col.min().alias(f"{name}_min"), col.max().alias(f"{name}_max"), col.drop_nulls().last().alias(f"{name}_last")]
        aggs += [thr.fill_nan(None).sum().alias("_ts"), thr.fill_nan(None).count().alias("_tn")]
        out = df.group_by(key).agg(aggs)
        for row in out.iter_rows():
            cell = [row[1], row[2], row[3]]
            for i in range(len(SERIES)):
                mn, mx, last = row[4 + 3 * i: 7 + 3 * i]
                cell += [math.inf if mn is None else mn, -math.inf if mx is None else mx, NAN if last is None else last]
            cell += [row[-2] or 0.0, row[-1] or 0]
            _merge(fine.cells, row[0], cell)

    @staticmethod
    def _frame_of(c: dict):
        """Full rows as a polars DataFrame of the COLUMNS (the dtypes add_frame keeps)."""
        import polars as pl
        return pl.DataFrame({name: pl.Series(name, c[name].tolist(), dtype=pl.Int8 if name == "kind" else
                                             pl.Int64 if name == "line" else pl.Float64) for name in COLUMNS})

    def _flush_frames(self) -> None:
        """The fast reader's rows (the last KEEP of them) become full rows."""
        if not self._frames:
            return
        c = self._cols
        held = len(c["line"])
        if held and held + self._framed > KEEP + 1024:
            # full rows held (from the parser) that the fold would push out: they join the fast
            # reader's rows, in the order they came, and go to the buckets in the same vectorised
            # fold rather than row by row
            if self._frames[0]["line"][0] < c["line"][-1]:
                self._unsorted = True
            self._frames.insert(0, self._frame_of(c))
            self._framed += held
            self._cols = c = {name: array(_TYPES.get(name, "d")) for name in COLUMNS}
        self._fold_frames(keep=KEEP)
        df = self._frames[0] if self._frames else None
        self._frames, self._framed = [], 0
        if df is None:
            return
        if len(c["line"]) and df["line"][0] < c["line"][-1]:
            self._unsorted = True
        for name in COLUMNS:
            values = df[name].to_list()
            if name not in _TYPES:
                values = [NAN if v is None else v for v in values]
            c[name].extend(values)
        if len(c["line"]) > KEEP:
            self._spill(len(c["line"]) - KEEP)

    def finish(self) -> None:
        """Fold what the fast reader left pending (called once reading ends; the readers call it too)."""
        self._flush_frames()
        if self._unsorted:  # rows from two readers (the parser's and the fast reader's)
            self._unsorted = False
            c = self._cols
            lines = c["line"]
            order = sorted(range(len(lines)), key=lines.__getitem__)
            for name in COLUMNS:
                c[name] = array(c[name].typecode, map(c[name].__getitem__, order))

    # -- readers ---------------------------------------------------------------------------
    @property
    def rows(self) -> dict[str, array]:
        """The rows kept in full (the last ones), column by column."""
        self.finish()
        return self._cols

    # the columns of the rows kept in full (all rows unless `complete` is False: then the last KEEP)
    kind = property(lambda self: self.rows["kind"])
    line = property(lambda self: self.rows["line"])
    ts = property(lambda self: self.rows["ts"])
    running = property(lambda self: self.rows["running"])
    queue = property(lambda self: self.rows["queue"])
    usage = property(lambda self: self.rows["usage"])
    tokens = property(lambda self: self.rows["tokens"])
    throughput = property(lambda self: self.rows["throughput"])
    mamba_usage = property(lambda self: self.rows["mamba_usage"])
    accept_len = property(lambda self: self.rows["accept_len"])

    @property
    def complete(self) -> bool:
        """Every row of the log is kept in full."""
        self.finish()
        return self._spilled == 0

    def between(self, first: int, last: int) -> "BatchSeries":
        """A series of the full rows with first <= line <= last (one run of a log, diag/fleet)."""
        c = self.rows
        i, j = bisect.bisect_left(c["line"], first), bisect.bisect_right(c["line"], last)
        out = BatchSeries(rank=self.rank)
        for k in range(i, j):
            for name in COLUMNS:
                out._cols[name].append(c[name][k])
            out._count_row(c["line"][k], c["ts"][k], c["running"][k])
        return out

    def tail(self, n: int) -> dict[str, array]:
        """The last n rows kept in full (fewer when fewer are kept), column by column, in log order:
        what a live reader (diag watch) reads its window from, whatever the log's length."""
        c = self.rows
        k = min(max(n, 0), len(c["line"]))
        return {name: c[name][len(c[name]) - k:] for name in COLUMNS}

    def row(self, i: int) -> dict:
        """Full row i of those kept (negative from the end)."""
        c = self.rows
        return {name: c[name][i] for name in COLUMNS}

    def last(self) -> dict | None:
        """The last batch row of the log."""
        return self.row(-1) if len(self.rows["line"]) else None

    def last_rows(self, n: int, kind: int | None = None) -> list[dict]:
        """The last n rows (of one kind: 1 decode, 0 prefill), in log order."""
        c = self.rows
        out = []
        for i in range(len(c["line"]) - 1, -1, -1):
            if kind is None or c["kind"][i] == kind:
                out.append(self.row(i))
                if len(out) >= n:
                    break
        return out[::-1]

    def kind_before(self, line: int) -> str | None:
        """'decode' or 'prefill': the kind of the last batch line at or before this line."""
        c = self.rows
        lines = c["line"]
        i = bisect.bisect_right(lines, line) - 1
        if i >= 0:
            return "decode" if c["kind"][i] == 1 else "prefill"
        if self._spilled == 0:
            return None
        kind = self._marks_first.get(line, self._marks_last.get(line))
        if kind is None:  # not an event line: the nearest one before it that was marked
            known = [(n, k) for n, k in itertools.chain(self._marks_first.items(), self._marks_last.items()) if n <= line]
            kind = max(known)[1] if known else -1
        return None if kind == -1 else ("decode" if kind == 1 else "prefill")

    def timeline(self, buckets: int) -> dict | None:
        """At most `buckets` buckets of equal width on the axis: per bucket the mean position, the
        number of batch lines and min/max/last of each series (throughput: its mean too, over decode
        lines only). The axis is seconds since the epoch when every row has a timestamp, else line
        numbers. Exact while every row is kept in full; from the fine buckets otherwise."""
        if not self.count:
            return None
        timed = self.untimed == 0
        if self.complete:
            return _exact(self._cols, timed, buckets)
        src = self._time if timed else self._line
        fine = _Fine(src.width)
        fine.cells = {k: list(v) for k, v in src.cells.items()}
        fine.lo, fine.hi = src.lo, src.hi
        c = self._cols
        native = _native()
        if native is not None:
            n = len(c["line"])
            lo, hi, count = native.span(c["ts"] if timed else c["line"], n)
            if count:
                fine._fit(lo, hi)
                native.fold(c["kind"], c["line"], c["ts"], [c[s] for s in SERIES], n, not timed, fine.width, fine.cells)
        elif len(c["line"]) >= 2048 and "polars" in sys.modules:   # the fast reader's polars is loaded: vectorised
            df = self._frame_of(c)
            if timed:
                self._bucket_frame(df, "ts", fine)
            else:
                import polars as pl
                self._bucket_frame(df.with_columns(pl.col("line").cast(pl.Float64).alias("x")), "x", fine)
        else:
            rows = [(c["kind"][i], c["line"][i], c["ts"][i], tuple(c[s][i] for s in SERIES)) for i in range(len(c["line"]))]
            cells = [((r[2] if timed else float(r[1])), _cell(1, (r[2] if timed else float(r[1])), r[1], r[3], r[0]))
                     for r in rows]
            if cells:
                fine.add_cells(min(x for x, _ in cells), max(x for x, _ in cells), cells)
        lo, hi = fine.lo, fine.hi
        span = (hi - lo) or 1.0
        top = min(self.count, buckets) - 1
        out_cells: dict[int, list] = {}
        for k in sorted(fine.cells):
            cell = fine.cells[k]
            mean = cell[1] / cell[0]
            _merge(out_cells, min(top, max(0, int((mean - lo) / span * top))), cell)
        out = _empty()
        shift = lo if timed else 0.0
        for k in sorted(out_cells):
            cell = out_cells[k]
            out["x"].append(cell[1] / cell[0] - shift)
            out["lines"].append(cell[0])
            for i, name in enumerate(SERIES):
                mn, mx, last = cell[3 + 3 * i: 6 + 3 * i]
                known = mn != math.inf
                out[name]["min"].append(mn if known else None)
                out[name]["max"].append(mx if known else None)
                out[name]["last"].append(last if known and last == last else None)
            out["throughput"]["mean"].append(round(cell[-2] / cell[-1], 6) if cell[-1] else None)  # sums differ in the last bits
        return {"timed": timed, "lo": lo, "hi": hi, "span": span, "exact": False, "buckets": out}


def _empty() -> dict:
    out: dict = {"x": [], "lines": [], **{name: {stat: [] for stat in STATS} for name in SERIES}}
    out["throughput"]["mean"] = []
    return out


def _exact(cols: dict, timed: bool, buckets: int) -> dict:
    """The timeline from every row (one pass over the columns, no object per line)."""
    x = cols["ts"] if timed else array("d", cols["line"])
    lo, hi = min(x), max(x)
    span = (hi - lo) or 1.0
    top = min(len(x), buckets) - 1
    keys = array("H", (int((v - lo) / span * top) for v in x))  # the bucket of each line (floor: v >= lo)
    columns = {"x": x, "kind": cols["kind"], **{name: cols[name] for name in SERIES}}
    shift = lo if timed else 0.0
    out = _empty()
    for rows in _bucket_rows(keys):
        def take(name: str) -> list:
            col = columns[name]
            return list(col[rows]) if isinstance(rows, slice) else [col[i] for i in rows]

        xs = take("x")
        out["x"].append(math.fsum(xs) / len(xs) - shift)
        out["lines"].append(len(xs))
        kinds = take("kind")
        for name in SERIES:
            if name == "throughput":  # decode lines only
                known = [v for v, k in zip(take(name), kinds) if k == 1 and v == v]
            else:
                known = [v for v in take(name) if v == v]
            stats = out[name]
            stats["min"].append(min(known) if known else None)
            stats["max"].append(max(known) if known else None)
            stats["last"].append(known[-1] if known else None)
            if name == "throughput":
                stats["mean"].append(math.fsum(known) / len(known) if known else None)
    return {"timed": timed, "lo": lo, "hi": hi, "span": span, "exact": True, "buckets": out}


def _bucket_rows(keys: array):
    """The rows of each non-empty bucket in bucket order, lines in log order within one: slices
    when the lines are in order on the axis, else index arrays (a counting sort, no object per line)."""
    if all(k1 <= k2 for k1, k2 in zip(keys, itertools.islice(keys, 1, None))):
        start = 0
        while start < len(keys):
            end = bisect.bisect_right(keys, keys[start], lo=start)
            yield slice(start, end)
            start = end
        return
    counts = [0] * (max(keys) + 1)
    for k in keys:
        counts[k] += 1
    first = list(itertools.accumulate([0] + counts[:-1]))
    at, order = list(first), array("I", bytes(4 * len(keys)))
    for i, k in enumerate(keys):
        order[at[k]] = i
        at[k] += 1
    for k, n in enumerate(counts):
        if n:
            yield order[first[k]:first[k] + n]
