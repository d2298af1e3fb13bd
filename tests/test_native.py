"""The C classifier (diag/_lines.c) against the patterns it stands for (diag/scan.py's regexes) and
the C fold against batches.py's row-by-row fold, on generated lines and rows.

classify() matches PREFIX, BATCH, HTTP_OK, BLANK, EMBEDDED and the batch-line layouts by hand; each
line here is built from pieces of those shapes with one piece bent (a digit too many, a space
missing, another rank, a stray comma, a byte past ASCII), and the classes, flags, timestamps,
ranks and values must be what the regexes read. Where the module was not built (no C compiler)
these tests skip, unless DIAG_REQUIRE_NATIVE is set (make test sets it: a C file that no longer
compiles fails there rather than passing on the fallback).
"""
from __future__ import annotations

import datetime
import math
import os
import random
import re
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag import scan
from diag.native import lines as native_lines
from diag.parse import batches as B

L = native_lines()
if L is None:
    if os.environ.get("DIAG_REQUIRE_NATIVE"):
        raise RuntimeError("diag._lines was not built (setup.py): DIAG_REQUIRE_NATIVE is set")
    pytest.skip("diag._lines not built here", allow_module_level=True)

PREFIX = re.compile(scan.PREFIX)
BATCH = re.compile(scan.BATCH)
HTTP = re.compile(scan.HTTP_OK)
BLANK = re.compile(scan.BLANK)
EMBEDDED = re.compile(scan.EMBEDDED)

DECODE = "[2026-05-14 10:00:01 TP0] Decode batch, #running-req: 12, #token: 4012, token usage: 0.31, cuda graph: True, " \
         "gen throughput (token/s): 801.20, #queue-req: 0"
PREFILL = "[2026-05-14 10:00:02 TP0] Prefill batch, #new-seq: 3, #new-token: 512, #cached-token: 0, token usage: 0.31, " \
          "#running-req: 4, #queue-req: 1, "
LAYOUTS = [scan._frame_layout(DECODE), scan._frame_layout(PREFILL),
           scan._frame_layout(DECODE.replace("Decode batch,", "Decode batch.").replace(", #token", ", #token", 1))]

pieces = st.sampled_from
stamp = st.builds(lambda d, t, f: f"{d} {t}{f}",
                  pieces(["2026-05-14", "2026-02-29", "2024-02-29", "2026-13-01", "0001-01-01", "2026-5-14", "1999-12-31"]),
                  pieces(["10:00:01", "23:59:59", "00:00:00", "10:0:01", "99:99:99"]),
                  pieces(["", ".5", ",123", ".123456", ".", ",", ".1234567890123456789"]))
ranks = pieces(["", " TP0", " TP1", " DP0 TP0", " TP0 EP0", " ATTN_CP3", " MOE_DP1 TP2", " TP", " tp0", "  TP0", " TP0 "])
value = pieces(["12", "0", "0.31", "801.20", "1234567890123456", "123456789012345", "1.1234567890123456", "x", "", "True",
                "12.", ".5", "3e5", "-1", "00012", "0.000000000000001"])
gap = pieces(["", " ", "\t", "  "])


@st.composite
def batch_line(draw):
    kind = draw(pieces(["Decode batch", "Prefill batch", "Decode batch.", "decode batch"]))
    if kind.lower().startswith("decode"):
        parts = ["#running-req", "#token", "token usage", "cuda graph", "gen throughput (token/s)", "#queue-req"]
    else:
        parts = ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req"]
    body = [f"{k}: {draw(value)}" for k in parts]
    if draw(st.booleans()):
        body.insert(draw(st.integers(0, len(body))), f"accept len: {draw(value)}")
    text = ("Decode batch. " if kind == "Decode batch." else kind + ", ") + ", ".join(body)
    tail = draw(pieces(["", ", ", ",", " RuntimeError: x", " [2026-05-14 10:00:00] next", "é"]))
    return f"[{draw(stamp)}{draw(ranks)}]{draw(gap)}{text}{tail}"


