"""Environment remedies: empty logs, kills, host memory, ports, NCCL, GPU architecture, imports, model files, proxies."""
from __future__ import annotations

import re

from .. import phase as P
from ..rules_v1 import Context
from . import remedy, _int, _float


# -- environment ------------------------------------------------------------------------

@remedy
def empty_log(ctx: Context):
    state = ctx.facts.state
    checks = [
        "Run the same command in the foreground (no nohup, no &) to see what it prints before it dies.",
        "Capture stderr: SGLang logs to stderr, so use `cmd > server.log 2>&1` (or `2>&1 | tee server.log`), not just `> server.log`.",
        "Set PYTHONUNBUFFERED=1 so nothing is lost in a buffer if the process is killed.",
        "Look for the kernel's OOM killer: `dmesg -T | grep -i -E 'killed process|out of memory'` (host RAM, not GPU memory).",
        "Over ssh, nohup'ed jobs can still die with the session: start them under tmux/screen or `setsid nohup cmd > log 2>&1 < /dev/null &`.",
        "Check that --log-level is not above info and that SGLANG_LOGGING_CONFIG_PATH does not send logs elsewhere.",
    ]
    if state == "empty":
        ctx.values["empty_sentence"] = "The input is empty: the server wrote nothing that reached this file."
    elif state == "nohup_only":
        ctx.values["empty_sentence"] = ("The file holds only nohup's own message: the server itself never wrote to it "
                                        "(output went elsewhere, or it died before its first line — e.g. killed with the ssh session).")
    else:
        ctx.values["empty_sentence"] = (f"The input ({ctx.facts.content_lines} line(s)) holds no line SGLang writes and no error diag "
                                        "recognises: there is too little to judge.")
        checks.insert(0, "Paste the server's own output (from the launch command to the error), not only the client's.")
    ctx.finding.fix_other.extend(checks)
    for e in ctx.facts.of_kind("nohup")[:2]:
        ctx.evidence(e, role="trigger")
    if not ctx.finding.evidence:  # quote what there is, or say that there is nothing
        lines = sorted(ctx.facts.context.items())[:3]
        for (inp, n), text in lines:
            if text.strip():
                ctx.evidence(n, text, role="trigger", input_index=inp)
        if not ctx.finding.evidence:
            ctx.evidence(0, "(the input is empty: 0 lines of text)", role="trigger")
    return None


@remedy
def truncated_startup(ctx: Context):
    ms = ctx.facts.milestones
    last = ms[-1] if ms else None
    names = {"load_begin": "Load weight begin", "load_end": "Load weight end", "kv_alloc": "KV Cache is allocated",
             "mamba_alloc": "Mamba Cache is allocated", "pool_end": "Memory pool end", "graph_begin": "Capture cuda graph begin",
             "graph_end": "Capture cuda graph end", "dist_begin": "Init torch distributed begin", "dist_end": "Init torch distributed ends"}
    if last:
        ctx.values["last_step"] = names.get(last.data.get("phase"), last.data.get("phase"))
        ctx.values["last_line"] = last.line
        ctx.evidence(last, role="trigger")
    nxt = P.from_milestones(ms, 10**12, None, bool(ctx.facts.flag("--speculative-algorithm")), None)[0]
    hint = {"weights": " Weight loading reads the checkpoint through host RAM: a SIGKILL from the OOM killer is likely if host memory is small.",
            "cuda_graph": " Graph capture was next or running: a native crash or a kill during capture leaves no traceback."}.get(nxt or "", "")
    ctx.values["stop_advice"] = ("Either the process was killed from outside (no traceback is printed then) or the paste/log was cut." + hint)
    if ctx.facts.of_kind("nohup"):
        ctx.values["stop_advice"] += (" The server ran under nohup: started over ssh, it can still die when the session closes "
                                      "(nohup only ignores SIGHUP for the first process), and output buffered at that moment is lost.")
        ctx.finding.fix_other.append("Start it under tmux/screen or `setsid nohup cmd > server.log 2>&1 < /dev/null &`, with "
                                     "PYTHONUNBUFFERED=1, then check whether it still runs after you log out.")
    ctx.finding.fix_other.extend([
        "Check whether the process still runs (ps / nvidia-smi) and how it ended: `dmesg -T | grep -i -E 'killed process|oom'`, "
        "the container's exit reason (docker inspect / kubectl describe pod: OOMKilled), the job scheduler's log.",
        "If the log was redirected, make sure stderr is captured (`2>&1`) and set PYTHONUNBUFFERED=1.",
        "Paste the rest of the log if it continues.",
    ])
    return None


