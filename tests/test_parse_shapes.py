"""Tracebacks as people paste them (issue 7): each shape gives the exception, its frames and the
step that failed, as a whole traceback would."""
from __future__ import annotations

from diag.parse.sglang import LogParser
from parsing import parse


def exceptions(p: LogParser):
    return [e for e in p.events if e.kind == "exception" and e.data.get("type")]


def test_frame_split_over_two_lines():
    p = parse('''
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/model_runner.py", line 1412, in
init_memory_pool
    self.token_to_kv_pool = MHATokenToKVPool(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB.
''')
    (exc,) = exceptions(p)
    assert [f.func for f in exc.data["frames"]] == ["init_memory_pool"]
    assert exc.data["frames"][0].line == 1412


def test_faulthandler_dump():
    p = parse('''
Fatal Python error: Segmentation fault

Thread 0x00007f8b2f7fe640 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 324 in wait
Current thread 0x00007f8c11b2e740 (most recent call first):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/device_communicators/pynccl.py", line 98 in __init__
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/parallel_state.py", line 260 in __init__
''')
    sig = [e for e in p.events if e.kind == "signal"]
    assert sig and sig[0].data["signal"] == "segfault"
    frames = sig[0].data.get("frames") or []
    assert frames and frames[0].file.endswith("pynccl.py") and frames[0].func == "__init__"
    assert not any(f.file.endswith("threading.py") for f in frames)      # only the crashing thread


def test_exception_type_cut_mid_word():
    p = parse('''
  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/loader.py", line 381, in load_model
    model = _initialize_model(
torch.OutOfMemor
''')
    (exc,) = exceptions(p)
    assert exc.data["type"] == "torch.OutOfMemoryError" and exc.data.get("cut")
    assert any(e.kind == "oom" for e in p.events)


def test_exception_line_indented_after_a_frame():
    p = parse('''
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/attention/flashinfer_backend.py", line 120, in __init__
    self.workspace_buffer = torch.empty(
  RuntimeError: CUDA error: no kernel image is available for execution on the device
''')
    (exc,) = exceptions(p)
    assert exc.data["type"] == "RuntimeError" and "no kernel image" in exc.data["message"]
    assert exc.data["frames"][0].file.endswith("flashinfer_backend.py")


def test_exception_first_excerpt_takes_the_frames_that_follow():
    p = parse('''
ValueError: Unsupported architectures: ChatGLMForConditionalGeneration.
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_loader/utils.py", line 88, in get_model_architecture
    return ModelRegistry.resolve_model_cls(architectures)
''')
    (exc,) = exceptions(p)
    assert exc.data["type"] == "ValueError"
    assert [f.func for f in exc.data["frames"]] == ["get_model_architecture"]


def test_log_viewer_lines_between_server_lines():
    from diag.clean import Cleaner
    lines = ["[2025-01-06 02:58:11 TP0] Load weight begin. avail mem=78.90 GB", "2025-01-06T02:58:11.123Z",
             "[2025-01-06 02:58:40 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.90 GB, mem usage=15.00 GB.",
             "2025-01-06T02:58:40.456Z", "[2025-01-06 02:58:41 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             "2025-01-06T02:58:41.001Z",
             '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process', "2025-01-06T02:58:41.002Z",
             "RuntimeError: boom", "2025-01-06T02:58:41.003Z"]
    out = [t for _, t in Cleaner().run(lines)]
    assert not any(t.startswith("2025-01-06T") for t in out)
    p = LogParser(0)
    for n, t in Cleaner().run(lines):
        p.feed(n, t)
    p.finish()
    (exc,) = exceptions(p)
    assert exc.data["frames"] and exc.data["frames"][0].func == "run_scheduler_process"


def test_json_lines_of_a_log_collector():
    from diag.clean import Cleaner
    lines = ['{"log":"[2025-01-06 02:58:11 TP0] Load weight begin. avail mem=78.90 GB\\n","stream":"stderr","time":"2025-01-06T02:58:11.1Z"}',
             '{"level":"error","ts":"2025-01-06T02:58:12Z","msg":"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."}']
    out = [t for _, t in Cleaner().run(lines)]
    assert out[0].startswith("[2025-01-06 02:58:11 TP0] Load weight begin")
    assert out[1].startswith("torch.OutOfMemoryError: CUDA out of memory")
