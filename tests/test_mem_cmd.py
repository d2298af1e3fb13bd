"""`diag mem` on pasted launch commands, including the founding case."""
import json
import re

import pytest

from diag import flags, mem_cmd
from diag import memory as M

# The founding case: Qwen3.6-27B BF16 on one RTX PRO 6000 Blackwell 96 GB (97,887 MiB) with MTP
# (EAGLE/NEXTN, 3 steps, topk 1, 4 draft tokens) and --mamba-scheduler-strategy extra_buffer.
FOUNDING = ("python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --speculative-algorithm EAGLE "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
            "--mamba-scheduler-strategy extra_buffer --port 30000")
SPEC_V2 = "SGLANG_ENABLE_SPEC_V2=1 "


def run_json(cmd, gpu="NVIDIA RTX PRO 6000 Blac...", version="0.5.10", model_config=None):
    out, code = mem_cmd.run(cmd.split(), gpu, model_config, version, fmt="json")
    return json.loads(out), code


def test_founding_case_text():
    out, code = mem_cmd.run((SPEC_V2 + FOUNDING).split(), "NVIDIA RTX PRO 6000 Blac...", None, "0.5.10")
    assert code == 1
    assert "RTX PRO 6000 Blackwell" in out and "97,887 MiB" in out
    # weights about 51 GB (the published 51.75 GiB includes the vision tower and the MTP layer loaded as the draft)
    weights = float(re.search(r"^  weights\s+([\d.]+)", out, re.M)[1])
    assert 50.5 <= weights <= 51.8
    # the user estimated ~143 MB a slot: it is 146.81 MiB with fp32 SSM; the SSM part alone is 144 MiB
    assert "146.81 MiB (153,944,064 B)" in out and "ssm 144.00 MiB (float32)" in out
    # slots per running request under each strategy
    assert "5 with extra_buffer (overlap on)" in out
    assert "extra_buffer (no overlap) 4" in out and "no_buffer 3" in out
    assert "result: DOES NOT FIT" in out
    assert re.search(r"^  KV pool\s+0\.00", out, re.M)          # nothing left for KV
    # the fixes, with the flags as 0.5.10 spells them
    assert "--max-mamba-cache-size" in out and "--max-running-requests" in out
    assert "--tp-size 2" in out
    # no checkpoint name is invented: the catalog knows an NVFP4 one (Blackwell), not an FP8 one
    assert "--model-path nvidia/Qwen3.6-27B-NVFP4" in out and "Qwen3.6-27B-FP8" not in out
    assert "an FP8 checkpoint of this model" in out


def test_founding_case_numbers():
    j, code = run_json(SPEC_V2 + FOUNDING)
    assert code == 1 and j["fits"] is False
    assert j["mamba_bytes_per_slot"] == 153_944_064
    assert j["mamba_bytes_per_slot_ssm"] == 144 * (1 << 20)
    assert j["mamba_slots_per_request"] == 5
    assert j["mamba_slots_per_request_by_strategy"]["extra_buffer (no overlap)"] == 4
    assert j["mamba_slots_per_request_by_strategy"]["no_buffer"] == 3
    assert j["kv_bytes_per_token"] == 65_536
    assert 50.5 <= j["weights_gib"] <= 51.8 and j["draft_gib"] == pytest.approx(0.79, abs=0.02)
    # 0.5.10 subtracts the verify scratch for the default 48 requests first: 48 x 4 x 146.8 MiB = 27.5 GiB
    assert j["spec_scratch_gib"] == pytest.approx(48 * 4 * 153_944_064 / (1 << 30), abs=0.01)
    assert j["spec_scratch_gib"] > j["rest_gib"] > 0
    assert j["max_total_num_tokens"] == 0 and j["kv_pool_gib"] == 0
    assert j["goals"][0] == "mamba"
    options = {o["title"]: o for o in j["options"]}
    fixes = [f for o in j["options"] for f in o["fixes"]]

    def value_of(flag):
        return [int(f["value"]) for f in fixes if f["flag"] == flag]

    # --max-mamba-cache-size counts slots: a whole multiple of the 5 slots extra_buffer reserves
    slots = value_of("--max-mamba-cache-size")
    assert slots and all(s % 5 == 0 and s < 500 for s in slots)
    assert value_of("--max-running-requests") and max(value_of("--max-running-requests")) < 48
    tp = next(o for o in j["options"] if any(f["flag"] == "--tp-size" for f in o["fixes"]))
    assert tp["fits"] and tp["cost"] == M.COST_GPUS
    fp8 = next(o for o in j["options"] if o["kind"] == "checkpoint_fp8")
    assert fp8["fits"] and fp8["cost"] == M.COST_CHECKPOINT
    assert all(o["fits"] for o in options.values())
    costs = [o["cost"] for o in j["options"]]
    assert costs == sorted(costs)


