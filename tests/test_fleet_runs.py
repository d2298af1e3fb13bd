"""Runs, servers and ranks (issue 12, parts 1 and 2): a log that holds several server runs is
diagnosed run by run; unrelated logs given together stay separate servers; the logs of one
deployment are aligned on time and the first failing rank is named, the rest folded as its
cascade. The failing parts are real corpus logs (tests/data), the healthy runs are built here."""
from __future__ import annotations

import datetime
import json
from pathlib import Path

import jsonschema

from diag.analyze import analyze, analyze_with_facts
from diag.fleet import ranks as RK
from diag.fleet.runs import split
from diag.parse.sglang import LogParser
from diag.report import Report, json_schema

DATA = Path(__file__).parent / "data"
PROXY = DATA / "sglang" / "006-warmup-502-killed-http-proxy.log"       # env.http_proxy, ends 'Killed'
ARCH = DATA / "sglang" / "028-sm75-flashinfer-no-kernel-image.log"      # env.cuda_arch_driver
WEIGHTS = DATA / "sglang" / "034-gemma3-12b-bf16-on-16gb-weights-oom.log"  # oom.weights
NODE1 = DATA / "blind" / "c43-pd-decode-oom-at-dist-init-leftover-procs.log"  # TP8-15, OOM on TP8 at 15:39:25
TIMEOUT = DATA / "extra" / "x06-dsr1-two-node-load-skew-nccl-allreduce-timeout.log"
LAUNCH = "python -m sglang.launch_server --model-path mistralai/Mistral-7B-Instruct-v0.1 --port 30000 --host 0.0.0.0"


def healthy(start: datetime.datetime, batches: int = 20) -> list[str]:
    """A start-up that reaches serving, with its own memory numbers (unlike the corpus run's)."""
    def ts(s):
        return (start + datetime.timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"$ {LAUNCH}",
             f"[{ts(1)}] server_args=ServerArgs(model_path='mistralai/Mistral-7B-Instruct-v0.1', tp_size=1, port=30000)",
             f"[{ts(8)} TP0] Init torch distributed begin.",
             f"[{ts(9)} TP0] Load weight begin. avail mem=78.50 GB",
             f"[{ts(31)} TP0] Load weight end. type=MistralForCausalLM, dtype=torch.bfloat16, avail mem=63.40 GB, mem usage=14.99 GB.",
             f"[{ts(32)} TP0] KV Cache is allocated. #tokens: 400000, K size: 24.41 GB, V size: 24.41 GB",
             f"[{ts(33)} TP0] max_total_num_tokens=400000, max_prefill_tokens=16384, max_running_requests=4096, context_len=32768",
             f"[{ts(60)}] The server is fired up and ready to roll!"]
    for i in range(batches):
        lines.append(f"[{ts(70 + i)} TP0] Decode batch. #running-req: 3, #token: {500 + i}, token usage: 0.01, "
                     f"gen throughput (token/s): 95.00, #queue-req: 0")
    return lines


def failed_run(path: Path = PROXY) -> list[str]:
    return [f"$ {LAUNCH}"] + path.read_text().splitlines()


def write(tmp_path: Path, name: str, lines: list[str]) -> str:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def valid(report: Report) -> dict:
    data = json.loads(report.dumps())
    jsonschema.Draft202012Validator(json_schema()).validate(data)
    assert Report.from_json(data).to_json() == data
    return data


def alone(path: Path) -> dict:
    return valid(analyze([str(path)]))


# -- part 1: runs ------------------------------------------------------------------------------

def test_a_failed_run_then_a_healthy_one(tmp_path):
    log = write(tmp_path, "pod.log", failed_run() + healthy(datetime.datetime(2024, 12, 13, 2, 0)))
    report, facts = analyze_with_facts([log])
    d = valid(report)
    ref = alone(PROXY)
    assert d["findings"][0]["category"] == ref["findings"][0]["category"] == "env.http_proxy"
    assert [r["state"] for r in d["runs"]] == ["failed", "serving"]
    assert [r["chosen"] for r in d["runs"]] == [True, False]
    first, second = d["runs"]
    assert first["inputs"][0]["first_line"] == 1 and second["inputs"][0]["first_line"] == first["inputs"][0]["last_line"] + 1
    assert second["trigger"] == "launch" and second["status"] == "clean" and second["first_error"] is None
    assert "Killed" in first["first_error"]["text"] or "AssertionError" in first["first_error"]["text"]
    # one memory budget per run: the failed run's numbers only, not the healthy run's
    assert d["facts"]["memory_readings"] == ref["facts"]["memory_readings"]
    assert facts.readings.get("kv_tokens") is None and facts.readings["max_total_num_tokens"] == 56524
    # evidence still points at the line of the whole file
    ev = d["findings"][0]["evidence"][0]
    assert Path(log).read_text().splitlines()[ev["line"] - 1].strip() == ev["text"].strip()


