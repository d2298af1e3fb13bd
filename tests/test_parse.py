"""Reading, chat-paste clean-up, SGLang log events, version detection, launch commands."""
from __future__ import annotations

import io

import pytest

from diag import detect_version as DV
from diag import flags as F
from diag.clean import Cleaner
from diag.launch import parse_launch, parse_server_args, server_args_to_flags
from diag.parse import sglang as SG
from diag.parse.sglang import LogParser, parse_oom_numbers
from diag.read import Opened, iter_lines, open_input
from diag.versions import VersionRange


def parse(text: str) -> LogParser:
    p = LogParser()
    for n, line in Cleaner().run(text.splitlines()):
        p.feed(n, line)
    p.finish()
    return p


def kinds(p: LogParser) -> list[str]:
    return [e.kind for e in p.events]


# -- reading -------------------------------------------------------------------------------

def opened(data: bytes, name="x") -> Opened:
    from diag.read import _encoding
    return Opened(name=name, stream=io.BytesIO(data), head=data[:65536], encoding=_encoding(data[:65536]), size=len(data))


def test_crlf_cr_and_invalid_bytes():
    lines = list(iter_lines(opened(b"a\r\nb\rc\n\xff\xfed")))
    assert lines[:3] == ["a", "b", "c"]
    assert lines[3].endswith("d") and "\ufffd" in lines[3]


def test_utf16_with_bom(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes("[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=78.90 GB\n".encode("utf-16"))
    o = open_input(str(f))
    assert list(iter_lines(o))[0].startswith("[2025-01-01")


def test_long_line_is_cut_without_holding_it(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes(b"y" * 600_000 + b"\nnext\n")
    o = open_input(str(f))
    lines = list(iter_lines(o))
    assert [len(lines[0]), lines[1]] == [256 * 1024, "next"]
    assert any("cut" in n for n in o.notes)


# -- clean-up -----------------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    ("sglang-1  | [2025-10-29 11:25:58 TP3] Watchdog timeout (self.watchdog_timeout=300)", "[2025-10-29 11:25:58 TP3] Watchdog timeout"),
    ("2025-03-25T11:01:54.123456789Z [2025-03-25 11:01:54 TP0] Load weight begin. avail mem=1 GB", "[2025-03-25 11:01:54 TP0] Load weight"),
    ("2025-03-25T11:01:54Z stdout F [2025-03-25 11:01:54 TP0] Load weight begin. avail mem=1 GB", "[2025-03-25 11:01:54 TP0] Load weight"),
    ("[pod/sglang-0/server] [2025-03-25 11:01:54 TP0] Load weight begin. avail mem=1 GB", "[2025-03-25 11:01:54 TP0] Load weight"),
    ("Mar 25 11:01:54 gpu-host python3[4242]: [2025-03-25 11:01:54 TP0] Load weight begin. avail mem=1 GB", "[2025-03-25 11:01:54 TP0] Load"),
    ("(SchedulerActor pid=48211) [2026-10-01 14:03:05 TP1] Load weight begin. avail mem=78.90 GB", "[2026-10-01 14:03:05 TP1] Load"),
    ("(SGLangEngine pid=1234, ip=10.0.0.5) [2026-10-01 14:03:05 TP1] Load weight begin. avail mem=78.90 GB", "[2026-10-01 14:03:05 TP1] Load"),
    ("> [2026-10-01 14:03:05 TP1] Load weight begin. avail mem=78.90 GB", "[2026-10-01 14:03:05 TP1] Load"),
    ("\x1b[1;33m[2026-10-01 14:03:05 TP1] Load weight begin. avail mem=78.90 GB\x1b[0m", "[2026-10-01 14:03:05 TP1] Load"),
])
def test_prefixes_are_removed(raw, expected):
    out = [t for _, t in Cleaner().run([raw, raw, raw])]
    assert all(t.startswith(expected) for t in out), out


