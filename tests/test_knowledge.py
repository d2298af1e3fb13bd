"""Model and GPU knowledge: bundles, name matching, config.json parsing, parameter counts."""
import json

import pytest

from diag import knowledge as K
from diag import memory as M

GIB = 1 << 30


def test_bundles_load_offline():
    models, gpus = K.all_models(), K.all_gpus()
    assert len(models) >= 30 and len(gpus) >= 20
    assert all(m.name and m.hf_id and m.architecture for m in models)
    assert all(g.name for g in gpus)


@pytest.mark.parametrize("m", [m for m in K.all_models() if "params_b" in m.checks], ids=lambda m: m.name)
def test_param_count_matches_reference(m):
    # models.md: params_computed_from_config_b (8.03B, 70.55B, 7.62B, 8.19B, 32.76B, 30.5B, 235.1B, 46.70B)
    assert m.params_b() == pytest.approx(m.checks["params_b"], rel=1e-3)


def test_deepseek_v3_parameter_split():
    # models.md §1.1: 671.0B main model; MTP module ~14B incl. its embed/head copy
    ds = K.find_model("deepseek-ai/DeepSeek-V3")
    assert ds.params_b() == pytest.approx(671.0, rel=0.005)
    assert sum(ds.mtp_param_groups().values()) / 1e9 == pytest.approx(11.6, rel=0.05)


def test_qwen36_27b_bf16_size_from_config_matches_published():
    m = K.find_model("Qwen/Qwen3.6-27B")
    total = (m.params_b() * 1e9 + sum(m.mtp_param_groups().values()) + m.vision_params()) * 2 / GIB
    assert total == pytest.approx(51.75, rel=0.01)   # published 51.75 GiB incl. vision tower and MTP


@pytest.mark.parametrize("query,name,quant", [
    ("Qwen/Qwen3.6-27B", "Qwen3.6-27B", None),
    ("/models/Qwen3.6-27B-FP8", "Qwen3.6-27B", "fp8"),
    ("mymodels/qwen3-32b-fp8", "Qwen3-32B", "fp8"),
    ("QWEN/QWEN3-32B-AWQ", "Qwen3-32B", "awq"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen3-Next-80B-A3B", None),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen3-30B-A3B", None),
    ("deepseek-ai/DeepSeek-V3-0324", "DeepSeek-V3", "fp8"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama-3.1-8B", None),
    ("nvidia/Qwen3.6-27B-NVFP4", "Qwen3.6-27B", "nvfp4"),
    ("Qwen/Qwen3.6-35B-A3B-FP8", "Qwen3.6-35B-A3B", "fp8"),
    ("google/gemma-3-27b-it", "gemma-3-27b", None),
    ("openai/gpt-oss-120b", "gpt-oss-120b", "mxfp4"),
    ("/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/" + "a" * 40, "Qwen3-8B", None),
])
def test_find_model(query, name, quant):
    m = K.find_model(query)
    assert m is not None and m.name == name
    assert m.weight_quant == quant


def test_find_model_fp8_suffix_sets_weights_and_variant_size():
    assert K.find_model("Qwen/Qwen3.6-35B-A3B-FP8").weights_gib_checkpoint == 34.9
    fp8 = K.find_model("/models/Qwen3.6-27B-FP8")
    assert fp8.weights_gib_checkpoint is None                       # not published: estimated from config
    assert M.estimate_weights(fp8).target_gib < 0.6 * M.estimate_weights(K.find_model("Qwen/Qwen3.6-27B")).target_gib


@pytest.mark.parametrize("query", ["Qwen3", "Mistral-7B", "llama", "", None, "totally-unknown-model"])
def test_find_model_refuses_to_guess(query):
    assert K.find_model(query) is None


def test_find_model_by_architecture():
    assert K.find_model(None, "Qwen3NextForCausalLM").name == "Qwen3-Next-80B-A3B"
    assert K.find_model(None, "LlamaForCausalLM") is None          # several families
    assert K.find_model("Qwen/Qwen3-8B", "LlamaForCausalLM") is None


@pytest.mark.parametrize("name,expect", [
    ("NVIDIA RTX PRO 6000 Blac...", 97887),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887),
    ("RTX PRO 6000", 97887),
    ("H100", 81559),
    ("NVIDIA H100 80GB HBM3", 81559),
    ("4090", 24564),
    ("A100 80GB", 81920),
    ("NVIDIA A100-SXM4-40GB", 40537),
    ("l4", 23034),
    ("L40S", 46068),
    ("A10G", 23028),
    ("NVIDIA RTX 6000 Ada Gene...", 49140),
    ("GB200", 189471),
    ("B200", 183359),
])
def test_find_gpu_by_name(name, expect):
    g = K.find_gpu(name)
    assert g is not None and g.memory_total_mib == expect


