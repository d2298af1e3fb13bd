"""The fast reader (diag/scan.py) against the line-by-line reader: the same report for every log.

Every log under tests/data goes through both readers (the fast one forced with
fast_min_bytes=0, which it otherwise takes only for inputs of several MiB) and the report JSON
must be identical, generated_at aside. Then the contract's edges on made-up logs: batch and
access lines around events (their evidence windows show the real neighbouring lines), a
failure signature inside a batch line, caps, CRLF, a last line without a newline, long lines.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from diag import jsonout
from diag.analyze import Options, analyze, analyze_with_facts

DATA = Path(__file__).parent / "data"
LOGS = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".gz", ".xz", ".bz2")
              and "smi" not in p.parts)


# the three readers: the fast one (polars, forced), the small one (pure Python, which diag takes
# for inputs under the fast reader's threshold) and the line-by-line reader every one must agree with
# ("polars": the fast reader without its C classifier, diag/_lines.c, as where it was not built)
READERS = {True: dict(fast_min_bytes=0), "polars": dict(fast_min_bytes=0), "small": dict(fast_min_bytes=1 << 62),
           False: dict(fast_min_bytes=1 << 62, small_reader=False)}
FAST = (True, "polars")


def report(path, fast, **kw) -> dict:
    """The report JSON through one reader: fast True (the fast reader), "polars" (the same without
    the C classifier), "small", or False (line by line)."""
    opts = Options(**READERS[fast], **kw)
    old = os.environ.get("DIAG_NO_NATIVE")
    if fast == "polars":
        os.environ["DIAG_NO_NATIVE"] = "1"
    try:
        out = json.loads(jsonout.dumps(analyze([str(path)], options=opts).to_json()))
    except Exception as exc:  # an input error must be the same error
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if fast == "polars" and old is None:
            del os.environ["DIAG_NO_NATIVE"]
    out.pop("generated_at", None)
    return out


def facts_of(path, reader):
    """The facts of one reader (as report())."""
    old = os.environ.get("DIAG_NO_NATIVE")
    if reader == "polars":
        os.environ["DIAG_NO_NATIVE"] = "1"
    try:
        return analyze_with_facts([str(path)], options=Options(**READERS[reader]))[1]
    finally:
        if reader == "polars" and old is None:
            del os.environ["DIAG_NO_NATIVE"]


# every hostile input, every compressed or .txt one, and every third log of the rest in
# path order (each labelled set, each layout is among them): three readers a log cost 30 ms, and the
# whole of tests/data took 15 s of the suite's 80; the made-up edge cases below take every reader, and
# `make fuzz` every log (DIAG_ALL_READER_LOGS=1)
READER_LOGS = LOGS if os.environ.get("DIAG_ALL_READER_LOGS") else \
    [p for i, p in enumerate(LOGS) if i % 3 == 0 or "hostile" in p.parts or p.suffix != ".log"]


@pytest.mark.parametrize("path", READER_LOGS, ids=lambda p: str(p.relative_to(DATA)))
def test_same_report_through_both_readers(path):
    slow = report(path, fast=False)
    assert report(path, fast=True) == slow
    assert report(path, fast="small") == slow
    if READER_LOGS.index(path) % 4 == 0:      # the polars path on a quarter of them (the edge cases below take it on all)
        assert report(path, fast="polars") == slow


def test_the_small_reader_takes_small_logs(tmp_path):
    """A plain serving log under the fast reader's threshold is read by the small reader (not line by
    line), and one that needs clean-up (a collector prefix) line by line, the same report either way."""
    from diag import scan
    taken = []
    small = scan.FastReader._small

    def spy(self, data):
        taken.append(small(self, data))
        return taken[-1]

    plain, prefixed = tmp_path / "plain.log", tmp_path / "prefixed.log"
    plain.write_text(_serving_log(600, OOM_TAIL))
    prefixed.write_text("".join(f"2026-05-14T10:00:00.000000000Z stdout F {l}\n" for l in _serving_log(600, OOM_TAIL).splitlines()))
    scan.FastReader._small = spy
    try:
        for path in (plain, prefixed):
            assert report(path, fast="small") == report(path, fast=False)
    finally:
        scan.FastReader._small = small
    assert taken == [True, False]


SERVING = [
    "[2026-05-14 09:12:11 TP0] Load weight begin. avail mem=78.31 GB",
    "[2026-05-14 09:13:20] The server is fired up and ready to roll!",
]


def _serving_log(n: int, tail: list[str]) -> str:
    out = list(SERVING)
    for i in range(n):
        s = f"{i % 60:02d}"
        if i % 3 == 0:
            out.append(f'[2026-05-14 10:{i // 60 % 60:02d}:{s}] INFO:     10.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK')
        elif i % 3 == 1:
            out.append(f"[2026-05-14 10:{i // 60 % 60:02d}:{s} TP0] Decode batch, #running-req: {i % 7}, #token: {i}, "
                       f"token usage: 0.{i % 10}0, cuda graph: True, gen throughput (token/s): {i}.5, #queue-req: {i % 3}")
        else:
            out.append("")
    return "\n".join(out + tail) + "\n"


OOM_TAIL = [
    "[2026-05-15 11:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 2790, in run_scheduler_process',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 2.60 GiB is free.",
    "[2026-05-15 11:00:01 TP0] Decode batch, #running-req: 3, #token: 9, token usage: 0.99, cuda graph: True, "
    "gen throughput (token/s): 1.0, #queue-req: 0",
    "[2026-05-15 11:00:01] Received sigquit from a child process. It usually means the child failed.",
]


@pytest.mark.parametrize("variant", ["lf", "crlf", "no-final-newline", "gz"])
def test_serving_log_variants(tmp_path, variant):
    text = _serving_log(3000, OOM_TAIL)
    path = tmp_path / "server.log"
    if variant == "crlf":
        text = text.replace("\n", "\r\n")
    if variant == "no-final-newline":
        text = text.rstrip("\n")
    data = text.encode()
    if variant == "gz":
        path = tmp_path / "server.log.gz"
        data = gzip.compress(data)
    path.write_bytes(data)
    fast, slow = report(path, fast=True), report(path, fast=False)
    assert fast == slow == report(path, fast="small") == report(path, fast="polars")
    assert fast["findings"], "the OOM is found"
    lines = {c["line"]: c["text"] for f in fast["findings"] for e in f["evidence"] for c in e["context"]}
    assert any("Decode batch" in t for t in lines.values()), "evidence windows show the batch lines around events"


def test_caps_and_events_between_batches(tmp_path):
    body = _serving_log(2000, [])
    lines = body.splitlines()
    lines.insert(900, "[2026-05-14 10:05:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2")
    lines.insert(1500, "Killed")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    from diag.read import Limits
    for cap in (1000, 1600, 10**6):
        slow = report(path, False, limits=Limits(max_lines=cap))
        for reader in (*FAST, "small"):
            assert report(path, reader, limits=Limits(max_lines=cap)) == slow, (reader, cap)


def test_a_signature_inside_a_batch_line_reaches_the_rules(tmp_path):
    """A batch line that carries a failure signature is fed (the line-by-line reader's rules skip
    batch lines; the fast reader feeds and matches it)."""
    lines = _serving_log(1200, []).splitlines()
    lines.append("[2026-05-14 11:00:00 TP0] Decode batch, #running-req: 1, #token: 2, token usage: 0.10, cuda graph: True, "
                 "gen throughput (token/s): 1.0, #queue-req: 0 RuntimeError: NCCL error: unhandled system error")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    for reader in FAST:
        rep = report(path, fast=reader)
        assert any(f["rule"] == "SGL-ENV-006" for f in rep["findings"])
    _, facts = analyze_with_facts([str(path)], options=Options(fast_min_bytes=0))
    assert len(facts.batches[0]) == 1200 // 3 + 1


def test_batch_statistics_the_same_rows(tmp_path):
    path = tmp_path / "x.log"
    path.write_text(_serving_log(4000, OOM_TAIL))
    _, slow = analyze_with_facts([str(path)], options=Options(**READERS[False]))
    b = slow.batches[0]
    for reader in (*FAST, "small"):
        a = facts_of(path, reader).batches[0]
        assert len(a) == len(b) > 1000
        for name in ("kind", "line", "ts", "running", "queue", "usage", "tokens", "throughput"):
            assert [x if x == x else None for x in a.rows[name]] == [x if x == x else None for x in b.rows[name]], name


def test_a_line_without_end_stays_flat_and_both_readers_agree(tmp_path):
    """A line of many MiB (no newline for a long stretch) is cut to MAX_LINE by both readers and
    never held whole; what follows it is read as usual."""
    import gzip
    path = tmp_path / "long.log.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b"[2026-05-14 11:00:00 TP0] start\n")
        for _ in range(12):
            f.write(b"A" * (1 << 20))
        f.write(b"\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    fast, slow = report(path, True), report(path, False)
    assert fast == slow == report(path, "polars")
    assert any("longer than 256 KiB were cut" in n for n in fast["inputs"][0]["notes"])
    assert fast["findings"] and fast["findings"][0]["category"].startswith("oom.")


def _plain_lines_log() -> str:
    """A serving log whose other lines repeat a few skeletons (a request id, a count): the memo of
    line classes (scan._Memo) learns them, and meets them again inside records that are still open
    (a traceback whose exception line has not come), after an exception whose message may go on,
    as the input's last content line, and as repeated milestones (which it must never learn)."""
    out = list(SERVING)
    for i in range(6000):
        ts = f"2026-05-14 {10 + i // 3600}:{i // 60 % 60:02d}:{i % 60:02d}"
        r = i % 5
        if r == 0:
            out.append(f"[{ts} TP0] Cache flushed successfully! request id {(i * 7919) ** 3:x}")
        elif r == 1:
            out.append(f"[{ts} TP1] Receive: obj=GenerateReqInput(rid='{i:08x}', text_len={i % 97})")
        elif r == 2:
            out.append(f"[{ts} TP0] Decode batch, #running-req: {i % 7}, #token: {i}, token usage: 0.{i % 10}0, "
                       f"cuda graph: True, gen throughput (token/s): {i}.5, #queue-req: {i % 3}")
        elif r == 3:
            out.append(f'[{ts}] INFO:     10.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK')
        else:
            out.append(f"[{ts} TP0] Load weight begin. avail mem={70 + i % 9}.31 GB" if i % 500 == 4 else "")
        if i in (1500, 4500):
            out += ["Traceback (most recent call last):", '  File "/sglang/srt/managers/scheduler.py", line 2790, in run',
                    f"[{ts} TP0] Cache flushed successfully! request id 5f3e", "    self.run_batch()",
                    "RuntimeError: the scheduler's step failed", f"[{ts} TP1] Receive: obj=GenerateReqInput(rid='1234abcd', text_len=3)"]
    out.append("[2026-05-14 11:00:00 TP0] Cache flushed successfully! request id 77aa")
    return "\n".join(out) + "\n\n\n"