def test_fences_dropped_and_line_numbers_kept():
    lines = ["```", "[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=1 GB", "```text", "RuntimeError: x", "```"]
    assert list(Cleaner().run(lines)) == [(2, lines[1]), (4, "RuntimeError: x")]


def test_hard_wrapped_paste_is_joined():
    head = "[2025-01-01 10:00:00 TP0] "
    wrapped = [head + "a" * 54, "bbbb continues", head + "c" * 54, "dddd", head + "e" * 54, "ffff", head + "short"]
    c = Cleaner()
    out = list(c.run(wrapped))
    assert out[0] == (1, head + "a" * 54 + "bbbb continues")
    assert c.info.joined == 3


def test_tables_are_not_joined():
    rows = ["+" + "-" * 78 + "+", "| NVIDIA-SMI 525.60.13    Driver Version: 525.60.13    CUDA Version: 12.0".ljust(79) + "|"] * 4
    assert len(list(Cleaner().run(rows))) == len(rows)


# -- SGLang events ----------------------------------------------------------------------------

def test_prefix_ranks_and_milestones_with_memory():
    p = parse("""[2026-10-01 14:03:05.123 DP1 TP5 EP5] Load weight begin. avail mem=78.90 GB
[2026-10-01 14:03:41 DP1 TP5 EP5] Load weight end. elapsed=35.92 s, type=Qwen3NextForCausalLM, quant=fp8, avail mem=58.66 GB, mem usage=20.24 GB.
[2026-10-01 14:03:42 TP0] Mamba Cache is allocated. max_mamba_cache_size: 723, conv_state size: 0.30GB, ssm_state size: 12.73GB 
[2026-10-01 14:03:42 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1265871, K size: 7.24 GB, V size: 7.24 GB
[2026-10-01 14:03:42 TP0] Memory pool end. avail mem=13.79 GB
[2026-10-01 14:04:31 TP0] Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=48.11 s, mem usage=1.38 GB, avail mem=12.41 GB.
[2026-10-01 14:04:32 TP0] max_total_num_tokens=1265871, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=241, context_len=262144, available_gpu_mem=12.41 GB
[2026-10-01 14:04:40] The server is fired up and ready to roll!""")
    ms = {e.data.get("phase"): e for e in p.events if e.kind == "milestone"}
    assert ms["load_begin"].rank == "DP1 TP5 EP5" and ms["load_begin"].data["avail_gib"] == 78.90
    assert ms["load_end"].data["usage_gib"] == 20.24 and ms["load_end"].data["quant"] == "quant=fp8"
    assert ms["mamba_alloc"].data["size"] == 723 and ms["mamba_alloc"].data["ssm_gib"] == 12.73
    assert ms["kv_alloc"].data["tokens"] == 1265871 and ms["kv_alloc"].data["k_gib"] == 7.24
    assert ms["graph_end"].data["usage_gib"] == 1.38
    cap = next(e for e in p.events if e.kind == "capacity")
    assert cap.data["max_running_requests"] == 241 and cap.data["available_gpu_mem"] == 12.41
    assert "ready" in ms


def test_mla_kv_line_and_old_formats():
    p = parse("""[2024-12-13 01:44:59 TP0] Load weight end. type=MistralForCausalLM, dtype=torch.bfloat16, avail mem=9.69 GB
[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1843200, KV size: 30.66 GB
[gpu_id=0] Memory pool end. avail mem=2.52 GB""")
    ms = [e.data for e in p.events if e.kind == "milestone"]
    assert ms[0]["avail_gib"] == 9.69 and ms[0]["usage_gib"] is None
    assert ms[1]["kv_gib"] == 30.66
    assert p.events[2].rank == "TP0"


