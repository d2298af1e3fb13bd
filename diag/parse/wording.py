"""The wordings that date a log and that the message catalog does not: what SGLang changed in
lines the parser types itself (the Load weight end / KV Cache / server_args lines, the batch
line's punctuation, refusals whose catalog entry spans more releases than the wording) and the
source files tracebacks name. Each row says in which examined versions SGLang prints that
wording (../shared/reference/sglang-logs.md and sglang-errors.md); the parser stores the rows a
line matches on its event (`dated_text`, `dated_message`, `dated_frames`), facts intersects them.

Wordings the catalog dates as narrowly (its printing versions of the matched message), and the
argparse program names facts read from the typed argparse event, are not repeated here.
"""
from __future__ import annotations

from .. import rx


class _Without:
    """A pattern that matches only where `absent` does not follow the match (a negative lookahead)."""

    def __init__(self, pattern: str, absent: str) -> None:
        self.rx, self.absent = rx.compile(pattern), absent

    def search(self, text: str):
        m = self.rx.search(text)
        return m if m and self.absent not in text[m.end():] else None

# (regex over a log line, lowest version, highest version, what the wording is)
WORDINGS: list[tuple[object, str | None, str | None, str]] = [
    (rx.compile(r"Load weight end\. elapsed=.*dtype="), "0.5.9", "0.5.9", "Load weight end with elapsed= and dtype="),
    (_Without(r"Load weight end\. elapsed=", "dtype="), "0.5.10", None, "Load weight end with elapsed= and no dtype"),
    (rx.compile(r"Init torch distributed ends\. elapsed="), "0.5.9", "0.5.19", "Init torch distributed ends with elapsed="),
    (rx.compile(r"Memory baseline taken\.|Init parallel begin\."), "0.5.23", None, "Init parallel / Memory baseline lines"),
    (rx.compile(r"^(?:\[[^\]]*\] )?KV Cache is allocated\. dtype:"), "0.5.13", None, "KV Cache is allocated. dtype:"),
    (rx.compile(r"^(?:\[[^\]]*\] )?KV Cache is allocated\. #tokens:"), None, "0.5.12", "KV Cache is allocated. #tokens:"),
    (rx.compile(r"(?:Full|SWA) KV Cache is allocated"), "0.5.19", None, "labelled KV Cache line"),
    (rx.compile(r"Capture cuda graph begin\. This can take up to several minutes"), None, "0.5.13", "Capture cuda graph begin. This can take…"),
    (rx.compile(r"Capture (?:target|draft) (?:decode|verify|prefill|extend) CUDA graph"), "0.5.14", None, "Capture target/draft … CUDA graph"),
    (rx.compile(r"num_tokens_per_bs="), "0.5.14", "0.5.14", "num_tokens_per_bs="),
    (rx.compile(r"server_args=ServerArgs\("), None, "0.5.14", "server_args=ServerArgs(…)"),
    (rx.compile(r"server_args=\{"), "0.5.19", None, "server_args={…}"),
    (rx.compile(r"server_args=ServerArgs\(.*\bmamba_scheduler_strategy="), "0.5.7", "0.5.13", "server_args field mamba_scheduler_strategy"),
    (rx.compile(r"server_args=.*\bmamba_radix_cache_strategy['=]"), "0.5.14", None, "server_args field mamba_radix_cache_strategy"),
    (rx.compile(r"server_args=ServerArgs\(.*\bcuda_graph_max_bs="), None, "0.5.13", "server_args field cuda_graph_max_bs"),
    (rx.compile(r"Current value: self\.server_args\.mem_fraction_static="), "0.5.4.post3", "0.5.9", "Not enough memory … self.server_args.mem_fraction_static="),
    (rx.compile(r"Current value: mem_fraction_static="), "0.5.10", None, "Not enough memory … mem_fraction_static="),
    (rx.compile(r"Loaded weights leave no GPU memory for the KV cache"), "0.5.14", None, "Loaded weights leave no GPU memory…"),
    (rx.compile(r"is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer"), "0.5.10", "0.5.13", "spec + radix + no_buffer ValueError"),
    (rx.compile(r"#new_tokens_gained"), "0.5.7", None, "Retract … #new_tokens_gained"),
    (rx.compile(r"Retract requests\. #retracted_reqs: \d+, #new_token_ratio"), "0.4.10.post2", "0.5.6.post2", "Retract … without #new_tokens_gained"),
    (rx.compile(r"(?:Decode|Prefill) batch\. #"), None, "0.4.10.post2", "Decode/Prefill batch. (period)"),
    (rx.compile(r"(?:Decode|Prefill) batch(?: \[\d+\])?, #"), "0.5.4.post3", None, "Decode/Prefill batch, (comma)"),
    (rx.compile(r"watchdog timeout \(self\.watchdog_timeout=.*self\.soft="), "0.5.8.post1", None, "… watchdog timeout (…, self.soft=…)"),
    (rx.compile(r"Rank \d+ scheduler is dead"), None, "0.5.9", "Rank N scheduler is dead"),
    (rx.compile(r"scheduler died during initialization \(exit code"), "0.5.10", None, "scheduler died during initialization"),
    (rx.compile(r"SIGQUIT received\. signum="), "0.5.4.post3", None, "SIGQUIT received. signum="),
    (rx.compile(r"Mamba Cache is allocated"), "0.5.4.post3", None, "Mamba Cache is allocated"),
    (rx.compile(r"is deprecated and will be removed in a future release\. Use"), "0.5.14", None, "deprecation warning of 0.5.14+"),
    (rx.compile(r"set --cuda-graph-max-bs to a smaller value|disable torch compile by not using --enable-torch-compile"),
     None, "0.5.13", "CUDA graph failure advice naming --cuda-graph-max-bs"),
    (rx.compile(r"set --cuda-graph-max-bs-decode to a smaller value"), "0.5.14", None, "CUDA graph failure advice naming --cuda-graph-max-bs-decode"),
    # source files named in tracebacks (sglang-logs.md / sglang-memory.md source locations)
    (rx.compile(r"model_executor/model_runner_kv_cache_mixin\.py"), "0.5.7", "0.5.14", "traceback file model_runner_kv_cache_mixin.py"),
    (rx.compile(r"mem_cache/kv_cache_configurator\.py|model_runner_components/|distributed/bootstrap\.py|arg_groups/memory_hook\.py"),
     "0.5.19", None, "traceback file of the 0.5.19+ layout"),
    (rx.compile(r"model_executor/pool_configurator\.py"), "0.5.11", None, "traceback file pool_configurator.py"),
    (rx.compile(r"managers/scheduler_metrics_mixin\.py"), "0.4.10.post2", "0.5.9", "traceback file managers/scheduler_metrics_mixin.py"),
    (rx.compile(r"model_executor/runner/decode_cuda_graph_runner\.py"), "0.5.14", None, "traceback file runner/decode_cuda_graph_runner.py"),
    (rx.compile(r"model_executor/cuda_graph_runner\.py"), None, "0.5.13", "traceback file model_executor/cuda_graph_runner.py"),
    (rx.compile(r"sglang/srt/utils\.py"), None, "0.4.10.post2", "traceback file srt/utils.py (before utils/ became a package)"),
]


def dated(text: str) -> list[tuple[str | None, str | None, str]]:
    """(lowest version, highest version, what the wording is) of each row the text matches."""
    return [(low, high, desc) for pattern, low, high, desc in WORDINGS if pattern.search(text)]
