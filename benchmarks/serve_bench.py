#!/usr/bin/env python3
"""The service under concurrent load: `diag serve` on 2 cores, driven by async HTTP clients.

Starts `diag serve` (2 workers, pinned to two CPUs where the machine has them), sends typical
pastes (the founding sample and a few corpus logs) to POST /v1/analyze from N concurrent
clients, and reports requests/s, p50/p99 latency, and the resident memory of the server
and its workers after 1,000 and 2,000 requests. Measured, not asserted.

    python benchmarks/serve_bench.py            # prints a table; --write updates benchmarks/RESULTS.md
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PASTES = ["samples/qwen36-27b-mtp-extra-buffer.log",
          "tests/data/sglang/008-qwen3-32b-fp8-tp2-16gb-weights-oom.log",
          "tests/data/sglang/010-nccl-unhandled-system-error-comm-init.log",
          "tests/data/sglang/021-gemma3-12b-4090-kv-buffer-alloc-oom.log",
          "tests/data/sglang/040-eagle-hicache-watchdog-pyspy-min-new-tokens.log"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            m = re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{p}/status").read_text())
            total += int(m[1]) if m else 0
        except OSError:
            pass
        todo += children.get(p, [])
    return total


async def drive(base: str, bodies: list[bytes], total: int, concurrency: int, fmt: str) -> tuple[float, list[float], int]:
    """(wall seconds, per-request latencies, non-200 count)."""
    latencies: list[float] = []
    failed = 0
    next_i = 0

    async def client(c: httpx.AsyncClient) -> None:
        nonlocal next_i, failed
        while next_i < total:
            i = next_i
            next_i += 1
            t0 = time.perf_counter()
            r = await c.post(f"/v1/analyze?format={fmt}", content=bodies[i % len(bodies)])
            latencies.append(time.perf_counter() - t0)
            failed += r.status_code != 200

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for _ in range(concurrency)))
        return time.perf_counter() - t0, latencies, failed


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the Service section of benchmarks/RESULTS.md")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()

    cpus = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
    port = free_port()
    env = {**os.environ, "DIAG_WORKERS": "2", "DIAG_QUEUE": "256", "DIAG_MAX_CONNECTIONS": "512"}
    for k in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "DIAG_CONFIG"):
        env.pop(k, None)
    server = subprocess.Popen([sys.executable, "-m", "diag", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=(lambda: os.sched_setaffinity(0, set(cpus))) if cpus else None)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                print("diag serve did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        bodies = [(ROOT / p).read_bytes() for p in PASTES]
        started_rss = tree_rss_kib(server.pid)
        asyncio.run(drive(base, bodies, 40, 4, "json"))  # warm-up
        rows, served, rss_1000, at_1000 = [], 40, None, 0
        for fmt in ("json", "html"):
            for conc in args.concurrency:
                wall, lat, failed = asyncio.run(drive(base, bodies, args.requests, conc, fmt))
                served += args.requests
                rows.append((fmt, conc, args.requests / wall, pct(lat, 50), pct(lat, 99), failed))
                if rss_1000 is None and served >= 1000:
                    rss_1000, at_1000 = tree_rss_kib(server.pid), served
        rss_end = tree_rss_kib(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()

    sizes = ", ".join(f"{len(b):,}" for b in bodies)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs (server pinned to {len(cpus) or 'all'}; "
               f"the load generator shares them), Python {platform.python_version()}")
    lines = ["## Service", "", "`python benchmarks/serve_bench.py --write`", "",
             f"Measured {time.strftime('%Y-%m-%d')} on {machine}. `diag serve` with 2 worker processes; "
             f"POST /v1/analyze of typical pastes ({len(bodies)} logs of {sizes} bytes, in turn), "
             f"{args.requests:,} requests per row over keep-alive connections.", "",
             "| format | concurrent clients | requests/s | p50 | p99 | errors |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for fmt, conc, rps, p50, p99, failed in rows:
        lines.append(f"| {fmt} | {conc} | {rps:,.0f} | {p50 * 1000:,.0f} ms | {p99 * 1000:,.0f} ms | {failed} |")
    lines += ["", f"Resident memory of the server and its workers: {started_rss / 1024:,.0f} MiB after start-up, "
              f"{rss_1000 / 1024:,.0f} MiB after {at_1000:,} requests, {rss_end / 1024:,.0f} MiB after {served:,}."]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", text)
    return 0


def write_section(path: Path, section: str) -> None:
    """Replace (or add) the '## Service' section, keeping the rest of the file."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    head, sep, rest = old.partition("\n## Service\n")
    tail = ""
    if sep:
        nxt = rest.find("\n## ")
        tail = rest[nxt:] if nxt >= 0 else ""
    path.write_text(head.rstrip("\n") + "\n\n" + section + "\n" + tail)


if __name__ == "__main__":
    sys.exit(main())