def test_batch_lines_become_columns():
    p = parse("""[2025-01-06 02:58:11 TP0] Decode batch. #running-req: 2, #token: 307481, token usage: 1.00, gen throughput (token/s): 10.92, #queue-req: 0
[2025-01-06 02:58:19 TP0] Decode batch, #running-req: 40, #full token: 151904, full token usage: 0.12, mamba num: 40, mamba usage: 0.06, cuda graph: True, gen throughput (token/s): 1843.55, #queue-req: 12
[2025-01-06 02:58:20 TP1] Decode batch, #running-req: 40, #token: 1, token usage: 0.12, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 12
[2025-01-06 02:58:21 TP0] Prefill batch, #new-seq: 3, #new-token: 8192, #cached-token: 1024, token usage: 0.12, #running-req: 37, #queue-req: 12, """)
    b = p.batches
    assert len(b) == 3  # the TP1 line repeats TP0's view
    assert list(b.kind) == [1, 1, 0]
    assert b.tokens[0] == 307481 and b.usage[1] == 0.12 and b.mamba_usage[1] == 0.06 and b.tokens[2] == 8192
    assert b.ts[1] - b.ts[0] == 8
    assert p.events == []


def test_traceback_with_header_frames_and_exception():
    p = parse("""[2025-10-01 14:03:42 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/x/sglang/srt/managers/scheduler.py", line 2790, in run_scheduler_process
    scheduler = Scheduler(
  File "/x/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 540, in init_memory_pool
    raise RuntimeError(
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.6

[2025-10-01 14:03:42] Received sigquit from a child process. It usually means the child failed.""")
    exc = next(e for e in p.events if e.kind == "exception")
    assert exc.rank == "TP0" and exc.data["type"] == "RuntimeError"
    assert [f.func for f in exc.data["frames"]] == ["run_scheduler_process", "init_memory_pool"]
    assert exc.data["frames"][1].code == "raise RuntimeError("
    assert not exc.data["partial_head"]
    assert kinds(p)[-1] == "signal"


def test_chained_and_fragment_tracebacks():
    p = parse("""  File "/x/a.py", line 1, in f
ValueError: first
During handling of the above exception, another exception occurred:
Traceback (most recent call last):
  File "/x/b.py", line 2, in g
KeyError: 'second'""")
    excs = [e for e in p.events if e.kind == "exception"]
    assert [e.data["type"] for e in excs] == ["ValueError", "KeyError"]
    assert excs[0].data["partial_head"] and excs[1].data["chained"]


def test_cut_traceback_keeps_its_frames():
    p = parse("""[2025-07-07 19:00:30 DP4 TP4] TpModelWorkerClient hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1199, in forward_extend
    return self.model.forward(""")
    cut = next(e for e in p.events if e.kind == "exception")
    assert cut.data["partial_tail"] and cut.data["frames"][0].func == "forward_extend"


def test_multiline_exception_message():
    p = parse("""torch.distributed.DistNetworkError:
The server socket has failed to listen on any local network address.
code: -98,
name: EADDRINUSE,""")
    exc = next(e for e in p.events if e.kind == "exception")
    assert "EADDRINUSE" in exc.data["message"] and exc.end_line == 4


def test_a_message_inside_an_exception_message_is_an_event_of_its_own():
    # NCCL's 'Last error:' detail under the DistBackendError: the shm failure is a message of its own
    p = parse("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:81, "
              "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
              "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
              "Last error:\n"
              "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)\n")
    exc = next(e for e in p.events if e.kind == "exception")
    nested = [e for e in p.events if e.kind == "message" and e.data.get("inside") == exc.line]
    shm = next(e for e in nested if e.msg.id == "nccl.shm_segment_failed")
    assert shm.line == 4 and shm.msg.fields["path"] == "/dev/shm/nccl-vzIpS6"
    assert "shared memory segment" in exc.data["message"]            # the exception keeps its whole message
    # an OOM's own continuation lines stay part of the OOM
    p = parse("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
              "79.14 GiB of which 1.10 GiB is free.\n"
              "Of the allocated memory 73.96 GiB is allocated by PyTorch, and 639.99 MiB is reserved by PyTorch but unallocated.\n")
    assert not [e for e in p.events if e.kind == "message"]