def test_lines_of_a_known_skeleton_are_accounted_for_as_fed(tmp_path):
    from diag.parse.sglang import LogParser
    path = tmp_path / "plain.log"
    path.write_text(_plain_lines_log())
    fed = []
    feed = LogParser.feed

    def counting(self, lineno, text):
        fed.append(lineno)
        return feed(self, lineno, text)

    LogParser.feed = counting
    try:
        slow = report(path, fast=False)
        n_slow = len(fed)
        fed.clear()
        for reader in (*FAST, "small"):
            assert report(path, fast=reader) == slow, reader
            assert len(fed) < n_slow // 4, "the memo accounts for most of the plain lines"
            fed.clear()
    finally:
        LogParser.feed = feed
    assert any(e["line"] for f in slow["findings"] for e in f["evidence"])


def test_small_reader_rows_by_layout_agree_with_the_parser(tmp_path):
    """The small reader reads kept-rank batch lines layout by layout, column by column: prefill and
    decode lines interleaved, a third layout met late, True/False where a value is read, timestamps
    with a comma fraction and across midnight, another rank's lines, a line of the kept rank no
    layout takes (fed), and more layouts than are learned: the same rows and report as line by line."""
    lines = list(SERVING)
    for i in range(1500):
        day, hh = ("14", "23") if i < 700 else ("15", "00")
        ts = f"2026-05-{day} {hh}:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}"
        if i % 4 == 0:
            lines.append(f"[{ts} TP0] Prefill batch, #new-seq: {i % 5}, #new-token: {i}, #cached-token: 0, "
                         f"token usage: 0.{i % 10}0, #running-req: {i % 9}, #queue-req: {i % 4}, ")
        elif i % 4 == 1:
            lines.append(f"[{ts} TP0] Decode batch, #running-req: {'True' if i % 20 == 1 else i % 7}, #token: {i}, "
                         f"token usage: 0.{i % 10}0, cuda graph: False, gen throughput (token/s): {i}.25, #queue-req: {i % 3}")
        elif i % 4 == 2:
            lines.append(f"[{ts} TP1] Decode batch, #running-req: 1, #token: {i}, token usage: 0.10, cuda graph: True, "
                         f"gen throughput (token/s): 2.0, #queue-req: 0")
        elif i > 1000:
            lines.append(f"[{ts} TP0] Decode batch, #running-req: {i % 7}, #token: {i}, token usage: 0.20, "
                         f"accept len: 1.{i % 9}, cuda graph: True, gen throughput (token/s): 3.0, #queue-req: 1")
        elif i % 40 == 3:
            lines.append(f"[{ts} TP0] Decode batch, #running-req: x{i}, #token: {i}, token usage: 0.2, cuda graph: True")
        else:
            lines.append(f'[{ts}] INFO:     10.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK')
    # more layouts than MAX_LAYOUTS: each extra key is another layout
    for k in range(12):
        lines.append(f"[2026-05-15 01:00:{k:02d} TP0] Decode batch, #running-req: 2, #token: 5, extra{k}: 1, "
                     f"token usage: 0.30, #queue-req: 0")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines + OOM_TAIL) + "\n")
    slow_report = report(path, fast=False)
    b = facts_of(path, False).batches[0]
    for reader in ("small", *FAST):
        assert report(path, fast=reader) == slow_report, reader
        a = facts_of(path, reader).batches[0]
        assert len(a) == len(b) > 700
        for name in ("kind", "line", "ts", "running", "queue", "usage", "tokens", "throughput", "accept_len"):
            assert [x if x == x else None for x in a.rows[name]] == [x if x == x else None for x in b.rows[name]], (reader, name)
        assert 1.0 in a.rows["running"]                      # a True read as the parser reads it