@remedy
def killed(ctx: Context):
    facts = ctx.facts
    kill_line = min(h.line for h in ctx.hits) if ctx.hits else None
    # a Python failure before the kill: the launcher killed its own children after it
    for e in facts.events:
        if kill_line is not None and e.line < kill_line and e.kind in ("exception", "argparse") and e.data.get("type") not in (None,) \
                and "scheduler died" not in (e.data.get("message") or "") and "scheduler is dead" not in (e.data.get("message") or ""):
            return False
    text = " ".join(h.text for h in ctx.hits)
    if "Bus error" in text or "SIGBUS" in text:
        ctx.values["killed_sentence"] = ("A process died with SIGBUS ('Bus error'), which on GPU servers usually means /dev/shm is too "
                                         "small for the shared-memory transfers between SGLang's processes.")
        ctx.finding.category = "env.host_memory"
        ctx.finding.fix_other.append("Give the container more shared memory: docker run --shm-size 32g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory at /dev/shm.")
        return None
    step = facts.failure_phase.phase if facts.failure_phase else None
    where = f" {P.DESCRIBE[step]}" if step in P.DESCRIBE else ""
    ctx.values["killed_sentence"] = (f"The server was killed with SIGKILL{where} and printed no Python error: something outside it "
                                     "ended it, most often the kernel's OOM killer (host RAM) or a container memory limit.")
    ctx.finding.fix_other.extend([
        "Confirm the sender: `dmesg -T | grep -i -E 'killed process|out of memory'`; in containers `docker inspect <id> --format '{{.State.OOMKilled}}'` or `kubectl describe pod` (OOMKilled).",
        "Give the process more host RAM (container memory limit) or reduce what SGLang keeps in host memory: --cpu-offload-gb, "
        "the hierarchical cache host pool (--hicache-ratio / --hicache-size), many tokenizer workers.",
        "Weight loading streams the checkpoint through host memory: loading several large servers at once on one host can exhaust RAM.",
    ])
    return None