def test_oom_numbers_new_and_old_wording():
    new = parse_oom_numbers("CUDA out of memory. Tried to allocate 26.00 MiB. GPU 1 has a total capacity of 15.77 GiB of which 44.44 MiB "
                            "is free. Process 4312 has 1.50 GiB memory in use. Including non-PyTorch memory, this process has 14.05 GiB "
                            "memory in use. Of the allocated memory 13.64 GiB is allocated by PyTorch, with 34.50 MiB allocated in private "
                            "pools (e.g., CUDA Graphs), and 67.23 MiB is reserved by PyTorch but unallocated.")
    assert new["gpu"] == 1 and new["total_gib"] == 15.77 and abs(new["tried_gib"] - 26 / 1024) < 1e-9
    assert abs(new["free_gib"] - 44.44 / 1024) < 1e-9 and new["this_process_gib"] == 14.05
    assert new["processes"] == [{"pid": 4312, "used_gib": 1.5}]
    assert new["allocated_gib"] == 13.64 and abs(new["private_pools_gib"] - 34.5 / 1024) < 1e-9
    old = parse_oom_numbers("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already "
                            "allocated; 3.19 MiB free; 14.62 GiB reserved in total by PyTorch)")
    assert old["total_gib"] == 15.78 and old["allocated_gib"] == 14.56 and old["reserved_gib"] == 14.62


def test_sglang_kv_allocator_messages_are_not_device_ooms():
    p = parse("[2025-05-01 12:00:00 TP0] Prefill out of memory. Try to lower your batch size.")
    assert "oom" not in kinds(p)


def test_signals_and_argparse():
    p = parse("""launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2
RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer.
Killed""")
    assert kinds(p)[0] == "argparse"
    assert p.events[-1].data["signal"] == "killed"


# -- versions ---------------------------------------------------------------------------------

def test_version_named_outright():
    for text, v in [("pip: sglang==0.5.5", "0.5.5"), ("image lmsysorg/sglang:v0.5.10.post1-cu129", "0.5.10.post1"),
                    ("SGLang v0.5.13 ready", "0.5.13")]:
        assert SG.named_version(text) == v
    assert SG.named_version("sglang-router 0.2.1") is None
    assert SG.named_version("sglang==0.5.5.1") is None      # not followed by a digit or a dot


def test_version_named_outright_is_a_version_event_not_an_sglang_line():
    p = parse("pip install sglang==0.5.6\nsomething else\n[2026-01-01 00:00:00] Decode batch, #running-req: 1, sglang==0.4.0")
    assert [(e.kind, e.line, e.data) for e in p.versions] == [("version", 1, {"component": "sglang", "version": "0.5.6"})]
    assert not list(p.events)      # a line that names a version is no event (and the batch line is not read for one)


def test_version_from_wordings_intersects():
    p = parse("[2026-01-01 00:00:00 TP0] Load weight end. elapsed=35.92 s, type=X, avail mem=1 GB, mem usage=2 GB.\n"
              "[2026-01-01 00:00:01 TP0] KV Cache is allocated. #tokens: 10, K size: 1 GB, V size: 1 GB")
    dated = [(e.line, VersionRange(low=lo, high=hi, source=d)) for e in p.events for lo, hi, d in e.data.get("dated_text", ())]
    assert len(dated) == 2
    rng, lines, note = DV.combine([], dated)
    assert (rng.low, rng.high) == ("0.5.10", "0.5.12") and not note and lines == [1, 2]


def test_catalog_for_unknown_and_in_between_versions():
    assert F.for_version(None).versions == [F.newest()]
    assert F.for_version("0.5.17").versions == ["0.5.14", "0.5.19"]
    assert F.for_version("0.5.10.post1").versions == ["0.5.10"]
    assert F.for_version(VersionRange(low="0.5.10", high="0.5.13")).versions == ["0.5.10", "0.5.11", "0.5.12", "0.5.13"]


# -- launch commands and server_args -------------------------------------------------------------

