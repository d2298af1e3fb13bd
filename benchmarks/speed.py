#!/usr/bin/env python3
"""Speed at any size (issue 9): diag against grep/wc/zcat on the same generated logs, side by side.

    python benchmarks/speed.py                    # 16 MiB, 128 MiB, 1 GiB, gz, event-dense, start-up
    python benchmarks/speed.py --sizes 16,128 --repeat 3
    python benchmarks/speed.py --sizes 1024,10240 --write   # also a 10 GiB log; update RESULTS.md

Every figure is whole-process CPU time (user + system of the process and the children it
waited for, from os.wait4), the median of paired runs (diag and its anchors run in turn, so a
machine shared with other work loads both alike), and the peak RSS of diag's process. The
anchors: `grep -E -c -f SIGNATURES`, `wc -l`, and for compressed logs `zcat F | grep -E -c -f`
and `zcat F | wc -l`. SIGNATURES are 16 failure signatures taken from diag's rule files
(benchmarks/signatures.txt). For each log the harness also checks that every line grep matches
is a line diag's parser was fed (none is skipped as a batch, access or blank line).
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIGS = ROOT / "benchmarks" / "signatures.txt"
DIAG = [sys.executable, "-m", "diag"]
NO_CAPS = ["--max-lines", str(10**12), "--max-bytes", str(1 << 50)]
# diag as installed: bytecode written and read (pip compiles at install; a PYTHONDONTWRITEBYTECODE
# in the caller's shell would make every run compile diag's sources), no progress line
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "DIAG_NO_PROGRESS": "1"}


# -- logs ------------------------------------------------------------------------------------

HEAD = [
    "[2026-05-14 09:12:01] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', mem_fraction_static=0.835, "
    "tp_size=1, chunked_prefill_size=8192, max_prefill_tokens=16384, cuda_graph_max_bs=256)",
    "[2026-05-14 09:12:11 TP0] Load weight begin. avail mem=78.31 GB",
    "[2026-05-14 09:12:30 TP0] Load weight end. elapsed=19.20 s, type=LlamaForCausalLM, avail mem=63.29 GB, mem usage=15.02 GB.",
    "[2026-05-14 09:12:31 TP0] KV Cache is allocated. #tokens: 398125, K size: 24.30 GB, V size: 24.30 GB",
    "[2026-05-14 09:12:31 TP0] Memory pool end. avail mem=13.79 GB",
    "[2026-05-14 09:12:31 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=13.79 GB",
    "[2026-05-14 09:13:10 TP0] Capture cuda graph end. Time elapsed: 39.10 s. mem usage=1.38 GB. avail mem=12.41 GB.",
    "[2026-05-14 09:13:11 TP0] max_total_num_tokens=398125, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=2048, context_len=131072, available_gpu_mem=12.41 GB",
    "[2026-05-14 09:13:20] The server is fired up and ready to roll!",
]
TAIL = [
    "[2026-05-15 11:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 2790, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/model_runner.py", line 1199, in forward_extend',
    "    return self.model.forward(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
    "2.60 GiB is free. Including non-PyTorch memory, this process has 76.58 GiB memory in use.",
    "[2026-05-15 11:00:01] Received sigquit from a child process. It usually means the child failed.",
]
# rare lines inside the serving stretch: warnings a grep for failures finds, one of them written
# into a batch line by a second process (the reader must not skip it as a batch line)
RARE = [
    "[{ts} TP0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
    '[{ts}] INFO:     10.0.3.4:41234 - "POST /health_generate HTTP/1.1" 503 Service Unavailable',
    "[{ts} TP0] Decode batch, #running-req: 12, #token: 4012, token usage: 0.31, cuda graph: True, "
    "gen throughput (token/s): 801.20, #queue-req: 0 [Errno 98] error while attempting to bind on address "
    "('0.0.0.0', 30000): address already in use",
]


def server_log(path: Path, mib: int, seed: int = 7) -> None:
    """A long-running server (the mix of benchmarks/run.py): start-up, then 55% decode and 20%
    prefill batch lines, 23% access lines, 2% other lines, a rare warning every ~500k lines,
    then an OOM traceback."""
    rnd = random.Random(seed)
    target = mib << 20
    with open(path, "w") as f:
        f.write("\n".join(HEAD) + "\n")
        written, t, block = 0, 0, []
        while written < target:
            t += 1
            ts = f"2026-05-14 {9 + t // 3600 % 14:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
            r = rnd.random()
            if r < 0.55:
                line = (f"[{ts} TP0] Decode batch, #running-req: {rnd.randint(1, 200)}, #token: {rnd.randint(1000, 390000)}, "
                        f"token usage: {rnd.random():.2f}, cuda graph: True, gen throughput (token/s): {rnd.uniform(100, 4000):.2f}, "
                        f"#queue-req: {rnd.randint(0, 50)}")
            elif r < 0.75:
                line = (f"[{ts} TP0] Prefill batch, #new-seq: {rnd.randint(1, 20)}, #new-token: {rnd.randint(16, 8192)}, "
                        f"#cached-token: {rnd.randint(0, 4096)}, token usage: {rnd.random():.2f}, #running-req: {rnd.randint(0, 200)}, "
                        f"#queue-req: {rnd.randint(0, 50)}, ")
            elif r < 0.98:
                line = (f'[{ts}] INFO:     10.0.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}:{rnd.randint(30000, 60000)} - '
                        f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
            elif r < 0.999998:
                line = f"[{ts} TP0] Cache flushed successfully! request id {rnd.getrandbits(64):x}"
            else:
                line = RARE[rnd.randrange(len(RARE))].format(ts=ts)
            block.append(line)
            if len(block) >= 10000:
                text = "\n".join(block) + "\n"
                f.write(text)
                written += len(text)
                block = []
        if block:
            f.write("\n".join(block) + "\n")
        f.write("\n".join(TAIL) + "\n")


def dense_log(path: Path, kind: str) -> None:
    """Event-dense logs (benchmarks/HOSTILE.md): 1M `Killed`, 200k OOM lines, 200k error lines."""
    rnd = random.Random(3)
    with open(path, "w") as f:
        if kind == "killed":
            f.write("Killed\n" * 1_000_000)
        elif kind == "oom":
            for i in range(200_000):
                f.write(f"[2026-05-14 10:{i // 60 % 60:02d}:{i % 60:02d} TP0] torch.OutOfMemoryError: CUDA out of memory. "
                        f"Tried to allocate {rnd.randint(1, 900)}.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which "
                        f"{rnd.randint(1, 9)}.60 GiB is free.\n")
        else:
            kinds = ["RuntimeError: CUDA error: an illegal memory access was encountered",
                     "RuntimeError: NCCL error: unhandled system error", "ValueError: Input length (9000 tokens) exceeds "
                     "the maximum allowed length (8192 tokens)", "[2026-05-14 10:00:00 TP0] Scheduler hit an exception:"]
            for i in range(200_000):
                f.write(kinds[i % len(kinds)] + f" (#{i})\n")


# -- measuring -------------------------------------------------------------------------------

def run(cmd: list[str] | str, shell: bool = False) -> tuple[float, int, str]:
    """(CPU seconds of the process and its children, peak RSS KiB, stdout) of one run."""
    # GNU time reports the peak RSS of the command itself (wait4's ru_maxrss would count this
    # harness's pages between fork and exec); the CPU is wait4's, children included
    timed = ["/usr/bin/time", "-f", "%M"] + (["sh", "-c", cmd] if shell else list(cmd))
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(timed, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env=ENV)
        out = proc.stdout.read()
        _, _, ru = os.wait4(proc.pid, 0)
        proc.returncode = 0
        err.seek(0)
        tail = (err.read().decode(errors="replace").strip().splitlines() or ["0"])[-1]
    rss = int(tail) if tail.isdigit() else 0
    return ru.ru_utime + ru.ru_stime, rss, out.decode(errors="replace")


def paired(cases: dict[str, list[str] | str], repeat: int) -> dict[str, tuple[float, int]]:
    """Each case `repeat` times, in turn: (median CPU s, max peak RSS KiB)."""
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    rss: dict[str, int] = {k: 0 for k in cases}
    for _ in range(repeat):
        for name, cmd in cases.items():
            c, m, _ = run(cmd, shell=isinstance(cmd, str))
            cpu[name].append(c)
            rss[name] = max(rss[name], m)
    return {k: (statistics.median(v), rss[k]) for k, v in cpu.items()}


def seen_check(path: Path) -> tuple[int, int]:
    """(lines grep matches, of those the ones diag's parser was not fed): run in-process with the
    parser's feed recorded."""
    out = subprocess.run(["grep", "-n", "-E", "-a", "-f", str(SIGS), str(path)] if not str(path).endswith(".gz")
                         else f"zcat {path} | grep -n -E -a -f {SIGS}", shell=str(path).endswith(".gz"),
                         capture_output=True, cwd=ROOT).stdout.decode(errors="replace")
    want = {int(line.split(":", 1)[0]) for line in out.splitlines() if line}
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from diag.parse.sglang import LogParser\n"
            "from diag.analyze import analyze, Options\nfrom diag.read import Limits\n"
            "fed = set(); feed = LogParser.feed\n"
            "def rec(self, n, t): fed.add(n); return feed(self, n, t)\n"
            "LogParser.feed = rec\n"
            "analyze([%r], options=Options(limits=Limits(max_lines=10**12, max_bytes=1 << 50)))\n"
            "want = set(map(int, sys.stdin.read().split()))\n"
            "print(len(want - fed))\n") % (str(ROOT), str(path))
    res = subprocess.run([sys.executable, "-c", code], input=" ".join(map(str, want)).encode(), capture_output=True, cwd=ROOT)
    missed = int(res.stdout.decode().strip() or "-1")
    return len(want), missed


