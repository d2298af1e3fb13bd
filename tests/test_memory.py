"""Memory formulas pinned to numbers SGLang prints (sglang-memory.md §2, §5, §9; models.md)."""
import pytest

from diag import flags, launch
from diag import knowledge as K
from diag import memory as M

GIB = 1 << 30
MIB = 1 << 20


def qwen3_next():
    return K.find_model("Qwen/Qwen3-Next-80B-A3B-Instruct")


def qwen36():
    return K.find_model("Qwen/Qwen3.6-27B")


# -- §2 default --mem-fraction-static -------------------------------------------------------

@pytest.mark.parametrize("total_mib,tp,reserved,mfs,mfs_eagle", [
    (81559, 1, 13440, 0.835, 0.810),
    (81559, 4, 14336, 0.824, 0.799),
    (81559, 8, 14848, 0.818, 0.793),
    (143771, 1, 13440, 0.907, 0.892),
    (143771, 8, 14848, 0.897, 0.882),
    (46068, 1, 6848, 0.851, 0.807),
])
def test_default_mfs_table_0_5_8(total_mib, tp, reserved, mfs, mfs_eagle):
    dep = M.Deployment(gpu_total_mib=total_mib, tp=tp, version="0.5.8.post1")
    d = M.default_mem_fraction_static(dep)
    assert d.reserved_mib == reserved and d.value == mfs
    spec = M.Deployment(gpu_total_mib=total_mib, tp=tp, version="0.5.8.post1", speculative_algorithm="EAGLE")
    assert M.default_mem_fraction_static(spec).value == mfs_eagle


@pytest.mark.parametrize("total_mib,mfs,mfs_eagle", [(81559, 0.830, 0.779), (143771, 0.903, 0.875)])
def test_default_mfs_0_5_10_piecewise_and_eagle(total_mib, mfs, mfs_eagle):
    # 58 piecewise capture sizes for 8192 tokens -> +464 MiB; EAGLE +4096 MiB (§2)
    assert len(M.piecewise_token_sizes(8192)) == 58
    for v in ("0.5.10", "0.5.13"):
        assert M.default_mem_fraction_static(M.Deployment(gpu_total_mib=total_mib, version=v)).value == mfs
        dep = M.Deployment(gpu_total_mib=total_mib, version=v, speculative_algorithm="NEXTN")
        assert M.default_mem_fraction_static(dep).value == mfs_eagle


def test_default_mfs_other_versions():
    # 0.5.14: no speculative term (draft memory is measured instead)
    spec14 = M.Deployment(gpu_total_mib=81559, version="0.5.14", speculative_algorithm="EAGLE")
    assert M.default_mem_fraction_static(spec14).value == 0.830
    # 0.4.6.post5: steps by tp*pp on <= 80 GiB cards
    assert M.default_mem_fraction_static(M.Deployment(gpu_total_mib=81559, tp=2, version="0.4.6.post5")).value == 0.87
    assert M.default_mem_fraction_static(M.Deployment(gpu_total_mib=81559, tp=8, version="0.4.6.post5")).value == 0.81
    # 0.4.10.post2: reserved (9.5 + tp*pp/2) GiB below 90 GiB
    d = M.default_mem_fraction_static(M.Deployment(gpu_total_mib=81559, tp=1, version="0.4.10.post2"))
    assert d.reserved_mib == 10 * 1024 and d.value == round((81559 - 10240) / 81559, 3)
    # unknown GPU
    assert M.default_mem_fraction_static(M.Deployment(version="0.5.10")).value == 0.88
    assert M.default_mem_fraction_static(M.Deployment(version="0.5.23")).value == 0.95


