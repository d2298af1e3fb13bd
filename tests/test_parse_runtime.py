"""Parser details the runtime rules rely on: py-spy threads, other components' milestones, the
match of an exception whose message goes on over several lines."""
from __future__ import annotations

from parsing import parse


def test_a_pyspy_dump_keeps_each_threads_frames():
    p = parse('''
[2025-10-29 11:25:58 TP6] Pyspy dump for PID 309:
Process 309: sglang::scheduler_TP6
Python v3.12.12 (/usr/bin/python3.12)

Thread 309 (active): "MainThread"
    _apply (penaltylib/min_new_tokens.py:78)
    verify (eagle_worker.py:674)
Thread 12816 (idle): "Thread-10 (watchdog_thread)"
    select (selectors.py:415)
    watchdog_thread (scheduler.py:2257)
''')
    dump = next(e for e in p.events if e.kind == "watchdog")
    assert [f.func for f in dump.data["frames"]] == ["_apply", "verify", "select", "watchdog_thread"]
    threads = dump.data["threads"]
    assert [(t["name"], t["state"]) for t in threads] == [("MainThread", "active"), ("Thread-10 (watchdog_thread)", "idle")]
    assert [f.func for f in threads[0]["frames"]] == ["_apply", "verify"]
    assert threads[0]["frames"][0].file == "penaltylib/min_new_tokens.py"


def test_another_components_milestone_is_an_event():
    p = parse('''
2025-06-22 16:13:00,000 - INFO - flashinfer.jit: Loading JIT ops: cascade
[2025-06-22 16:13:55 TP0] Load weight begin. avail mem=15.20 GB
''')
    jit = [e for e in p.events if e.msg is not None and e.msg.id == "flashinfer.loading_jit_ops"]
    assert len(jit) == 1 and jit[0].msg.fields["name"] == "cascade"


def test_a_hint_printed_after_a_cuda_error_does_not_replace_its_match():
    p = parse('''
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
''')
    ex = next(e for e in p.events if e.kind == "exception")
    assert ex.msg.id == "cuda.illegal_address"
    # the hint is an event of its own, on its own line
    hint = [e for e in p.events if e.msg is not None and e.msg.id == "torch.async_report_hint"]
    assert [e.line for e in hint] == [2]


def test_a_message_wrapped_over_lines_is_matched_as_one():
    p = parse('''
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value:
mem_fraction_static=0.2
''')
    ex = next(e for e in p.events if e.kind == "exception")
    assert ex.msg.name == "kv.not_enough_memory" and ex.msg.fields.get("mem_fraction_static") == "0.2"


def test_the_last_line_cut_after_a_placeholder_reads_its_value():
    p = parse("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.9.\n")
    ex = next(e for e in p.events if e.kind == "exception")
    assert ex.msg.name == "kv.no_memory_after_weights" and ex.msg.fields["mem_fraction_static"].startswith("0.9")