@st.composite
def access_line(draw):
    head = draw(pieces(["[{}{}]", "[{}{}] ", "INFO: ", "INFO:     ", "", "[{}{}]INFO:   "]))
    if "{}" in head:
        head = head.format(draw(stamp), draw(ranks))
    host = draw(pieces(["INFO:     10.0.3.4:41234 ", "10.0.3.4:41234 ", "::1:5 ", "[::1]:5 ", "", "host:1 ", "INFO: x "]))
    method = draw(pieces(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]))
    path = draw(pieces(["/generate", "/v1/chat/completions", "/health?x=1", "", "/a b"]))
    ver = draw(pieces(["1.1", "2", "", "1.x"]))
    code = draw(pieces(["200 OK", "307", "404", "503 Service Unavailable", "2", "299"]))
    return f'{head}{host}- "{method} {path} HTTP/{ver}" {code}'


other = pieces(["", "   ", "\t", " \t ", "Killed", "[2026-05-14 10:00:00 TP0] Load weight begin. avail mem=78.31 GB",
                "[2026-05-14 10:00:00] The server is fired up and ready to roll!", "x [2026-05-14 10:00:00 TP0] y",
                "x[2026-05-14 10:00:00", "pid=3 ```", "\x1b[31mred", "café", "[2026-05-14T10:00:00 TP0] ok"])
line_st = st.one_of(batch_line(), access_line(), other)


def _expect(line: str, rank: str, words: list[str], sig: bool) -> dict:
    """What the polars path makes of one line (scan._block/_block_known/_classes), from the regexes."""
    m = PREFIX.match(line)
    dirty = bool(EMBEDDED.search(line)) or any(w in line for w in words) or not line.isascii()
    batch = bool(BATCH.match(line))
    http = bool(HTTP.match(line))
    mine = batch and (m[2].strip(" ") == rank)
    clean = not dirty and not sig
    row = None
    if mine and clean:
        head = r"^\[(" + scan.TS + ")" + (re.escape(" " + rank) if rank else "") + r"\]" + scan._SP + "?"
        for lay in LAYOUTS:
            if re.match(head + lay[3], line):
                row = lay
                break
    if batch:
        cls = 5 if not mine and clean else 0 if not mine else 1 if row else 6 if clean else 0
    elif http:
        cls = 2 if clean else 0
    else:
        cls = 3 if clean and BLANK.match(line) else 0
    return dict(m=m, batch=batch, http=http and not batch, mine=mine, dirty=dirty, cls=cls, row=row)


def _seconds(ts: str) -> float:
    """scan._seconds: the date as polars reads it, then hours, minutes and the seconds' float."""
    try:
        day = (datetime.date(int(ts[:4]), int(ts[5:7]), int(ts[8:10])) - datetime.date(1970, 1, 1)).days
    except ValueError:
        return math.nan
    return float(day * 86400 + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60) + float(ts[17:].replace(",", ".") or 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(line_st, min_size=1, max_size=30), st.sampled_from(["TP0", "", "DP0 TP0"]),
       st.lists(st.sampled_from(scan.DIRTY_WORDS), max_size=2, unique=True), st.data())
