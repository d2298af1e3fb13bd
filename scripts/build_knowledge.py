#!/usr/bin/env python3
"""Build the offline knowledge bundles diag/data/models.json and diag/data/gpus.json.

Dev tool, run by hand when the shared reference changes:

    python scripts/build_knowledge.py [--ref /work/shared/reference] [--out diag/data]

It reads the reference `models.json` / `gpus.json` (see `models.md` there) and keeps the
fields the memory arithmetic needs, plus name / hf_id / aliases / architecture and the
sources in short form ("owner/repo@commit"). A few facts that the reference lacks are
added from OVERLAY below, each with its own source. The product reads only the bundles.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF = Path("/work/shared/reference")

# Facts not in the reference, keyed by model name. Each carries a "source".
OVERLAY: dict[str, dict] = {
    # Qwen3.5/3.6 vision tower (vision_config of the public checkpoints). The layer count is
    # named `depth`, so SGLang's adjust_mem_fraction_for_vlm (getattr num_hidden_layers, 24)
    # falls back to 24 layers.
    **{name: {"vision": {"depth": 27, "num_hidden_layers": None, "hidden_size": 1152, "intermediate_size": 4304,
                         "out_hidden_size": 5120, "spatial_merge_size": 2},
              "attn_output_gate": True,
              "source": {"vision": "public Qwen3.5/3.6 config.json vision_config copies (depth 27, hidden 1152, intermediate 4304)"}}
       for name in ("Qwen3.5-27B", "Qwen3.6-27B")},
    **{name: {"vision": {"depth": 27, "num_hidden_layers": None, "hidden_size": 1152, "intermediate_size": 4304,
                         "out_hidden_size": None, "spatial_merge_size": 2},
              "attn_output_gate": True,
              "source": {"vision": "public Qwen3.5/3.6 config.json vision_config copies (depth 27, hidden 1152, intermediate 4304)"}}
       for name in ("Qwen3.5-35B-A3B", "Qwen3.6-35B-A3B", "Qwen3.5-122B-A10B", "Qwen3.5-397B-A17B")},
    # Qwen3-Next full-attention layers are gated like Qwen3.5 (q_proj emits query and gate).
    "Qwen3-Next-80B-A3B": {"attn_output_gate": True, "source": {"attn_output_gate": "models.json type 'gated full attention'"}},
    # Gemma 3 uses a SigLIP-so400m tower (num_hidden_layers 27, hidden 1152, intermediate 4304).
    **{name: {"vision": {"depth": 27, "num_hidden_layers": 27, "hidden_size": 1152, "intermediate_size": 4304,
                         "out_hidden_size": None, "spatial_merge_size": 1},
              "source": {"vision": "public gemma-3 config.json vision_config (siglip_vision_model)"}}
       for name in ("gemma-3-12b", "gemma-3-27b")},
    # DeepSeek-V3/R1: published size of the revisions with the same config (models.json weights_note).
    **{name: {"weights_gib_checkpoint": 641.30,
              "weights_includes": "FP8 incl. the MTP layer (size of deepseek-ai/DeepSeek-V3-0324 / DeepSeek-R1-0528, same config)"}
       for name in ("DeepSeek-V3", "DeepSeek-R1")},
    # Older repo ids of the Llama 3.1 checkpoints.
    "Llama-3.1-8B": {"aliases": ["meta-llama/Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"]},
    "Llama-3.1-70B": {"aliases": ["meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"]},
}

# quant_method in a checkpoint's quantization_config -> diag's weight format name
QUANT_METHODS = {"fp8": "fp8", "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4", "awq": "awq", "gptq": "gptq"}


def short_source(text: str) -> str:
    """'ai-dynamo/aiconfigurator aic-core/... @095f58a (...)' -> 'ai-dynamo/aiconfigurator@095f58a'."""
    if not isinstance(text, str):
        return str(text)
    repo = re.search(r"\b([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)\b", text)
    commit = re.search(r"@([0-9a-f]{7,40})", text)
    if repo and commit:
        return f"{repo[1]}@{commit[1]}"
    return text[:80]


def _moe(m: dict) -> dict | None:
    moe = m.get("moe")
    if not moe:
        return None
    layers = m["num_hidden_layers"]
    dense = moe.get("first_k_dense_replace") or 0
    shared_n = moe.get("shared_experts")
    shared_inter = moe.get("shared_expert_intermediate_size")
    if shared_n and not shared_inter:
        shared_inter = moe.get("moe_intermediate_size")
    if m["architecture"].startswith("Llama4"):   # Llama 4: every MoE layer also has one shared expert
        shared_n, shared_inter = 1, moe.get("moe_intermediate_size")
    return {
        "num_experts": moe.get("num_experts"),
        "experts_per_token": moe.get("experts_per_token"),
        "moe_intermediate_size": moe.get("moe_intermediate_size"),
        "num_shared_experts": shared_n or (1 if shared_inter else 0),
        "shared_expert_intermediate_size": shared_inter,
        "first_k_dense_replace": dense,
        "moe_layers": moe.get("moe_layers") or layers - dense,
    }


def _linear(m: dict) -> dict | None:
    la = m.get("linear_attention")
    if not la:
        return None
    keep = ("num_linear_layers", "num_full_attention_layers", "full_attention_interval", "linear_num_key_heads",
            "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim")
    out = {k: la.get(k) for k in keep}
    out["mamba_ssm_dtype"] = la.get("mamba_ssm_dtype_in_config")
    return out


def _swa(m: dict) -> dict | None:
    sw = m.get("sliding_window")
    if not sw:
        return None
    note = sw.get("sglang_0_5_23", "") or sw.get("note", "")
    # SGLang sizes two pools only for hybrid-SWA architectures (models.md §2)
    hybrid = m["architecture"] in ("GptOssForCausalLM", "Llama4ForConditionalGeneration")
    swa_layers = sw.get("sliding_layers") or sw.get("chunked_layers") or 0
    full_layers = sw.get("full_layers") or sw.get("global_layers") or 0
    window = sw.get("sliding_window") or sw.get("attention_chunk_size")
    if not sw.get("use_sliding_window", True):
        return None
    return {"window": window, "swa_layers": swa_layers, "full_layers": full_layers, "hybrid_pool": hybrid,
            "note": note[:160]}


def _checks(m: dict) -> dict:
    """Reference figures the tests compare the formulas with."""
    d = m.get("derived") or {}
    out: dict = {}
    kv = d.get("kv_bytes_per_token_bf16") or d.get("kv_bytes_per_token_bf16_sglang_all_layers")
    if kv:
        out["kv_bytes_per_token_bf16"] = kv
    if d.get("kv_bytes_per_token_bf16_any_tp"):
        out["kv_bytes_per_token_bf16"] = {f"tp{t}": d["kv_bytes_per_token_bf16_any_tp"] for t in (1, 2, 4, 8)}
    la = m.get("linear_attention") or {}
    slots = la.get("sglang_0_5_23_state_per_slot")
    if slots:
        out["mamba_bytes_per_slot_fp32"] = {tp: (v["per_slot_bytes_ssm_fp32"] if isinstance(v, dict) else v)
                                            for tp, v in slots.items()}
        bf = {tp: v.get("per_slot_bytes_ssm_bf16") for tp, v in slots.items() if isinstance(v, dict)}
        if bf:
            out["mamba_bytes_per_slot_bf16"] = bf
    pc = m.get("params_computed_from_config_b")
    if pc is not None:
        out["params_b"] = pc["total"] if isinstance(pc, dict) else pc
    return out


def model_entry(m: dict) -> dict:
    arch = m["architecture"]
    quant = m.get("checkpoint_quantization")
    weight_quant = QUANT_METHODS.get((quant or {}).get("quant_method")) if quant else None
    weights = m.get("weights_gib_checkpoint")
    includes = ""
    if m.get("multimodal"):
        includes = "vision tower"
    if m.get("mtp_layers"):
        includes = (includes + " and " if includes else "") + "MTP layers"
    weights_includes = f"published checkpoint size (incl. {includes})" if includes else "published checkpoint size"
    measured = m.get("measured_weights_gib_vllm") or {}
    note = m.get("weights_note")
    if isinstance(note, str) and "double-counts" in note:
        # gpt-oss repos ship the weights twice; the loaded size is the vLLM measurement
        weights, weights_includes = measured.get("tp1"), "loaded size measured with vLLM on H100 (repo total double-counts)"
    variants = {}
    for key, fmt in (("fp8_variant", "fp8"), ("nvfp4_variant", "nvfp4")):
        v = m.get(key)
        if v:
            variants[fmt] = {"hf_id": v.get("hf_id"), "weights_gib": v.get("weights_gib_checkpoint")}
            if fmt == "nvfp4":
                variants[fmt]["note"] = (v.get("quant") or "")[:200]
                variants[fmt]["kv_fp8"] = "kv_cache_scheme" in (v.get("quant") or "")
    aliases = list(m.get("same_architecture") or [])
    if m.get("base_model_variant"):
        aliases.append(m["base_model_variant"]["hf_id"])
    sources = {k: short_source(v) for k, v in (m.get("source") or {}).items()}
    mla = m.get("mla")
    entry = {
        "name": m["name"],
        "hf_id": m["hf_id"],
        "aliases": aliases,
        "architecture": arch,
        "torch_dtype": m.get("torch_dtype"),
        "num_hidden_layers": m["num_hidden_layers"],
        "hidden_size": m["hidden_size"],
        "intermediate_size": m.get("intermediate_size_mlp") or m.get("intermediate_size"),
        "num_attention_heads": m["num_attention_heads"],
        "num_key_value_heads": m["num_key_value_heads"],
        "head_dim": m.get("head_dim"),
        "vocab_size": m.get("vocab_size"),
        "max_position_embeddings": m.get("max_position_embeddings"),
        "tie_word_embeddings": bool(m.get("tie_word_embeddings")),
        "attention_bias": bool(m.get("attention_bias")) or arch in ("Qwen2ForCausalLM", "GptOssForCausalLM"),
        "moe": _moe(m),
        "mla": ({k: mla.get(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank")}
                if mla else None),
        "swa": _swa(m),
        "linear": _linear(m),
        "mtp_layers": m.get("mtp_layers") or 0,
        "weight_quant": weight_quant,
        "weights_gib_checkpoint": weights,
        "weights_includes": weights_includes if weights else None,
        "measured_weights_gib_tp1": measured.get("tp1"),
        "multimodal": bool(m.get("multimodal")),
        "vision": None,
        "variants": variants,
        "params_total_b": m.get("params_total_b"),
        "params_active_b": m.get("params_active_b"),
        "checks": _checks(m),
        "source_quality": m.get("source_quality"),
        "sources": sources,
    }
    over = OVERLAY.get(m["name"], {})
    for k, v in over.items():
        if k == "source":
            entry["sources"].update(v)
        elif k == "aliases":
            entry["aliases"] = sorted(set(entry["aliases"]) | set(v))
        else:
            entry[k] = v
    return entry


def gpu_entry(g: dict) -> dict:
    aliases = list(g.get("aliases") or [])
    aliases += list((g.get("variants") or {}).keys())
    return {
        "name": g["name"],
        "aliases": aliases,
        "memory_total_mib": g.get("memory_total_mib_nvidia_smi"),
        "memory_gb_spec": g.get("memory_gb_spec"),
        "arch": g.get("arch"),
        "bf16_dense_tflops": g.get("bf16_dense_tflops"),
        "hbm_bandwidth_tbps": g.get("hbm_bandwidth_tbps"),
        "nvlink": g.get("nvlink"),
        "sources": {k: short_source(v) for k, v in (g.get("source") or {}).items()},
    }


def build(ref: Path, out: Path) -> tuple[Path, Path]:
    models = json.loads((ref / "models.json").read_text())
    gpus = json.loads((ref / "gpus.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    header = {"built_from": str(ref), "units": "GiB = 2^30 B, MiB = 2^20 B"}
    m_path, g_path = out / "models.json", out / "gpus.json"
    m_path.write_text(json.dumps({**header, "models": [model_entry(m) for m in models]}, indent=1) + "\n")
    g_path.write_text(json.dumps({**header, "gpus": [gpu_entry(g) for g in gpus]}, indent=1) + "\n")
    return m_path, g_path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, default=DEFAULT_REF)
    ap.add_argument("--out", type=Path, default=ROOT / "diag" / "data")
    args = ap.parse_args()
    for p in build(args.ref, args.out):
        print(f"wrote {p} ({p.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
