"""diag scan (issue 12, part 3): many logs in parallel, one row per server run, every output
format, replicas that failed alike grouped by a stable fingerprint, progress on stderr."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from diag.fleet import scan as S

DATA = Path(__file__).parent / "data"
MAMBA = DATA / "sglang" / "014-spec-v2-mamba-extra-buffer-nonetype-crash.log"
PROXY = DATA / "sglang" / "006-warmup-502-killed-http-proxy.log"
ARCH = DATA / "sglang" / "028-sm75-flashinfer-no-kernel-image.log"


def diag(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def replica_fleet(folder: Path, n: int = 40, odd: int = 3) -> list[Path]:
    """n replicas: n - odd failed like the real log MAMBA (their own timestamps, ranks and pids),
    the others like ARCH."""
    folder.mkdir(parents=True, exist_ok=True)
    base = MAMBA.read_text()
    out = []
    for k in range(n):
        if k < n - odd:
            text = base.replace("2026-", f"20{26 + k % 3}-").replace("TP0", f"TP{k % 8}")
        else:
            text = ARCH.read_text()
        p = folder / f"replica-{k:02d}.log"
        p.write_text(text)
        out.append(p)
    return out


def test_expand_globs_folders_and_missing(tmp_path):
    files = replica_fleet(tmp_path / "a", 4, 1)
    (tmp_path / "a" / "notes.md").write_text("x")
    found, missing = S.expand([str(tmp_path / "a"), str(tmp_path / "a" / "*.log"), str(tmp_path / "nope-*.log")])
    assert found == [str(f) for f in files]          # each once, in order, no .md
    assert missing == [str(tmp_path / "nope-*.log")]


def test_fingerprint_ignores_numbers_paths_and_prefixes():
    a = S.fingerprint("SGL-X-001", "oom.kv_pool", "failed", "[2025-01-01 10:00:00 TP3] Tried to allocate 2.00 GiB at /a/b/c.py pid 123")
    b = S.fingerprint("SGL-X-001", "oom.kv_pool", "failed", "[2026-02-02 11:11:11 TP5] Tried to allocate 7.50 GiB at /x/y.py pid 9")
    c = S.fingerprint("SGL-X-002", "oom.kv_pool", "failed", "Tried to allocate 7.50 GiB")
    assert a == b != c and len(a) == 12


def test_rows_group_replicas_that_failed_alike(tmp_path):
    files = replica_fleet(tmp_path / "fleet")
    rows = S.scan_files([str(f) for f in files], S.Options(jobs=2))
    df = S.frame(rows)
    assert df.columns == S.COLUMNS and df.height == 40
    g = S.groups(df)
    assert [x["runs"] for x in g] == [37, 3]
    ref = S.rows_of(str(MAMBA), S.Options())[0]
    assert g[0]["rule"] == ref["rule"] and g[0]["category"] == ref["category"]
    assert df.filter(pl.col("fingerprint") == g[0]["fingerprint"])["group_size"].unique().to_list() == [37]
    # the parallel scan gives the rows the one-process scan gives, in file order
    again = S.frame(S.scan_files([str(f) for f in files], S.Options(jobs=1)))
    assert again.drop("group_size").equals(df.drop("group_size"))


def test_a_file_with_restarts_gives_a_row_per_run(tmp_path):
    log = tmp_path / "pod.log"
    log.write_text(PROXY.read_text() + "\n" + "$ python -m sglang.launch_server --model-path m\n" + ARCH.read_text())
    rows = S.rows_of(str(log), S.Options())
    assert [r["run"] for r in rows] == [0, 1]
    assert [r["category"] for r in rows] == ["env.http_proxy", "env.cuda_arch_driver"]
    assert rows[1]["first_line"] == rows[0]["last_line"] + 1


def test_an_unreadable_file_is_a_row_not_a_stop(tmp_path):
    bad = tmp_path / "bin.log"
    bad.write_bytes(b"\x00\x01\x02" * 5000)
    rows = S.scan_files([str(bad), str(PROXY)], S.Options(jobs=2))
    assert rows[0]["status"] == "error" and "binary" in rows[0]["error"]
    assert rows[1]["category"] == "env.http_proxy"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return replica_fleet(tmp_path_factory.mktemp("scan") / "logs", 12, 2)


def test_cli_text_table_and_groups(fleet):
    r = diag("scan", str(fleet[0].parent), "--progress", "-j", "2")
    assert r.returncode == 1, r.stderr          # findings at error or above
    assert "replica-00.log" in r.stdout and "10 of 12 runs (10 file(s))" in r.stdout
    assert "12 run(s) in 12 file(s); 12 failed" in r.stdout
    assert "diag: scanned 12/12 files" in r.stderr


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "parquet"])
def test_cli_every_format(fleet, tmp_path, fmt):
    out = tmp_path / f"rows.{fmt}"
    r = diag("scan", str(fleet[0].parent / "*.log"), "-f", fmt, "-o", str(out), "--fail-on", "never", "--no-progress")
    assert r.returncode == 0, r.stderr
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out.read_text())))
        assert list(rows[0]) == S.COLUMNS
    elif fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    elif fmt == "json":
        rows = json.loads(out.read_text())
    else:
        rows = pl.read_parquet(out).to_dicts()
    assert len(rows) == 12
    assert sorted(Path(r["file"]).name for r in rows) == sorted(f.name for f in fleet)
    sizes = sorted({(r["fingerprint"], int(r["group_size"])) for r in rows}, key=lambda x: -x[1])
    assert [s for _, s in sizes] == [10, 2]
    mamba = next(r for r in rows if Path(r["file"]).name == "replica-00.log")
    assert mamba["state"] == "failed" and mamba["rule"] and mamba["first_error"]


def test_cli_parquet_needs_a_file_and_nothing_to_scan_is_an_error(tmp_path):
    r = diag("scan", str(PROXY), "-f", "parquet")
    assert r.returncode == 2 and "--output" in r.stderr and "Traceback" not in r.stderr
    r = diag("scan", str(tmp_path / "none-*.log"))
    assert r.returncode == 2 and "no log file to scan" in r.stderr
    r = diag("scan", str(PROXY), "-f", "xml")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_scan_does_not_load_polars_before_it_is_needed():
    code = "import sys, diag.cli; assert 'polars' not in sys.modules and 'diag.fleet.scan' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