def test_classes_flags_and_values_are_the_patterns(lines, rank, words, data):
    lines = [l.replace("\n", " ").replace("\r", " ") for l in lines]
    text = "".join(l + "\n" for l in lines).encode()
    sig_rows = sorted(data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=3)))
    starts = [0]
    for l in lines:
        starts.append(starts[-1] + len(l.encode()) + 1)
    marks = array("q", [starts[i] + len(lines[i].encode()) // 2 for i in sig_rows]).tobytes()
    n, offs, cls, flags, tse, rk, rank_names, kb, last_kind, rows = L.classify(
        text, marks, tuple(w.encode() for w in words), rank.encode(), [lay[4] for lay in LAYOUTS], 7, scan.MAX_LINE)
    assert n == len(lines)
    assert list(memoryview(offs).cast("q")) == starts
    tse = memoryview(tse).cast("i")
    got_rows = [i for i in range(n) if cls[i] == 1]
    kind = 2
    for i, line in enumerate(lines):
        want = _expect(line, rank, words, i in sig_rows)
        f = flags[i]
        assert cls[i] == want["cls"], (line, cls[i], want)
        assert bool(f & scan._PREFIXED) == bool(want["m"]), line
        assert bool(f & scan._BATCH) == want["batch"], line
        assert bool(f & scan._HTTP) == want["http"], line
        assert bool(f & scan._SIG) == (i in sig_rows)
        if line.isascii():
            assert bool(f & scan._DIRTY) == want["dirty"], line
        if want["m"]:
            assert line[1:tse[i]] == want["m"][1], line
            stripped = want["m"][2].strip(" ")
            assert (rank_names[rk[i] - 1].decode() if rk[i] else "") == stripped
        else:
            assert tse[i] == 0 and rk[i] == 0
        assert kb[i] == kind, line                     # the kind of the kept rank's last batch line before it
        if want["mine"]:
            kind = 1 if "Decode batch" in line else 0
    assert last_kind == kind
    count, line_b, kind_b, ts_b, values, untimed, top, first, last = rows
    assert count == len(got_rows)
    assert list(memoryview(line_b).cast("q")) == [7 + i for i in got_rows]
    assert list(kind_b) == [_expect(lines[i], rank, words, False)["row"][2] for i in got_rows]
    secs = list(memoryview(ts_b).cast("d"))
    cols = [list(memoryview(v).cast("d")) for v in values]
    for j, i in enumerate(got_rows):
        line = lines[i]
        ts = PREFIX.match(line)[1]
        want = _seconds(ts)
        assert (secs[j] == want) or (math.isnan(secs[j]) and math.isnan(want)), (ts, secs[j], want)
        lay = _expect(line, rank, words, False)["row"]
        parts = line.split(", ")
        for c, name in enumerate(scan.FIELDS):
            slot = lay[1].get(name)
            if slot is None:
                assert math.isnan(cols[c][j])
                continue
            k, width = slot
            text_value = parts[k][width:] if k else parts[k].split(": ")[-1]
            assert cols[c][j] == float(text_value), (line, name)
    assert untimed == sum(1 for x in secs if x != x)
    if got_rows:
        assert (first, last) == (7 + got_rows[0], 7 + got_rows[-1])


def test_a_learned_layout_takes_the_line_it_was_learned_from():
    for line in (DECODE, PREFILL, DECODE.replace(", cuda graph: True", ""), DECODE + ", accept len: 1.5",
                 DECODE.replace("TP0", "DP1 TP0").replace("] Decode batch,", "]Decode batch,")):
        lay = scan._frame_layout(line)
        m = PREFIX.match(line)
        rank = m[2].strip(" ")
        got = L.classify((line + "\n").encode(), b"", (), rank.encode(), [lay[4]], 1, scan.MAX_LINE)
        assert got[2][0] == 1, line


def _rows(k: int, seed: int):
    rnd = random.Random(seed)
    kind = array("b", [rnd.randrange(2) for _ in range(k)])
    line = array("q", sorted(rnd.sample(range(1, 10 * k), k)))
    ts = array("d", [rnd.choice([math.nan, 1.7e9 + rnd.uniform(0, 5000)]) for _ in range(k)])
    series = [array("d", [rnd.choice([math.nan, rnd.uniform(0, 300), float(rnd.randrange(9))]) for _ in range(k)])
              for _ in B.SERIES]
    return kind, line, ts, series


@pytest.mark.parametrize("seed", range(6))
def test_the_fold_is_the_row_by_row_fold(seed):
    k = 3000
    kind, line, ts, series = _rows(k, seed)
    rows = [(kind[i], line[i], ts[i], tuple(s[i] for s in series)) for i in range(k)]
    for by_line, width in ((False, 1 / 64), (False, 8.0), (True, 1.0), (True, 64.0)):
        want: dict = {}
        for r in rows:
            x = float(r[1]) if by_line else r[2]
            if x == x:
                B._merge(want, int(x // width), B._cell(1, x, r[1], r[3], r[0]))
        got = dict(L.fold(kind, line, ts, series, k, by_line, width))
        assert got.keys() == want.keys()
        for key in want:
            assert [None if v != v else v for v in got[key]] == [None if v != v else v for v in want[key]], key
        # merged into a grid that holds cells already: batches._merge of each
        grid = {key: list(cell) for key, cell in list(want.items())[::2]}
        ref = {key: list(cell) for key, cell in grid.items()}
        for key, cell in sorted(got.items()):
            B._merge(ref, key, cell)
        assert L.fold(kind, line, ts, series, k, by_line, width, grid) is None
        assert {key: [None if v != v else v for v in c] for key, c in grid.items()} == \
               {key: [None if v != v else v for v in c] for key, c in ref.items()}
    lo, hi, count = L.span(ts, k)
    valid = [x for x in ts if x == x]
    assert (lo, hi, count) == (min(valid), max(valid), len(valid))
    assert L.span(line, k) == (float(min(line)), float(max(line)), k)


def test_spilled_buckets_are_those_of_the_python_fold(monkeypatch):
    """A series of more than 2 * KEEP rows: the same buckets and timeline with and without the C fold."""
    monkeypatch.setattr(B, "KEEP", 2048)

    def build():
        s = B.BatchSeries("TP0")
        kind, line, ts, series = _rows(3 * B.KEEP, 11)
        full = {"running": series[0], "queue": series[1], "usage": series[2], "throughput": series[3], "mamba_usage": series[4]}
        for i in range(len(line)):
            vals = (full["running"][i], full["queue"][i], full["usage"][i], 7.0, full["throughput"][i],
                    full["mamba_usage"][i], math.nan)
            s._cols["kind"].append(kind[i])
            s._cols["line"].append(line[i])
            s._cols["ts"].append(ts[i])
            for name, v in zip(B.COLUMNS[3:], vals):
                s._cols[name].append(v)
            s._count_row(line[i], ts[i], vals[0])
            if len(s._cols["line"]) >= 2 * B.KEEP:
                s._spill(len(s._cols["line"]) - B.KEEP)
        return s

    def same(a: dict, b: dict) -> bool:
        # the sums (position, throughput) are added in another order (a spill's cell, then into the
        # grid's): equal to 1e-12; everything else exactly
        if a.keys() != b.keys():
            return False
        for k in a:
            for i, (x, y) in enumerate(zip(a[k], b[k])):
                if i in (1, len(a[k]) - 2):
                    if not math.isclose(x, y, rel_tol=1e-12):
                        return False
                elif not (x == y or (x != x and y != y)):
                    return False
        return True

    with_c = build()
    monkeypatch.setenv("DIAG_NO_NATIVE", "1")
    without = build()
    assert same(with_c._time.cells, without._time.cells)
    assert same(with_c._line.cells, without._line.cells)
    assert with_c._time.width == without._time.width and with_c._line.width == without._line.width
    t_without = without.timeline(60)
    monkeypatch.delenv("DIAG_NO_NATIVE")
    assert with_c.timeline(60) == t_without


def test_bad_arguments_are_errors_not_crashes():
    with pytest.raises(TypeError):
        L.classify(b"x\n", b"", ("pid=",), b"TP0", [], 1, 10)          # words must be bytes
    with pytest.raises(ValueError):
        L.classify(b"x\n", b"123", (), b"TP0", [], 1, 10)               # marks are int64
    with pytest.raises(ValueError):
        L.classify(b"x\n", b"", (), b"TP0", [((b"a",), (9,), 1)], 1, 10)   # a column out of range
    with pytest.raises(TypeError):
        L.fold(array("b", [1]), array("d", [1.0]), array("d", [1.0]), [array("d", [1.0])] * 5, 1, False, 1.0)
    with pytest.raises(ValueError):
        L.fold(array("b", [1]), array("q", [1]), array("d", [1.0]), [array("d", [1.0])] * 5, 1, False, 0.0)
    assert L.classify(b"", b"", (), b"TP0", [], 1, 10)[0] == 0


def test_more_ranks_than_a_byte_counts_leave_the_chunk_to_polars(tmp_path):
    """A chunk naming more than 250 ranks is not classified in C (its rank ids are bytes): classify
    gives None and the reader reads that chunk with polars, the same report as line by line."""
    lines = [f"[2026-05-14 10:00:{k % 60:02d} TP{k}] Decode batch, #running-req: 1, #token: 5, token usage: 0.10, "
             f"cuda graph: True, gen throughput (token/s): 1.0, #queue-req: 0" for k in range(300)]
    data = ("\n".join(lines) + "\n").encode()
    assert L.classify(data, b"", (), b"TP0", [lay[4] for lay in LAYOUTS], 1, scan.MAX_LINE) is None
    from test_scan import report
    path = tmp_path / "ranks.log"
    path.write_text("\n".join(lines * 3 + ["RuntimeError: CUDA error: an illegal memory access was encountered"]) + "\n")
    assert report(path, fast=True) == report(path, fast=False)
