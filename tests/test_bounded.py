"""Bounded stores: the parser's events (diag/events.py) and batch statistics (diag/parse/batches.py)
keep a fixed amount whatever the log holds, and say the same as the full data where it matters."""
from __future__ import annotations

import math

import pytest

from diag.events import Event, EventStore
from diag.parse import batches as B
from diag.parse.sglang import LogParser


def test_event_store_keeps_the_first_and_last_of_each_kind():
    store = EventStore()
    for i in range(1000):
        store.append(Event("signal", 0, i + 1, "Killed"))
    store.append(Event("oom", 0, 2000, "OOM"))
    kept = list(store)
    assert len(store) == 1001 and store.counts["signal"] == 1000
    assert len(kept) == EventStore.FIRST + EventStore.LAST + 1
    assert [e.line for e in kept[:2]] == [1, 2] and kept[-2].line == 1000 and kept[-1].kind == "oom"
    assert store[1000:] == [kept[-1]]        # what the last line made
    assert store.dropped == 1000 - EventStore.FIRST - EventStore.LAST


def test_event_dense_log_keeps_the_parser_bounded():
    p = LogParser()
    for i in range(30_000):
        p.feed(i + 1, "Killed")
    p.finish()
    assert len(p.events) == 30_000
    assert len(list(p.events)) <= EventStore.FIRST + EventStore.LAST
    assert len(p.context) <= 4 * LogParser.CONTEXT_CAP


def _n(x):
    """NaN as None, in rows and lists of rows (NaN != NaN)."""
    if isinstance(x, dict):
        return {k: _n(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_n(v) for v in x]
    return None if isinstance(x, float) and x != x else x


def _rows(n):
    for i in range(n):
        yield (i + 1, f"2026-05-14 10:{i // 60 % 60:02d}:{i % 60:02d}",
               ("Decode batch, " if i % 3 else "Prefill batch, ") + f"#running-req: {i % 50}, #token: {i}, token usage: 0.{i % 100:02d}, "
               f"gen throughput (token/s): {i % 977}.5, #queue-req: {i % 7}")


def test_batch_series_spills_to_buckets(monkeypatch):
    monkeypatch.setattr(B, "KEEP", 500)
    full, small = B.BatchSeries(), B.BatchSeries()
    monkeypatch.setattr(B, "KEEP", 10**9)
    for row in _rows(3000):
        full.add(*row)
    monkeypatch.setattr(B, "KEEP", 500)
    for row in _rows(3000):
        small.add(*row)
    assert full.complete and not small.complete
    assert len(small) == len(full) == 3000 and len(small.rows["line"]) < 1000
    assert _n(small.last()) == _n(full.last()) and small.max_running == full.max_running == 49
    assert _n(small.last_rows(3, kind=1)) == _n(full.last_rows(3, kind=1))
    exact, approx = full.timeline(240), small.timeline(240)
    assert not approx["exact"] and exact["exact"]
    assert sum(approx["buckets"]["lines"]) == 3000 == sum(exact["buckets"]["lines"])
    assert max(approx["buckets"]["running"]["max"]) == 49
    assert approx["lo"] == exact["lo"] and approx["hi"] == exact["hi"]
    assert math.isclose(sum(x for x in approx["buckets"]["throughput"]["mean"] if x) / len(approx["buckets"]["x"]),
                        sum(x for x in exact["buckets"]["throughput"]["mean"] if x) / len(exact["buckets"]["x"]), rel_tol=0.05)


def test_kind_before_an_event_long_before_the_end(monkeypatch):
    monkeypatch.setattr(B, "KEEP", 200)
    b = B.BatchSeries()
    rows = list(_rows(2000))
    for row in rows[:100]:
        b.add(*row)
    b.mark(101)                        # an event right after line 100, a prefill line (i = 99)
    for row in rows[100:]:
        b.add(*row)
    assert not b.complete
    assert rows[99][2].startswith("Prefill") and b.kind_before(101) == "prefill"   # from the mark: line 100 left the rows
    assert b.kind_before(1999) == "prefill" and b.kind_before(2000) == "decode"


@pytest.mark.parametrize("frames", [1, 7])
def test_rows_from_frames_equal_rows_one_by_one(monkeypatch, frames):
    pl = pytest.importorskip("polars")
    monkeypatch.setattr(B, "KEEP", 300)
    one, bulk = B.BatchSeries(), B.BatchSeries()
    rows = []
    for lineno, ts, msg in _rows(2000):
        one.add(lineno, ts, msg)
        vals = B.row_of(msg)
        rows.append(dict(kind=1 if msg.startswith("Decode") else 0, line=lineno, ts=B.ts_seconds(ts), **dict(zip(B.COLUMNS[3:], vals))))
    step = len(rows) // frames + 1
    for k in range(0, len(rows), step):
        bulk.add_frame(pl.DataFrame(rows[k:k + step]))
    assert bulk.timeline(240) == one.timeline(240)
    assert _n(bulk.last()) == _n(one.last()) and len(bulk) == len(one)


def test_a_log_whose_later_lines_outgrow_the_sample_is_not_joined_into_one_record():
    """Prefix-less lines that grow longer than the first lines (counters gain digits): the longest
    sampled lines are no terminal's wrap width, and later, longer lines are never joined to their
    neighbours (each join copies the record so far: a chain over the whole log was quadratic; a
    60,000-line log of this shape took 30 s of CPU, 200,000 lines 527 s)."""
    import random
    from diag.clean import Cleaner
    rnd = random.Random(5)
    lines = [f"worker_{rnd.getrandbits(32):08x} state: cache_hit_rate={rnd.random():.3f} num_tokens_total={i * 37} "
             f"request_slot_index={i % 977}" for i in range(20000)]
    c = Cleaner()
    out = list(c.run(lines))
    assert c.info.wrap_width is None and len(out) == len(lines)
    # and where a paste does have a wrap width, one joined record stays under MAX_JOINED characters
    from diag.clean import MAX_JOINED
    body = "".join(chr(97 + rnd.randrange(26)) for _ in range(80_000))   # one 80,000-character record, wrapped at 80
    pasted = [body[i:i + 80] for i in range(0, len(body), 80)] + ["end"]
    c2 = Cleaner()
    out2 = list(c2.run(pasted))
    assert c2.info.wrap_width == 80
    assert all(len(t) <= MAX_JOINED + 80 for _, t in out2) and len(out2) >= 2
    assert sum(len(t) for _, t in out2) == len(body) + 3      # nothing lost