# -- the run ---------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,128,1024", help="MiB of the generated server logs (comma-separated)")
    ap.add_argument("--gz", default="128,1024", help="sizes also measured gzip-compressed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the logs are generated (kept between runs)")
    ap.add_argument("--no-dense", action="store_true", help="skip the event-dense logs")
    ap.add_argument("--no-check", action="store_true", help="skip the grep-sees ⊆ diag-sees check")
    ap.add_argument("--write", action="store_true", help="write the tables into benchmarks/RESULTS.md")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.gettempdir()) / "diag-speed"
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    gz = {int(x) for x in args.gz.split(",") if x}
    rows: list[str] = []
    # the bytecode and the start-up cache (diag/cache.py), as after a first run
    subprocess.run(DIAG + ["rules", "list"], capture_output=True, cwd=ROOT, env=ENV)

    def log(size: int) -> Path:
        path = work / f"server-{size}MiB.log"
        if not path.exists():
            print(f"generating {path} …", file=sys.stderr)
            server_log(path, size)
        return path

    print("| input | lines | diag CPU | grep -E -c -f | ratio | wc -l | ratio | diag peak RSS | grep lines seen |", flush=True)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |", flush=True)
    for size in sizes:
        path = log(size)
        lines = int(subprocess.run(["wc", "-l", str(path)], capture_output=True).stdout.split()[0])
        res = paired({"diag": DIAG + ["analyze", "--format", "json", "-o", "/dev/null", *NO_CAPS, str(path)],
                      "grep": ["grep", "-E", "-c", "-a", "-f", str(SIGS), str(path)], "wc": ["wc", "-l", str(path)]},
                     args.repeat)
        seen = "" if args.no_check else "{} of {} (missed {})".format(*(lambda w, m: (w - m, w, m))(*seen_check(path)))
        row = (f"| server log {size:,} MiB | {lines:,} | {res['diag'][0]:.2f} s | {res['grep'][0]:.2f} s | "
               f"{res['diag'][0] / max(res['grep'][0], 1e-3):.1f}× | {res['wc'][0]:.2f} s | "
               f"{res['diag'][0] / max(res['wc'][0], 1e-3):.0f}× | {res['diag'][1] / 1024:.0f} MiB | {seen} |")
        print(row, flush=True)
        rows.append(row)
    gz_rows = []
    for size in sorted(gz):
        src = log(size)
        path = work / f"server-{size}MiB.log.gz"
        if not path.exists():
            with open(src, "rb") as fi, gzip.open(path, "wb", compresslevel=6) as fo:
                shutil.copyfileobj(fi, fo, 1 << 20)
        res = paired({"diag": DIAG + ["analyze", "--format", "json", "-o", "/dev/null", *NO_CAPS, str(path)],
                      "zgrep": f"zcat {path} | grep -E -c -a -f {SIGS}", "zwc": f"zcat {path} | wc -l"}, args.repeat)
        row = (f"| server log {size:,} MiB, gzip | {res['diag'][0]:.2f} s | {res['zgrep'][0]:.2f} s | "
               f"{res['diag'][0] / res['zgrep'][0]:.2f}× | {res['zwc'][0]:.2f} s | {res['diag'][0] / res['zwc'][0]:.1f}× | "
               f"{res['diag'][1] / 1024:.0f} MiB |")
        gz_rows.append(row)
    if gz_rows:
        print("\n| input | diag CPU | zcat \\| grep -E -c -f | ratio | zcat \\| wc -l | ratio | diag peak RSS |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(gz_rows), flush=True)
    dense_rows = []
    if not args.no_dense:
        for kind in ("killed", "oom", "errors"):
            path = work / f"dense-{kind}.log"
            if not path.exists():
                dense_log(path, kind)
            res = paired({"diag": DIAG + ["analyze", "--format", "json", "-o", "/dev/null", *NO_CAPS, str(path)],
                          "grep": ["grep", "-E", "-c", "-a", "-f", str(SIGS), str(path)]}, max(1, args.repeat - 2))
            dense_rows.append(f"| {kind} ({path.stat().st_size / 2**20:.0f} MiB) | {res['diag'][0]:.2f} s | "
                              f"{res['grep'][0]:.2f} s | {res['diag'][0] / max(res['grep'][0], 1e-3):.0f}× | "
                              f"{res['diag'][1] / 1024:.0f} MiB |")
        print("\n| event-dense log | diag CPU | grep -E -c -f | ratio | diag peak RSS |")
        print("| --- | ---: | ---: | ---: | ---: |")
        print("\n".join(dense_rows), flush=True)
    # start-up: a pasted log of 10,000 lines, --help, rules list, against the bare interpreter
    paste = work / "paste-10k.log"
    if not paste.exists():
        text = log(16).read_text().splitlines()[:9990]
        paste.write_text("\n".join(text + TAIL) + "\n")
    res = paired({"python -c pass": [sys.executable, "-c", "pass"], "diag --help": DIAG + ["--help"],
                  "diag rules list": DIAG + ["rules", "list"],
                  "diag analyze (10,000-line paste)": DIAG + ["analyze", "--format", "json", "-o", "/dev/null", str(paste)],
                  "diag analyze (2-line paste)": DIAG + ["analyze", "--format", "json", "-o", "/dev/null",
                                                         str(ROOT / "samples" / "nohup-empty.log")]},
                 max(args.repeat, 5))
    base = res["python -c pass"][0]
    start_rows = [f"| {k} | {v[0] * 1000:.0f} ms | {v[0] / base:.1f}× | {v[1] / 1024:.0f} MiB |" for k, v in res.items()]
    print("\n| start-up | CPU | × python -c pass | peak RSS |\n| --- | ---: | ---: | ---: |")
    print("\n".join(start_rows), flush=True)
    if args.write:
        machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        section = [f"## Speed at any size (`python benchmarks/speed.py --write`)", "",
                   f"Measured {time.strftime('%Y-%m-%d')} on {machine}; CPU = user+system of the whole process "
                   f"(children included), median of {args.repeat} paired runs; signatures: benchmarks/signatures.txt.", "",
                   "| input | lines | diag CPU | grep -E -c -f | ratio | wc -l | ratio | diag peak RSS | grep lines seen |",
                   "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |", *rows, ""]
        if gz_rows:
            section += ["| input | diag CPU | zcat \\| grep -E -c -f | ratio | zcat \\| wc -l | ratio | diag peak RSS |",
                        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |", *gz_rows, ""]
        if dense_rows:
            section += ["| event-dense log | diag CPU | grep -E -c -f | ratio | diag peak RSS |",
                        "| --- | ---: | ---: | ---: | ---: |", *dense_rows, ""]
        section += ["| start-up | CPU | × python -c pass | peak RSS |", "| --- | ---: | ---: | ---: |", *start_rows, ""]
        results = ROOT / "benchmarks" / "RESULTS.md"
        text = results.read_text()
        head, sep, rest = text.partition("\n## Speed at any size")
        rest = rest.partition("\n## ")[2]
        results.write_text(head.rstrip("\n") + "\n\n" + "\n".join(section) + ("\n## " + rest if rest else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