def test_founding_case_without_spec_v2_env_and_nextn():
    # 0.5.10 without SGLANG_ENABLE_SPEC_V2=1: no overlap scheduler, extra_buffer holds 4 slots per request
    j, _ = run_json(FOUNDING)
    assert j["mamba_slots_per_request"] == 4 and j["overlap_schedule"] is False
    assert any("SGLANG_ENABLE_SPEC_V2" in w for w in j["warnings"])
    # NEXTN is rewritten to EAGLE and uses the checkpoint's MTP layer
    j2, _ = run_json(SPEC_V2 + FOUNDING.replace("EAGLE", "NEXTN"))
    assert j2["mamba_slots_per_request"] == 5 and j2["draft_gib"] == pytest.approx(0.79, abs=0.02)


def test_founding_case_fixes_fit():
    """Each proposed fix, applied to the command, makes the budget fit."""
    j, _ = run_json(SPEC_V2 + FOUNDING)
    for o in j["options"]:
        if not o["fixes"]:
            continue
        extra = " ".join(f"{f['flag']} {f['value']}" if f["value"] is not None else f["flag"] for f in o["fixes"])
        fixed, code = run_json(SPEC_V2 + FOUNDING + " " + extra)
        assert code == 0 and fixed["fits"], o["title"]


def test_founding_case_newer_versions():
    j, code = run_json(SPEC_V2 + FOUNDING, version="0.5.13")
    assert code == 0 and j["fits"] and j["max_running_requests"] < 48      # joint formula: capped by the slots
    assert j["max_mamba_cache_size"] // 5 == j["max_running_requests"]
    cmd = FOUNDING.replace("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy")
    j, code = run_json(cmd, version="0.5.23")
    assert j["mamba_slots_per_request"] == 5 and j["kv_cell_bytes"] == pytest.approx(65_536 * 17 / 16)
    out, _ = mem_cmd.run(FOUNDING.split(), "RTX PRO 6000", None, "0.5.23")
    assert "unrecognized arguments: --mamba-scheduler-strategy" in out      # gone in 0.5.23 (errors §3)


def test_section9_command_fits():
    cmd = "python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp-size 4"
    j, code = run_json(cmd, gpu="H100", version="0.5.8.post1")
    assert code == 0 and j["fits"]
    assert j["mem_fraction_static"] == 0.824 and j["mem_fraction_static_auto"]
    assert j["mamba_bytes_per_slot"] == 19_316_736 and j["mamba_slots_per_request"] == 3


def test_translation_to_old_spelling_and_dropped_flags():
    cat = flags.for_version("0.5.10")
    opt = M.Option("mamba_no_buffer", 1, [{"flag": "--mamba-radix-cache-strategy", "value": "no_buffer"},
                                          {"flag": "--cuda-graph-backend-decode", "value": "disabled"},
                                          {"flag": "--attn-dp-size", "value": "2"}], {"slots_after": 3, "slots_per_request": 5})
    out, dropped = mem_cmd._translated(opt, cat)
    names = [(f["flag"], f["value"]) for f in out["fixes"]]
    assert ("--mamba-scheduler-strategy", "no_buffer") in names
    assert ("--disable-cuda-graph", None) in names
    assert dropped and "--attn-dp-size" in dropped[0]


def test_model_config_file(tmp_path):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "intermediate_size": 12288,
           "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 151936, "max_position_embeddings": 40960}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out, code = mem_cmd.run(["--model-path", "/data/my-finetune"], "L40S", str(tmp_path), "0.5.12")
    assert code == 0 and "147,456 B" in out


@pytest.mark.parametrize("argv,gpu,cfg,msg", [
    (["--model-path", "foo/bar"], "H100", None, "unknown model"),
    (FOUNDING.split(), "A100", None, "unknown GPU"),
    (FOUNDING.split(), None, None, "no GPU"),
    ([], "H100", None, "no launch command"),
    (["--tp-size", "2"], "H100", None, "no model"),
    (["--model-path", "Qwen/Qwen3-8B"], "H100", "/nonexistent/config.json", "model config not found"),
])
def test_usage_errors(argv, gpu, cfg, msg):
    out, code = mem_cmd.run(argv, gpu, cfg, "0.5.10")
    assert code == 2 and msg in out and "\n" not in out.strip()


def test_gpu_by_total_mib_and_single_string_command():
    out, code = mem_cmd.run([FOUNDING], "97887", None, "0.5.12")
    assert code in (0, 1) and "RTX PRO 6000" in out
    out, code = mem_cmd.run(["--model-path", "Qwen/Qwen3-8B"], "50000", None, None)
    assert code == 0 and "50,000 MiB" in out and "rules of 0.5.23" in out
