"""diag run (issue 12, part 6) on a stand-in server (tests/data/fleet/fakesglang, put first on
PYTHONPATH so that `python -m sglang.launch_server` is it) that fails in each way: an argparse
error, an exception, a SIGKILL, silence then exit; and one that becomes ready and is stopped.
Each test checks that no process is left behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).parent / "data"
FAKE = DATA / "fleet" / "fakesglang"
KV_OOM = DATA / "sglang" / "021-gemma3-12b-4090-kv-buffer-alloc-oom.log"
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def env(mode: str, **more) -> dict:
    e = dict(os.environ, PYTHONPATH=str(FAKE) + os.pathsep + os.environ.get("PYTHONPATH", ""), DIAG_FAKE_MODE=mode,
             DIAG_NO_CONFIG="1")
    e.update(more)
    return e


def diag_run(tmp_path, mode, *flags, server_args=(), timeout=90, **more):
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "diag", "run", "--log", str(log), "--interval", "0.05", *flags, "--",
           sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL, *server_args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env(mode, **more), cwd=tmp_path)
    return r, log


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_argparse_error(tmp_path):
    # a flag diag's newest catalog knows, that the installed (stand-in) release refuses
    r, log = diag_run(tmp_path, "argparse", "-f", "json", server_args=["--enable-metrics"])
    ended = events(r.stdout)[-1]
    assert ended["type"] == "ended" and ended["returncode"] == 2 and ended["signal"] is None
    top = ended["report"]["findings"][0]
    assert top["category"].startswith("config.") and "--enable-metrics" in json.dumps(top)
    text = log.read_text()
    assert "unrecognized arguments: --enable-metrics" in text and text.rstrip().endswith("exited with status 2 after " +
                                                                                        text.rstrip().rsplit("after ", 1)[1])
    assert r.returncode == 1


def test_exception_on_stderr_is_in_the_log(tmp_path):
    r, log = diag_run(tmp_path, "exception", DIAG_FAKE_LOG=str(KV_OOM))
    assert r.returncode == 1, r.stderr
    text = log.read_text()
    assert KV_OOM.read_text().splitlines()[-1] in text           # stderr went to the log, with stdout
    assert "exited with status 1" in r.stderr
    ref = subprocess.run([sys.executable, "-m", "diag", "analyze", str(KV_OOM), "-f", "json"], capture_output=True, text=True)
    cat = json.loads(ref.stdout)["findings"][0]["category"]
    assert cat in r.stdout and "FINDING" in r.stdout             # printed when the traceback completed, then the report


def test_sigkill_is_known_not_inferred(tmp_path):
    marker = tmp_path / "pid"
    r, log = diag_run(tmp_path, "sigkill", "-f", "json", DIAG_FAKE_MARKER=str(marker))
    ended = events(r.stdout)[-1]
    assert ended["returncode"] == -9 and ended["signal"] == 9 and ended["signal_name"] == "SIGKILL"
    assert ended["kernel_log"] in ("read", "unreadable")
    lines = log.read_text().splitlines()
    assert "Killed" in lines and any("killed by SIGKILL (signal 9)" in line for line in lines)
    assert ended["report"]["findings"][0]["category"] == "env.killed"
    assert not alive(int(marker.read_text()))
    assert r.returncode in (1, 3)


def test_silence_then_exit(tmp_path):
    r, log = diag_run(tmp_path, "silent")
    assert "exited with status 1" in r.stderr
    lines = log.read_text().splitlines()
    assert lines[1].startswith("$ ") and "sglang.launch_server" in lines[1]   # the command, as a shell shows it
    assert lines[2] == "Exit code: 1"
    assert r.returncode in (1, 3)


def test_the_log_is_appended_never_truncated(tmp_path):
    diag_run(tmp_path, "silent")
    first = (tmp_path / "server.log").read_text()
    r, log = diag_run(tmp_path, "silent")
    assert log.read_text().startswith(first) and log.read_text().count("Exit code: 1") == 2


def test_preflight_stops_before_the_server_starts(tmp_path):
    marker = tmp_path / "started"
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "diag", "run", "--log", str(log), "--gpu", "RTX 4090", "--", sys.executable, "-m",
           "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-70B-Instruct"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env("ready", DIAG_FAKE_MARKER=str(marker)))
    assert r.returncode == 1 and "not starting the server" in r.stderr and "memory budget does not fit" in r.stderr
    assert not marker.exists() and not log.exists()
    bad = [sys.executable, "-m", "diag", "run", "--log", str(log), "--", sys.executable, "-m", "sglang.launch_server",
           "--model-path", MODEL, "--tp-sise", "2"]
    r = subprocess.run(bad, capture_output=True, text=True, timeout=60, env=env("ready", DIAG_FAKE_MARKER=str(marker)))
    assert r.returncode == 1 and "--tp-size" in r.stderr and not marker.exists()


def test_force_starts_anyway(tmp_path):
    r, log = diag_run(tmp_path, "argparse", "--force", server_args=["--tp-sise", "2"])
    assert "not starting" not in r.stderr and "unrecognized arguments: --tp-sise" in log.read_text()


def test_ready_then_stopped_leaves_nothing_behind(tmp_path):
    marker = tmp_path / "pid"
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "diag", "run", "--log", str(log), "--interval", "0.05", "-f", "json", "--",
           sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env("ready", DIAG_FAKE_MARKER=str(marker)))
    try:
        seen = []
        for line in proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "ready":
                break
        assert seen[-1]["type"] == "ready" and "ready after" in seen[-1]["message"]
        proc.send_signal(signal.SIGTERM)                           # passed on to the server
        assert proc.wait(timeout=30) == 0
        rest = [json.loads(line) for line in proc.stdout.read().splitlines()]
        assert rest[-1]["type"] == "ended" and rest[-1]["returncode"] == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not alive(int(marker.read_text()))


def test_detach_and_exit_when_ready(tmp_path):
    marker = tmp_path / "pid"
    r, log = diag_run(tmp_path, "ready", "--detach", "--exit-when-ready", DIAG_FAKE_MARKER=str(marker))
    pid = int(marker.read_text())
    try:
        assert r.returncode == 0 and "is running" in r.stderr
        assert alive(pid) and os.getsid(pid) == pid                 # its own session: a hang-up does not reach it
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
    assert not alive(pid)


def test_usage(tmp_path):
    r = subprocess.run([sys.executable, "-m", "diag", "run"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "after `--`" in r.stderr