@remedy
def host_memory(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    v = ctx.values
    if v.get("req") and v.get("avail"):
        req, avail = float(v["req"]), float(v["avail"])
        v["host_sentence"] = (f"The hierarchical cache asked for {req:.1f} GB of pinned host memory but only {avail:.1f} GB "
                              "(host available minus 10 GiB) is free.")
        ratio = _float(ctx.facts.flag("--hicache-ratio"))
        ctx.add_fix("--hicache-size", int(avail * 0.9), f"a host pool that fits in the {avail:.0f} GB available (GB = 1e9 bytes)", option=1)
        if ratio:
            ctx.add_fix("--hicache-ratio", f"{max(1.0, ratio * avail / req * 0.9):.1f}", "scale the host pool to the memory available", option=2)
    elif "host memory should be larger" in text:
        v["host_sentence"] = ("The hierarchical cache's host pool must hold more tokens than the GPU pool (up to 0.5.14): "
                              "raise --hicache-ratio above 1 or give --hicache-size more GB.")
        ctx.add_fix("--hicache-ratio", 2, "host pool twice the GPU pool", option=1)
    elif "shm" in text or "shared memory" in text:
        v["host_sentence"] = "Shared memory (/dev/shm) ran out; containers default to 64 MB."
        ctx.finding.fix_other.append("Run the container with --shm-size 32g or --ipc=host (Kubernetes: an emptyDir with medium: Memory at /dev/shm).")
    else:
        v["host_sentence"] = "The host ran out of memory (ENOMEM) for an allocation SGLang or PyTorch made in host RAM."
        ctx.finding.fix_other.append("Check free host memory and container limits; reduce --cpu-offload-gb or the hierarchical cache's host pool.")
    return None


@remedy
def port_in_use(ctx: Context):
    facts = ctx.facts
    text = " ".join(h.text for h in ctx.hits) + " " + " ".join(e.data.get("message", "") for e in facts.of_kind("exception"))
    port = _int(facts.flag("--port"))
    addr = ctx.values.get("addr")
    http = bool(addr) or "uvicorn" in text.lower() or "bind on address" in text
    if http:
        p = re.search(r":(\d+)", addr or "")
        busy = int(p[1]) if p else (port or 30000)
        ctx.values["port_sentence"] = (f"The HTTP port {busy} is already taken (an older server still running?). The model had loaded; "
                                       "only binding the API port failed.")
        ctx.add_fix("--port", busy + 1, "a free HTTP port", option=1)
        ctx.finding.fix_other.append(f"Find the owner: `ss -ltnp 'sport = :{busy}'` (or lsof -i :{busy}); stop the old server if it is one.")
    else:
        dp = _int(facts.flag("--dp-size"))
        what = "TCPStore (torch.distributed rendezvous)" if ("TCPStore" in text or "listen on any local network address" in text) else "an internal port"
        ctx.values["port_sentence"] = (f"A port for {what} was taken between SGLang picking it and binding it. This is not the HTTP port: "
                                       "changing --port does not help."
                                       + (f" With --dp-size {dp} many such ports are opened at once, which makes the race likelier." if dp and dp > 1 else ""))
        ctx.finding.fix_other.extend([
            "Keep SGLang's internal ports out of the kernel's ephemeral range: check `sysctl net.ipv4.ip_local_port_range`, and reserve "
            "the range SGLang uses with net.ipv4.ip_local_reserved_ports (or move the ephemeral range above it).",
            "If it persists with data parallelism, run independent single-GPU servers behind a router instead of one --dp-size N server.",
        ])
        if facts.catalog.has("--nccl-port"):
            ctx.add_fix("--nccl-port", 23456, "pin the NCCL/rendezvous port to one outside the ephemeral range (make sure it is free)", option=1)
    return None


@remedy
def nccl(ctx: Context):
    text = " ".join(h.text for h in ctx.hits) + " " + " ".join(e.data.get("message", "") for e in ctx.facts.of_kind("exception"))
    multi_node = bool(re.search(r"TP(?:1[6-9]|[2-9]\d)|\brank(?:1[6-9]|[2-9]\d)\b", " ".join(sorted(ctx.facts.events[i].rank or "" for i in range(len(ctx.facts.events)))))) \
        or bool(ctx.facts.flag("--nnodes")) and str(ctx.facts.flag("--nnodes")) not in ("1",)
    if "connectFullMesh" in text or "Gloo" in text or "gloo" in text:
        ctx.values["comm_what"] = "Gloo"
        ctx.values["nccl_sentence"] = ("The ranks could not connect their Gloo (CPU) process group"
                                       + (" across nodes" if multi_node else "") + ": the sockets went to an interface or address "
                                       "the other ranks cannot reach.")
        ctx.add_fix(external_env="GLOO_SOCKET_IFNAME", value="<interface carrying the --dist-init-addr IP, e.g. eth0 / ib0>",
                    why="make Gloo use the network the nodes share", option=1)
        ctx.add_fix(external_env="NCCL_SOCKET_IFNAME", value="<same interface>", why="and NCCL's bootstrap too", option=1)
        ctx.finding.fix_other.append("Check that each node's hostname does not resolve to 127.0.x.x (/etc/hosts) and that no firewall blocks "
                                     "the ports between nodes; --dist-init-addr must be an address every node can reach.")
    elif re.search(r"[Tt]imeout|timed out", text):
        ctx.values["comm_what"] = "collective timeout"
        ctx.values["nccl_sentence"] = ("A collective operation timed out: one rank stopped participating (crashed, hung or is much "
                                       "slower), and the others waited until the watchdog aborted.")
        ms = re.search(r"Timeout\(ms\)=(\d+)", text)
        seq = re.search(r"SeqNum=(\d+)", text)
        early = (seq is not None and int(seq[1]) <= 10) or not any(len(b) for b in ctx.facts.batches)
        if early:
            secs = int(ms[1]) // 1000 if ms else 600
            ctx.values["nccl_sentence"] += (f" It was one of the first collectives (start-up), after {secs} s: in multi-node start-ups this is "
                                            "usually a node still loading its weights (slow disk or network storage) while the others wait.")
            ctx.add_fix("--dist-timeout", max(1800, secs * 3), "give slow nodes time to finish loading before the first collective", option=2)
        ctx.finding.fix_other.append("Find the rank that failed first (its own error comes earlier in its log); a timeout on every rank "
                                     "means the network between them is down.")
        ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="log which rank and transport fail", option=1)
    else:
        ctx.values["comm_what"] = "NCCL"
        ctx.values["nccl_sentence"] = ("NCCL could not set up or run its communicators"
                                       + (" (it failed in ncclCommInitRank, during start-up)" if "CommInitRank" in text else "")
                                       + ": a system call in its transport failed. Rerun with NCCL_DEBUG=INFO to see which one.")
        ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="NCCL prints the failing call and transport", option=1)
        ctx.add_fix(external_env="NCCL_IB_DISABLE", value="1", why="on a single node with broken or absent RDMA devices, use sockets/NVLink", option=2)
        ctx.add_fix(external_env="NCCL_P2P_DISABLE", value="1", why="if GPU peer-to-peer over PCIe is the failing transport", option=3)
        ctx.finding.fix_other.append("In containers give NCCL enough shared memory (--shm-size 32g or --ipc=host); 'unhandled system error' "
                                     "is often /dev/shm or an RDMA device it cannot open.")
    return None