def test_default_mfs_multimodal_factor():
    # adjust_mem_fraction_for_vlm: Qwen3.5 vision config names its layers `depth` -> SGLang uses 24 layers
    dep = M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.12")
    d = M.default_mem_fraction_static(dep)
    factor = 0.95 * (1 - 0.1 * (24 * 1152 ** 2 / (24 * 1024 ** 2) - 1))
    assert d.value == pytest.approx(round((97887 - d.reserved_mib) / 97887, 3) * factor)
    text_only = M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.12", language_only=True)
    assert M.default_mem_fraction_static(text_only).value == round((97887 - d.reserved_mib) / 97887, 3)


# -- §5.1 Mamba state, §3 KV cell ---------------------------------------------------------------

@pytest.mark.parametrize("tp,fp32,bf16_mib", [(1, 77_266_944, 37.69), (2, 38_633_472, 18.84), (4, 19_316_736, 9.42),
                                              (8, 9_658_368, 4.71)])
def test_qwen3_next_state_per_slot(tp, fp32, bf16_mib):
    conv, ssm = M.mamba_state_bytes(qwen3_next(), tp, 4)
    assert conv + ssm == fp32
    conv, ssm = M.mamba_state_bytes(qwen3_next(), tp, 2)
    assert (conv + ssm) / MIB == pytest.approx(bf16_mib, abs=0.01)


def test_qwen36_27b_state_and_kv():
    conv, ssm = M.mamba_state_bytes(qwen36(), 1, 4)
    assert conv + ssm == 153_944_064                       # 146.81 MiB
    assert (conv + ssm) / MIB == pytest.approx(146.81, abs=0.005)
    assert ssm / MIB == pytest.approx(144.0)               # the SSM part alone
    assert M.kv_cell_bytes(qwen36(), 1, 2) == 65_536
    assert M.kv_cell_bytes(qwen36(), 2, 2) == 32_768
    assert M.kv_cell_bytes(qwen36(), 8, 2) == 16_384       # one KV head per rank (replicated)


def test_mla_kv_cell():
    ds = K.find_model("deepseek-ai/DeepSeek-V3")
    for tp in (1, 8):
        assert M.kv_cell_bytes(ds, tp, 2) == 70_272
        assert M.kv_cell_bytes(ds, tp, 1) == 35_136


@pytest.mark.parametrize("m", [m for m in K.all_models() if m.checks.get("kv_bytes_per_token_bf16")], ids=lambda m: m.name)
def test_kv_cell_matches_reference_table(m):
    if m.is_hybrid_swa:
        pytest.skip("two pools; checked separately")
    for tp_key, want in m.checks["kv_bytes_per_token_bf16"].items():
        assert M.kv_cell_bytes(m, int(tp_key[2:]), 2) == want


@pytest.mark.parametrize("m", [m for m in K.all_models() if m.checks.get("mamba_bytes_per_slot_fp32")], ids=lambda m: m.name)
def test_mamba_state_matches_reference_table(m):
    for tp_key, want in m.checks["mamba_bytes_per_slot_fp32"].items():
        assert sum(M.mamba_state_bytes(m, int(tp_key[2:]), 4)) == want
    for tp_key, want in (m.checks.get("mamba_bytes_per_slot_bf16") or {}).items():
        assert sum(M.mamba_state_bytes(m, int(tp_key[2:]), 2)) == want


# -- §5.3 slots per request --------------------------------------------------------------------------

@pytest.mark.parametrize("version,strategy,kw,ratio", [
    ("0.5.6.post2", "no_buffer", {}, 3),
    ("0.5.7", "no_buffer", {}, 5),
    ("0.5.7", "extra_buffer", {"speculative": True}, 4),
    ("0.5.8.post1", "no_buffer", {}, 3),
    ("0.5.8.post1", "extra_buffer", {}, 5),
    ("0.5.9", "extra_buffer", {"speculative": True}, 4),
    ("0.5.10", "extra_buffer", {"overlap": True, "speculative": True}, 5),
    ("0.5.10", "extra_buffer", {"overlap": False}, 4),
    ("0.5.12", "no_buffer", {}, 3),
    ("0.5.13", "extra_buffer_lazy", {}, 4),
    ("0.5.23", "extra_buffer", {"overlap": True}, 5),
    ("0.5.23", "extra_buffer", {"radix_disabled": True}, 1),
])
def test_slots_per_request(version, strategy, kw, ratio):
    assert M.mamba_slots_per_request(version, strategy, **kw) == ratio


