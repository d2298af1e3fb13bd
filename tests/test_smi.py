"""Tests of the nvidia-smi parser (diag.parse.smi) against the labelled corpus and focused cases."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from diag.parse.smi import find_smi_blocks, looks_like_smi, parse_smi

DATA = Path(__file__).parent / "data" / "smi"
CASES = sorted(p for p in DATA.iterdir() if p.suffix != ".json" and p.with_suffix(".json").exists())

# Label fields known to be wrong, with the reason; the check is skipped for that file only.
LABEL_ERRATA = {
    ("049-csv-loop-dmon-h200-580.159.04.txt", "samples"):
        "label says 15; the file holds 14 looped CSV rows (plus 3 dmon rows)",
}

SGLANG_LINES = [
    f"[2025-01-06 02:58:{k % 60:02d} TP0] Decode batch. #running-req: 2, #token: 1234, "
    f"token usage: 0.05, gen throughput (token/s): 40.2, #queue-req: 0"
    for k in range(200)
]


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def _facts(snap):
    return (snap.format, snap.driver_version, snap.cuda_version, snap.gpus_facts(), snap.processes_facts(),
            snap.mig_devices, snap.error)


# ---------------------------------------------------------------------------
# Corpus: every file against its label (the scorer's checks, plus every labelled GPU/process key)

def test_corpus_is_copied():
    assert len(CASES) >= 46


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_corpus_case(path: Path):
    label = json.loads(path.with_suffix(".json").read_text())
    snap = parse_smi(path.read_text().splitlines())
    assert snap is not None
    assert snap.format == label["format"]
    assert snap.driver_version == label["driver_version"]
    assert snap.cuda_version == label["cuda_version"]

    gpus = snap.gpus_facts()
    assert len(gpus) == len(label["gpus"])
    for want, got in zip(label["gpus"], gpus):
        for key, value in want.items():
            assert got.get(key) == value, (want.get("index"), key)

    procs = snap.processes_facts()
    assert len(procs) == len(label["processes"])
    for want, got in zip(label["processes"], procs):
        for key, value in want.items():
            assert got.get(key) == value, (want["pid"], key)

    for key in ("mig_devices", "mig_mode", "error"):
        if key in label:
            assert getattr(snap, key) == label[key], key
    if "warnings" in label:
        assert set(label["warnings"]) <= set(snap.warnings)
    if "samples" in label and (path.name, "samples") not in LABEL_ERRATA:
        assert len(snap.samples) == label["samples"]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_corpus_looks_like_smi(path: Path):
    assert looks_like_smi(path.read_text()[:65536])


@pytest.mark.parametrize("prefix", [None, "2025-03-25T11:01:{s:02d}.{ms:03d}Z app[3d8d7e96] ord [info] ", "    "],
                         ids=["plain", "log-prefix", "indented"])
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_corpus_embedded_in_log(path: Path, prefix: str | None):
    """Each output pasted into a server log (optionally with a per-line prefix whose digits vary)
    is found as a block and parses to the same facts as the bare output."""
    body = path.read_text().splitlines()
    if prefix is not None:
        body = [prefix.format(s=k % 60, ms=k * 37 % 1000) + line for k, line in enumerate(body)]
    lines = SGLANG_LINES[:40] + body + SGLANG_LINES[:40]
    blocks = find_smi_blocks(lines)
    assert blocks and 40 <= blocks[0][0] and blocks[-1][1] <= 40 + len(body)
    start, end = blocks[0]
    snap = parse_smi(lines[start:end], start + 1)
    direct = parse_smi(path.read_text().splitlines())
    if path.name.startswith("049"):    # looped CSV then dmon: two outputs, two blocks
        assert len(blocks) == 2 and snap.gpus_facts() == direct.gpus_facts()
    else:
        assert len(blocks) == 1 and _facts(snap) == _facts(direct)
    assert snap.first_line >= start + 1 and snap.last_line <= end


# ---------------------------------------------------------------------------
# looks_like_smi / find_smi_blocks

def test_looks_like_smi_rejects_server_logs():
    assert not looks_like_smi("\n".join(SGLANG_LINES))
    assert not looks_like_smi("[2025-01-06 02:58:11 TP0] Decode batch. #running-req: 2")
    assert not looks_like_smi("")
    assert not looks_like_smi("\n\n  \n")


def test_looks_like_smi_rejects_log_with_pasted_table():
    table = _lines("019-table-h100-80gb-hbm3-590.48.01.txt")
    assert not looks_like_smi("\n".join(SGLANG_LINES[:50] + table + SGLANG_LINES[:50]))


def test_looks_like_smi_accepts_noheader_csv():
    assert looks_like_smi("0, NVIDIA H100 80GB HBM3, 81559 MiB, 19818 MiB\n1, NVIDIA H100 80GB HBM3, 81559 MiB, 2 MiB\n")


def test_find_smi_blocks_table_in_middle_of_log():
    table = _lines("013-table-in-log-l40s-sglang-570.124.06.txt")
    lines = SGLANG_LINES[:100] + table + SGLANG_LINES[100:]
    assert find_smi_blocks(lines) == [(101, 100 + len(table))]   # the "nvidia-smi output:" line is not part
    snap = parse_smi(lines[101:100 + len(table)], 102)
    assert snap.gpus[0].line == 110 and snap.processes[0].line == 119   # 1-based lines of the whole log


def test_find_smi_blocks_several_formats():
    parts = [_lines(n) for n in ("019-table-h100-80gb-hbm3-590.48.01.txt", "029-q-h100-80gb-hbm3-590.48.01.txt",
                                 "041-csv-query-gpu-loop-rtx3090-wsl-unknown.csv",
                                 "034-q-xml-tesla-t4-515.105.01.xml", "046-error-driver-unreachable-unknown.txt",
                                 "045-csv-query-apps-vllm-enginecore-unknown.csv")]
    lines, expected = [], []
    for part in parts:
        lines += SGLANG_LINES[:10]
        expected.append((len(lines), len(lines) + len(part)))
        lines += part
    lines += SGLANG_LINES[:10]
    blocks = find_smi_blocks(lines)
    assert [parse_smi(lines[s:e]).format for s, e in blocks] == [
        "table", "q", "csv-query-gpu", "q-xml", "error", "csv-query-apps"]
    assert blocks == expected


def test_find_smi_blocks_ignores_lookalikes():
    lines = ["2025-01-01 | INFO | memory.used: 10 MiB / 20 MiB", "Driver Version: 550.54.15",
             "# gpu usage is high", "pid, process_name", "| not | a | table |"] + SGLANG_LINES[:20]
    assert find_smi_blocks(lines) == []


def test_find_smi_blocks_is_fast():
    lines = (SGLANG_LINES * 50)[:10000]
    lines[5000:5000] = _lines("019-table-h100-80gb-hbm3-590.48.01.txt")
    find_smi_blocks(lines)
    t0 = time.perf_counter()
    blocks = find_smi_blocks(lines)
    assert blocks == [(5000, 5022)]
    assert time.perf_counter() - t0 < 0.05


# ---------------------------------------------------------------------------
# parse_smi: unrecognisable input

@pytest.mark.parametrize("text", ["", "\n\n", "hello world\nfoo: bar", "\n".join(SGLANG_LINES[:5]),
                                  "0, 1, 2\n3, 4, 5", "| just | pipes |"])
def test_garbage_is_none(text: str):
    assert parse_smi(text.splitlines()) is None


# ---------------------------------------------------------------------------
# Quick sanity case per format

def test_table_sanity():
    snap = parse_smi(_lines("009-table-a40-x8-errgpu-525.60.13.txt"), start_line=10)
    assert snap.format == "table" and len(snap.gpus) == 8
    assert snap.gpus[4].name == "ERR!" and snap.gpus[4].errors[0].startswith("ERR! in name")
    assert snap.gpus[0].line == 18 and snap.first_line == 11
    assert snap.processes[0].name == "...eratornet/venv/bin/python"


def test_table_truncated_process_memory():
    proc = parse_smi(_lines("015-table-b200-x8-python-580.95.05.txt")).processes[0]
    assert proc.used_mib is None and proc.used_raw == "10052..."


def test_table_windows_processes():
    snap = parse_smi(_lines("022-table-rtx2080super-windows-wddm-591.86.txt"))
    assert {p.used_raw for p in snap.processes} == {"N/A"}
    assert snap.processes[8].name == r"...m Files\NZXT CAM\NZXT CAM.exe" and snap.processes[0].type == "C+G"


def test_table_two_snapshots_keeps_last():
    table = (DATA / "019-table-h100-80gb-hbm3-590.48.01.txt").read_text()
    snap = parse_smi((table + "\n" + table.replace("19818MiB", "11111MiB")).splitlines())
    assert [g.memory_used_mib for g in snap.gpus] == [11111] and len(snap.processes) == 3
    assert any("kept the last" in w for w in snap.warnings)


def test_table_with_error_line_and_crlf():
    table = (DATA / "019-table-h100-80gb-hbm3-590.48.01.txt").read_text()
    text = "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\r\n" + table.replace("\n", "\r\n")
    snap = parse_smi(text.split("\n"))
    assert snap.format == "table" and snap.gpus[0].memory_used_mib == 19818
    assert snap.error.startswith("Unable to determine the device handle")


def test_table_fragment_power_err():
    snap = parse_smi(_lines("027-table-fragment-v100-pcie-errpower-unknown.txt"))
    assert snap.format == "table-fragment" and snap.gpus[0].errors == ["ERR! in power"]


def test_mig_table():
    snap = parse_smi(_lines("011-table-h100-x8-mig-535.104.12.txt"))
    assert snap.mig_mode == "Enabled" and len(snap.mig_devices) == 32
    assert all(g.memory_total_mib is None for g in snap.gpus)


def test_q_sanity():
    snap = parse_smi(_lines("032-q-rtx2080super-kmd-610.57.04.txt"))
    assert (snap.driver_version, snap.cuda_version) == ("610.57.04", "13.3")
    assert snap.gpus[0].uuid.startswith("GPU-") and snap.gpus[0].memory_reserved_mib == 400


def test_q_fragment_health_notes():
    snap = parse_smi(_lines("028-q-fragment-a100-sxm4-80gb-ecc-510.73.08.txt"))
    assert snap.format == "q-fragment"
    assert "ECC volatile DRAM Correctable: 177" in snap.gpus[0].errors
    assert "row remapping pending" in snap.gpus[0].errors
    assert any("says 8" in w for w in snap.warnings)


def test_q_old_process_blocks_without_instance_ids():
    text = """==============NVSMI LOG==============
