"""Model and GPU facts for the memory calculator (offline bundles in diag/data).

`find_model` / `model_from_config` give a `ModelSpec` (architecture fields named as in the
HF `config.json`, text_config for multimodal checkpoints); `find_gpu` gives a `GpuSpec`
(nvidia-smi total MiB). Unknown -> None: callers say "unknown" and use the log's numbers.
The bundles are built by scripts/build_knowledge.py from the shared reference
(models.md / models.json / gpus.json).
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).parent / "data"

# Name suffixes that do not change the architecture. Weight formats set the quantization
# (an "-FP8" checkpoint holds FP8 weights, models.md §1.1).
QUANT_SUFFIXES = {"fp8": "fp8", "fp8-dynamic": "fp8", "awq": "awq", "gptq": "gptq", "int4": "gptq", "w4a16": "gptq",
                  "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4", "int8": "w8a8", "w8a8": "w8a8", "bf16": None}
PLAIN_SUFFIXES = {"instruct", "thinking", "chat", "it", "hf", "base", "dynamic", "pt"}
# bytes per weight element by checkpoint format (models.md §1.1)
FP8_BLOCK_BYTES = 1 + 4 / 16384       # FP8 + one fp32 scale per 128x128 block
NVFP4_BYTES = 0.5 + 1 / 16            # FP4 + FP8 scale per 16 elements
MXFP4_BYTES = 0.5 + 1 / 32            # FP4 + E8M0 scale per 32 elements
INT4_G128_BYTES = 0.5 + 4 / 128       # int4 + fp16 scale and packed zero per 128 (AWQ/GPTQ)


@lru_cache(maxsize=1)
def _models_data() -> list[dict]:
    return json.loads((DATA / "models.json").read_text())["models"]


@lru_cache(maxsize=1)
def _gpus_data() -> list[dict]:
    return json.loads((DATA / "gpus.json").read_text())["gpus"]


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------

@dataclass
class ModelSpec:
    """One model's architecture and checkpoint facts (config.json field names)."""
    name: str
    hf_id: str | None = None
    architecture: str | None = None
    aliases: list[str] = field(default_factory=list)
    torch_dtype: str | None = "bfloat16"
    num_hidden_layers: int = 0
    hidden_size: int = 0
    intermediate_size: int | None = None        # dense MLP size
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    head_dim: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    attn_output_gate: bool = False              # Qwen3-Next/3.5: q_proj also emits a gate
    moe: dict | None = None                     # num_experts, moe_intermediate_size, num_shared_experts, ...
    mla: dict | None = None                     # kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim, q_lora_rank
    swa: dict | None = None                     # window, swa_layers, full_layers, hybrid_pool
    linear: dict | None = None                  # Gated DeltaNet fields (linear_num_key_heads, ...), mamba_ssm_dtype
    mtp_layers: int = 0
    weight_quant: str | None = None             # None = bf16/fp16; fp8 / nvfp4 / mxfp4 / awq / gptq / w8a8
    kv_cache_quant: str | None = None           # "fp8" when the checkpoint declares an FP8 KV scheme
    weights_gib_checkpoint: float | None = None  # published size of the served format
    weights_includes: str | None = None
    measured_weights_gib_tp1: float | None = None
    multimodal: bool = False
    vision: dict | None = None                  # depth, num_hidden_layers, hidden_size, intermediate_size
    variants: dict = field(default_factory=dict)  # format -> {hf_id, weights_gib}
    params_total_b: float | None = None
    params_active_b: float | None = None
    checks: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    source_quality: str | None = None
    matched: str | None = None                  # what the caller asked for, when found by name

    # -- derived shapes ------------------------------------------------------------------
    @property
    def head_dim_(self) -> int:
        return self.head_dim or (self.hidden_size // max(1, self.num_attention_heads))

    @property
    def is_mla(self) -> bool:
        return bool(self.mla and self.mla.get("kv_lora_rank"))

    @property
    def is_hybrid_mamba(self) -> bool:
        return bool(self.linear and self.linear.get("num_linear_layers"))

    @property
    def is_hybrid_swa(self) -> bool:
        """SGLang sizes separate full/SWA pools (models.md §2: gpt-oss, Llama-4; not Gemma 2/3)."""
        return bool(self.swa and self.swa.get("hybrid_pool") and self.swa.get("swa_layers"))

    @property
    def num_linear_layers(self) -> int:
        return int(self.linear.get("num_linear_layers") or 0) if self.linear else 0

    @property
    def kv_layers(self) -> int:
        """Layers that hold a KV cache (hybrid GDN models: full-attention layers only, models.md §2)."""
        return self.num_hidden_layers - self.num_linear_layers

    @property
    def checkpoint_format(self) -> str:
        return self.weight_quant or "bf16"

    def with_quant(self, fmt: str | None) -> "ModelSpec":
        """The same architecture served from a checkpoint of another format."""
        m = copy.deepcopy(self)
        fmt = None if fmt in (None, "bf16", "fp16") else fmt
        if fmt == m.weight_quant:
            return m
        m.weight_quant = fmt
        variant = m.variants.get(fmt or "bf16") or {}
        m.weights_gib_checkpoint = variant.get("weights_gib")
        m.weights_includes = "published checkpoint size" if m.weights_gib_checkpoint else None
        m.measured_weights_gib_tp1 = None
        if variant.get("hf_id"):
            m.matched = variant["hf_id"]
        if variant.get("kv_fp8"):
            m.kv_cache_quant = "fp8"
        return m

    # -- parameter counts (models.md §1.2 groups) ---------------------------------------
    def param_groups(self) -> dict[str, float]:
        """Parameters of the text model by how SGLang shards them (not counting MTP / vision).

        attn_kv: K/V projections (replicated once attention-TP > KV heads);
        attn: other attention/GDN projections (split over attention TP);
        attn_replicated: MLA fused_qkv_a down-projection (on every rank);
        mlp_dense, shared_experts, experts: MLPs (split over TP); embed, lm_head: vocab-parallel;
        small: norms, router gates, GDN conv/A_log/dt_bias (replicated).
        """
        g = dict.fromkeys(("embed", "lm_head", "attn", "attn_kv", "attn_replicated", "linear_attn",
                           "mlp_dense", "shared_experts", "experts", "small"), 0.0)
        h, L = self.hidden_size, self.num_hidden_layers
        g["embed"] = (self.vocab_size or 0) * h
        g["lm_head"] = 0 if self.tie_word_embeddings else (self.vocab_size or 0) * h
        n_lin = self.num_linear_layers
        n_attn = L - n_lin
        attn, kv, repl = self._attention_layer_params()
        g["attn"] += attn * n_attn
        g["attn_kv"] += kv * n_attn
        g["attn_replicated"] += repl * n_attn
        if n_lin:
            proj, small = self._gdn_layer_params()
            g["linear_attn"] += proj * n_lin
            g["small"] += small * n_lin
        dense_layers, moe_layers = L, 0
        if self.moe:
            moe_layers = int(self.moe.get("moe_layers") or L)
            dense_layers = L - moe_layers
            e, s, gate = self._moe_layer_params()
            g["experts"] += e * moe_layers
            g["shared_experts"] += s * moe_layers
            g["small"] += gate * moe_layers
        g["mlp_dense"] += 3 * h * (self.intermediate_size or 0) * dense_layers
        g["small"] += 2 * h * L + h                      # two RMSNorms per layer + final norm
        return g

    def _attention_layer_params(self) -> tuple[float, float, float]:
        h = self.hidden_size
        if self.is_mla:
            m = self.mla
            heads, nope, rope = self.num_attention_heads, m["qk_nope_head_dim"], m["qk_rope_head_dim"]
            v, kv_lora, q_lora = m["v_head_dim"], m["kv_lora_rank"], m.get("q_lora_rank")
            repl = h * ((q_lora or 0) + kv_lora + rope)  # fused_qkv_a_proj_with_mqa (replicated)
            q = (q_lora * heads * (nope + rope)) if q_lora else h * heads * (nope + rope)
            attn = q + kv_lora * heads * (nope + v) + heads * v * h
            return attn, 0.0, repl
        hd, heads, kvh = self.head_dim_, self.num_attention_heads, self.num_key_value_heads
        q = h * heads * hd * (2 if self.attn_output_gate else 1)
        o = heads * hd * h
        kv = 2 * h * kvh * hd
        if self.attention_bias:
            q += heads * hd
            kv += 2 * kvh * hd
            o += h
        return q + o, kv, 0.0

    def _gdn_layer_params(self) -> tuple[float, float]:
        la, h = self.linear, self.hidden_size
        key_dim = la["linear_num_key_heads"] * la["linear_key_head_dim"]
        value_dim = la["linear_num_value_heads"] * la["linear_value_head_dim"]
        proj = h * (2 * key_dim + 2 * value_dim)         # in_proj_qkvz
        proj += h * 2 * la["linear_num_value_heads"]     # in_proj_ba
        proj += value_dim * h                            # out_proj
        conv = (2 * key_dim + value_dim) * la["linear_conv_kernel_dim"]
        small = conv + 2 * la["linear_num_value_heads"] + la["linear_value_head_dim"]
        return proj, small

    def _moe_layer_params(self) -> tuple[float, float, float]:
        m, h = self.moe, self.hidden_size
        experts = (m.get("num_experts") or 0) * 3 * h * (m.get("moe_intermediate_size") or 0)
        shared = (m.get("num_shared_experts") or 0) * 3 * h * (m.get("shared_expert_intermediate_size") or 0)
        gate = h * (m.get("num_experts") or 0)
        return experts, shared, gate

    def mtp_param_groups(self) -> dict[str, float]:
        """One NextN/MTP module: a decoder layer + eh_proj (2h -> h) + norms; embed/head shared."""
        if not self.mtp_layers:
            return {}
        h = self.hidden_size
        attn, kv, repl = self._attention_layer_params()
        g = {"attn": attn, "attn_kv": kv, "attn_replicated": repl, "mlp_dense": 0.0, "experts": 0.0,
             "shared_experts": 0.0, "small": 5 * h, "eh_proj": 2 * h * h}
        if self.moe:
            e, s, gate = self._moe_layer_params()
            g["experts"], g["shared_experts"] = e, s
            g["small"] += gate
        else:
            g["mlp_dense"] = 3 * h * (self.intermediate_size or 0)
        return {k: v * self.mtp_layers for k, v in g.items()}

    def vision_params(self) -> float:
        """Vision tower parameters from its config (0 when unknown)."""
        v = self.vision
        if not (self.multimodal and v and v.get("hidden_size")):
            return 0.0
        hv, inter = v["hidden_size"], v.get("intermediate_size") or 4 * v["hidden_size"]
        depth = v.get("depth") or v.get("num_hidden_layers") or 0
        blocks = depth * (4 * hv * hv + 2 * hv * inter)
        merge = (v.get("spatial_merge_size") or 1) ** 2
        out = v.get("out_hidden_size") or self.hidden_size
        merger = (hv * merge) ** 2 + hv * merge * out     # patch merger / projector
        return blocks + merger

    def params_b(self) -> float:
        return sum(self.param_groups().values()) / 1e9


def _spec_from_entry(e: dict) -> ModelSpec:
    known = ModelSpec.__dataclass_fields__
    return ModelSpec(**{k: copy.deepcopy(v) for k, v in e.items() if k in known})


@lru_cache(maxsize=1)
def all_models() -> tuple[ModelSpec, ...]:
    return tuple(_spec_from_entry(e) for e in _models_data())


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[-_\s]+", name.lower()) if t]


def _normalize(name: str) -> tuple[str, str | None, bool]:
    """'Qwen3-32B-FP8' -> ('qwen3-32b', 'fp8', True). Strips format / instruct-style suffixes."""
    toks = _tokens(name)
    quant: str | None = None
    found_quant = False
    keep: list[str] = []
    i = 0
    while i < len(toks):
        two = "-".join(toks[i:i + 2])
        if two in QUANT_SUFFIXES:
            quant, found_quant = QUANT_SUFFIXES[two], True
            i += 2
            continue
        t = toks[i]
        if t in QUANT_SUFFIXES:
            quant, found_quant = QUANT_SUFFIXES[t], True
        elif t not in PLAIN_SUFFIXES:
            keep.append(t)
        i += 1
    return "-".join(keep), quant, found_quant


def _candidate_names(query: str) -> list[str]:
    """The last one and two path components of a local path or HF id."""
    parts = [p for p in re.split(r"[\\/]+", query.strip()) if p and p not in (".", "..")]
    if not parts:
        return []
    names = [parts[-1]]
    if parts[-1].lower() in ("snapshots",) or re.fullmatch(r"[0-9a-f]{40}", parts[-1]):
        parts = parts[:-2] if len(parts) > 2 else parts
        names = [parts[-1]]
    m = re.match(r"models--([^-].*?)--(.+)$", parts[-1])   # HF cache dir models--Org--Name
    if m:
        names = [m[2]]
    return names


def _model_keys(m: ModelSpec) -> dict[str, str | None]:
    """Normalized names of a model and its checkpoints -> the format each implies."""
    keys: dict[str, str | None] = {}
    for n in [m.name, m.hf_id or "", *m.aliases]:
        if n:
            k, q, _ = _normalize(n.split("/")[-1])
            keys.setdefault(k, q)
    for fmt, v in (m.variants or {}).items():
        if v.get("hf_id"):
            k, _, _ = _normalize(v["hf_id"].split("/")[-1])
            keys.setdefault(k, fmt)
    return keys


def find_model(name_or_path: str | None, architecture: str | None = None) -> ModelSpec | None:
    """The model a --model-path / HF id / local directory names, or None when unsure.

    Matching is case-insensitive on the last path component with format and
    instruct-style suffixes removed; a suffix such as -FP8 sets the weight format.
    When two model families match, None is returned rather than a guess.
    """
    models = all_models()
    if architecture:
        pool = [m for m in models if m.architecture == architecture]
    else:
        pool = list(models)
    if not name_or_path:
        return copy.deepcopy(pool[0]) if architecture and len(pool) == 1 else None
    for raw in _candidate_names(name_or_path):
        key, quant, has_quant = _normalize(raw)
        if not key:
            continue
        exact = [(m, fmt) for m in pool for k, fmt in _model_keys(m).items() if k == key]
        hits = exact or _prefix_hits(pool, key)
        if not exact:
            # a prefix is not the model when the name states another size ('DeepSeek-R1-Distill-Llama-70B'
            # starts like DeepSeek-R1, a 671B model) or distils into another family
            hits = [(m, fmt) for m, fmt in hits if _size_agrees(m, raw) and "distill" not in raw.lower()]
        families = {m.name for m, _ in hits}
        if len(families) != 1:
            continue
        m, fmt = hits[0]
        spec = copy.deepcopy(m)
        if has_quant:
            spec = spec.with_quant(quant)
        elif fmt and fmt != spec.weight_quant:
            spec = spec.with_quant(fmt)
        spec.matched = name_or_path
        return spec
    return None


def _size_agrees(m: ModelSpec, name: str) -> bool:
    from .memory.names import params_b
    stated = params_b(name)
    if stated is None:
        return True
    actual = getattr(m, "params_total_b", None)
    if not actual and m.intermediate_size and m.vocab_size:   # partial entries give the count, not the shapes
        try:
            actual = m.params_b()
        except Exception:  # an entry without the fields for a count
            return True
    return not actual or 0.7 <= stated / actual <= 1.4


def _prefix_hits(pool: list[ModelSpec], key: str) -> list[tuple[ModelSpec, str | None]]:
    """Token-boundary prefix matches either way ('deepseek-v3-0324' ~ 'deepseek-v3')."""
    hits = []
    for m in pool:
        for k, fmt in _model_keys(m).items():
            if key.startswith(k + "-") or k.startswith(key + "-"):
                hits.append((m, fmt))
    return hits


def model_from_config(path_or_dict: str | Path | dict) -> ModelSpec:
    """A ModelSpec from a HF config.json (file, directory, or parsed dict).

    Handles Llama / Qwen2 / Qwen3 / MoE / Qwen3-Next / Qwen3.5 GDN / DeepSeek MLA /
    gpt-oss / Gemma 3 / Mistral / Mixtral / GLM shapes. Multimodal configs are read
    from text_config; the vision tower from vision_config.
    """
    if isinstance(path_or_dict, dict):
        top, origin = path_or_dict, ""
    else:
        p = Path(path_or_dict)
        if p.is_dir():
            p = p / "config.json"
        # numbers through diag.numbers: 1e999, NaN, Infinity and 5,000-digit ints are unknown (None)
        from .numbers import to_float, to_int
        top = json.loads(p.read_text(encoding="utf-8", errors="replace"), parse_float=to_float, parse_int=to_int,
                         parse_constant=lambda _: None)
        if not isinstance(top, dict):
            raise ValueError("not a JSON object")
        origin = str(p.parent)
    cfg = dict(top.get("text_config") or top)
    for k in ("quantization_config", "tie_word_embeddings", "torch_dtype", "dtype"):
        if k not in cfg and k in top:
            cfg[k] = top[k]
    arch = (top.get("architectures") or cfg.get("architectures") or [None])[0]
    name = top.get("_name_or_path") or (Path(origin).name if origin else None) or arch or "custom model"
    L = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or 0)
    h = int(cfg.get("hidden_size") or cfg.get("d_model") or 0)
    heads = int(cfg.get("num_attention_heads") or 0)
    spec = ModelSpec(
        name=Path(str(name)).name, hf_id=top.get("_name_or_path"), architecture=arch,
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16",
        num_hidden_layers=L, hidden_size=h, num_attention_heads=heads,
        num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=cfg.get("head_dim") or (h // heads if heads else None),
        vocab_size=cfg.get("vocab_size"), max_position_embeddings=cfg.get("max_position_embeddings"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        attention_bias=bool(cfg.get("attention_bias") or cfg.get("qkv_bias") or arch in ("Qwen2ForCausalLM", "GptOssForCausalLM")),
        intermediate_size=cfg.get("intermediate_size_mlp") or cfg.get("intermediate_size"),
        mtp_layers=int(cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers") or 0),
        sources={"config": origin or "config dict"}, source_quality="user config.json",
    )
    _config_moe(spec, cfg, arch)
    _config_mla(spec, cfg)
    _config_linear(spec, cfg)
    _config_swa(spec, cfg, arch)
    _config_quant(spec, cfg)
    vc = top.get("vision_config")
    if vc:
        spec.multimodal = True
        spec.vision = {"depth": vc.get("depth") or vc.get("num_hidden_layers"), "num_hidden_layers": vc.get("num_hidden_layers"),
                       "hidden_size": vc.get("hidden_size"), "intermediate_size": vc.get("intermediate_size"),
                       "out_hidden_size": vc.get("out_hidden_size"), "spatial_merge_size": vc.get("spatial_merge_size") or 1}
    known = find_model(str(name), arch)
    if known and known.num_hidden_layers == L and known.hidden_size == h:
        # same architecture as a bundled model: borrow its checkpoint size and sources
        spec.aliases = [known.name]
        if known.checkpoint_format == spec.checkpoint_format:
            spec.weights_gib_checkpoint = known.weights_gib_checkpoint
            spec.weights_includes = known.weights_includes
        spec.variants = known.variants
        if spec.vision is None:
            spec.vision = known.vision
    return spec


def _config_moe(spec: ModelSpec, cfg: dict, arch: str | None) -> None:
    n = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    if not n:
        return
    L = spec.num_hidden_layers
    dense = int(cfg.get("first_k_dense_replace") or 0)
    mlp_only = cfg.get("mlp_only_layers") or []
    step = int(cfg.get("decoder_sparse_step") or cfg.get("interleave_moe_layer_step") or 1)
    moe_layers = len([i for i in range(dense, L) if i not in mlp_only and (i + 1) % step == 0])
    expert_size = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    if arch and arch.startswith("Llama4"):
        expert_size = cfg.get("intermediate_size")
    shared_n = int(cfg.get("n_shared_experts") or 0)
    shared_size = cfg.get("shared_expert_intermediate_size")
    if shared_size and not shared_n:
        shared_n = 1
    if arch and arch.startswith("Llama4"):
        shared_n, shared_size = 1, expert_size
    if shared_n and not shared_size:
        shared_size = expert_size
    spec.moe = {"num_experts": n, "experts_per_token": cfg.get("num_experts_per_tok"),
                "moe_intermediate_size": expert_size, "num_shared_experts": shared_n,
                "shared_expert_intermediate_size": shared_size, "first_k_dense_replace": dense,
                "moe_layers": moe_layers}


def _config_mla(spec: ModelSpec, cfg: dict) -> None:
    if cfg.get("kv_lora_rank"):
        spec.mla = {k: cfg.get(k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank")}


def _config_linear(spec: ModelSpec, cfg: dict) -> None:
    if not cfg.get("linear_num_value_heads"):
        return
    L = spec.num_hidden_layers
    types = cfg.get("layer_types")
    if types:
        n_lin = sum(1 for t in types if t == "linear_attention")
    else:
        interval = int(cfg.get("full_attention_interval") or 4)
        n_lin = sum(1 for i in range(L) if (i + 1) % interval != 0)  # full attention when (i+1) % interval == 0
    spec.linear = {"num_linear_layers": n_lin, "num_full_attention_layers": L - n_lin,
                   "full_attention_interval": cfg.get("full_attention_interval"),
                   **{k: cfg.get(k) for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                              "linear_value_head_dim", "linear_conv_kernel_dim")},
                   "mamba_ssm_dtype": cfg.get("mamba_ssm_dtype")}
    if spec.architecture and "Qwen3" in spec.architecture:
        spec.attn_output_gate = bool(cfg.get("attn_output_gate", True))


def _config_swa(spec: ModelSpec, cfg: dict, arch: str | None) -> None:
    types = cfg.get("layer_types") or []
    sliding = sum(1 for t in types if t == "sliding_attention")
    if arch == "GptOssForCausalLM" and sliding:
        spec.swa = {"window": cfg.get("sliding_window"), "swa_layers": sliding, "full_layers": len(types) - sliding,
                    "hybrid_pool": True}
    elif arch and arch.startswith("Llama4") and cfg.get("attention_chunk_size"):
        chunked = sum(1 for i in range(spec.num_hidden_layers) if (i + 1) % 4 != 0)
        spec.swa = {"window": cfg["attention_chunk_size"], "swa_layers": chunked,
                    "full_layers": spec.num_hidden_layers - chunked, "hybrid_pool": True}
    elif cfg.get("sliding_window") and (cfg.get("use_sliding_window", True)):
        # Gemma 2/3, Mistral: SGLang charges every layer in full (models.md §2)
        spec.swa = {"window": cfg.get("sliding_window"), "swa_layers": sliding, "full_layers": 0, "hybrid_pool": False}


def _config_quant(spec: ModelSpec, cfg: dict) -> None:
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method") or "").lower()
    algo = str(q.get("quant_algo") or "").upper()
    if method == "fp8" or algo == "FP8":
        spec.weight_quant = "fp8"
    elif method == "mxfp4":
        spec.weight_quant = "mxfp4"
    elif "fp4" in method or "FP4" in algo or algo == "MIXED_PRECISION":
        spec.weight_quant = "nvfp4"
    elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        spec.weight_quant = method.split("_")[0]
    elif method == "compressed-tensors":
        fmt = json.dumps(q).lower()
        spec.weight_quant = "fp8" if '"float"' in fmt and '"num_bits": 8' in fmt else ("gptq" if '"num_bits": 4' in fmt else None)
    # an FP8 KV scheme in the checkpoint makes --kv-cache-dtype auto pick fp8 (sglang-memory.md §3)
    scheme = q.get("kv_cache_scheme")
    if "fp8" in str(q.get("kv_cache_quant_algo") or "").lower() or (isinstance(scheme, dict) and scheme.get("num_bits") == 8):
        spec.kv_cache_quant = "fp8"


# ---------------------------------------------------------------------------------------
# GPUs
# ---------------------------------------------------------------------------------------

# nvidia-smi's total vs the number asked for: nvidia-smi readings match within 1 %; PyTorch's
# "total capacity of X GiB" is up to ~2 % below nvidia-smi's total (driver-reserved memory).
TOTAL_MATCH_ABOVE = 0.01
TOTAL_MATCH_BELOW = 0.025


@dataclass
class GpuSpec:
    name: str
    aliases: list[str] = field(default_factory=list)
    memory_total_mib: int | None = None     # nvidia-smi memory.total
    memory_gb_spec: float | None = None
    arch: str | None = None
    bf16_dense_tflops: float | None = None
    hbm_bandwidth_tbps: float | None = None
    nvlink: bool | None = None
    sources: dict = field(default_factory=dict)
    matched: str | None = None

    @property
    def total_gib(self) -> float | None:
        return self.memory_total_mib / 1024 if self.memory_total_mib else None


@lru_cache(maxsize=1)
def all_gpus() -> tuple[GpuSpec, ...]:
    known = GpuSpec.__dataclass_fields__
    return tuple(GpuSpec(**{k: v for k, v in g.items() if k in known}) for g in _gpus_data())


def _gpu_words(text: str) -> list[str]:
    t = text.lower().replace("...", " ").replace("…", " ")
    t = re.sub(r"(\d+)\s*gb\b", r"\1gb", t)
    return [w for w in re.split(r"[^a-z0-9.]+", t) if w and w not in ("nvidia", "geforce", "gpu", "graphics", "amd", "instinct")]


def find_gpu(name: str | None = None, total_mib: int | None = None) -> GpuSpec | None:
    """A GPU by nvidia-smi name (also truncated 'NVIDIA RTX PRO 6000 Blac...'), user words
    ('RTX PRO 6000', 'H100', '4090'), or by total MiB when no name is given."""
    gpus = all_gpus()
    if name and name.strip():
        hit = _gpu_by_name(name.strip(), gpus)
        if hit:
            out = copy.deepcopy(hit)
            out.matched = name
            return out
        return None
    if total_mib:
        return _gpu_by_total(int(total_mib), gpus)
    return None


def _gpu_by_name(name: str, gpus: tuple[GpuSpec, ...]) -> GpuSpec | None:
    low = name.lower().strip()
    truncated = low.endswith("...") or low.endswith("…")
    stem = low.rstrip(".…").strip()
    for g in gpus:                                    # exact nvidia-smi / torch names
        if low == g.name.lower() or low in (a.lower() for a in g.aliases):
            return g
    if truncated:                                     # nvidia-smi table cut the name
        hits = [g for g in gpus if any(a.lower().rstrip(".…").startswith(stem) or stem.startswith(a.lower().rstrip(".…"))
                                       for a in g.aliases if not a.endswith("...")) or
                any(a.lower().rstrip(".…").strip() == stem for a in g.aliases)]
        picked = _one_gpu(hits)
        if picked:
            return picked
    words = set(_gpu_words(name))
    if not words:
        return None
    hits = []
    for g in gpus:
        vocab = [set(_gpu_words(g.name))] + [set(_gpu_words(a)) for a in g.aliases]
        if any(words <= v for v in vocab):
            hits.append(g)
    return _one_gpu(hits)


def _one_gpu(hits: list[GpuSpec]) -> GpuSpec | None:
    """One GPU, or several that differ only in form factor (same memory) -> the first."""
    if not hits:
        return None
    if len(hits) == 1:
        return hits[0]
    known = [g for g in hits if g.memory_total_mib]
    if known and len({g.memory_total_mib for g in known}) == 1:
        return known[0]
    return None


def _gpu_by_total(total_mib: int, gpus: tuple[GpuSpec, ...]) -> GpuSpec | None:
    best, best_diff = None, None
    for g in gpus:
        if not g.memory_total_mib:
            continue
        rel = (total_mib - g.memory_total_mib) / g.memory_total_mib
        if -TOTAL_MATCH_BELOW <= rel <= TOTAL_MATCH_ABOVE:
            if best_diff is None or abs(rel) < best_diff:
                best, best_diff = g, abs(rel)
    if best is None:
        return None
    out = copy.deepcopy(best)
    out.matched = f"{total_mib} MiB"
    return out
