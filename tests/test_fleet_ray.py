"""diag scan --ray (issue 12, part 4) on a real local Ray cluster of two nodes (a head and a
worker node, started here with `ray start`, one CPU each, no dashboard), stopped afterwards by
the ids of the processes it started. Skips only when Ray cannot start on this machine."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PROXY = DATA / "sglang" / "006-warmup-502-killed-http-proxy.log"
ARCH = DATA / "sglang" / "028-sm75-flashinfer-no-kernel-image.log"
RAY = Path(sys.executable).parent / "ray"
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_DISABLE_DOCKER_CPU_WARNING="1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ours(temp: str) -> list[int]:
    """The processes this test's cluster runs: their command line names its temp folder, or
    their parent is one of those."""
    pids, parents = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry.name)] = ppid
        if temp in cmd:
            pids.add(int(entry.name))
    grew = True
    while grew:
        kids = {p for p, pp in parents.items() if pp in pids and p not in pids}
        grew = bool(kids)
        pids |= kids
    return sorted(pids)


def _stop(temp: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _ours(temp)
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        # gcs_server, the raylets and their runtime-env agents ignore TERM for over 3 s (measured
        # here): the cluster is this test's own and thrown away, so KILL follows after half a second
        deadline = time.monotonic() + (0.5 if sig == signal.SIGTERM else 10)
        while time.monotonic() < deadline and _alive(_ours(temp)):
            time.sleep(0.05)
        if not _alive(_ours(temp)):
            return


def _alive(pids: list[int]) -> bool:
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            return True
    return False


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'diag[ray]'; the test extra installs it)")
    if not RAY.exists():
        pytest.skip(f"Ray's command line is not installed beside {sys.executable}")
    temp = tempfile.mkdtemp(prefix="diagray", dir="/tmp")   # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    try:
        head = subprocess.run([str(RAY), "start", "--head", f"--port={port}", "--include-dashboard=false",
                               f"--temp-dir={temp}", *common], capture_output=True, text=True, timeout=120, env=ENV)
        if head.returncode != 0:
            _stop(temp)
            pytest.skip("Ray cannot start a head node on this machine: " + (head.stderr or head.stdout).strip().splitlines()[-1][:300])
        worker = subprocess.run([str(RAY), "start", f"--address={address}", *common], capture_output=True, text=True,
                                timeout=120, env=ENV)
        if worker.returncode != 0:
            _stop(temp)
            pytest.skip("Ray cannot start a second (worker) node on this machine: "
                        + (worker.stderr or worker.stdout).strip().splitlines()[-1][:300])
        yield address, temp
    finally:
        _stop(temp)
        assert not _alive(_ours(temp)), "the Ray cluster's processes outlived the test"
        shutil.rmtree(temp, ignore_errors=True)


ENGINES = textwrap.dedent('''
    """Stand-in SGLang engines, one Ray actor pinned to each node, printing a real failure log."""
    import sys, ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")

    @ray.remote(num_cpus=0)
    class Engine:
        def run(self, text):
            for line in text.splitlines():
                print(line, flush=True)
            return ray.get_runtime_context().get_node_id()

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    texts = [open(p).read() for p in sys.argv[2:]]
    engines = [Engine.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote() for n in nodes]
    print(",".join(ray.get([e.run.remote(t) for e, t in zip(engines, texts)])))
''')


def _scan(*args, timeout=180):
    r = subprocess.run([sys.executable, "-m", "diag", "scan", *args], capture_output=True, text=True, timeout=timeout, env=ENV)
    return r


def _start_scan(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "diag", "scan", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """Both scans of the cluster, run side by side (each driver mostly waits on Ray's handshakes): the
    scan of given paths starts with the stand-in engines, the scan of the session logs once the
    engines have written theirs. {name: (returncode, stdout, stderr)}, and the engines' node ids."""
    address, temp = cluster
    tmp = tmp_path_factory.mktemp("ray")
    folder = tmp / "logs"
    folder.mkdir()
    for k in range(4):
        (folder / f"engine-{k}.log").write_text((PROXY if k % 2 else ARCH).read_text())
    script = tmp / "engines.py"
    script.write_text(ENGINES)
    session = None
    given = _start_scan("--ray", address, str(folder / "*.log"), "-f", "json", "--fail-on", "never")
    try:
        r = subprocess.run([sys.executable, str(script), address, str(PROXY), str(ARCH)], capture_output=True,
                           text=True, timeout=120, env=ENV)
        session = _start_scan("--ray", address, "-f", "jsonl", "--fail-on", "never", "--progress")
        out = {}
        for name, proc in (("given", given), ("session", session)):
            so, se = proc.communicate(timeout=180)
            out[name] = (proc.returncode, so, se)
    finally:
        for proc in (given, session):
            if proc is not None and proc.poll() is None:
                proc.kill()
    return r, out


def test_ray_scan_of_session_logs_on_every_node(cluster, runs):
    _, temp = cluster
    r, out = runs
    assert r.returncode == 0, r.stderr[-2000:]
    engine_nodes = set(r.stdout.strip().splitlines()[-1].split(","))
    assert len(engine_nodes) == 2                       # one engine ran on each node
    code, stdout, stderr = out["session"]
    assert code == 0, stderr[-2000:]
    rows = [json.loads(line) for line in stdout.splitlines()]
    # Ray's own logs and idle workers' files are not SGLang logs: only the two engines' output is left
    assert sorted(r["category"] for r in rows) == ["env.cuda_arch_driver", "env.http_proxy"]
    assert all(Path(r["file"]).name.startswith("worker-") and temp in r["file"] for r in rows)
    assert len({r["node"] for r in rows}) == 2          # the two largest files went to the two nodes
    assert {r["node"].split("/")[1] for r in rows} <= {n[:8] for n in engine_nodes}
    assert "diag: scanned" in stderr


def test_ray_scan_of_given_paths_reads_each_file_once(runs):
    _, out = runs
    code, stdout, stderr = out["given"]
    assert code == 0, stderr[-2000:]
    rows = json.loads(stdout)
    assert sorted(Path(r["file"]).name for r in rows) == [f"engine-{k}.log" for k in range(4)]   # both nodes see them: read once
    assert len({r["node"] for r in rows}) == 2
    assert {r["group_size"] for r in rows} == {2}


def test_ray_unreachable_is_one_line(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed")
    out = _scan("--ray", f"127.0.0.1:{_free_port()}", str(PROXY), timeout=120)
    assert out.returncode == 2 and "cannot connect to the Ray cluster" in out.stderr and "Traceback" not in out.stderr
