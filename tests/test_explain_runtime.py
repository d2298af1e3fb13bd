"""The runtime explainer's reading of frames and the memory figures SGLang's refusals print."""
from __future__ import annotations

from diag.analyze import Options, analyze_with_facts
from diag.events import Frame
from diag.explain import ExplainContext, explainers
from diag.explain.runtime import _module_of, _wait_kind, is_sglang_frame


def test_module_of_an_sglang_path():
    assert _module_of("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py") == "sglang.srt.managers.scheduler"
    assert _module_of("/usr/lib/python3.10/dist-packages/sglang/srt/layers/sampler.py") == "sglang.srt.layers.sampler"
    assert _module_of("/home/u/sgl_jax/srt/managers/scheduler.py") is None


def test_sglang_frames_in_tracebacks_and_in_shortened_pyspy_paths():
    assert is_sglang_frame(Frame("/x/sglang/srt/managers/scheduler.py", 1, "f"))
    assert not is_sglang_frame(Frame("/usr/lib/python3.10/dist-packages/torch/cuda/streams.py", 1, "synchronize"))
    # py-spy shortens paths: its own package's files are SGLang's, the stdlib's and other packages' are not
    assert is_sglang_frame(Frame("penaltylib/min_new_tokens.py", 78, "_apply"), shortened=True)
    assert is_sglang_frame(Frame("eagle_worker.py", 674, "verify"), shortened=True)
    assert not is_sglang_frame(Frame("threading.py", 1012, "run"), shortened=True)
    assert not is_sglang_frame(Frame("torch/distributed/distributed_c10d.py", 2806, "all_reduce"), shortened=True)


def test_what_a_stuck_frame_waited_in():
    assert _wait_kind(Frame("torch/distributed/distributed_c10d.py", 1, "all_reduce")) == "collective"
    assert _wait_kind(Frame("model_executor/cuda_graph_runner.py", 1, "replay")) == "graph_replay"
    assert _wait_kind(Frame("torch/cuda/__init__.py", 1, "synchronize")) == "kernel_sync"
    assert _wait_kind(Frame("flashinfer/jit/core.py", 1, "build")) == "jit"
    assert _wait_kind(Frame("penaltylib/min_new_tokens.py", 78, "_apply")) is None


def test_the_fraction_a_refusal_prints_is_a_reading(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                   "Current value: self.server_args.mem_fraction_static=0.2\n")
    _, facts = analyze_with_facts([str(log)], options=Options())
    assert facts.readings["mem_fraction_static"] == 0.2
    v = explainers()["memory"].fn(ExplainContext(facts, []), goal="kv_pool").values
    assert v["fraction"] == 0.2 and v["low_fraction"] and v["fallback"]["raise_fraction"] == "0.85"


def test_a_fallback_raise_is_never_a_tweak_below_a_hundredth(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                   "Current value: mem_fraction_static=0.945\n")
    _, facts = analyze_with_facts([str(log)], options=Options())
    v = explainers()["memory"].fn(ExplainContext(facts, []), goal="kv_pool").values
    assert "raise_fraction" not in v["fallback"]


def test_the_capacity_line_is_read_without_start_up_milestones(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("[2024-12-13 01:45:02 TP0] max_total_num_tokens=56524, max_prefill_tokens=16384, "
                   "max_running_requests=2049, context_len=32768\n")
    _, facts = analyze_with_facts([str(log)], options=Options())
    assert facts.readings["max_total_num_tokens"] == 56524 and facts.readings["context_len"] == 32768