def test_launch_command_parsing_like_argparse():
    cat = F.for_version("0.5.10")
    cmd = parse_launch("CUDA_VISIBLE_DEVICES=0,1 SGLANG_ENABLE_SPEC_V2=1 python3 -m sglang.launch_server --model-path /m "
                       "--tp 2 --mem-fraction 0.8 --enable-torch-compile --json-model-override-args '{\"a\": 1}' "
                       "--reasoning_parser qwen3 2>&1 | tee log", cat)
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_ENABLE_SPEC_V2": "1"}
    assert cmd.flags["--tp-size"] == "2" and cmd.flags["--mem-fraction-static"] == "0.8"
    assert cmd.flags["--enable-torch-compile"] is True
    kinds_ = {p.kind for p in cmd.problems}
    assert {"abbreviation", "unknown_flag"} <= kinds_


def test_launch_command_over_several_lines_is_one_event():
    p = parse("""```bash
SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server \\
  --model-path Qwen/Qwen3-4B \\
  --json-model-override-args '{
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}
  }' \\
  --speculative-num-steps 1
```
The input (70000 tokens) is longer than the model's context length (40960).
[2025-01-01 00:00:00] python -m sglang.launch_server --model-path /m --json-model-override-args '{"a":
[2025-01-01 00:00:01] Load weight begin. avail mem=15.20 GB
""")
    launches = [e for e in p.events if e.kind == "launch"]
    assert len(launches) == 2
    first = launches[0]
    assert first.line == 2 and first.end_line == 7
    cmd = parse_launch(first.data["command"], F.for_version("0.5.10"))
    assert cmd.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert cmd.flags["--speculative-num-steps"] == "1" and '"factor": 4.0' in cmd.flags["--json-model-override-args"]
    # a log record ends a command whose quote is still open
    assert launches[1].end_line is None and any(e.kind == "milestone" for e in p.events)


def test_server_args_dump_both_styles_and_cut():
    old = parse_server_args("ServerArgs(model_path='/m', mem_fraction_static=0.824, tp_size=4, mamba_scheduler_strategy='no_buffer', x=Obj(1))")
    assert old["mem_fraction_static"] == 0.824 and old["x"] == "Obj(1)"
    new = parse_server_args("{'model_path': '/m', 'mem_fraction_static': 0.907, 'cuda_graph_config': {'decode': {'max_bs': 8}}}")
    assert new["cuda_graph_config"]["decode"]["max_bs"] == 8
    cut = parse_server_args("ServerArgs(model_path='/m', tp_size=4, mem_frac")
    assert cut == {"model_path": "/m", "tp_size": 4}
    flags = server_args_to_flags(old, F.for_version("0.5.10"))
    assert flags["--mem-fraction-static"] == 0.824 and flags["--mamba-scheduler-strategy"] == "no_buffer"


# -- pastes hard-wrapped by a terminal or mail client --------------------------------------------

CORPUS = sorted((__import__("pathlib").Path(__file__).parent / "data" / "sglang").glob("*.log"))


def _wrap(text: str, width: int) -> str:
    out = []
    for line in text.splitlines():
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name[:3])
def test_wrapped_paste_gives_the_same_answer(path, tmp_path):
    from diag.analyze import analyze
    base = analyze([str(path)])
    assert not any("joined" in n for n in base.inputs[0].notes), "an unwrapped log must not be joined"
    for width in (60, 80, 120, 200):
        f = tmp_path / f"w{width}.log"
        f.write_text(_wrap(path.read_text(), width))
        wrapped = analyze([str(f)])
        assert [x.category for x in wrapped.findings[:1]] == [x.category for x in base.findings[:1]], width


def test_records_run_together_on_one_line_are_split():
    flat = ("(SGLangWorker pid=38141) 'sm_120' is not a recognized processor for this target (ignoring processor) "
            "(SGLangWorker pid=38141) [2025-09-18 03:27:46 DP2 TP0] Scheduler hit an exception: Traceback (most recent call last): "
            "(SGLangWorker pid=38141)   File \"/x/sglang/srt/managers/scheduler.py\", line 1, in run "
            "(SGLangWorker pid=38141) RuntimeError: boom")
    c = Cleaner()
    out = [t for _, t in c.run([flat])]
    assert out[1].startswith("[2025-09-18 03:27:46 DP2 TP0] Scheduler hit an exception")
    assert out[-1] == "RuntimeError: boom" and c.info.split == 3
    two = "[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=1 GB [2025-01-01 10:00:01 TP0] Load weight end. type=X, dtype=y, avail mem=1 GB"
    assert len([t for _, t in Cleaner().run([two])]) == 2