Driver Version                      : 390.25
Attached GPUs                       : 1
GPU 00000000:04:00.0
    Product Name                    : GeForce GTX 1080 Ti
    Processes
        Process ID                  : 1032
            Type                    : C
            Name                    : python
            Used GPU Memory         : 10781 MiB
        Process ID                  : 1033
            Type                    : C
            Name                    : python3
            Used GPU Memory         : Not available in WDDM driver model"""
    procs = parse_smi(text.splitlines()).processes
    assert [(p.pid, p.used_mib) for p in procs] == [(1032, 10781), (1033, None)]
    assert procs[1].used_raw == "Not available in WDDM driver model"


def test_xml_sanity():
    snap = parse_smi(_lines("036-q-xml-a100-sxm4-80gb-mig-535.54.03.xml"))
    assert snap.format == "q-xml" and snap.mig_mode == "Enabled" and len(snap.mig_devices) == 4
    assert any("says 4" in w for w in snap.warnings)
    windows = parse_smi(_lines("035-q-xml-rtx2080-windows-516.59.xml"))
    assert windows.processes[1].name == "" and windows.processes[1].used_raw == "N/A"


def test_csv_query_gpu_units_and_nounits():
    units = parse_smi(_lines("039-csv-query-gpu-h100-allfields-590.48.01.csv")).gpus[0]
    assert (units.memory_used_mib, units.memory_total_mib, units.memory_reserved_mib) == (19818, 81559, 479)
    nounits = parse_smi(_lines("042-csv-query-gpu-tesla-p100-nounits-unknown.csv")).gpus[0]
    assert (nounits.memory_used_mib, nounits.memory_total_mib, nounits.memory_free_mib) == (0, None, 16280)


def test_csv_noheader():
    snap = parse_smi(["0, NVIDIA H100 80GB HBM3, 81559 MiB, 19818 MiB", "1, NVIDIA H100 80GB HBM3, 81559 MiB, 2 MiB"])
    assert [(g.index, g.memory_total_mib, g.memory_used_mib) for g in snap.gpus] == [(0, 81559, 19818), (1, 81559, 2)]
    assert snap.warnings


def test_csv_looped_last_sample_per_gpu():
    snap = parse_smi(_lines("041-csv-query-gpu-loop-rtx3090-wsl-unknown.csv"))
    assert len(snap.gpus) == 1 and snap.gpus[0].memory_used_mib == 2218
    assert len(snap.samples) == 14 and snap.samples[0].utilization_gpu_pct == 19.0
    rows = ["timestamp, index, memory.used [MiB]"] + [
        f"2025/01/01 00:00:0{t}.{g}00, {g}, {t * 10 + g} MiB" for t in range(3) for g in range(2)]
    snap = parse_smi(rows)
    assert [(g.index, g.memory_used_mib) for g in snap.gpus] == [(0, 20), (1, 21)] and len(snap.samples) == 6


def test_csv_name_only_rows_are_separate_gpus():
    rows = ["name, memory.used [MiB]"] + [f"NVIDIA H100, {g} MiB" for g in range(8)]
    snap = parse_smi(rows)
    assert [g.memory_used_mib for g in snap.gpus] == list(range(8)) and not snap.samples


def test_csv_query_apps():
    snap = parse_smi(_lines("044-csv-query-apps-rtx2080super-windows-610.62.csv"))
    assert snap.format == "csv-query-apps" and len(snap.processes) == 21
    assert snap.processes[0].gpu is None and snap.processes[0].used_raw == "[N/A]"
    assert snap.processes[0].gpu_bus_id == "00000000:0C:00.0"
    assert parse_smi(["pid, process_name, used_gpu_memory [MiB]"]).processes == []


def test_csv_then_dmon():
    snap = parse_smi(_lines("049-csv-loop-dmon-h200-580.159.04.txt"))
    assert snap.gpus[0].memory_used_mib == 62059          # the last CSV sample, not dmon
    assert len(snap.samples) == 17 and snap.samples[-1].memory_used_mib == 98923


def test_dmon_only():
    text = """#Date       Time        gpu    pwr     sm    mem     fb