@pytest.mark.parametrize("name", ["A100", "RTX 6000", "foo", ""])
def test_find_gpu_ambiguous_or_unknown(name):
    assert K.find_gpu(name) is None


def test_find_gpu_by_total():
    assert K.find_gpu(total_mib=97887).name.startswith("RTX PRO 6000")
    assert K.find_gpu(total_mib=97871).name == "H20"
    # PyTorch's "total capacity of 79.14 GiB" is a little below nvidia-smi's 81,559 MiB
    assert K.find_gpu(total_mib=int(79.14 * 1024)).memory_total_mib == 81559
    assert K.find_gpu(total_mib=12345) is None


# -- config.json ----------------------------------------------------------------------------

QWEN36_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {
        "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64, "num_attention_heads": 24,
        "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 248320, "max_position_embeddings": 262144,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16, "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": 1, "attn_output_gate": True, "tie_word_embeddings": False,
    },
    "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "out_hidden_size": 5120,
                      "spatial_merge_size": 2},
    "tie_word_embeddings": False,
}


def test_model_from_config_qwen35_gdn(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN36_CONFIG))
    m = K.model_from_config(tmp_path)
    assert m.is_hybrid_mamba and m.num_linear_layers == 48 and m.kv_layers == 16
    assert m.mtp_layers == 1 and m.multimodal and m.attn_output_gate
    conv, ssm = M.mamba_state_bytes(m, 1, 4)
    assert conv + ssm == 153_944_064
    assert M.kv_cell_bytes(m, 1, 2) == 65_536


def test_model_from_config_deepseek_mla():
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "intermediate_size": 18432,
           "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536,
           "n_routed_experts": 256, "n_shared_experts": 1, "moe_intermediate_size": 2048, "first_k_dense_replace": 3,
           "num_experts_per_tok": 8, "num_nextn_predict_layers": 1,
           "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    m = K.model_from_config(cfg)
    assert m.is_mla and m.weight_quant == "fp8" and m.mtp_layers == 1
    assert m.moe["moe_layers"] == 58
    assert m.params_b() == pytest.approx(671.0, rel=0.005)
    assert M.kv_cell_bytes(m, 8, 2) == 70_272


def test_model_from_config_gpt_oss_swa_and_gemma3():
    oss = {"architectures": ["GptOssForCausalLM"], "hidden_size": 2880, "intermediate_size": 2880,
           "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "vocab_size": 201088, "num_local_experts": 128, "num_experts_per_tok": 4, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 18, "quantization_config": {"quant_method": "mxfp4"}}
    m = K.model_from_config(oss)
    assert m.is_hybrid_swa and m.swa["swa_layers"] == 18 and m.weight_quant == "mxfp4"
    cell, full = M.swa_cell_bytes(m, 1, 2, 0.8)
    assert cell == pytest.approx(66_355, abs=1)          # models.md §2: 36,864 + 0.8 x 36,864
    gemma = {"architectures": ["Gemma3ForConditionalGeneration"],
             "text_config": {"hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
                             "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                             "sliding_window": 1024, "vocab_size": 262208},
             "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27, "intermediate_size": 4304}}
    g = K.model_from_config(gemma)
    assert not g.is_hybrid_swa                           # SGLang charges every Gemma 3 layer in full
    assert M.kv_cell_bytes(g, 1, 2) == 507_904


def test_model_from_config_mixtral_glm_llama():
    mixtral = {"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
               "num_local_experts": 8, "num_experts_per_tok": 2}
    assert K.model_from_config(mixtral).params_b() == pytest.approx(46.703, rel=1e-3)
    llama = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
    m = K.model_from_config(llama)
    assert m.params_b() == pytest.approx(8.03, rel=1e-3) and m.head_dim_ == 128
    glm = {"architectures": ["Glm4MoeForCausalLM"], "hidden_size": 5120, "intermediate_size": 12288,
           "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 151552, "n_routed_experts": 160, "n_shared_experts": 1, "moe_intermediate_size": 1536,
           "first_k_dense_replace": 3, "num_nextn_predict_layers": 1, "attention_bias": True}
    g = K.model_from_config(glm)
    assert g.mtp_layers == 1 and g.moe["moe_layers"] == 89
    assert M.kv_cell_bytes(g, 1, 2) == 376_832
