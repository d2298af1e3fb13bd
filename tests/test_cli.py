"""The command line as a user meets it: exit codes, one-line errors, bad input, the JSON contract."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import clirun

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
DIAG = [sys.executable, "-m", "diag"]


def run(*args, stdin: bytes | None = None, env: dict | None = None, cwd=ROOT) -> subprocess.CompletedProcess:
    """`diag args…` in this process (tests/clirun.py): the same code as the entry point, no start-up."""
    return clirun.run(list(args), stdin=stdin, env={"NO_COLOR": "1", **(env or {})}, cwd=cwd)


def sub(*args, stdin: bytes | None = None, env: dict | None = None, cwd=ROOT) -> subprocess.CompletedProcess:
    """`python -m diag args…` as a real process: for stdin, exit statuses and the entry point."""
    return clirun.subprocess_run(list(args), stdin=stdin, env={"NO_COLOR": "1", **(env or {})}, cwd=cwd)


def one_line_error(proc) -> str:
    err = proc.stderr.decode().strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("diag: error:")
    return err


def test_missing_file(tmp_path):
    proc = sub("analyze", str(tmp_path / "nope.log"))   # the entry point's own exit status
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
    proc = sub("analyze", "--format", "json", str(f))   # exit 3 through the entry point
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    assert report["status"] == "inconclusive"
    assert report["findings"][0]["category"] == "env.empty_log"
    assert "input is empty" in report["findings"][0]["summary"]
    assert report["findings"][0]["evidence"] == []     # nothing to quote, and nothing made up


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
    b = json.loads(sub("analyze", "--format", "json", "-", stdin=log).stdout)   # a real pipe
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
    assert sub(*args, "--fail-on", "warning").returncode == 1    # exit 1 through the entry point
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
    assert "What it detects" in out and "Why it happens" in out and "Cases" in out
    # the catalog message it names, with the releases that print it, and every fix with its direction
    assert "is not compatible with radix cache" in out and "0.5.10" in out
    assert "--mamba-scheduler-strategy" in out and "(set)" in out
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


# -- issue 10, part 4: the conventions of a command-line tool ------------------------------------

SAMPLE = "samples/qwen36-27b-mtp-extra-buffer.log"


def test_a_file_named_like_an_option(tmp_path):
    f = tmp_path / "-x.log"
    f.write_bytes((ROOT / SAMPLE).read_bytes())
    proc = run("analyze", "-x.log", cwd=tmp_path)
    assert proc.returncode == 2
    err = one_line_error(proc)
    assert "./-x.log" in err and "--" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["-x.log"]  # no file named 'g' written
    for argv in (["analyze", "./-x.log"], ["analyze", "--", "-x.log"]):
        assert run(*argv, cwd=tmp_path).returncode == 1


@pytest.mark.parametrize("argv, hint", [
    (["analyze", "--formt", "json", SAMPLE], "did you mean --format"),
    (["analize", SAMPLE], "did you mean `diag analyze`"),
    (["analyze", SAMPLE, "--format", "jsn"], "'jsn' is not one of"),
    (["analyze", SAMPLE, "--sglang-version", "0.5.x"], "not an SGLang version"),
    (["analyze", SAMPLE, "--sglang-version", "7.0"], "outside the SGLang releases"),
    (["analyze", SAMPLE, "--ignore", "SGL-OOM-02"], "did you mean SGL-OOM-0"),
    (["analyze", SAMPLE, "--select", "oomm"], "did you mean oom"),
    (["rules", "list", "--format", "markdown"], "writes --format text or json"),
    (["mem", "--format", "html", "--", "python"], "writes --format text or json"),
    (["flags", "check", "--", "vllm", "serve", "Qwen/Qwen3-8B"], "vLLM command, not an SGLang one"),
    (["rules", "show", "SGL-OOM-0001"], "did you mean"),
])
def test_usage_errors_are_one_line(argv, hint):
    proc = run(*argv)
    assert proc.returncode == 2
    assert hint in one_line_error(proc)


def test_output_dash_is_stdout_and_an_input_is_never_overwritten(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((ROOT / SAMPLE).read_bytes())
    proc = run("analyze", str(log), "--format", "json", "-o", "-")
    assert proc.returncode == 1 and json.loads(proc.stdout)["status"] == "findings"
    assert not (ROOT / "-").exists()
    for flag in ("-o", "--html"):
        proc = run("analyze", str(log), flag, str(log))
        assert proc.returncode == 2 and "is one of the inputs" in one_line_error(proc)
        assert log.read_bytes() == (ROOT / SAMPLE).read_bytes()
    link = tmp_path / "link.log"
    link.symlink_to(log)
    assert run("analyze", str(log), "-o", str(link)).returncode == 2


def test_closed_and_full_streams():
    closed = subprocess.run(" ".join(DIAG + ["analyze", SAMPLE]) + " >&-", shell=True, cwd=ROOT, capture_output=True, timeout=60)
    assert closed.returncode == 2 and b"standard output is closed" in closed.stderr
    if os.path.exists("/dev/full"):
        full = subprocess.run(" ".join(DIAG + ["analyze", SAMPLE]) + " > /dev/full", shell=True, cwd=ROOT, capture_output=True, timeout=60)
        assert full.returncode == 2 and b"No space left" in full.stderr
    head = subprocess.run(" ".join(DIAG + ["analyze", SAMPLE]) + " | head -1", shell=True, cwd=ROOT, capture_output=True, timeout=60)
    assert head.stderr == b""


def test_piped_stdin_needs_no_dash():
    proc = sub("analyze", "--format", "json", stdin=(ROOT / SAMPLE).read_bytes())   # a real pipe, no "-"
    assert proc.returncode == 1 and json.loads(proc.stdout)["inputs"][0]["path"] == "<stdin>"


def test_version_flag():
    for proc in (sub("--version"), run("-V")):
        assert proc.returncode == 0 and proc.stdout.decode().startswith("diag ")


def test_exit_codes_stay_in_0_to_3_on_an_internal_error(tmp_path):
    """A bug is one line and exit 3 (nothing concluded), never 4 or a traceback."""
    sys.path.insert(0, str(Path(__file__).parent))
    from hostile import diag
    import diag.cli.analyze as A
    original = A.render
    A.render = lambda *a, **k: 1 / 0
    try:
        r = diag("analyze", SAMPLE)
    finally:
        A.render = original
    assert r.code == 3 and r.err.startswith("diag: internal error") and len(r.err.splitlines()) == 1


def test_quiet_verbose_and_color(tmp_path):
    out = tmp_path / "r.txt"
    quiet = run("analyze", SAMPLE, "-q", "-o", str(out))
    assert quiet.stderr == b""
    loud = run("-v", "analyze", str(tmp_path / ".." / out.parent.name / "r.txt"), "-o", str(tmp_path / "r2.txt"))
    assert b"wrote" in loud.stderr
    forced = run("analyze", SAMPLE, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert b"\x1b[" in forced.stdout
    never = run("--color", "never", "analyze", SAMPLE, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert b"\x1b[" not in never.stdout
    always = run("--color", "always", "analyze", SAMPLE)
    assert b"\x1b[" in always.stdout


def test_config_file_and_cli_override(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((ROOT / SAMPLE).read_bytes())
    (tmp_path / "pyproject.toml").write_text('[tool.diag]\nignore = ["SGL-OOM-021"]\nfail-on = "critical"\n')
    deep = tmp_path / "deep" / "er"
    deep.mkdir(parents=True)
    base = run("analyze", str(log), "--format", "json", cwd=ROOT)
    cfg = run("analyze", str(log), "--format", "json", cwd=deep)
    rules = lambda p: [f["rule"] for f in json.loads(p.stdout)["findings"]]  # noqa: E731
    assert "SGL-OOM-021" in rules(base) and "SGL-OOM-021" not in rules(cfg)
    (tmp_path / ".diag.toml").write_text('fail-on = "never"\n')  # .diag.toml wins in the same folder
    assert run("analyze", str(log), cwd=deep).returncode == 0
    over = run("analyze", str(log), "--fail-on", "info", cwd=deep)
    assert over.returncode == 1  # the command line overrides the config
    (tmp_path / ".diag.toml").write_text('fail_onn = "never"\n')
    bad = run("analyze", str(log), cwd=deep)
    assert bad.returncode == 2 and b"did you mean 'fail_on'" in bad.stderr


def test_select_and_ignore():
    only = json.loads(run("analyze", SAMPLE, "--format", "json", "--select", "oom").stdout)
    assert only["findings"] and all(f["category"].startswith("oom") for f in only["findings"])
    none = run("analyze", SAMPLE, "--format", "json", "--select", "env")
    assert json.loads(none.stdout)["findings"] == [] and none.returncode == 0


def test_sarif_and_github_annotations():
    sarif = json.loads(run("analyze", SAMPLE, "--format", "sarif").stdout)
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"] == "diag"
    res = sarif["runs"][0]["results"][0]
    assert res["ruleId"].startswith("SGL-") and res["level"] == "error"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith(".log") and loc["region"]["startLine"] >= 1
    rule_ids = [r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]]
    assert all(r["ruleIndex"] == rule_ids.index(r["ruleId"]) for r in sarif["runs"][0]["results"])
    gh = run("analyze", SAMPLE, "--format", "github").stdout.decode().splitlines()
    assert gh[0].startswith("::error file=") and ",line=" in gh[0] and "::" in gh[0][2:]
    assert all("\n" not in l for l in gh)


def test_completion_is_offered():
    # Typer detects the shell from the parent process (sh under CI); its test switch makes
    # the option take the shell by name instead.
    # (a real process: typer ends the completion option with sys.exit)
    proc = sub("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert proc.returncode == 0 and b"complete" in proc.stdout


def test_non_utf8_file_name_in_every_format(tmp_path):
    name = os.fsdecode(b"bad\xff.log")
    path = tmp_path / name
    path.write_bytes((ROOT / SAMPLE).read_bytes())
    for fmt in ("html", "json", "markdown", "text", "sarif"):
        out = tmp_path / f"out.{fmt}"
        proc = run("analyze", os.fsencode(path), "--format", fmt, "-o", str(out))   # argv decoded as Python does
        assert proc.returncode == 1, proc.stderr
        text = out.read_text(encoding="utf-8")
        assert "bad\\xff.log" in text.replace("\\\\", "\\") or (fmt == "sarif" and "bad%5Cxff.log" in text)


def test_startup_stays_light():
    """`diag --help` and a small analyze import neither polars nor the renderers' heavy parts."""
    code = ("import sys; from diag.cli import _run; _run(['analyze', '%s', '-q', '-o', '/dev/null']); "
            "print(sorted(m for m in ('polars', 'jinja2', 're2', 'hypothesis', 'regex') if m in sys.modules))" % SAMPLE)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert proc.stdout.decode().strip() == "['re2']", proc.stdout
    helps = subprocess.run([sys.executable, "-c", "import sys; from diag.cli import _run; _run(['--help']); "
                            "print([m for m in ('re2', 'polars', 'jinja2') if m in sys.modules])"],
                           capture_output=True, cwd=ROOT, timeout=60)
    assert helps.stdout.decode().strip().endswith("[]")


