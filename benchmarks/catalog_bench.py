#!/usr/bin/env python3
"""Micro-benchmark of the message catalog: open cost, memory, per-line match cost.

    python benchmarks/catalog_bench.py [--lines N]

Each measurement runs in a fresh interpreter so that start-up is measured cold, against the bare
interpreter (python -c pass). Lines: renderings of catalog messages (matching) and log lines
that no message matches (batch statistics, HTTP access lines, free text). The memo cache is
bypassed for the per-line figures (every line is distinct); one more figure shows a repeated line.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from diag.messages import Catalog
t1 = time.perf_counter()
cat = Catalog.open()
t2 = time.perf_counter()
m = cat.match("Not enough memory. Please try to increase --mem-fraction-static.")
t3 = time.perf_counter()
rss_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mode, n = sys.argv[1], int(sys.argv[2])
out = {"import_s": t1 - t0, "open_s": t2 - t1, "first_match_s": t3 - t2, "rss_after_first_match_kb": rss_open,
       "first_match_ok": m is not None}
if mode == "lines":
    import random
    from diag.messages.template import render
    rng = random.Random(7)
    rows = cat.db.execute("SELECT n FROM messages WHERE specific = 1 ORDER BY n").fetchall()
    picks = [r[0] for r in rng.sample(rows, min(n, len(rows)))]
    entries = cat._entries_for(picks)
    matching = []
    for i, e in enumerate(entries):
        if e.template:
            # distinct lines: a numbered prefix, as a log prefix would be
            matching.append(f"[2026-01-01 10:00:{i % 60:02d} TP{i % 8}] " + render(e.template))
    batch = [f"[2026-01-01 10:00:00 TP0] Decode batch, #running-req: {i}, #token: {i * 7}, token usage: 0.{i % 97:02d}, "
             f"cuda graph: True, gen throughput (token/s): {i * 1.5:.2f}, #queue-req: 0" for i in range(n)]
    nonmatching = []
    for i in range(n):
        k = i % 3
        if k == 0:
            nonmatching.append(f"Collecting torch==2.{i % 9}.0 (from sglang[all]) Downloading torch-2.{i % 9}.0-cp311-none.whl ({i} MB)")
        elif k == 1:
            nonmatching.append(f'INFO:     127.0.0.1:{40000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        else:
            nonmatching.append(f"the quick brown fox {i} jumps over the lazy dog number {i * 3}")
    def timed(lines):
        ts, hits = [], 0
        for line in lines:
            cat._memo.clear(); cat._cand.clear()
            a = time.perf_counter()
            r = cat.match(line)
            ts.append(time.perf_counter() - a)
            hits += r is not None
        return ts, hits
    cold, hc = timed(matching)          # first sight of each message: row load + RE2 compile
    timed(matching[:300])
    tm, hm = timed(matching[:300])      # seen before (a log repeats a few hundred messages)
    tb, hb = timed(batch)
    tn, hn = timed(nonmatching)
    out["matching_cold"] = {"n": len(cold), "matched": hc, "times": cold}
    out["batch"] = {"n": len(tb), "matched": hb, "times": tb}
    rep = matching[0]
    cat.match(rep)
    a = time.perf_counter()
    for _ in range(10000):
        cat.match(rep)
    out["repeated_line_us"] = (time.perf_counter() - a) / 10000 * 1e6
    out["matching"] = {"n": len(tm), "matched": hm, "times": tm}
    out["nonmatching"] = {"n": len(tn), "matched": hn, "times": tn}
    out["rss_after_lines_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


def run(mode: str, n: int) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, mode, str(n)], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def bare() -> tuple[float, int]:
    code = "import resource,time;t=time.perf_counter();print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    a = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return time.perf_counter() - a, int(p.stdout)


def pct(ts: list[float], q: float) -> float:
    s = sorted(ts)
    return s[min(len(s) - 1, int(q * len(s)))] * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=3000)
    a = ap.parse_args()
    from diag.messages.store import CATALOG_PATH
    walls, rss = [], []
    for _ in range(5):
        w, r = bare()
        walls.append(w)
        rss.append(r)
    opens = [run("open", 0) for _ in range(5)]
    res = run("lines", a.lines)
    print(f"catalog file: {CATALOG_PATH.stat().st_size / 1e6:.2f} MB")
    print(f"bare interpreter: {statistics.median(walls) * 1e3:.1f} ms wall, {statistics.median(rss) / 1024:.1f} MiB RSS")
    print(f"import diag.messages: {statistics.median(o['import_s'] for o in opens) * 1e3:.2f} ms; "
          f"Catalog.open(): {statistics.median(o['open_s'] for o in opens) * 1e3:.2f} ms; "
          f"first match (compiles RE2 on first use): {statistics.median(o['first_match_s'] for o in opens) * 1e3:.2f} ms")
    print(f"RSS after open + first match: {statistics.median(o['rss_after_first_match_kb'] for o in opens) / 1024:.1f} MiB "
          f"(bare {statistics.median(rss) / 1024:.1f} MiB)")
    for key in ("matching_cold", "matching", "batch", "nonmatching"):
        r = res[key]
        print(f"{key:14} lines: {r['n']} ({r['matched']} matched): median {pct(r['times'], 0.5):.1f} us, "
              f"p99 {pct(r['times'], 0.99):.1f} us, max {max(r['times']) * 1e6:.0f} us")
    print(f"repeated line (memo): {res['repeated_line_us']:.2f} us; RSS after the run {res['rss_after_lines_kb'] / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