@remedy
def nccl_crash(ctx: Context):
    sig = " ".join(h.text for h in ctx.hits)
    ctx.values["signal_text"] = "a segmentation fault" if "Segmentation" in sig or "SIGSEGV" in sig else ("an abort" if "ABRT" in sig else "a fatal signal")
    ctx.values["p2p_advice"] = ("On PCIe systems without working peer-to-peer (common with consumer GeForce cards), disable NCCL's P2P "
                                "transport; in containers also check /dev/shm.")
    ctx.add_fix(external_env="NCCL_P2P_DISABLE", value="1", why="fall back from GPU peer-to-peer to copies through host memory", option=1)
    ctx.add_fix(external_env="NCCL_DEBUG", value="INFO", why="see the transport NCCL picks before it crashes", option=1)
    ctx.finding.fix_other.append("If it still crashes, also try NCCL_IB_DISABLE=1 (no RDMA) and NCCL_SHM_DISABLE=1, and check that the "
                                 "driver supports this GPU generation.")
    return None


@remedy
def cuda_arch(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    flashinfer = "flashinfer" in text.lower() or any("flashinfer" in (e.text or "").lower() for e in ctx.facts.events)
    if "driver" in text.lower() and ("insufficient" in text or "too old" in text):
        ctx.values["arch_sentence"] = ("The NVIDIA driver is older than the CUDA runtime the installed PyTorch/kernels were built "
                                       "with. Upgrade the driver, or install builds for the CUDA version the driver supports.")
        ctx.finding.fix_other.append("Compare `nvidia-smi` (driver, max CUDA) with `python -c 'import torch; print(torch.version.cuda)'`.")
        return None
    sm = ctx.values.get("sm") or ctx.values.get("sm2") or ctx.values.get("sm3") or ctx.values.get("sm4")
    if "ptxas" in text or "not a recognized processor" in text:
        ctx.values["arch_sentence"] = (f"Triton compiles kernels at run time with the ptxas it ships, and that ptxas does not know "
                                       f"this GPU's architecture{f' (sm_{sm})' if sm else ''}: the installed Triton/PyTorch predates the GPU. "
                                       "The first kernel compiled (often during CUDA graph capture) fails.")
        ctx.add_fix(external_env="TRITON_PTXAS_PATH", value="/usr/local/cuda/bin/ptxas",
                    why="use the CUDA toolkit's newer ptxas (CUDA 12.8+ knows Blackwell) instead of Triton's bundled one", option=1)
        ctx.finding.fix_other.append("Or install a PyTorch/Triton build made for this GPU (for Blackwell: CUDA 12.8+ wheels, e.g. torch cu128).")
        return None
    ctx.values["arch_sentence"] = ("A compiled kernel has no code for this GPU's architecture"
                                   + (f" (sm_{sm})" if sm else "") + (": FlashInfer's kernels were not built for it" if flashinfer else "")
                                   + ". The GPU is fine; the installed build does not support it.")
    if flashinfer:
        ctx.add_fix("--attention-backend", "triton", "Triton kernels compile for the GPU at run time", option=1)
        ctx.add_fix("--sampling-backend", "pytorch", "avoid FlashInfer's sampling kernels too", option=1)
        ctx.finding.options.append({"option": 1, "title": "use the portable Triton/PyTorch backends", "cost": 2})
    ctx.finding.fix_other.append("Or install builds that include this architecture (FlashInfer needs compute capability 8.0+ for most kernels; "
                                 "Blackwell needs CUDA 12.8+ builds).")
    return None


@remedy
def import_error(ctx: Context):
    v = ctx.values
    if v.get("symbol"):
        lib = re.search(r"(/\S+?\.so)\S*: undefined symbol", " ".join(h.text for h in ctx.hits))
        pkg = lib[1].split("/")[-2] if lib else "a compiled extension"
        v["what"] = f"{pkg} (undefined symbol)"
        v["import_sentence"] = (f"{pkg} was compiled against a different PyTorch than the one installed: the C++ symbol "
                                f"{v['symbol'][:60]} does not exist in this torch. Install the {pkg} build made for this torch "
                                "(or the torch version it expects); no server flag can fix this.")
        ctx.finding.fix_other.append("Reinstall matching versions together (e.g. `pip install 'sglang[all]==<version>'` in a fresh venv, "
                                     "which pins torch and sgl-kernel), or use the official lmsysorg/sglang container.")
    elif v.get("lib"):
        lib = v["lib"]
        v["what"] = lib
        cuda = bool(re.match(r"lib(?:nvrtc|cudart|cublas|cudnn|cufft|curand|cusparse|nccl|nvJitLink|cuda)\b", lib))
        v["import_sentence"] = (f"The shared library {lib} is not on the loader path"
                                + (": it belongs to the CUDA toolkit/runtime, which is not installed or not where the loader looks." if cuda else "."))
        if cuda:
            ctx.add_fix(external_env="LD_LIBRARY_PATH", value="$CUDA_HOME/lib64:$LD_LIBRARY_PATH",
                        why="point the loader at the CUDA libraries (or at site-packages/nvidia/*/lib from the pip wheels)", option=1)
            ctx.add_fix(external_env="CUDA_HOME", value="/usr/local/cuda", why="where the CUDA toolkit is installed", option=1)
        ctx.finding.fix_other.append("Install the missing library (for CUDA: a toolkit of the major version the wheels were built for).")
    elif v.get("module"):
        v["what"] = v["module"]
        v["import_sentence"] = (f"SGLang skipped {v['module']} because importing it failed; the architecture it provides will then be "
                                "reported as 'not supported'. The import error on that line is the cause.")
    elif v.get("mod"):
        mod = v["mod"].strip("'\"")
        v["what"] = mod
        v["import_sentence"] = f"The Python package providing '{mod}' is not installed in the environment the server runs in."
        ctx.finding.fix_other.append(f"Install it into the same environment (`python -m pip install {mod.split('.')[0]}` — for flashinfer, "
                                     "the wheel matching your torch and CUDA versions), or use the official container.")
    elif v.get("glibc"):
        v["what"] = v["glibc"]
        v["import_sentence"] = f"A binary package needs {v['glibc']}, newer than this system's C/C++ runtime."
        ctx.finding.fix_other.append("Use a newer OS image / container, or wheels built for this glibc (manylinux tag).")
    else:
        detail = v.get("detail", "")
        v["what"] = detail[:60]
        v["import_sentence"] = f"Import failed: {detail[:200]}"
        ctx.finding.fix_other.append("Reinstall SGLang and its kernels as one consistent set (fresh venv or the official container).")
    return None


@remedy
def build_failure(ctx: Context):
    text = " ".join(h.text for h in ctx.hits)
    m = re.search(r"Error building extension '([^']+)'", text)
    ctx.values["build_what"] = m[1] if m else text.strip()[:80]
    ctx.finding.fix_other.extend([
        "Make sure nvcc matches the CUDA version of torch (`nvcc --version` vs `python -c 'import torch; print(torch.version.cuda)'`) "
        "and that CUDA_HOME points at it.",
        "Clear the JIT cache (~/.cache/flashinfer, ~/.triton) and check it is writable with free space; or use prebuilt wheels / the official container.",
    ])
    return None


@remedy
def model_load(ctx: Context):
    v = ctx.values
    text = " ".join(h.text for h in ctx.hits)
    if v.get("archs"):
        archs = v["archs"]
        if any("Ignore import error when loading" in (e.text or "") for e in ctx.facts.events) or \
                any("Ignore import error" in t for t in ctx.facts.context.values()):
            v["model_sentence"] = (f"{archs} is reported unsupported because its SGLang module failed to import (see the "
                                   "'Ignore import error' line above); fix that import.")
        else:
            v["model_sentence"] = (f"The installed SGLang has no implementation of {archs}. Models are added release by release: "
                                   "upgrade SGLang to a version that lists this architecture.")
            ctx.finding.fix_other.append("Upgrade SGLang (`pip install -U 'sglang[all]'` or a newer container) and check its supported-models list; "
                                         "if the architecture should be there, look for 'Ignore import error when loading sglang.srt.models…' in the full log.")
    elif re.search(r"401|403|[Gg]ated|restricted", text):
        v["model_sentence"] = "The Hugging Face hub refused the download: the repo is gated or private and no valid token was sent."
        ctx.add_fix(external_env="HF_TOKEN", value="<a token with access to the repo>", why="accept the model's licence on its page, then pass a token", option=1)
    elif "not a valid model identifier" in text or "Repository Not Found" in text:
        v["model_sentence"] = "--model-path is neither an existing local folder nor a repo id on the hub (check the spelling and the path inside the container)."
    elif "safetensor" in text.lower() or "HeaderTooLarge" in text or "deserializing" in text:
        v["model_sentence"] = "A weight file is corrupt or incomplete (an interrupted download, or a Git LFS pointer instead of the file)."
        ctx.finding.fix_other.append("Re-download the checkpoint (huggingface-cli download --force-download) and compare file sizes with the hub.")
    elif "LocalEntryNotFound" in text or "disk cache" in text:
        v["model_sentence"] = "The model is not in the local cache and the hub cannot be reached (offline mode or no network)."
        ctx.finding.fix_other.append("Download it first on a machine with network access, or unset HF_HUB_OFFLINE.")
    else:
        v["model_sentence"] = "A file the model needs could not be found or read: " + text.strip()[:160]
    return None


@remedy
def http_proxy(ctx: Context):
    v = ctx.values
    status = v.get("status") or v.get("status2")
    v["status_text"] = f"HTTP {status}" if status else "a proxy error"
    host = str(ctx.facts.flag("--host") or "")
    url = next((e.data.get("url") for e in ctx.facts.milestones if e.data.get("phase") == "http_up" and e.data.get("url")), "")
    if not host and url:
        m = re.match(r"https?://([^:/]+)", url)
        host = m[1] if m else ""
    if host in ("", "0.0.0.0", "::"):
        ctx.add_fix("--host", "127.0.0.1", "the warm-up then targets 127.0.0.1, which no_proxy usually covers (the server is then local-only)", option=2)
    ctx.finding.fix_other.insert(0, "Exclude local addresses from the proxy for the server process: "
                                    "export no_proxy=localhost,127.0.0.1,0.0.0.0 NO_PROXY=localhost,127.0.0.1,0.0.0.0 "
                                    "(add the host's own name/IP), or unset http_proxy/https_proxy for it.")
    ctx.finding.options.extend([{"option": 2, "title": "bind to 127.0.0.1", "cost": 2}])
    ctx.add_fix(external_env="no_proxy", value="localhost,127.0.0.1,0.0.0.0", why="keep the server's requests to itself away from the proxy", option=1)
    ctx.finding.options.insert(0, {"option": 1, "title": "bypass the proxy for local addresses", "cost": 1})
    return None




@remedy
def gpu_fault(ctx: Context):
    faults = ctx.facts.values.get("smi.faults") or []
    parts, severe = [], False
    for f in faults:
        parts.append(f"GPU {f['gpu']} ({f.get('name') or '?'}): {'; '.join(f['errors'])}")
        severe = severe or any("ERR!" in e or "uncorrectable" in e.lower() and "correctable" != e.lower() for e in f["errors"])
        _quote_smi_line(ctx, f.get("line"), f"GPU {f['gpu']}: {'; '.join(f['errors'])}")
    if not ctx.finding.evidence:
        ctx.evidence(0, "; ".join(parts), role="trigger")
    if not severe:
        ctx.finding.severity = "warning"
        ctx.finding.title = "A GPU needs a reset (pending memory row remapping or page retirement)"
    ctx.values["fault_sentence"] = ("nvidia-smi shows " + "; ".join(parts) + ". Keep SGLang (and every rank of a sharded server) "
                                    "off that GPU until it is reset or replaced.")
    ctx.finding.fix_other.extend([
        "Check the kernel log for the Xid: `dmesg -T | grep -i xid` (79: fallen off the bus, 119/120: GSP timeouts, 48/63/64/94/95: memory errors).",
        "Drain the GPU and reset it (`nvidia-smi -r -i N`, or reboot the node); replace it if errors return.",
        "Meanwhile run SGLang on the healthy GPUs only: CUDA_VISIBLE_DEVICES listing them.",
    ])
    return None


@remedy
def gpu_held(ctx: Context):
    facts = ctx.facts
    parts = []
    for g in facts.gpus:
        used, total = g.get("memory_used_mib"), g.get("memory_total_mib")
        if used and total and used / total >= 0.1:
            procs = [p for p in facts.gpu_processes if p.get("gpu") == g.get("index") and p.get("used_mib")]
            who = ", ".join(f"PID {p['pid']} {p.get('name') or ''} {p['used_mib']} MiB".strip() for p in procs[:4])
            parts.append(f"GPU {g.get('index')} has {used:,} of {total:,} MiB in use" + (f" ({who})" if who else ""))
    ctx.values["held_sentence"] = ("; ".join(parts) + ". A server started now would size its KV cache from what is left, "
                                   "or fail to start.") if parts else "GPU memory is in use."
    for snap in facts.smi:
        for g in snap.gpus:
            if g.memory_used_mib and g.memory_total_mib and g.memory_used_mib / g.memory_total_mib >= 0.1:
                _quote_smi_line(ctx, g.line, f"GPU {g.index}: {g.memory_used_mib} / {g.memory_total_mib} MiB", memory=True)
    if not ctx.finding.evidence:
        ctx.evidence(0, ctx.values["held_sentence"], role="trigger")
    ctx.finding.fix_other.append("If the processes are an old server of yours, stop them; otherwise pick free GPUs with CUDA_VISIBLE_DEVICES.")
    return None


def _quote_smi_line(ctx: Context, line: int | None, fallback: str, memory: bool = False) -> None:
    """Quote the snapshot's own line for a GPU (the memory row of a table when asked), else a summary."""
    if line is None:
        ctx.evidence(0, fallback, role="trigger")
        return
    found = [(k, t) for k, t in ctx.facts.context.items() if k[1] == line]
    if not found:
        ctx.evidence(line, fallback, role="trigger")
        return
    (inp, n), text = found[0]
    if memory:  # table layout: the memory cell is on the row below the name
        below = ctx.facts.context.get((inp, n + 1), "")
        if "MiB /" in below:
            n, text = n + 1, below
    ctx.evidence(n, text, role="trigger", input_index=inp)


@remedy
def driver_unreachable(ctx: Context):
    error = ctx.facts.values.get("smi.error") or ""
    ctx.values["smi_error"] = error
    found = [(k, t) for k, t in ctx.facts.context.items() if error and error[:40] in t]
    if found:
        (inp, n), text = found[0]
        ctx.evidence(n, text, role="trigger", input_index=inp)
    else:
        ctx.evidence(0, error, role="trigger")
    return None
