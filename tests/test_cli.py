"""The command line as a user meets it: exit codes, one-line errors, bad input, the JSON contract."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
DIAG = [sys.executable, "-m", "diag"]


def run(*args, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, NO_COLOR="1")
    e.update(env or {})
    return subprocess.run(DIAG + list(args), input=stdin, capture_output=True, cwd=ROOT, env=e, timeout=120)


def one_line_error(proc) -> str:
    err = proc.stderr.decode().strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("diag: error:")
    return err


def test_missing_file(tmp_path):
    proc = run("analyze", str(tmp_path / "nope.log"))
    assert proc.returncode == 2
    assert "no such file" in one_line_error(proc)


def test_folder(tmp_path):
    proc = run("analyze", str(tmp_path))
    assert proc.returncode == 2
    assert "is a directory" in one_line_error(proc)


def test_binary_file(tmp_path):
    f = tmp_path / "core.bin"
    f.write_bytes(bytes(range(256)) * 64)
    proc = run("analyze", str(f))
    assert proc.returncode == 2
    assert "binary" in one_line_error(proc)
    assert f.read_bytes() == bytes(range(256)) * 64  # untouched


def test_empty_file_is_inconclusive(tmp_path):
    f = tmp_path / "server.log"
    f.write_text("")
    proc = run("analyze", "--format", "json", str(f))
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    assert report["status"] == "inconclusive"
    assert report["findings"][0]["category"] == "env.empty_log"
    assert report["findings"][0]["evidence"]


def test_nohup_only_is_inconclusive():
    proc = run("analyze", "--format", "json", "samples/nohup-empty.log")
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    fixes = " ".join(report["findings"][0]["fix_other"])
    for hint in ("foreground", "PYTHONUNBUFFERED=1", "2>&1", "dmesg", "ssh"):
        assert hint in fixes


def test_invalid_utf8_is_read(tmp_path):
    f = tmp_path / "server.log"
    f.write_bytes(b"[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=78.90 GB\n"
                  b"caf\xe9 \xff\xfe broken bytes\n"
                  b"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
    proc = run("analyze", "--format", "json", str(f))
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["findings"][0]["category"] == "oom.kv_pool"


def test_huge_single_line(tmp_path):
    f = tmp_path / "huge.log"
    with open(f, "wb") as fh:
        fh.write(b"x" * (50 * 1024 * 1024))
    proc = run("analyze", "--format", "json", str(f))
    assert proc.returncode == 3, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "inconclusive"
    assert any("cut" in n for n in report["inputs"][0].get("notes", []))


def test_gzip_and_stdin_give_the_same_answer(tmp_path):
    log = (DATA / "sglang" / "021-gemma3-12b-4090-kv-buffer-alloc-oom.log").read_bytes()
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress(log))
    a = json.loads(run("analyze", "--format", "json", str(gz)).stdout)
    b = json.loads(run("analyze", "--format", "json", "-", stdin=log).stdout)
    assert a["findings"][0]["category"] == b["findings"][0]["category"] == "oom.kv_pool"
    assert a["findings"][0]["evidence"] == b["findings"][0]["evidence"]


def test_json_contract():
    proc = run("analyze", "--format", "json", "samples/qwen36-27b-mtp-extra-buffer.log", "--smi", "samples/rtx-pro-6000-smi.txt")
    assert proc.returncode == 1
    r = json.loads(proc.stdout)
    assert r["schema"] == "diag.report/2"
    jsonschema = pytest.importorskip("jsonschema")
    from diag.report import json_schema
    jsonschema.validate(r, json_schema(), cls=jsonschema.Draft202012Validator)  # the shipped schema
    assert r["launch"]["argv"] and r["findings"][0]["commands"][0]["after"] and r["timeline"]["startup"]["marks"]
    assert r["status"] in ("findings", "clean", "inconclusive")
    assert [i["kind"] for i in r["inputs"]] == ["sglang-log", "nvidia-smi"]
    for i in r["inputs"]:
        assert set(i) >= {"path", "kind", "lines", "bytes"}
    for f in r["findings"]:
        assert set(f) >= {"rule", "category", "severity", "confidence", "title", "summary", "evidence", "memory", "fix", "fix_other"}
        assert f["severity"] in ("critical", "error", "warning", "info")
        assert 0 <= f["confidence"] <= 1
        for e in f["evidence"]:
            assert set(e) >= {"input", "line", "text"}
        for fx in f["fix"]:
            assert ("flag" in fx) + ("env" in fx) + ("external_env" in fx) == 1
            if fx.get("action") == "remove":
                assert fx["value"] is None
        for key in f["memory"]:
            if key.endswith(("_gib", "_mib")):
                assert f["memory"][key] is None or isinstance(f["memory"][key], (int, float))
    facts = r["facts"]
    assert set(facts) >= {"sglang_version", "launch_flags", "driver_version", "cuda_version", "gpus", "gpu_processes"}
    assert facts["gpus"][0]["memory_total_mib"] == 97887
    assert facts["gpu_processes"][0]["pid"] == 5635


def test_fail_on_changes_the_exit_code():
    args = ["analyze", "--format", "json", "tests/data/sglang/018-dsv3-runaway-generation-kv-full-retract.log"]
    assert run(*args).returncode == 0          # a warning is below the default --fail-on error
    assert run(*args, "--fail-on", "warning").returncode == 1
    assert run("analyze", "samples/qwen36-27b-mtp-extra-buffer.log", "--fail-on", "never").returncode == 0


def test_text_output_plain_without_terminal():
    proc = run("analyze", "samples/qwen36-27b-no-buffer-spec-refused.log")
    out = proc.stdout.decode()
    assert "\x1b[" not in out
    assert "config.mamba_strategy" in out and "extra_buffer" in out


def test_inputs_are_not_modified(tmp_path):
    src = DATA / "sglang" / "040-eagle-hicache-watchdog-pyspy-min-new-tokens.log"
    f = tmp_path / "server.log"
    f.write_bytes(src.read_bytes())
    before = (f.read_bytes(), f.stat().st_mtime_ns)
    run("analyze", "--format", "json", str(f))
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before


def test_rules_list_and_show():
    proc = run("rules", "list")
    assert proc.returncode == 0
    assert "SGL-CFG-008" in proc.stdout.decode()
    proc = run("rules", "show", "SGL-CFG-008")
    out = proc.stdout.decode()
    assert "What it detects" in out and "Why it happens" in out and "Examples" in out
    assert run("rules", "show", "NOPE").returncode == 2


@pytest.mark.parametrize("argv,needle", [
    (["--mem-fration-static", "0.8"], "did you mean --mem-fraction-static?"),
    (["--reasoning_parser", "qwen3"], "--reasoning-parser"),
    (["--kv-cache-dtype", "fp9"], "invalid choice: 'fp9'"),
])
def test_flags_check_catches(argv, needle):
    proc = run("flags", "check", "--sglang-version", "0.5.10", "--", "python", "-m", "sglang.launch_server",
               "--model-path", "Qwen/Qwen3-8B", *argv)
    assert proc.returncode == 1
    assert needle in proc.stdout.decode()


def test_flags_check_spec_no_buffer_conflict():
    proc = run("flags", "check", "--sglang-version", "0.5.12", "--", "python", "-m", "sglang.launch_server",
               "--model-path", "Qwen/Qwen3.6-27B", "--speculative-algorithm", "NEXTN", "--mamba-scheduler-strategy", "no_buffer")
    out = proc.stdout.decode()
    assert proc.returncode == 1
    assert "radix cache" in out and "extra_buffer" in out


def test_flags_check_renamed_flag_on_new_version():
    proc = run("flags", "check", "--sglang-version", "0.5.23", "--", "python", "-m", "sglang.launch_server",
               "--model-path", "Qwen/Qwen3.6-27B", "--mamba-scheduler-strategy", "extra_buffer", "--cuda-graph-max-bs", "16")
    out = proc.stdout.decode()
    assert "--mamba-radix-cache-strategy" in out
    assert "ambiguous option: --cuda-graph-max-bs" in out


def test_mem_command_founding_case():
    proc = run("mem", "--gpu", "RTX PRO 6000", "--sglang-version", "0.5.10", "--format", "json", "--", "python", "-m",
               "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B", "--speculative-algorithm", "EAGLE",
               "--mamba-scheduler-strategy", "extra_buffer")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["fits"] is False
    assert abs(out["mamba_mib_per_slot"] - 146.81) < 0.01


def test_mem_command_usage_error():
    proc = run("mem", "--gpu", "no such gpu", "--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B")
    assert proc.returncode == 2
    one_line_error(proc)