def test_a_run_of_one_subcommand_builds_only_that_one():
    """diag analyze builds the typer app of analyze alone (typer builds every registered command
    on each call); the group's help, completion and an unknown name get every subcommand."""
    from diag import cli
    assert cli._subcommand(["analyze", "x.log"]) == "analyze"
    assert cli._subcommand(["-q", "--color", "never", "rules", "list"]) == "rules"
    assert cli._subcommand(["--color=never", "mem", "--help"]) == "mem"
    for argv in (["--help"], ["-V"], [], ["anlyze", "x"], ["--show-completion"], ["--", "analyze"]):
        assert cli._subcommand(argv) is None
    names = [c.name or c.callback.__name__ for c in cli.app_for(("analyze",)).registered_commands]
    assert names == ["analyze"]
    full = cli.app
    assert full is cli.app_for(tuple(cli.COMMANDS)) and len(full.registered_commands) + len(full.registered_groups) >= 8


DIRECT = [
    ["x.log"], ["x.log", "y.log"], ["-"], [], ["--format", "json", "-o", "/dev/null", "x.log"],
    ["-f", "markdown", "x.log", "--output", "-"], ["x.log", "--smi", "a.txt", "--smi", "b.txt"],
    ["--html", "r.html", "--fail-on", "warning", "--sglang-version", "0.5.2", "x.log"],
    ["--launch", "python -m sglang.launch_server --tp 2", "--model-config", "c.json", "x.log"],
    ["--redact", "x.log"], ["--no-redact", "x.log"], ["--ignore", "SGL-OOM-001", "--ignore", "x", "--select", "oom", "x.log"],
    ["--max-bytes", "4096", "--max-lines", "010", "x.log"], ["-q", "x.log"], ["x.log", "--verbose"], ["-v", "-q", "x.log"],
    ["--", "-x.log", "--format"], ["x.log", "--", "--", "-"], ["--format", "slack-blocks", "x.log"],
]
TYPER_ONLY = [
    ["--help"], ["-h"], ["-qv", "x.log"], ["--format=json", "x.log"], ["--format", "JSON", "x.log"], ["--format", "yaml", "x"],
    ["--formt", "json", "x"], ["-x.log"], ["--max-lines", "0", "x"], ["--max-lines", "1_0", "x"], ["--max-lines", "-1", "x"],
    ["--max-bytes", "１", "x"], ["-o", "a", "-o", "b", "x"], ["-q", "--quiet", "x"], ["--redact", "--no-redact", "x"],
    ["x", "-o"], ["--fail-on", "fatal", "x"], ["-o", "--format", "x"], ["--sglang-version"],
]