def test_a_healthy_run_then_a_failed_one(tmp_path):
    lines = healthy(datetime.datetime(2024, 12, 12, 22, 0)) + failed_run()
    d = valid(analyze([write(tmp_path, "pod.log", lines)]))
    assert [r["state"] for r in d["runs"]] == ["serving", "failed"]
    assert [r["chosen"] for r in d["runs"]] == [False, True]
    assert d["findings"][0]["category"] == "env.http_proxy"
    assert d["facts"]["memory_readings"] == alone(PROXY)["facts"]["memory_readings"]
    failed = d["runs"][1]
    assert failed["inputs"][0]["first_line"] == len(healthy(datetime.datetime(2024, 12, 12, 22, 0))) + 1
    assert failed["first_error"]["line"] > failed["inputs"][0]["first_line"]


def test_kubectl_previous_and_current_concatenated(tmp_path):
    """`kubectl logs --previous; kubectl logs`: a pod that restarted after a failure, no launch
    line in either (the container's command is not echoed): server_args and start-up steps split it."""
    again = "[2025-03-01 10:20:00] server_args=ServerArgs(model_path='google/gemma-3-12b-it', tp_size=1, port=30000)"
    lines = healthy(datetime.datetime(2025, 3, 1, 10, 0))[1:] + [again] + WEIGHTS.read_text().splitlines()
    p = LogParser(0)
    for n, t in enumerate(lines, 1):
        p.feed(n, t)
    p.finish()
    runs = split(p)
    assert [r.trigger for r in runs] == ["start", "server_args"]
    d = valid(analyze([write(tmp_path, "k.log", lines)]))
    assert d["findings"][0]["category"] == alone(WEIGHTS)["findings"][0]["category"] == "oom.weights"
    assert [r["chosen"] for r in d["runs"]] == [False, True]


def test_a_pod_that_restarted_three_times_the_same_way(tmp_path):
    lines = []
    for k in range(3):
        lines += failed_run()
    lines += healthy(datetime.datetime(2024, 12, 13, 3, 0))
    d = valid(analyze([write(tmp_path, "crashloop.log", lines)]))
    assert len(d["runs"]) == 4
    assert [r["category"] for r in d["runs"][:3]] == ["env.http_proxy"] * 3
    assert [r["chosen"] for r in d["runs"]] == [True, False, False, False]   # the first of equals


def test_a_launch_quoted_after_the_error_is_not_a_run(tmp_path):
    """Issue pastes quote the command after the traceback: nothing of a server follows it."""
    lines = PROXY.read_text().splitlines() + ["", "Reproduction:", LAUNCH, "Environment: 8x H100"]
    d = valid(analyze([write(tmp_path, "issue.log", lines)]))
    assert d["runs"] == [] and d["servers"] == []


def test_single_run_logs_have_no_runs_field():
    for name in ("006-warmup-502-killed-http-proxy", "018-dsv3-runaway-generation-kv-full-retract",
                 "004-watchdog-timeout-py-spy-missing"):
        d = alone(DATA / "sglang" / f"{name}.log")
        assert d["runs"] == [] and d["servers"] == []


def test_every_corpus_log_of_one_server_is_one_run():
    """The shared corpus: every log is one server run (a regression guard for the boundaries)."""
    for log in sorted((DATA / "sglang").glob("*.log")):
        p = LogParser(0)
        from diag.clean import Cleaner
        from diag.read import iter_lines, open_input
        for n, t in Cleaner().run(iter_lines(open_input(str(log)))):
            p.feed(n, t)
        p.finish()
        assert len(split(p)) == 1, log.name


# -- part 1: unrelated inputs -----------------------------------------------------------------

def test_unrelated_logs_are_separate_servers():
    d = valid(analyze([str(PROXY), str(ARCH)]))
    assert [s["inputs"] for s in d["servers"]] == [[0], [1]]
    assert {s["category"] for s in d["servers"]} == {"env.http_proxy", "env.cuda_arch_driver"}
    chosen = next(s for s in d["servers"] if s["chosen"])
    ref = alone(PROXY if chosen["inputs"] == [0] else ARCH)
    # the version and the facts are the chosen server's own, not a range made up from both logs
    assert d["facts"]["sglang_version"] == ref["facts"]["sglang_version"]
    assert d["findings"][0]["category"] == ref["findings"][0]["category"]
    assert len(d["inputs"]) == 2


def test_replicas_with_the_same_ranks_are_separate(tmp_path):
    a = write(tmp_path, "replica-0.log", healthy(datetime.datetime(2025, 1, 1, 8, 0)))
    b = write(tmp_path, "replica-1.log", healthy(datetime.datetime(2025, 1, 1, 8, 1)))
    d = valid(analyze([a, b]))
    assert len(d["servers"]) == 2 and all(s["state"] == "serving" for s in d["servers"])


# -- part 2: ranks and nodes ------------------------------------------------------------------

