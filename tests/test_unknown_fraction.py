"""With no GPU and no --mem-fraction-static in the input, the fraction in use is unknown: the
direction of the fraction fix comes from the step that failed, never from SGLang's no-GPU
fallback (0.95) taken as the value in use."""
from __future__ import annotations

import json

import clirun


def _fraction_fixes(tmp_path, text: str) -> list[tuple[str, str | None]]:
    log = tmp_path / "x.log"
    log.write_text(text)
    r = clirun.run(["analyze", "--format", "json", str(log)])
    top = json.loads(r.stdout)["findings"][0]
    return [(f.get("direction"), f.get("value")) for f in top["fix"] if f.get("flag") == "--mem-fraction-static"]


def test_a_kv_pool_refusal_raises_the_unknown_fraction(tmp_path):
    got = _fraction_fixes(tmp_path, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
    assert got and all(d == "raise" and 0.85 <= float(v) <= 0.92 for d, v in got)


def test_a_graph_capture_oom_lowers_the_unknown_fraction(tmp_path):
    got = _fraction_fixes(tmp_path, "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.02 GiB.\n")
    assert got and all(d == "lower" for d, _ in got)
    # below SGLang's automatic value on GPUs of 24-80 GiB (about 0.80-0.88), not below the no-GPU 0.95 only
    assert all(float(v) < 0.80 for _, v in got)
