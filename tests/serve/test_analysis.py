"""The adapter to the pipeline: jobs, results, the spool, the failure fingerprint (no server)."""
from __future__ import annotations

import json
import os

import pytest

from diag.serve import analysis
from diag.serve.analysis import Job, Spool, TooLarge, fingerprint, normalise, safe_name

from .conftest import DATA, SAMPLE, SMI, leaked, seeded_log


def job_for(tmp_path, *named: tuple[str, bytes], **kw) -> Job:
    inputs = []
    for i, (name, data) in enumerate(named):
        path = tmp_path / f"input-{i}"
        path.write_bytes(data)
        inputs.append(analysis.Input(path=str(path), name=name, kind="nvidia-smi" if name.startswith("smi") else None))
    return Job(inputs=inputs, **kw)


def test_run_renders_each_format_with_display_names(tmp_path):
    job = job_for(tmp_path, ("rank0.log", SAMPLE.read_bytes()), ("smi.txt", SMI.read_bytes()),
                  formats=analysis.FORMATS)
    result = analysis.run(job)
    assert (result.exit_code, result.status, result.rule, result.category) == (1, "findings", "SGL-OOM-021", "oom.mamba_state")
    data = json.loads(result.outputs["json"])
    assert data["exit_code"] == 1 and [i["path"] for i in data["inputs"]] == ["rank0.log", "smi.txt"]
    assert all(str(tmp_path) not in out for out in result.outputs.values())
    assert json.loads(result.outputs["slack-blocks"])["blocks"]
    assert "oom.mamba_state" in result.categories and result.fingerprint and len(result.fingerprint) == 32


def test_redacted_unless_asked(tmp_path):
    shared = analysis.run(job_for(tmp_path, ("a.log", seeded_log().encode()), formats=("markdown", "json")))
    assert all(leaked(out) == [] for out in shared.outputs.values())
    raw = analysis.run(job_for(tmp_path, ("a.log", seeded_log().encode()), formats=("json",), redact=False))
    assert "hf" in leaked(raw.outputs["json"])


def test_unreadable_input_and_internal_errors(tmp_path, monkeypatch):
    result = analysis.run(job_for(tmp_path, ("core.bin", bytes(range(256)) * 64)))
    assert result.exit_code == 2 and result.status == "unreadable"
    assert result.error.startswith("core.bin: binary data") and str(tmp_path) not in result.error

    import diag.analyze

    def broken(*args, **kwargs):
        raise ValueError("secret hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 in the message")
    monkeypatch.setattr(diag.analyze, "analyze", broken)
    result = analysis.run(job_for(tmp_path, ("a.log", SAMPLE.read_bytes())))
    assert result.exit_code == 3 and result.status == "error" and "ValueError" in result.error and "hf_" not in result.error
    assert "nothing concluded" in result.error


def test_options_reach_the_pipeline(tmp_path):
    result = analysis.run(job_for(tmp_path, ("a.log", SAMPLE.read_bytes()), sglang_version="0.5.10", fail_on="never"))
    data = json.loads(result.outputs["json"])
    assert result.exit_code == 0 and data["facts"]["sglang_version"] == "0.5.10"


@pytest.mark.parametrize("a, b", [
    ("[2026-05-14 09:13:02 TP0] RuntimeError: Not enough memory. Current value: mem_fraction_static=0.755",
     "[2026-06-01 17:45:10 TP3] RuntimeError: Not enough memory. Current value: mem_fraction_static=0.8"),
    ("OSError: /home/alice/venv/lib/libnvrtc.so.12: cannot open shared object file",
     "OSError: /opt/conda/lib/libnvrtc.so.12: cannot open shared object file"),
    ("illegal memory access at 0x7f3a2c001000 (stream 0x55d1)", "illegal memory access at 0x7ffe00000000 (stream 0x1)"),
    ("request 3f9c2a71e0b44d2a failed", "request 9a8b7c6d5e4f3a2b failed"),
])
def test_normalise_masks_what_differs_between_occurrences(a, b):
    assert normalise(a) == normalise(b)
    assert "Not enough memory" in normalise(a) or "cannot open" in normalise(a) or "illegal" in normalise(a) \
        or "request" in normalise(a)


def test_fingerprint_same_failure_same_print_other_failure_other_print(tmp_path):
    from diag.analyze import analyze
    one = SAMPLE.read_text()
    (tmp_path / "a.log").write_text(one)
    (tmp_path / "b.log").write_text(one.replace("09:13:02", "23:59:59").replace("0.755", "0.81").replace("alice", "bob"))
    fa, fb = fingerprint(analyze([str(tmp_path / "a.log")])), fingerprint(analyze([str(tmp_path / "b.log")]))
    assert fa == fb and fa is not None
    reports = [analyze([str(p)]) for p in sorted((DATA / "sglang").glob("*.log"))[:8]]
    by_rule = {r.findings[0].rule: fingerprint(r) for r in reports if r.findings}
    assert len(by_rule) >= 5 and len(set(by_rule.values())) == len(by_rule)  # other rules, other prints
    assert fa not in by_rule.values()
    (tmp_path / "clean.log").write_text("[2026-05-14 09:13:20] The server is fired up and ready to roll!\n")
    assert fingerprint(analyze([str(tmp_path / "clean.log")])) is None


def test_spool_caps_and_cleans_up():
    with Spool(max_bytes=100) as spool:
        spool.add("../../etc/passwd", b"x" * 60)
        out = spool.new("b.log")
        with pytest.raises(TooLarge, match="100 bytes"):
            out.write(b"y" * 60)
        out.close()
        folder = spool.dir
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
        assert [i.name for i in spool.inputs] == ["passwd", "b.log"]
        assert all(i.path.startswith(folder) for i in spool.inputs)
    assert not os.path.exists(folder)


@pytest.mark.parametrize("given, shown", [("C:\\logs\\rank0.log", "rank0.log"), ("/var/log/x.log", "x.log"),
                                          ("", "paste.log"), (".hidden", "hidden"), ("a\x00b\nc.log", "abc.log"),
                                          ("x" * 200, "x" * 80)])
def test_safe_name(given, shown):
    assert safe_name(given) == shown