def node0_lines() -> list[str]:
    """Node 0 of the two-node TP16 launch whose node 1 is the corpus log c43: its ranks start at the
    same time, then time out in the collective (x06's real NCCL watchdog lines), ten minutes later."""
    lines = [f"[2026-02-25 15:39:23 TP{r}] Init torch distributed begin." for r in range(8)]
    lines.append("[2026-02-25 15:49:25 TP6] Scheduler hit an exception: Traceback (most recent call last):")
    lines.append('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2937, in run_scheduler_process')
    lines.append("torch.distributed.DistBackendError: [Rank 6] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=2, OpType=ALLREDUCE) ran for 600050 milliseconds before timing out.")
    lines += [x.replace("E207 01:29:36", "E225 15:49:25") for x in TIMEOUT.read_text().splitlines()[11:14]]
    lines.append("[2026-02-25 15:49:26] Received sigquit from a child process. It usually means the child failed.")
    return lines


def test_first_failing_rank_across_node_files(tmp_path):
    n0 = write(tmp_path, "node0.log", node0_lines())
    n1 = str(NODE1)
    d = valid(analyze([n0, n1]))
    assert d["servers"] == []                       # one deployment: the two nodes' ranks do not overlap
    r = d["ranks"]
    assert r["basis"] == "timestamps"
    assert r["first"]["input"] == 1 and r["first"]["rank"] == "TP8" and r["first"]["ts"] == "2026-02-25 15:39:25"
    assert "out of memory" in r["first"]["text"]
    assert set(r["ranks"]) >= {f"TP{k}" for k in range(16)}
    kinds = {(c["input"], c["rank"]) for c in r["cascade"]}
    assert (0, "TP6") in kinds                      # the timeout on node 0 is folded as the cascade
    assert all(c["after_s"] >= 0 for c in r["cascade"] if "after_s" in c)
    assert any(c["after_s"] >= 600 for c in r["cascade"] if "after_s" in c)
    # the root cause is the first failure's (as node 1's log alone says), not node 0's timeout
    top = d["findings"][0]
    assert top["category"] == alone(NODE1)["findings"][0]["category"] != "env.nccl"
    assert {(e["input"], e["line"]) for e in top["evidence"] if e["role"] == "trigger"} == {(1, r["first"]["line"])}
    assert any("cascade" in n for n in top["confidence_notes"])
    # without the node-1 log, the timeout is all there is: it stays the diagnosis
    assert alone(Path(n0))["findings"][0]["category"] == "env.nccl"


def test_first_failing_rank_in_one_interleaved_file(tmp_path):
    merged = sorted(node0_lines()[:8] + NODE1.read_text().splitlines()[5:13], key=lambda s: s[1:20])
    merged += NODE1.read_text().splitlines()[13:] + node0_lines()[8:]
    d = valid(analyze([write(tmp_path, "all.log", merged)]))
    assert d["ranks"]["first"]["rank"] == "TP8" and d["ranks"]["first"]["input"] == 0
    assert d["ranks"]["cascade_count"] >= 1


def test_the_file_order_is_not_the_time_order(tmp_path):
    """rank0's file comes first but its failure is the later one (a collective timeout)."""
    rank0 = ["[2025-06-01 12:10:00 TP0] Init torch distributed begin.",
             "[2025-06-01 12:20:01 TP0] Watchdog timeout (self.watchdog_timeout=300)"]
    rank1 = ["[2025-06-01 12:10:00 TP1] Init torch distributed begin.",
             "[2025-06-01 12:10:05 TP1] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/sglang/srt/model_executor/model_runner.py", line 1, in forward',
             "RuntimeError: CUDA error: an illegal memory access was encountered"]
    d = valid(analyze([write(tmp_path, "rank0.log", rank0), write(tmp_path, "rank1.log", rank1)]))
    first = d["ranks"]["first"]
    assert (first["input"], first["rank"]) == (1, "TP1") and "illegal memory access" in first["text"]
    assert [(c["rank"], c["kind"]) for c in d["ranks"]["cascade"]] == [("TP0", "watchdog")]
    assert d["ranks"]["cascade"][0]["after_s"] == 596.0


def test_cascade_messages():
    from diag.events import Event
    def ev(kind, text, **data):
        return Event(kind, 0, 1, text, data=data)
    assert RK.is_cascade(ev("exception", "x", type="torch.distributed.DistBackendError", message="Watchdog caught collective operation timeout"))
    assert RK.is_cascade(ev("signal", "Received sigquit", signal="sigquit"))
    assert RK.is_cascade(ev("error", "Health check failed. Server couldn't get a response from detokenizer", source="raw"))
    assert not RK.is_cascade(ev("exception", "x", type="RuntimeError", message="CUDA error: an illegal memory access was encountered"))
    assert not RK.is_cascade(ev("exception", "x", type="RuntimeError", message="CUDA error: the launch timed out and was terminated"))
    assert RK.file_hints("logs/node1/rank_3.log") == ("rank3", "node1")
