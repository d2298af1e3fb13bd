#!/usr/bin/env python3
"""Speed and memory of `diag analyze`, measured (not asserted): start-up on a pasted log,
throughput and peak memory on large generated logs, nvidia-smi parsing.

    python benchmarks/run.py            # prints a table; --write updates benchmarks/RESULTS.md
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import HEAD, TAIL  # noqa: E402  (one generated log shape for both benchmarks)

ROOT = Path(__file__).resolve().parent.parent
DIAG = [sys.executable, "-m", "diag"]


def generated_log(path: Path, lines: int, seed: int = 7) -> None:
    """A long-running server: start-up, then batches and access lines, then an OOM traceback."""
    rnd = random.Random(seed)
    head, tail = HEAD, TAIL
    with open(path, "w") as f:
        f.write("\n".join(head) + "\n")
        t = 0
        for i in range(lines - len(head) - len(tail)):
            t += 1
            ts = f"2026-05-14 {9 + t // 3600 % 14:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
            r = rnd.random()
            if r < 0.55:
                f.write(f"[{ts} TP0] Decode batch, #running-req: {rnd.randint(1, 200)}, #token: {rnd.randint(1000, 390000)}, "
                        f"token usage: {rnd.random():.2f}, cuda graph: True, gen throughput (token/s): {rnd.uniform(100, 4000):.2f}, "
                        f"#queue-req: {rnd.randint(0, 50)}\n")
            elif r < 0.75:
                f.write(f"[{ts} TP0] Prefill batch, #new-seq: {rnd.randint(1, 20)}, #new-token: {rnd.randint(16, 8192)}, "
                        f"#cached-token: {rnd.randint(0, 4096)}, token usage: {rnd.random():.2f}, #running-req: {rnd.randint(0, 200)}, "
                        f"#queue-req: {rnd.randint(0, 50)}, \n")
            elif r < 0.98:
                f.write(f'[{ts}] INFO:     10.0.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}:{rnd.randint(30000, 60000)} - '
                        f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n')
            else:
                f.write(f"[{ts} TP0] Cache flushed successfully! request id {rnd.getrandbits(64):x}\n")
        f.write("\n".join(tail) + "\n")


def timed(args: list[str], repeat: int = 5) -> tuple[float, float, int]:
    """(median s, min s, peak RSS KiB) of a CLI run."""
    times, rss = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + DIAG + args, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        try:
            rss = max(rss, int(proc.stderr.decode().strip().splitlines()[-1]))
        except (ValueError, IndexError):
            pass
    return statistics.median(times), min(times), rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write benchmarks/RESULTS.md")
    ap.add_argument("--big", type=int, default=1_000_000, help="lines in the large generated log")
    args = ap.parse_args()
    rows = []
    sample = "samples/qwen36-27b-mtp-extra-buffer.log"
    subprocess.run(DIAG + ["analyze", sample], capture_output=True, cwd=ROOT)  # warm the bytecode cache
    med, best, rss = timed(["analyze", sample, "--smi", "samples/rtx-pro-6000-smi.txt"])
    rows.append(("pasted log (19 lines) + nvidia-smi, text, start-up included", med, best, rss, ""))
    med, best, rss = timed(["analyze", "--format", "json", "tests/data/sglang/040-eagle-hicache-watchdog-pyspy-min-new-tokens.log"])
    rows.append(("corpus paste (28 lines), json", med, best, rss, ""))
    with tempfile.TemporaryDirectory() as tmp:
        for n in (100_000, args.big):
            path = Path(tmp) / f"server-{n}.log"
            generated_log(path, n)
            size = path.stat().st_size
            med, best, rss = timed(["analyze", "--format", "json", str(path)], repeat=3 if n > 200_000 else 5)
            rows.append((f"generated server log, {n:,} lines ({size / 2**20:.0f} MiB), json", med, best, rss,
                         f"{n / med:,.0f} lines/s"))
        big = Path(tmp) / "one-line.log"
        big.write_bytes(b"x" * (50 * 2**20))
        med, best, rss = timed(["analyze", "--format", "json", str(big)], repeat=3)
        rows.append(("one 50 MiB line (inconclusive)", med, best, rss, ""))
    sys.path.insert(0, str(ROOT))
    from diag.parse.smi import parse_smi
    smi = (ROOT / "tests/data/smi/015-table-b200-x8-python-580.95.05.txt").read_text().splitlines()
    t0 = time.perf_counter()
    for _ in range(200):
        parse_smi(smi)
    per = (time.perf_counter() - t0) / 200
    rows.append(("parse_smi, 8-GPU table (in process)", per, per, 0, ""))

    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    lines = [f"Measured {time.strftime('%Y-%m-%d')} on {machine}.", "",
             "| case | median | best | peak RSS | rate |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, med, best, rss, note in rows:
        lines.append(f"| {name} | {med * 1000:,.0f} ms | {best * 1000:,.0f} ms | {rss / 1024:,.0f} MiB | {note} |"
                     if rss else f"| {name} | {med * 1000:,.2f} ms | {best * 1000:,.2f} ms | – | {note} |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        results = ROOT / "benchmarks" / "RESULTS.md"
        kept = results.read_text().partition("\n## ")[2] if results.exists() else ""  # other benchmarks' sections
        results.write_text("# Benchmark results\n\n`python benchmarks/run.py --write`\n\n" + text + "\n"
                           + ("\n## " + kept if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
