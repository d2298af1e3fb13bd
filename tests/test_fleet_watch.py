"""diag watch (issue 12, part 5): a live log appended to, rotated and truncated while it runs;
findings printed when their signature completes; early warnings from the batch lines; exit
codes for a sidecar. Time is bounded with the tool's own options (poll interval, settle,
idle exit), and waits are for what the output says, never fixed sleeps."""
from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diag.fleet.watch import Follower, Thresholds, Watcher

DATA = Path(__file__).parent / "data"
PROXY = DATA / "sglang" / "006-warmup-502-killed-http-proxy.log"
ARCH = DATA / "sglang" / "028-sm75-flashinfer-no-kernel-image.log"
RETRACT = DATA / "sglang" / "018-dsv3-runaway-generation-kv-full-retract.log"
FAST = ["--interval", "0.05", "--settle", "0.3"]


def batches(start: datetime.datetime, n: int, running=3, queue=lambda i: 0, tput=lambda i: 90.0, usage=lambda i: 0.1):
    out = []
    for i in range(n):
        ts = (start + datetime.timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"[{ts} TP0] Decode batch. #running-req: {running}, #token: {1000 + i}, token usage: {usage(i):.2f}, "
                   f"gen throughput (token/s): {tput(i):.2f}, #queue-req: {queue(i)}")
    return out


# -- following ---------------------------------------------------------------------------------

def test_follower_appends_partial_lines_rotation_and_truncation(tmp_path):
    log = tmp_path / "server.log"
    f = Follower(str(log))
    assert f.read() == []                                  # not there yet
    log.write_text("one\ntwo\nthr")
    assert f.read() == ["one", "two"]
    with log.open("a") as out:
        out.write("ee\nfour\n")
    assert f.read() == ["three", "four"]
    with log.open("a") as out:                            # written to the old file after the rename
        os.rename(log, tmp_path / "server.log.1")
        out.write("five\n")
    log.write_text("new-1\nnew-2\n")
    assert f.read() == ["five", "new-1", "new-2"] and "rotated" in f.notes
    f.notes.clear()
    log.write_text("x\n")                                  # truncated in place, shorter
    assert f.read() == ["x"] and f.notes == ["truncated"]
    f.notes.clear()
    with log.open("r+") as out:                           # truncated, then written past where we were
        out.truncate(0)
        out.write("rewritten line one\nrewritten line two\n")
    assert f.read() == ["rewritten line one", "rewritten line two"] and f.notes == ["truncated"]
    f.close()


# -- early warnings ----------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def types(notes, kind="warning"):
    return [n.data.get("warning") for n in notes if n.type == kind]


def test_kv_pool_full_with_retractions_warns_once():
    w = Watcher(settle=0.1)
    notes = w.feed(RETRACT.read_text().splitlines())
    assert types(notes) == ["kv_pressure"]
    kv = next(n for n in notes if n.type == "warning")
    assert kv.data["token_usage"] == 1.0 and kv.data["retracted"] == 5 and kv.line == 5
    assert types(w.feed(RETRACT.read_text().splitlines()[:5])) == []   # still the same episode
    w.close()


def test_queue_growth_and_throughput_collapse():
    t0 = datetime.datetime(2025, 5, 1, 12, 0, 0)
    w = Watcher()
    assert types(w.feed(batches(t0, 30))) == []
    grow = batches(t0 + datetime.timedelta(seconds=30), 20, queue=lambda i: 2 * i)
    assert types(w.feed(grow)) == ["queue_growth"]
    w2 = Watcher()
    lines = batches(t0, 20, tput=lambda i: 100.0) + batches(t0 + datetime.timedelta(seconds=20), 10, tput=lambda i: 8.0)
    assert "throughput_collapse" in types(w2.feed(lines))
    w.close()
    w2.close()


def test_running_requests_stuck_by_the_clock():
    clock = Clock()
    w = Watcher(Thresholds(stuck_after=30), clock=clock)
    w.feed(batches(datetime.datetime(2025, 5, 1, 12, 0), 5, running=4))
    clock.t += 29
    assert types(w.tick()) == []
    clock.t += 2
    stuck = w.tick()
    assert types(stuck) == ["stuck"] and stuck[0].data["running"] == 4
    assert types(w.tick()) == []                            # once per episode
    w.close()


def test_a_finding_when_its_signature_completes():
    clock = Clock()
    w = Watcher(settle=5, clock=clock)
    lines = PROXY.read_text().splitlines()
    head, tail = lines[:13], lines[13:]                    # the AssertionError line is in the tail
    assert w.feed(head) == [] or True
    assert [n for n in w.tick() if n.type == "finding"] == []
    notes = w.feed(tail) + w.tick()
    found = [n for n in notes if n.type == "finding"]
    assert [n.data["finding"]["category"] for n in found] == ["env.http_proxy"]
    trigger = next(e for e in found[0].data["finding"]["evidence"] if e["role"] == "trigger")
    assert found[0].line == trigger["line"] and "502" in trigger["text"]
    assert [n for n in w.feed(["Killed"]) + w.tick() if n.type == "finding"] == []   # no repeat
    w.close()


# -- the command -----------------------------------------------------------------------------