def test_strategy_resolution():
    assert M.resolve_mamba_strategy(M.Deployment(version="0.5.12"))[0] == "no_buffer"
    assert M.resolve_mamba_strategy(M.Deployment(version="0.5.14"))[0] == "extra_buffer"
    assert M.resolve_mamba_strategy(M.Deployment(version="0.5.14", disable_overlap_schedule=True))[0] == "no_buffer"
    # 0.5.10 speculative decoding needs SGLANG_ENABLE_SPEC_V2=1 for the overlap scheduler
    dep = M.Deployment(version="0.5.10", speculative_algorithm="EAGLE")
    assert M.overlap_schedule_on(dep, "extra_buffer")[0] is False
    dep.env["SGLANG_ENABLE_SPEC_V2"] = "1"
    assert M.overlap_schedule_on(dep, "extra_buffer")[0] is True
    assert M.overlap_schedule_on(M.Deployment(version="0.5.11", speculative_algorithm="EAGLE"), "extra_buffer")[0]


# -- §9 worked example: sglang 0.5.8.post1, Qwen3-Next TP4, 80 GB ------------------------------------

def section9(**kw):
    dep = M.Deployment(model=kw.pop("model", qwen3_next()), gpu=K.find_gpu("H100"), version="0.5.8.post1", tp=4, **kw)
    return dep, M.budget(dep, M.Readings(pre_load_free_gib=78.90, after_load_free_gib=41.38, weights_gib=37.52))


def test_section9_reproduces_printed_numbers():
    dep, b = section9()
    assert b.mem_fraction_static == 0.824 and b.mem_fraction_static_auto
    assert b.headroom_gib == pytest.approx(13.886, abs=0.001)
    assert b.rest_gib == pytest.approx(27.494, abs=0.001)
    assert b.mamba_bytes_per_slot == 19_316_736
    assert b.max_mamba_cache_size == 723
    assert b.kv_bytes_per_token == 12_288
    assert b.max_total_num_tokens == pytest.approx(1_265_871, rel=0.01)
    assert b.max_running_requests == 241 and b.mamba_slots_per_request == 3
    # the log's sizes (pools hold size + 1 slots; K and V are half the cell each)
    assert round(b.max_total_num_tokens * 6144 / GIB, 2) == 7.24
    conv, ssm = M.mamba_state_bytes(qwen3_next(), 4, 4)
    assert round(724 * conv / GIB, 2) == 0.30 and round(724 * ssm / GIB, 2) == 12.73
    assert b.fits


def test_section9_extra_buffer_and_mtp():
    _, b = section9(mamba_strategy="extra_buffer")
    assert b.max_running_requests == 144
    # MTP with D = 4 and the default 48 requests: scratch 19,316,736 x 48 x 4 = 3.45 GiB subtracted first
    _, b = section9(speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=4)
    assert b.spec_scratch_gib == pytest.approx(3.45, abs=0.005)
    assert b.mem_fraction_static == 0.799                  # §2 table: 80 GB, TP4, EAGLE