def test_usage_block_narrows_the_version():
    from diag.analyze import analyze_with_facts
    import tempfile, os
    usage = ("usage: launch_server.py [-h] --model-path MODEL_PATH [--enable-ep-moe] [--enable-deepep-moe] [--enable-flashmla]\n"
             "                        [--cuda-graph-max-bs CUDA_GRAPH_MAX_BS] [--enable-flashinfer-mla] [--host HOST] [--port PORT]\n"
             "launch_server.py: error: unrecognized arguments: --foo\n")
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
        fh.write(usage)
    try:
        _, facts = analyze_with_facts([fh.name])
    finally:
        os.unlink(fh.name)
    assert facts.version.high == "0.4.6.post5", facts.version  # --enable-flashinfer-mla was removed after 0.4.6


def test_iter_events_yields_every_line():
    from diag.parse.sglang import iter_events
    text = """[2025-01-06 02:58:11 TP0] Decode batch. #running-req: 2, #token: 307481, token usage: 1.00, gen throughput (token/s): 10.92, #queue-req: 0
something the parser does not know
[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=78.90 GB

RuntimeError: boom"""
    evs = list(iter_events(Cleaner().run(text.splitlines())))
    assert [(e.line, e.kind) for e in evs] == [(1, "batch"), (2, "plain"), (3, "milestone"), (5, "exception")]
    assert evs[0].data["running"] == 2 and evs[0].data["kind"] == "decode"


def test_events_command_streams_json_lines():
    import json, subprocess, sys
    out = subprocess.run([sys.executable, "-m", "diag", "events", str(CORPUS[0].parent / "006-warmup-502-killed-http-proxy.log"),
                          "--kind", "exception"], capture_output=True, text=True, check=True).stdout.splitlines()
    ev = json.loads(out[0])
    assert ev["kind"] == "exception" and ev["data"]["type"] == "AssertionError" and ev["data"]["frames"]


def test_a_last_value_followed_by_a_shell_line_is_not_a_wrap():
    lines = ["[2025-01-06 02:58:11 TP0] Decode batch. #running-req: 2, #token: 307481, token usage: 1.00, #queue-req: 0",
             "Killed", "something else entirely"]
    assert [t for _, t in Cleaner().run(lines)] == lines


def test_a_repeated_line_of_the_widest_length_is_not_a_wrap():
    """A library's check printed once per rank gives lines of one length, each complete: a
    line that begins as the one before it is the next record, not its wrapped rest."""
    line = "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214"
    lines = [line] * 4 + ["Child process unexpectedly failed with an exit code 256. pid=%d" % p for p in range(97719, 97723)]
    c = Cleaner()
    assert [t for _, t in c.run(lines)] == lines and c.info.joined == 0