def start(*args):
    return subprocess.Popen([sys.executable, "-m", "diag", "watch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class Reader:
    """The JSON objects watch printed so far, read without blocking past a deadline."""

    def __init__(self, proc):
        import threading
        self.proc, self.notes = proc, []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            self.notes.append(json.loads(line))

    def wait_for(self, pred, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = [n for n in self.notes if pred(n)]
            if hit:
                return hit[0]
            if self.proc.poll() is not None and not self._t.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"not seen in {timeout}s; got {[n['type'] for n in self.notes]}")


def finding(category):
    return lambda n: n["type"] == "finding" and n["finding"]["category"] == category


def test_watch_a_log_appended_rotated_and_truncated(tmp_path):
    log = tmp_path / "server.log"
    t0 = datetime.datetime(2024, 12, 13, 1, 40)
    start_up = [f"[{t0:%Y-%m-%d %H:%M:%S} TP0] Load weight begin. avail mem=23.20 GB",
                f"[{t0:%Y-%m-%d %H:%M:%S}] The server is fired up and ready to roll!"]
    log.write_text("\n".join(start_up) + "\n")
    proc = start(str(log), "-f", "json", "--idle-exit", "2", *FAST)
    out = Reader(proc)
    try:
        assert out.wait_for(lambda n: n["type"] == "ready")["line"] == 2
        with log.open("a") as f:                                   # appended while it runs
            f.write("\n".join(batches(t0, 5)) + "\n")
        os.rename(log, tmp_path / "server.log.1")                  # rotated: the restarted server's new log
        log.write_text("$ python -m sglang.launch_server --model-path mistralai/Mistral-7B-Instruct-v0.1\n"
                       + PROXY.read_text())
        assert out.wait_for(lambda n: n["type"] == "rotated")
        run = out.wait_for(lambda n: n["type"] == "run")
        proxy = out.wait_for(finding("env.http_proxy"))
        assert proxy["run"] == 1 and proxy["line"] > run["line"]
        with log.open("r+") as f:                                  # truncated in place, then written again
            f.truncate(0)
        with log.open("a") as f:
            f.write(ARCH.read_text())
        assert out.wait_for(lambda n: n["type"] == "truncated")
        assert out.wait_for(finding("env.cuda_arch_driver"))
        assert proc.wait(timeout=30) == 1                          # findings at error: exit 1 (after --idle-exit)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kinds = [n["type"] for n in out.notes]
    assert kinds.count("finding") == len({(n["run"], n["finding"]["rule"]) for n in out.notes if n["type"] == "finding"})


def test_exit_on_finding_for_a_sidecar(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(PROXY.read_text())
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "diag", "watch", str(log), "--exit-on-finding", *FAST],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout.startswith("FINDING critical env.http_proxy [SGL-ENV-012]")
    assert time.monotonic() - t < 30


def test_sigterm_ends_it_cleanly(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(batches(datetime.datetime(2025, 1, 1), 3)) + "\n")
    proc = start(str(log), "-f", "json", *FAST)
    out = Reader(proc)
    out.wait_for(lambda n: n["type"] == "opened")                 # the signal handlers are in place
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0                              # nothing failed: 0
    assert [n for n in out.notes if n["type"] == "finding"] == []


def test_watch_usage_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "diag", "watch", str(tmp_path / "x.log"), "-f", "markdown"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "diag watch writes --format text or json" in r.stderr


# -- what watch reads: the parser's and the batch series' public API ---------------------------

def test_watch_reads_no_private_field_of_the_parser():
    import ast
    src = Path(__file__).resolve().parent.parent / "diag" / "fleet" / "watch.py"
    for node in ast.walk(ast.parse(src.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and isinstance(node.value, ast.Attribute):
            assert node.value.attr not in ("parser", "batches", "events"), f"watch.py:{node.lineno} reads .{node.value.attr}.{node.attr}"


def test_the_parsers_record_open_and_the_series_tail():
    from diag.events import Event, EventStore
    from diag.parse.sglang import LogParser
    p = LogParser(0)
    lines = PROXY.read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if "Traceback (most recent call last)" in l)
    for k, text in enumerate(lines[:start], 1):
        p.feed(k, text)
    assert not p.record_open
    p.feed(start + 1, lines[start])
    assert p.record_open                                  # inside the traceback
    for k, text in enumerate(lines[start + 1:], start + 2):
        p.feed(k, text)
    p.finish()
    assert not p.record_open
    for k, text in enumerate(batches(datetime.datetime(2025, 5, 1), 5, queue=lambda i: i), 1):
        p.feed(1000 + k, text)
    tail = p.batches.tail(3)
    assert list(tail["line"]) == [1003, 1004, 1005] and list(tail["queue"]) == [2.0, 3.0, 4.0]
    assert len(p.batches.tail(100)["line"]) == 5 and len(p.batches.tail(0)["line"]) == 0
    store = EventStore()
    for i in range(600):
        store.append(Event("retract" if i % 2 else "signal", 0, i + 1, "x"))
    kept = store.of_kind("retract")
    assert len(kept) == EventStore.FIRST + EventStore.LAST and kept[0].line == 2 and kept[-1].line == 600
    assert [e.line for e in kept] == sorted(e.line for e in kept)


def test_warnings_go_on_past_the_rows_the_series_keeps_in_full():
    """After 2 x 32,768 batch lines the series keeps only its last rows in full: the warnings read
    their window from those (once they compared the whole count with the kept rows and went quiet)."""
    from diag.parse.batches import KEEP
    t0 = datetime.datetime(2025, 5, 1, 0, 0, 0)
    w = Watcher()
    n = 2 * KEEP + 500
    for k in range(0, n, 8192):
        assert types(w.feed(batches(t0 + datetime.timedelta(seconds=k), min(8192, n - k)))) == []
    assert len(w.parser.batches) == n and len(w.parser.batches.rows["line"]) < n
    grow = batches(t0 + datetime.timedelta(seconds=n), 20, queue=lambda i: 2 * i)
    assert types(w.feed(grow)) == ["queue_growth"]
    w.close()