#YYYYMMDD   HH:MM:SS    Idx      W      %      %     MB
 20251129   22:22:38      0     75      5      2   1000
 20251129   22:22:39      1      -      -      2   2000"""
    snap = parse_smi(text.splitlines())
    assert snap.format == "dmon" and [(g.index, g.memory_used_mib) for g in snap.gpus] == [(0, 1000), (1, 2000)]
    assert snap.samples[0].timestamp == "20251129 22:22:38" and snap.samples[1].utilization_gpu_pct is None


def test_error_only():
    snap = parse_smi(_lines("046-error-driver-unreachable-unknown.txt"))
    assert snap.format == "error" and not snap.gpus and "couldn't communicate" in snap.error


def test_prefixed_table_with_varying_timestamps():
    table = _lines("021-table-h200-mig-590.48.01.txt")
    lines = [f"2025-03-25 11:01:{k % 60:02d},{k:03d} | INFO | {line}" for k, line in enumerate(table)]
    snap = parse_smi(lines)
    assert snap.format == "table" and len(snap.mig_devices) == 5 and snap.processes[0].ci == 1


def test_long_lines_cost_linear_time():
    """Header/row patterns must not backtrack quadratically on long field-like lines."""
    lines = ["memory.used, " + "ab, " * 5000 + "!", "memory." + "a." * 10000 + "!, x", "|" + "  0  " * 5000 + "|"]
    t0 = time.perf_counter()
    parse_smi(lines)
    find_smi_blocks(lines)
    looks_like_smi("\n".join(lines))
    assert time.perf_counter() - t0 < 1.0


def test_faults_are_the_errors_that_show_an_error_state():
    from diag.parse.smi import SmiGpu
    g = SmiGpu(0, "H100", 81559, 10, errors=["ERR! in power", "volatile uncorrectable ECC errors: 2", "Remapping Pending: yes",
                                             "page retirement pending", "GPU has fallen off the bus", "fan N/A"])
    assert g.faults() == g.errors[:5]
    assert SmiGpu(1, "H100", 81559, 10, errors=["fan N/A"]).faults() == []
