"""`diag scan --ray [ADDRESS]`: the scan on every node of a Ray cluster, where the logs are.

An optional extra (`pip install 'diag[ray]'`); diag must be installed in the cluster's Python
environment, as it is for any Ray task. In two rounds of tasks, each pinned to one alive node
(NodeAffinitySchedulingStrategy, not soft):

1. each node lists the log files it can read: the paths given (globs and folders, expanded on
   the node), else its Ray session's log folder, where SGLang engines started as Ray actors or
   tasks write their output (`worker-*.out`, `worker-*.err`, `job-driver-*.log`);
2. each file is given to one node (a file that several nodes see, on a shared file system or
   nodes on one host, is read once; the largest files first, to the least loaded node), and
   each node diagnoses its files with its own cores (diag/fleet/scan.py) and returns the rows.

Only the rows travel to the caller: the logs are never copied off their nodes.
"""
from __future__ import annotations

import os
import socket

RAY_OUTPUT = ("worker-*.out", "worker-*.err", "job-driver-*.log")


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached (one line for the CLI)."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("diag scan --ray needs Ray: pip install 'diag[ray]'") from None
    return ray


def session_logs() -> str:
    """This node's Ray session log folder (inside a Ray task)."""
    try:
        import ray._private.worker as w
        path = w.global_worker.node.get_logs_dir_path()
        if path and os.path.isdir(path):
            return path
    except Exception:  # private API moved: the documented default location
        pass
    return os.path.join(os.environ.get("RAY_TMPDIR", "/tmp/ray"), "session_latest", "logs")


def list_node_files(paths: list[str]) -> dict:
    """Round 1, on a node: the files it can read, with what identifies a file across nodes."""
    from . import scan as S
    default = not paths
    patterns = [os.path.join(session_logs(), p) for p in RAY_OUTPUT] if default else paths
    files, missing = S.expand(patterns)
    out = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue
        out.append({"path": f, "size": st.st_size, "id": [os.path.realpath(f), st.st_ino, st.st_size, st.st_mtime_ns]})
    return {"node": _node_id(), "host": socket.gethostname(), "files": out, "missing": [] if default else missing,
            "default": default}


def scan_node_files(files: list[str], opts, only_sglang: bool) -> dict:
    """Round 2, on a node: the rows of its files, each row naming the node."""
    from dataclasses import replace

    from . import scan as S
    # a Ray worker runs threads: its pool is spawned, not forked
    rows = S.scan_files(files, replace(opts, only_sglang=only_sglang, start_method="spawn"))
    node = f"{socket.gethostname()}/{_node_id()[:8]}"
    for r in rows:
        r["node"] = node
    return {"node": _node_id(), "rows": rows}


def _node_id() -> str:
    import ray
    return ray.get_runtime_context().get_node_id()


def assign(listings: list[dict]) -> dict[str, list[str]]:
    """Each distinct file to one node that sees it: largest first, to the least loaded node."""
    seen: dict[tuple, list[tuple[str, str, int]]] = {}
    for lst in listings:
        for f in lst["files"]:
            seen.setdefault(tuple(f["id"]), []).append((lst["node"], f["path"], f["size"]))
    load = {lst["node"]: 0 for lst in listings}
    out: dict[str, list[str]] = {lst["node"]: [] for lst in listings}
    for _, holders in sorted(seen.items(), key=lambda kv: (-kv[1][0][2], kv[0][0])):
        node, path, size = min(holders, key=lambda h: (load[h[0]], h[0]))
        out[node].append(path)
        load[node] += max(size, 1)
    return out


def _check_reachable(address: str | None) -> None:
    """A host:port that refuses connections fails at once (ray.init would retry for a minute)."""
    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailable(f"--ray {address}: give the cluster's address as HOST:PORT (or 'auto')")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5):
            pass
    except OSError as exc:
        raise RayUnavailable(f"cannot connect to the Ray cluster at {address}: {exc.strerror or exc}") from None


def scan_cluster(address: str | None, paths: list[str], opts, progress=None) -> list[dict]:
    """Every alive node's rows, gathered here."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    _check_reachable(address)
    try:
        ray.init(address=address or "auto", log_to_driver=False, logging_level="ERROR", configure_logging=True)
    except Exception as exc:  # ConnectionError, a timeout, a bad address: one line
        raise RayUnavailable(f"cannot connect to the Ray cluster at {address or 'auto'}: {str(exc).splitlines()[0][:200]}") from None
    try:
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        if not nodes:
            raise RayUnavailable("the Ray cluster has no alive node")
        lister = ray.remote(num_cpus=0)(list_node_files)
        scanner = ray.remote(num_cpus=0)(scan_node_files)

        def on(node):
            return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

        listings = ray.get([lister.options(**on(n)).remote(paths) for n in nodes])
        plan = assign(listings)
        total = sum(len(v) for v in plan.values())
        only_sglang = listings[0]["default"] if listings else False
        pending = {scanner.options(**on(n)).remote(files, opts, only_sglang): len(files) for n, files in plan.items() if files}
        rows: list[dict] = []
        done = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                done += pending.pop(ref)
                rows.extend(ray.get(ref)["rows"])
                if progress:
                    progress(done, total, sum(1 for r in rows if r.get("state") == "failed"))
        rows.sort(key=lambda r: (r.get("node") or "", r.get("file") or "", r.get("run") or 0))
        return rows
    finally:
        ray.shutdown()