def test_a_plain_analyze_runs_without_typer_and_is_parsed_as_typer_parses_it(monkeypatch):
    """`diag analyze` with files and whole options skips typer (~20 ms of a paste's start-up):
    what it calls the command with equals what typer calls it with, and anything it does not
    read alike (help, clusters, --opt=value, values typer converts or refuses) is left to typer."""
    from diag import cli
    import diag.cli.analyze as A
    seen = []
    monkeypatch.setattr(A, "command", lambda *a: seen.append(a) or 0)
    app = cli.app_for(("analyze",))
    names = list(A._DEFAULTS)
    for argv in DIRECT:
        direct = A.direct_args(argv)
        assert direct is not None, argv
        seen.clear()
        assert app(args=["analyze", *argv], prog_name="diag", standalone_mode=False) in (None, 0)
        by_typer = dict(zip(["files", *names], seen[0]))
        assert {k: list(v or []) if k in ("files", "smi", "ignore", "select") else v for k, v in by_typer.items()} == \
               {k: list(v or []) if k in ("files", "smi", "ignore", "select") else v for k, v in direct.items()}, argv
        assert all(type(direct[k]) is type(by_typer[k]) for k in names if by_typer[k] is not None), argv
    for argv in TYPER_ONLY:
        assert A.direct_args(argv) is None, argv
    code = ("import sys; from diag.cli import _run; code = _run(['analyze', '%s', '-q', '-o', '/dev/null']); "
            "print(code, 'typer' in sys.modules)" % SAMPLE)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert proc.stdout.decode().split() == ["1", "False"], proc


