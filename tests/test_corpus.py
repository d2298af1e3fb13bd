"""Real logs users pasted in public issues, with labels: tests/data/sglang (the shared corpus),
extra and extra2 (validation sets gathered the same way), blind (the development half of logs
gathered after the rules were written), holdout (its held-out half, scored blind first, then
used to find regressions) and fresh (gathered at the end of the session, scored blind; see
tests/data/README.md for the first-look figures).

Each log must get its labelled category, and the report must suggest every flag the label says
fixed it. Where the log itself does not carry what the label rests on, or diag does not yet read
the mechanism, the case is a strict xfail with the reason: when diag starts getting it right the
test fails, and the entry goes."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from diag.analyze import analyze

DATA = Path(__file__).parent / "data"
CASES = sorted(p for sub in ("sglang", "extra", "extra2", "blind", "holdout", "fresh", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh16", "fresh17", "fresh18", "fresh19", "fresh20", "fresh21", "fresh22", "fresh23") for p in (DATA / sub).glob("*.log"))

# case -> why the category differs from the label
CATEGORY_GAPS = {
    "024-olmocr-vlm-image-encode-oom-default-fraction": "nothing in the one OOM line shows the image encoder",
    "x10-glm51-mtp-draft-oom-lk-moe-init": "the label's MTP reading comes from the issue title; the log shows an OOM right after the shards loaded",
    "x24-llava-next-72b-single-gpu-weights-oom": "the OOM is only in the issue title; the paste stops inside get_model",
    "y07-gemma3-27b-bnb4-4090-not-enough-memory": "the error line is missing and the printed numbers, with SGLang's default fraction, still leave a small pool",
    "y14-inkling-mtp-eighth-draft-pool-oom": "the input is the reporter's four-line summary, not SGLang's output",
    "b21-warmup-0000-host-proxy-502": "the warm-up's 502 is told in the reporter's prose, not in server output",
    # the held-out half and the fresh set (first looks in tests/data/README.md)
    "c29-deepep-max-dispatch-tokens-over-1024": "DeepEP's dispatch-token assertion is not yet read as an invalid SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
    "c44-router-prefill-url-bootstrap-port-comma": "the router's refusal of a port with a comma is not yet read as an invalid --prefill value",
    "f01-deepep-normal-cuda-graph": "the paste holds only SGLang's generic capture-failure advice, not the DeepEP mode",
    "f07-misspelled-cuda-visible-devices-busy-gpu": "the traceback is cut before its OOM line; that the GPU was busy is only in the thread",
    "f08-ascend-qwen35-vision-heads-tp6": "the vision tower's head-count check is cut; TP 6 against 16 heads is only in the thread",
    "f14-ascend-pd-mf-store-url-placeholder": "the Ascend transfer engine's init failure is not yet read as an unfilled ASCEND_MF_STORE_URL",
    # fresh3: 51 logs gathered this session, first looks in tests/data/README.md
    "a09-aiter-workspace-oom-after-kv-pool-mi355": "a traceback cut inside the attention backend's init, right after the KV pool was allocated, is not yet read as an OOM of the backend's workspace",
    "c03-mineru-v100-sglang-sm75-required": "a retyped message ('sm 75', 'SGlang') does not match SGLang's 'only supports sm75 and above'",
    "d03-rocm720-hip-graph-capture-invalidated-aiter-ar": "an HSA hardware exception is read as a GPU fault; that a ROCm runtime bug invalidated the HIP graph capture is only in the thread",
    "d05-dynamo-kv-events-publisher-every-tp-rank-port-collision": "the paste stops inside the scheduler's error line; the ZMQ bind error is only in the issue title",
    "e01-ascend-pd-prefill-overlap-gloo-context-corruption": "SGLang's PD 'context corruption' warning before a gloo abort is not yet read as the overlap scheduler on the prefill node",
    "f18-hicache-ratio-host-pool-1p4tb-small-model": "the hierarchical cache's host pool sized from --hicache-ratio for a small model is told in prose, not in an error line",
    # fresh4: 22 logs gathered in the next session, first look in tests/data/fresh4/FIRST_LOOK.md
    "d02-ktransformers-dsv4-flash-oom-missing-kt-weight-path": "a traceback cut inside the model runner's init is not read as an OOM of KTransformers' experts kept on the GPU; the missing --kt-weight-path is only in the thread",
    # fresh5: 15 logs, first look in tests/data/fresh5/FIRST_LOOK.md
    "c02-gb10-two-node-messagequeue-wrong-nic-hang": "the one line is a normal warning (custom all-reduce off across nodes); the hang on the wrong NIC is only in the thread",
    "d01-rocm-no-aiter-build-quark-import-at-startup": "the paste stops inside argument handling before the aiter import error; that the build lacks aiter is only in the thread",
    # fresh6: 10 logs, first look in tests/data/fresh6/FIRST_LOOK.md
    "b01-kernels-015-transformers-hub-kernels-valueerror": "the one line is the kernels hub package's own ValueError; that kernels 0.15 and transformers 5.6 do not fit is only in the thread",
    "c01-kimi-k3-megamoe-sparse-dp-graph-allreduce-deadlock": "the paste is two WorkNCCL records retyped over several lines, without the watchdog's own sentence",
    "c03-cold-nfs-bf16-load-unbalanced-loading-barrier-timeout": "the two-line paste is taken for a hard-wrapped one and joined without a space (one full line cannot tell an editor's reflow at a word's end from a terminal's wrap inside one), so the loading-barrier message is not found",
    "d01-fa3-spec-resolve-num-tokens-typeerror": "an unexpected keyword in a call between two SGLang functions (a fork's bug) reads like a package version mismatch without its traceback",
    "r01-jax-chunked-prefill-above-max-prefill-no-bucket": "sglang-jax's bucket check is not in the catalog (the JAX port is not SGLang's package)",
    "r02-no-cuda-graph-padding-torch-compile-autotune-hang": "three torch.compile AUTOTUNE lines and no SGLang line; the two flags are only in the thread",
    # fresh7: 6 logs, first look in tests/data/fresh7/FIRST_LOOK.md
    "a01-chunked-prefill-disable-radix-being-chunked-req-assert": "the paste holds the command and batch lines only; the scheduler's assertion is only in the issue title",
    # fresh8: 7 logs, first look in tests/data/fresh8/FIRST_LOOK.md
    "b02-heterogeneous-gpu-jit-arch": "two quoted errors, 'no kernel image' and a JIT build's missing FlashInfer header: the build failure is read as the cause; that the GPUs differ in architecture is only in the thread",
    "b03-multinode-cuda-graph-capture-deadlock": "the input is nvidia-smi dmon's utilisation samples only (96% SM, no memory traffic): no SGLang line",
    # fresh11: 17 logs, first look in tests/data/fresh11/FIRST_LOOK.md
    "b02-deepseek-weight-load-dict-materialize-oom": "one OOM line, cut, with no frame or milestone: that the loader materialised every weight at once is only in the PR",
    "b06-epd-zmq-to-tokenizer-host-0000-embedding-timeout": "an encoder's embedding timeout and its endpoint on 0.0.0.0: that the tokenizer cannot reach 0.0.0.0 is only in the PR",
    # fresh22: 7 logs, first look in tests/data/fresh22/FIRST_LOOK.md
    "w01-mi355x-dpa-prefill-hsa-out-of-resources": "the excerpt lacks the HIP abort its notes describe: a headerless thread dump of idle threads and a c10d heartbeat frame, no failure line",
    # fresh23: 51 logs (46 blind), first look in tests/data/fresh23/FIRST_LOOK.md
    "a01-ple-offload-embedding-oom": "two OOM lines only: an allocation a little larger than the GPU is read as a table sized from the context; that it was the offloaded per-layer embedding built on the GPU first is only in the thread",
    "b04-laguna-sm120-forced-trtllm-moe-runner-assert": "a bare assertion on the MoE layer's routing_method_type inside the NVFP4 MoE method is not tied to the forced --moe-runner-backend (only in the findings document)",
    "g04-xinference-rocm-7900xt-cuda-sgl-kernel-libcuda": "a missing libcuda.so.1 is read as CUDA not initialising; that the machine is a ROCm host (only a c10 HIPAllocatorConfig warning says so) with a CUDA build of sgl_kernel is not read",
    "i04-dsv4-pd-decode-restart-vram-not-released-not-enough-memory": "the refusal with --mem-fraction-static 0.9 is read as the weights filling the budget; that 70 GB per GPU were held by a dead instance shows only against the GPU's capacity, which the excerpt does not print",
    "l04-wsl2-tp2-multimem-logits-symm-mem-sigfpe": "an elided faulthandler dump ('...' for the frames): a native SIGFPE, not tied to the symmetric-memory rendezvous of the logits all-gather",
    "w03-rdna4-qwen36-35b-moe-weights-oom-tp2": "diag reads the experts built by the unquantized method under --quantization awq as SGL-CFG-046 (config.invalid_value, --quantization moe_wna16); the thread's owner blamed the expert count, while the same repository's preset notes name the unquantized AWQ experts for this very failure (fresh23/l01)",
    # fresh16: 19 logs, first look in tests/data/fresh16/FIRST_LOOK.md
    "f04-gemma4-modelopt-fp4-on-bf16-checkpoint": "a traceback cut inside CUDA-graph init with no exception line and no launch command: that --quantization modelopt_fp4 was given a BF16 checkpoint is only in the thread",
}
# case -> the labelled fix flags diag does not suggest, and why
FIX_GAPS = {
    "021-gemma3-12b-4090-kv-buffer-alloc-oom": "the excerpt names no model, so the KV bytes per token and the tokens the smaller pool holds are unknown (with the model given, --context-length goes down with the fraction)",
    "040-eagle-hicache-watchdog-pyspy-min-new-tokens": "neither the stuck stack (EAGLE verify, min_new_tokens) nor a launch command shows the hierarchical cache; only the issue title names it (diag drops it for a stack in its code or with the flag in the command)",
    "042-dp-attention-prefill-runtime-oom": "a traceback cut before its OOM line, with no batch line or launch command: no running count to halve (offered when either shows one)",
    "x09-glm53-flash-mamba-ping-pong-slots-exhausted": "neither the excerpt nor a launch command gives the pool's size (28 only in the reporter's compose file): no value to raise --max-mamba-cache-size from",
    "x22-dsr1-two-node-decode-retraction-messages": "retraction lines only: no batch line, launch command or pool size to cap running requests from (offered when the batch lines or the memory model give one)",
    "b01-flashinfer-sampling-no-kernel-image": "the label's --disable-flash-sampling is no SGLang flag (the thread's spelling of --disable-flashinfer-sampling, which diag offers for releases before 0.3.6)",
    "c11-dynamo-70b-single-gpu-oom": "the label spells the TP flag '--tp'; diag suggests the catalog's name, --tp-size",
    "c28-tp-not-dividing-attention-heads": "the paste names no model, so no TP size that divides its heads is computed",
    "a01-kimi-eagle3-draft-inherits-trtllm-mla": "the draft worker's attention backend error is cut; --speculative-draft-attention-backend is only in the thread",
    "a07-qwen25vl-72b-awq-4090-gpu0-fast-image-processor": "the OOM names no image processor; that the fast (GPU) image processor filled GPU 0 is only in the thread",
    "d07-expert-distribution-metrics-eagle-multistep-graph-capture": "a capture invalidated by a host sync in the expert-distribution recorder is not tied to multi-step drafting (--speculative-num-steps 1)",
    "b20-dsv41-decode-cuda-graph-capture-oom": "no version in the paste: the graph batch flag is spelled as most releases spell it (--cuda-graph-max-bs, 0.4.6-0.5.19), the label uses 0.5.14+'s --cuda-graph-max-bs-decode",
    "a10-extra-buffer-on-non-mamba-model-nonetype": "no version in the paste: the strategy flag is spelled as most releases spell it (--mamba-scheduler-strategy, 0.5.7-0.5.19), the label uses 0.5.14+'s --mamba-radix-cache-strategy",
    "e15-llava16-34b-missing-preprocessor-config": "a missing preprocessor_config.json is read as a model-files problem; --tokenizer-path pointing at the original repository is not offered",
    "f11-uccl-ep-deepep-empty-dp-rank-deadlock-watchdog": "a watchdog timeout with an empty DP rank under DeepEP is not tied to --deepep-mode",
    "f13-qwen3-8b-bf16-on-16gb-needs-fp8": "diag raises the fraction and offers an FP8 checkpoint; the label's whole working set (online --quantization fp8, fewer requests and tokens, no graphs) is not offered together",
    "f20-pd-decode-hicache-vs-forced-disable-radix-cache": "the refusal names the hierarchical cache and the disabled radix cache; that a PD decode server disables the radix cache itself, which --disaggregation-decode-enable-radix-cache undoes, is only in the thread",
    "c03-pd-hetero-tp-swa-gptoss-nixl-transfer-error": "a KV transfer error between prefill and decode servers of different TP sizes is not tied to the sliding-window model's need for equal --tp-size",
    "d02-glm52-nvfp4-sm120-shared-experts-fusion-size-mismatch": "a weight size mismatch while loading is not tied to the shared-experts fusion (--disable-shared-experts-fusion is only in the thread)",
    "r01-jax-chunked-prefill-above-max-prefill-no-bucket": "sglang-jax's bucket check is not in the catalog (the JAX port is not SGLang's package)",
    "r02-no-cuda-graph-padding-torch-compile-autotune-hang": "three torch.compile AUTOTUNE lines and no SGLang line; the two flags are only in the thread",
    "c01-b300-sm103-fa4-vision-arch-assert": "the two-line paste does not show that the failing FA4 kernel is the vision tower's, so --mm-attention-backend is not offered",
    "d02-ktransformers-dsv4-flash-oom-missing-kt-weight-path": "a traceback cut inside the model runner's init is not read as an OOM of KTransformers' experts kept on the GPU; the missing --kt-weight-path is only in the thread",
    "b03-multinode-cuda-graph-capture-deadlock": "no SGLang line: the capture that hung (and --disable-cuda-graph) is only in the write-up",
    "c01-flashinfer-autotune-dp-logits-allgather-oom": "the autotune warm-up's OOM offers skipping the autotune and a lower fraction; --max-running-requests has no value to lower from (the request pool's size is not in the paste), so it is said in words",
    "c07-pcg-warmup-ima-small-context-length": "the one quoted line does not show the piecewise CUDA graph's token sizes; --disable-piecewise-cuda-graph is only in the dynamo thread",
    "c01-glm47-fp8-tp32-block-n-divisible": "the label's --moe-a2a-backend deepep is a reading of a maintainer's 'enable deepep'; diag offers a TP size that keeps whole blocks, with DP or EP for the other GPUs, in words",
    # fresh13: 14 logs, first look in tests/data/fresh13/FIRST_LOOK.md
    "c04-pd-decode-bootstrap-connection-refused-8998": "the decode side cannot reach the prefill's bootstrap port; that the two sides (and the router) were given different ports is only in the thread, and the label's value is a description, not a port",
    "c05-moe-dense-tp-size-assert-check-server-args": "the traceback stops at the assert of check_server_args: the check is found (moe_dense_tp_size only supports 1 and None), but a value for the flag is not derived from an unreviewed message",
    # fresh16
    "d01-deepep-low-latency-dispatch-token-limit": "--deepep-mode auto is offered; the label's other choice, prefill chunks under DeepEP's per-rank token buffer (128 by default), would make every prefill a few hundred tokens and is not offered",
    # fresh22
    "w01-mi355x-dpa-prefill-hsa-out-of-resources": "no failure line in the excerpt (see CATEGORY_GAPS); the lower fraction is only in the kit's notes",
    # fresh23
    "a03-qwen38-27b-mi355x-mamba-state": "a larger fraction is offered for the state pool SGLang found no memory for; the label's --max-running-requests 32 belongs to the TP=2 launch that replaced it",
    "c02-miles-lora-offload-rollout-no-weights-cpu-backup": "an HTTP read error of the training framework against its rollout engine; that offloading needs --enable-weights-cpu-backup is only in the write-up",
    "f06-long-cot-kv-pool-retraction-stalls": "fewer running requests are offered for the retraction; --disable-radix-cache is the study's own setting, not a fix the log points to",
    "l01-rdna4-coder-next-ream-awq-experts-bf16-oom": "--quantization moe_wna16 is offered (SGL-CFG-046); the label's --dtype bfloat16 is the preset's, not something the log asks for",
    # fresh18
    "r01-sbo-deepgemm-masked-overlap-v0512": "a cut traceback inside DeepGEMM's masked grouped GEMM (the reporter's own '...' in it) with no exception line and no launch command: that --enable-single-batch-overlap needs a DeepGEMM build the image no longer ships is only in the thread",
    "h01-ecc-error-deepseek-cuda-graph": "the excerpt ends in an abort after weight loading with the ECC error line cut out; --disable-cuda-graph comes from a documentation PR, not from the log",
} | {k: v for k, v in CATEGORY_GAPS.items() if k in (
    "f04-gemma4-modelopt-fp4-on-bf16-checkpoint",
    "x24-llava-next-72b-single-gpu-weights-oom", "y07-gemma3-27b-bnb4-4090-not-enough-memory",
    "y14-inkling-mtp-eighth-draft-pool-oom",
    "c11-dynamo-70b-single-gpu-oom", "c32-specforge-eagle3-draft-dtype-mismatch",
    "c28-tp-not-dividing-attention-heads",
    "c44-router-prefill-url-bootstrap-port-comma", "f07-misspelled-cuda-visible-devices-busy-gpu",
    "f14-ascend-pd-mf-store-url-placeholder",
    "d03-rocm720-hip-graph-capture-invalidated-aiter-ar", "e01-ascend-pd-prefill-overlap-gloo-context-corruption",
    "f18-hicache-ratio-host-pool-1p4tb-small-model",
    "f20-pd-decode-hicache-vs-forced-disable-radix-cache")}


def label_flags(label: dict) -> set[str]:
    """The flag and variable names of the label's fixes (as the corpus scorer reads them)."""
    out = set()
    for item in label.get("fix_flags") or []:
        if m := re.search(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", item):
            out.add(m.group(1))
        elif m := re.search(r"\b([A-Z][A-Z0-9_]{3,})=", item):
            out.add(m.group(1))
    return out


@functools.lru_cache(maxsize=None)
def _analysis(path: Path):
    return analyze([str(path)])


def _case(log: Path, gaps: dict):
    reason = gaps.get(log.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(log, marks=marks, id=f"{log.parent.name}/{log.stem[:3]}")


@pytest.mark.parametrize("log", [_case(p, CATEGORY_GAPS) for p in CASES])
def test_category(log):
    label = json.loads(log.with_suffix(".json").read_text())
    report = _analysis(log)
    got = report.findings[0].category if report.findings else ("clean" if report.status == "clean" else None)
    accept = [label["category"]] + list(label.get("accept") or [])   # what the log's text supports equally well
    assert got in accept, f"{log.name}: {got} (label {label['category']}, accepted {accept[1:]})"


@pytest.mark.parametrize("log", [_case(p, FIX_GAPS) for p in CASES
                                 if label_flags(json.loads(p.with_suffix(".json").read_text()))])
def test_fix_flags(log):
    want = label_flags(json.loads(log.with_suffix(".json").read_text()))
    report = _analysis(log)
    got = {x.flag or x.env or x.external_env for f in report.findings for x in f.fix}
    assert want <= got, f"{log.name}: missing {sorted(want - got)} (suggested {sorted(got)})"


def test_every_gap_names_a_case():
    stems = {p.stem for p in CASES}
    assert set(CATEGORY_GAPS) <= stems and set(FIX_GAPS) <= stems


def test_findings_quote_the_log():
    """Every finding on a log with content quotes at least one of its lines."""
    for log in CASES:
        report = _analysis(log)
        for f in report.findings:
            if f.category not in ("env.empty_log",):
                assert f.evidence, f"{log.name}: {f.rule} quotes nothing"