def test_section9_from_log_lines_only():
    """No model: per-token and per-slot sizes are derived from the printed sizes."""
    dep = M.Deployment(model=None, gpu_total_mib=81559, version="0.5.8.post1", tp=4)
    R = M.Readings(pre_load_free_gib=78.90, after_load_free_gib=41.38, weights_gib=37.52, mamba_cache_size=723,
                   conv_state_gib=0.30, ssm_state_gib=12.73, kv_tokens=1_265_871, k_size_gib=7.24, v_size_gib=7.24)
    b = M.budget(dep, R)
    assert b.sources["kv_bytes_per_token"] == "log" and b.sources["mamba_bytes_per_slot"] == "log"
    assert b.kv_bytes_per_token == pytest.approx(12_288, rel=0.001)
    assert b.mamba_bytes_per_slot == pytest.approx(19_316_736, rel=0.001)
    assert b.max_running_requests == 241
    # the formula with the derived sizes lands on the same pools
    R2 = M.Readings(pre_load_free_gib=78.90, after_load_free_gib=41.38, weights_gib=37.52,
                    kv_bytes_per_token=b.kv_bytes_per_token, mamba_bytes_per_slot=b.mamba_bytes_per_slot)
    b2 = M.budget(dep, R2)
    assert b2.max_mamba_cache_size == 723
    assert b2.max_total_num_tokens == pytest.approx(1_265_871, rel=0.01)


def test_log_sizes_reconcile_with_model():
    dep = M.Deployment(model=qwen3_next(), gpu_total_mib=81559, version="0.5.8.post1", tp=4)
    R = M.Readings(pre_load_free_gib=78.90, after_load_free_gib=41.38, weights_gib=37.52, mamba_cache_size=723,
                   conv_state_gib=0.30, ssm_state_gib=12.73, kv_tokens=1_265_871, k_size_gib=7.24, v_size_gib=7.24)
    b = M.budget(dep, R)
    assert b.sources["kv_bytes_per_token"] == "model" and b.kv_bytes_per_token == 12_288
    assert b.sources["mamba_bytes_per_slot"] == "model"
    # an fp8 KV pool prints half the sizes: the log wins over the model
    R.k_size_gib = R.v_size_gib = 3.62
    b = M.budget(dep, R)
    assert b.sources["kv_bytes_per_token"] == "log" and b.kv_bytes_per_token == pytest.approx(6144, rel=0.002)


# -- models.md worked example A (0.5.23 split) -------------------------------------------------------

def test_qwen36_example_a_split():
    R = M.Readings(pre_load_free_gib=100, after_load_free_gib=70, weights_gib=30)      # rest = 60 GiB
    dep = M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.23", mem_fraction_static=0.9)
    b = M.budget(dep, R)
    assert b.rest_gib == pytest.approx(60)
    assert b.max_mamba_cache_size == 197
    assert b.max_total_num_tokens == pytest.approx(518_000, rel=0.01)
    assert b.mamba_strategy == "extra_buffer" and b.max_running_requests == 39
    nb = M.budget(M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.23", mem_fraction_static=0.9,
                               mamba_strategy="no_buffer", disable_overlap_schedule=True), R)
    assert nb.max_running_requests == 65
    bf = M.budget(M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.23", mem_fraction_static=0.9,
                               mamba_ssm_dtype="bfloat16"), R)
    assert bf.mamba_bytes_per_slot / MIB == pytest.approx(74.81, abs=0.01)