def test_version_from_the_flags_an_ambiguous_option_names(tmp_path):
    from diag.analyze import Options, analyze_with_facts
    p = tmp_path / "x.log"
    p.write_text("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                 "--cuda-graph-max-bs-prefill\n", encoding="utf-8")
    f = analyze_with_facts([str(p)], options=Options())[1]
    assert f.version.low == "0.5.14" and "0.5.23" in f.catalog.versions


def test_a_rejected_command_says_nothing_about_the_version_wherever_the_error_stands(tmp_path):
    from diag.analyze import Options, analyze_with_facts
    p = tmp_path / "x.log"
    p.write_text("python -m sglang.launch_server --model m --kt-amx-weight-path /w --kt-amx-method AMXINT4\n"
                 "it shows launch_server.py: error: unrecognized arguments: --kt-amx-method AMXINT4\n", encoding="utf-8")
    f = analyze_with_facts([str(p)], options=Options())[1]
    assert f.version.describe() == "unknown"     # not the releases that accept the rejected flags


def test_a_traceback_header_carries_its_catalog_match():
    p = parse("[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):\n"
              '  File "/x/sglang/srt/server.py", line 621, in _wait_and_warmup\n'
              "AssertionError: res=<Response [502]>, res.text=''\n")
    header = next(e for e in p.events if e.data.get("source") == "traceback-header")
    assert header.msg is not None and header.msg.name == "warmup.failed"


def test_the_last_line_cut_inside_a_message_still_carries_it():
    p = parse("ValueError: metrics_port at 40290 is not available in 30 seconds. metrics_port is used by a process "
              "already. process.name()='sglang' process.cmdline()=\n")
    exc = next(e for e in p.events if e.kind == "exception")
    assert exc.msg is not None and exc.msg.name == "port.wait_timeout" and exc.data.get("cut")
    # only the last line: a line that stops early in the middle of a log is a different message
    p = parse("ValueError: metrics_port at 40290 is not available in 30 seconds. metrics_port is used by a process "
              "already. process.name()='sglang' process.cmdline()=\n[2025-01-01 10:00:00] Load weight begin. avail mem=1 GB\n")
    assert next(e for e in p.events if e.kind == "exception").msg is None


def test_the_kernels_oom_killer_line_is_not_a_device_oom():
    p = parse("[Sat Mar  1 10:02:11 2025] Out of memory: Killed process 4242 (sglang::schedu) total-vm:812345678kB, "
              "anon-rss:98765432kB, file-rss:0kB\nKilled\n")
    assert not [e for e in p.events if e.kind == "oom"]
    assert any(e.msg is not None and e.msg.id == "kernel.oom_killed_rss" for e in p.events)


def test_an_exception_keeps_its_match_when_a_nested_line_matches_better():
    # a record without a recognised prefix runs on after the exception: it is a message of its own
    p = parse("FileNotFoundError: [Errno 2] No such file or directory: 'ninja'\n"
              "2025-07-02 16:41:31 | ERROR | sglang.srt.entrypoints.engine | Received sigquit from a child process. "
              "It usually means the child failed.\n")
    exc = next(e for e in p.events if e.kind == "exception")
    assert exc.msg.id == "ninja.not_installed"
    assert any(e.kind == "message" and e.msg.name == "launcher.sigquit" for e in p.events)


# -- what an event's text says, read by the parser once (facts read the typed data) ---------------

def test_env_reads_architecture_and_launch_flags_are_event_data():
    p = parse("RuntimeError: bad value os.environ.get('SGLANG_X')='1' and os.environ.get('SGLANG_Y')='' "
              "os.environ.get('SGLANG_X')='2'\n"
              "\n"
              "ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now.\n"
              "\n"
              "AssertionError: Qwen3ForCausalLM needs a config\n"
              "\n"
              "python -m sglang.launch_server --model-path m --tp 2 --mem-fraction-static=0.8 x --not\\ a-flag")
    exc = [e for e in p.events if e.kind == "exception"]
    assert exc[0].data["env"] == {"SGLANG_X": "1", "SGLANG_Y": ""}
    assert "architecture" not in exc[1].data           # a class SGLang says it does not support is not the model's
    assert exc[2].data["architecture"] == "Qwen3ForCausalLM"
    assert not any(e.data.get("spec_topk_error") for e in exc)
    assert parse("ValueError: EAGLE only supports topk = 1 here").events[0].data["spec_topk_error"] is True
    launch = next(e for e in p.events if e.kind == "launch")
    assert launch.data["flag_names"] == ["--model-path", "--tp", "--mem-fraction-static"]


def test_last_line_reading():
    assert SG.last_line("Of the allocated memory 3.1 GiB is allocated by PyTorch", []).cut is False
    assert SG.last_line("Of the allocated memory 3.1 GiB is allo", []).cut is True
    assert SG.last_line("call(a, [b", []).cut is True
    end = SG.last_line("[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 3, #token: 10, #new-token: 7, gen throughput", [])
    assert (end.cut, end.batch, end.batch_cut, end.new_tokens) == (True, True, True, 7)
    end = SG.last_line("[2026-01-01 00:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 12, #queue-req: 0", [])
    assert (end.cut, end.batch, end.batch_cut, end.new_tokens) == (False, True, False, 12)
    assert SG.last_line("", []) == SG.LastLine()


def test_a_message_broken_over_two_lines_mid_sentence_is_matched_joined():
    # the first half matches nothing and does not end a sentence; the second starts in lower case
    p = parse("[2025-01-01 10:00:00] Load weight begin. avail mem=70.00 GB\n"
              "TP rank 1 could finish the model loading, but there are other ranks that\n"
              "didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.\n"
              "[2025-01-01 10:09:00] Load weight end. type=X, dtype=torch.bfloat16, avail mem=10.00 GB\n")
    ev = next(e for e in p.events if e.kind == "message")
    assert ev.msg.name == "load.other_ranks_unfinished" and (ev.line, ev.end_line) == (2, 3)
    # a line that ends its sentence is not joined with the next one
    p = parse("[2025-01-01 10:00:00] Load weight begin. avail mem=70.00 GB\n"
              "TP rank 1 could finish the model loading, but there are other ranks.\n"
              "didn't finish loading\n")
    assert not any(e.kind == "message" for e in p.events)


def test_a_sentence_cut_before_its_full_stop_still_matches_its_message():
    from diag.messages import Catalog
    m = Catalog.open().match_cut("TP rank 1 could finish the model loading, but there are other ranks that didn't finish loading")
    assert m is not None and m.name == "load.other_ranks_unfinished" and m.partial


def test_a_line_that_describes_a_launch_is_not_advice():
    p = parse("[2025-01-01 10:00:00] Server started with --enable-torch-compile and using --chunked-prefill-size 4096\n"
              "To work around this error, add --disable-piecewise-cuda-graph to your launch command.\n")
    assert [flag for _, flag, _ in p.advice] == ["--disable-piecewise-cuda-graph"]


def test_a_message_broken_before_a_new_sentence_is_one_message():
    """An exception text that ended its sentence, then the rest of SGLang's template on the next line
    ('{e}. The full weights of the ModelRunner ...'): the pair is one catalog message, read from the
    first line; two unrelated sentences are not joined."""
    p = parse("Failed to update parameter online: start (256) + length (256) exceeds dimension size (256)..\n"
              "The full weights of the ModelRunner are partially updated. Please discard the whole weights.\n")
    msgs = [e for e in p.events if e.msg is not None]
    assert len(msgs) == 1 and msgs[0].line == 1 and msgs[0].end_line == 2
    assert msgs[0].msg.template.startswith("Failed to update parameter online: {e}. The full weights")
    assert msgs[0].msg.fields["e"].startswith("start (256)")
    p = parse("The model weights were downloaded to a shared folder last week.\n"
              "Then we restarted the server with the same command as before.\n")
    assert not [e for e in p.events if e.msg is not None and e.end_line == 2]


def test_joins_past_a_sentence_break_are_bounded(monkeypatch):
    """Pages of unprefixed prose would pay a second catalog match per line: the tries are capped per
    input (LogParser.JOIN_TRIES), after which such a pair is read line by line."""
    pair = ("Failed to update parameter online: start (256) + length (256) exceeds dimension size (256)..\n"
            "The full weights of the ModelRunner are partially updated. Please discard the whole weights.\n")
    monkeypatch.setattr(LogParser, "JOIN_TRIES", 3)
    prose = "".join(f"Line {i} of a long write-up that the paste carried along with the log.\n" for i in range(8))
    p = parse(prose + pair)
    assert not [e for e in p.events if e.msg is not None and e.end_line]
    p = parse(pair)
    assert [e for e in p.events if e.msg is not None and e.end_line == 2]