def test_the_process_ends_without_teardown_after_every_exit_handler(tmp_path):
    """main's last atexit handler ends the process with os._exit (the interpreter's teardown is
    ~25 ms of a paste's CPU): the output is whole on a pipe, the exit status is main's, and the
    other handlers ran first (diag.cache's write-back leaves its memo files)."""
    cache = tmp_path / "cache"
    proc = sub("analyze", SAMPLE, "--format", "json", env={"DIAG_CACHE_DIR": str(cache)})
    assert proc.returncode == 1 and json.loads(proc.stdout)["findings"], proc.stderr
    assert any(p.name.startswith("rx-required") for p in cache.iterdir())
    err = sub("analyze", str(tmp_path / "missing.log"), env={"DIAG_CACHE_DIR": str(cache)})
    assert err.returncode == 2 and err.stderr.decode().startswith("diag: error:")
    # teardown skipped: a global's __del__ never runs; with a handler registered before main, it does
    code = ("import atexit, sys\nfrom diag import cli\nclass D:\n    def __del__(self): print('torn down')\n"
            "d = D()\nsys.argv = ['diag', '--version']\n%scli.main()")
    fast = subprocess.run([sys.executable, "-c", code % ""], capture_output=True, cwd=ROOT, timeout=60)
    assert fast.returncode == 0 and fast.stdout.decode().startswith("diag ") and "torn down" not in fast.stdout.decode()
    late = subprocess.run([sys.executable, "-c", code % "atexit.register(print, 'handler ran')\n"],
                          capture_output=True, cwd=ROOT, timeout=60)
    assert late.returncode == 0 and late.stdout.decode().split("\n")[1:3] == ["handler ran", "torn down"], late.stdout


def test_small_plain_files_are_analysed_with_the_cycle_collector_paused(tmp_path, monkeypatch):
    """Only plain files up to GC_PAUSE_MAX (not stdin, not compressed, not larger); the collector
    is on again after the run, and a caller's paused collector stays paused."""
    import gc
    from diag import cli
    small, big, packed = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log.gz"
    small.write_text("[2026-05-14 09:12:01] hello\n")
    big.write_bytes(b"x" * (cli.GC_PAUSE_MAX + 1))
    packed.write_bytes(gzip.compress(b"[2026-05-14 09:12:01] hello\n"))
    assert cli._small_inputs([str(small), SAMPLE])
    for paths in ([], ["-"], [str(big)], [str(small), str(packed)], [str(tmp_path)], [str(tmp_path / "none.log")]):
        assert not cli._small_inputs(paths), paths
    seen = []
    import diag.cli.analyze as A
    monkeypatch.setattr(A, "command", lambda **kw: seen.append(gc.isenabled()) or 0)
    assert cli._run(["analyze", str(small)]) == 0 and cli._run(["analyze", str(big)]) == 0
    assert seen == [False, True] and gc.isenabled()
    gc.disable()
    try:
        assert cli._run(["analyze", str(big)]) == 0 and not gc.isenabled()
    finally:
        gc.enable()