def test_mamba_split_versions():
    per = 153_944_064
    rest = 20 * GIB
    old = M.mamba_split("0.5.12", rest, per, ratio=5, draft_tokens=4, max_running_requests=48)
    assert old.scratch_bytes == per * 48 * 4 and old.max_mamba_cache_size == 0       # scratch first (§5.2)
    joint = M.mamba_split("0.5.13", rest, per, ratio=5, draft_tokens=4, max_running_requests=48)
    budget_bytes = rest * 0.9 / 1.9
    assert joint.max_mamba_cache_size == int(budget_bytes // (per * (1 + 4 / 5)))
    assert joint.scratch_bytes == per * 4 * (joint.max_mamba_cache_size // 5)
    flag = M.mamba_split("0.5.13", rest, per, ratio=5, max_mamba_cache_size=40)
    assert flag.max_mamba_cache_size == 40 and flag.rest_after_bytes == rest - 40 * per
    radix_off = M.mamba_split("0.5.8.post1", rest, per, ratio=1, radix_disabled=True)
    assert radix_off.max_mamba_cache_size == 512


def test_max_running_requests_rules():
    assert M.max_running_requests("0.5.8.post1", 1_265_871, 262_144, requested=None, mamba_cap=241)[0] == 241
    assert M.max_running_requests("0.5.8.post1", 1_265_871, 262_144, requested=None)[0] == 2472
    assert M.max_running_requests("0.5.12", 100_000, 4096, requested=None)[0] == 4096
    assert M.max_running_requests("0.5.14", 50, 4096, requested=48)[0] == 25          # tokens // 2
    assert M.max_running_requests("0.5.12", 100_000, 4096, requested=48, mamba_cap=7) == (7, "Mamba slots // slots per request")


# -- 0.5.14+ "Loaded weights leave no GPU memory" ----------------------------------------------------

def test_minimum_viable_fraction_reproduced():
    # "... Raise --mem-fraction-static above 0.788 (minimum viable = 1 - available/pre = 0.7873)"
    dep = M.Deployment(model=K.find_model("Qwen/Qwen3-32B"), gpu_total_mib=97887, version="0.5.14")
    R = M.Readings(pre_load_free_gib=94.50, after_load_free_gib=20.10, mem_fraction_static=0.6,
                   min_viable_fraction=0.7873, suggested_fraction=0.788)
    b = M.budget(dep, R)
    assert b.mem_fraction_static == 0.6
    assert b.min_viable_fraction == pytest.approx(0.7873, abs=0.001)
    assert not b.fits and "Loaded weights leave no GPU memory" in b.problems[0]
    assert b.goals[0] == "kv_pool"
    opts = M.options_for("kv_pool", dep, b)
    mfs_opt = next(o for o in opts if o.kind == "raise_fraction")
    value = float(mfs_opt.changes[0]["value"])
    assert value > 0.788
    # it still leaves SGLang's graph/activation reserve outside the static pools
    assert (1 - value) * 94.50 >= b.cuda_graph_gib + b.activations_gib - 0.01


def test_weights_problem_never_suggests_mem_fraction():
    dep = M.Deployment(model=K.find_model("meta-llama/Llama-3.1-70B-Instruct"), gpu=K.find_gpu("H100"), version="0.5.10")
    b = M.budget(dep)
    assert not b.fits and b.goals[0] == "weights"
    assert "CUDA out of memory while loading" in b.problems[0]
    opts = M.options_for("weights", dep, b)
    flags_used = [f for o in opts for f in o.flags]
    assert "--mem-fraction-static" not in flags_used
    tp = next(o for o in opts if o.kind == "tp")
    assert tp.changes[0] == {"flag": "--tp-size", "value": tp.changes[0]["value"], "action": "set"}
    assert tp.changes[0]["value"] in ("2", "4") and tp.cost == M.COST_GPUS
    assert not any(o.kind == "checkpoint_fp8" for o in opts)   # FP8 70B (67.7 GiB) still exceeds one H100's budget
    int4 = next(o for o in opts if o.kind == "checkpoint_int4")
    assert int4.fits and int4.values["after"]["weights_gib"] < 40 and not int4.changes   # no checkpoint name invented


def test_weights_estimates_match_references():
    q32 = K.find_model("Qwen/Qwen3-32B")
    assert M.estimate_weights(q32, 1).target_gib == pytest.approx(61.03, rel=0.01)      # vLLM measured
    assert M.estimate_weights(q32, 2).target_gib == pytest.approx(30.59, rel=0.01)
    ds = K.find_model("deepseek-ai/DeepSeek-V3")
    assert M.estimate_weights(ds, 8, 1, 8).target_gib == pytest.approx(79.3, rel=0.01)  # models.md example B
    assert M.estimate_weights(ds, 8, 1, 1).target_gib == pytest.approx(87.8, rel=0.015)  # DP attention
    q = qwen36()
    e1, e2 = M.estimate_weights(q, 1), M.estimate_weights(q, 2)
    assert e1.target_gib + e1.mtp_gib == pytest.approx(51.75, abs=0.01)
    assert e2.target_gib + e2.mtp_gib == pytest.approx(25.9, rel=0.01)


# -- CUDA graphs and prefill ---------------------------------------------------------------------------

def test_cuda_graph_problem_and_options():
    # a fraction so high that the measured graphs no longer fit outside the static pools
    dep = M.Deployment(model=K.find_model("Qwen/Qwen3-8B"), gpu=K.find_gpu("H100"), version="0.5.12",
                       mem_fraction_static=0.99)
    R = M.Readings(pre_load_free_gib=78.9, after_load_free_gib=63.6, weights_gib=15.3, graph_mem_gib=1.4)
    b = M.budget(dep, R)
    assert "cuda_graph" in b.goals and not b.fits
    opts = M.options_for("cuda_graph", dep, b)
    assert opts[0].kind == "lower_fraction" and opts[0].changes[0]["flag"] == "--mem-fraction-static"
    new = float(opts[0].changes[0]["value"])
    assert new < 0.99 and (1 - new) * 78.9 >= 1.4 + b.activations_gib + M.options.MFS_MARGIN_GIB - 0.1
    assert opts[-1].kind == "disable_graph"
    assert opts[-1].changes[0] == {"flag": "--cuda-graph-backend-decode", "value": "disabled", "action": "set"}
    # the activations' reserve alone takes more than the headroom: smaller graphs cannot be the fix
    assert not any(o.kind == "graph_bs" for o in opts)
    # with room outside that reserve, the graphs shrink to what it holds
    dep = M.Deployment(model=K.find_model("Qwen/Qwen3-8B"), gpu=K.find_gpu("H100"), version="0.5.12", mem_fraction_static=0.8)
    b = M.budget(dep, M.Readings(pre_load_free_gib=78.9, after_load_free_gib=63.6, weights_gib=15.3, graph_mem_gib=8.0))
    opts = M.options_for("cuda_graph", dep, b)
    assert any(o.kind == "graph_bs" and int(o.changes[0]["value"]) < b.cuda_graph_max_bs for o in opts)


def test_prefill_warning_and_options():
    dep = M.Deployment(model=K.find_model("Qwen/Qwen3-8B"), gpu=K.find_gpu("H100"), version="0.5.12")
    R = M.Readings(pre_load_free_gib=78.9, after_load_free_gib=63.6, weights_gib=15.3, available_gpu_mem_gib=0.9)
    b = M.budget(dep, R)
    assert "prefill" in b.warning_goals
    opts = M.options_for("prefill", dep, b)
    assert any(o.kind == "prefill_chunk" and int(o.changes[0]["value"]) < 8192 for o in opts)


def test_swa_pool_gpt_oss():
    dep = M.Deployment(model=K.find_model("openai/gpt-oss-120b"), gpu=K.find_gpu("H200"), version="0.5.12")
    b = M.budget(dep)
    assert b.kv_bytes_per_token == pytest.approx(66_355, abs=1)
    assert b.swa_tokens == int(b.max_total_num_tokens * 0.8)


def test_fp8_kv_and_checkpoint_kv_scheme():
    q = K.find_model("Qwen/Qwen3-32B")
    assert M.kv_dtype_bytes("fp8_e4m3", q)[0] == 1
    assert M.kv_dtype_bytes("auto", q)[0] == 2
    assert M.kv_dtype_bytes(None, q, "torch.float8_e4m3fn")[0] == 1
    nv = K.find_model("nvidia/Qwen3.6-27B-NVFP4")
    assert nv.kv_cache_quant == "fp8" and M.kv_dtype_bytes("auto", nv)[0] == 1


def test_draft_kv_inside_cell_from_0_5_14():
    dep = M.Deployment(model=qwen36(), gpu_total_mib=97887, version="0.5.14", speculative_algorithm="NEXTN",
                       speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    b = M.budget(dep)
    assert b.kv_cell_bytes == pytest.approx(65_536 * (1 + 1 / 16))
    assert b.draft_weights_gib == pytest.approx(0.79, abs=0.02)
    assert b.item("draft_weights").note.endswith("in the static budget (0.5.14+)")


# -- flags ---------------------------------------------------------------------------------------------

def test_from_flags_any_version_names():
    d = M.Deployment.from_flags({"--tensor-parallel-size": "4", "--mamba-scheduler-strategy": "extra_buffer",
                                 "--cuda-graph-max-bs": "128", "--disable-cuda-graph": True,
                                 "--speculative-algorithm": "NEXTN", "--kv-cache-dtype": "fp8_e4m3",
                                 "--model-path": "/models/Qwen3.6-27B-FP8", "--max-mamba-cache-size": "60"}, "0.5.10")
    assert d.tp == 4 and d.mamba_strategy == "extra_buffer" and d.cuda_graph_max_bs == 128 and d.disable_cuda_graph
    assert d.spec == "EAGLE" and d.kv_cache_dtype == "fp8_e4m3" and d.max_mamba_cache_size == 60
    assert d.model.name == "Qwen3.6-27B" and d.weight_quant == "fp8"
    d = M.Deployment.from_flags({"--tp-size": 8, "--attn-dp-size": 8, "--mamba-radix-cache-strategy": "no_buffer",
                                 "--cuda-graph-max-bs-decode": 64, "--cuda-graph-backend-decode": "disabled"}, "0.5.23")
    assert d.dp_attention and d.attn_tp == 1 and d.mamba_strategy == "no_buffer"
    assert d.cuda_graph_max_bs == 64 and d.disable_cuda_graph
    # a server_args dump (field names, Python values)
    d = M.Deployment.from_flags({"tp_size": 2, "dp_size": 2, "enable_dp_attention": True, "mem_fraction_static": 0.824,
                                 "max_running_requests": None, "disable_radix_cache": False,
                                 "quantization": "fp8", "model_path": "Qwen/Qwen3-32B"}, "0.5.8.post1")
    assert d.tp == 2 and d.attn_tp == 1 and d.mem_fraction_static == 0.824 and d.max_running_requests is None
    assert not d.disable_radix_cache and d.weight_quant == "fp8" and d.model.weight_quant == "fp8"


def test_from_parsed_launch_command():
    cat = flags.for_version("0.5.10")
    cmd = launch.parse_launch("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 "
                              "--mem-fraction-static 0.8", cat)
    d = M.Deployment.from_flags(cmd.flags, "0.5.10", gpu=K.find_gpu("H100"))
    assert d.tp == 4 and d.mem_fraction_static == 0.8 and d.model.name == "Qwen3-Next-80B-A3B"


def test_budget_json_keys_are_unit_suffixed():
    _, b = section9()
    j = b.to_json()
    for key in ("total_gib", "weights_gib", "kv_pool_gib", "mamba_state_gib", "draft_gib", "cuda_graph_gib", "free_gib",
                "kv_bytes_per_token", "mamba_bytes_per_slot", "mamba_slots_per_request", "max_total_num_tokens",
                "max_running_requests", "mem_fraction_static", "fits"):
        assert key in j
    assert [i["name"] for i in j["items"]][:3] == ["total", "cuda_context", "weights"]
    assert j["items"][-1]["name"] == "free"
    assert all(i["source"] in M.SOURCES for i in j["items"])
    total = j["items"][0]["gib"]
    assert sum(i["gib"] for i in j["items"][1:]) == pytest.approx(total, abs=0.01)


def test_flag_catalog_versions_cover_renames():
    from diag import flags as F
    cat = F.for_version("0.5.23")
    assert cat.translate("--mamba-scheduler-strategy", "extra_buffer") == [("--mamba-radix-cache-strategy", "extra_buffer")]
    old = F.for_version("0.5.10")
    assert old.translate("--mamba-radix-cache-strategy", "extra_buffer") == [("--mamba-scheduler-strategy", "extra_buffer")]
