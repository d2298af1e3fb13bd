"""What a checkpoint's name says of its size, for models diag's catalog does not know.

Published checkpoints carry their parameter count in the name ('Llama-3.3-70B-Instruct',
'DeepSeek-R1-Distill-Llama-70B', 'Mixtral-8x7B', 'Qwen3-235B-A22B', 'Qwen2.5-0.5B') and often
their weight format ('-FP8', '-AWQ', '-GPTQ-Int4', '-bnb-4bit'). From those two the weights'
size follows: parameters × bytes per parameter. This is an estimate (embedding tables, vision
towers and MoE shared layers aside), used only where nothing better is known, and said so.
"""
from __future__ import annotations

from .. import rx

GIB = 1024 ** 3
# a size token: '70B', '0.5B', '8x7B', '1.5b'; the MoE active count ('A22B') is not the size
SIZE = rx.compile(r"(?:^|[-_/.\s])(?:(\d{1,3})x)?(\d{1,4}(?:\.\d{1,2})?)[Bb](?:$|[-_/.\s])")
ACTIVE = rx.compile(r"(?:^|[-_/.\s])[Aa]\d{1,3}(?:\.\d)?[Bb](?:$|[-_/.\s])")
# bytes per parameter by the weight format the name shows (bf16/fp16 when it shows none)
FORMATS = (("int4", 0.5), ("4bit", 0.5), ("awq", 0.5), ("gptq", 0.5), ("nf4", 0.5), ("w4a16", 0.5), ("mxfp4", 0.5),
           ("fp4", 0.5), ("int8", 1.0), ("8bit", 1.0), ("w8a8", 1.0), ("fp8", 1.0))


def params_b(name: str | None) -> float | None:
    """Billions of parameters the name states, or None. 'Mixtral-8x7B' -> 56; the largest size
    token wins ('Qwen3-235B-A22B' -> 235)."""
    if not name:
        return None
    text = name.rstrip("/").rsplit("/", 1)[-1][:200]
    text = ACTIVE.sub("-", text)
    best = None
    for m in SIZE.finditer(f"-{text}-"):
        n = float(m[2]) * (int(m[1]) if m[1] else 1)
        if 0.1 <= n <= 3000 and (best is None or n > best):
            best = n
    return best


def bytes_per_param(name: str | None) -> float:
    low = (name or "").lower()
    for word, b in FORMATS:
        if word in low:
            return b
    return 2.0


def weights_gib(name: str | None, tp: int = 1, pp: int = 1) -> float | None:
    """The weights per GPU the name implies (parameters × bytes / (TP × PP)), GiB."""
    p = params_b(name)
    if p is None:
        return None
    return p * 1e9 * bytes_per_param(name) / GIB / max(1, tp) / max(1, pp)


def tp_to_fit(name: str | None, gpu_gib: float, tp: int = 1, share: float = 0.85) -> int | None:
    """The smallest power-of-two TP at which the named weights take at most `share` of a GPU
    (room left for the KV cache, graphs and activations); None when 8 GPUs are not enough."""
    w = weights_gib(name, 1)
    if w is None or gpu_gib <= 0:
        return None
    for n in (1, 2, 4, 8):
        if n > tp and w / n <= share * gpu_gib:
            return n
    return None
