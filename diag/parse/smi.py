"""Parser for nvidia-smi outputs.

Reads every format nvidia-smi prints: the default table (all driver eras, Windows/WDDM,
MIG), `-q` (full or an excerpt), `-q -x` XML, `--query-gpu` / `--query-compute-apps` CSV
(looped or not, with or without header and units), `dmon`, and the error-only output.
`find_smi_blocks` locates such outputs pasted inside other logs, where every line may
carry a log prefix; `parse_smi` removes that prefix by learning its shape from the lines
that anchor the format (table borders, `-q` keys, CSV header).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

from .. import rx
from ..numbers import to_float, to_int


@dataclass
class SmiGpu:
    index: int | None
    name: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    memory_free_mib: int | None = None
    memory_reserved_mib: int | None = None
    bus_id: str | None = None
    uuid: str | None = None
    errors: list[str] = field(default_factory=list)
    line: int | None = None

    def faults(self) -> list[str]:
        """The errors that show the GPU in an error state: ERR! cells, uncorrectable ECC, pending
        or failed row remaps, page retirement pending, a GPU fallen off the bus."""
        return [e for e in self.errors if FAULT.search(e)]


# the words of an error that is a fault of the GPU (not a note about a missing field)
FAULT = rx.compile(r"ERR!|uncorrectable|remapping (?:pending|failure)|retirement pending|fallen off", rx.IGNORECASE)


@dataclass
class SmiProcess:
    gpu: int | None
    pid: int | None
    name: str | None
    used_mib: int | None
    used_raw: str | None = None
    type: str | None = None
    gi: int | None = None
    ci: int | None = None
    gpu_uuid: str | None = None
    gpu_bus_id: str | None = None
    gpu_name: str | None = None
    line: int | None = None


@dataclass
class SmiSample:
    timestamp: str | None
    gpu: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    memory_free_mib: int | None
    utilization_gpu_pct: float | None
    line: int | None


@dataclass
class SmiSnapshot:
    format: str
    driver_version: str | None
    cuda_version: str | None
    gpus: list[SmiGpu]
    processes: list[SmiProcess]
    mig_mode: str | None = None
    mig_devices: list[dict] = field(default_factory=list)
    samples: list[SmiSample] = field(default_factory=list)
    error: str | None = None
    error_line: int | None = None          # the line of that error
    warnings: list[str] = field(default_factory=list)
    first_line: int | None = None
    last_line: int | None = None

    def gpus_facts(self) -> list[dict]:
        out = []
        for g in self.gpus:
            d = {"index": g.index, "name": g.name,
                 "memory_total_mib": g.memory_total_mib, "memory_used_mib": g.memory_used_mib}
            _put_known(d, g, ("memory_free_mib", "memory_reserved_mib", "bus_id", "uuid"))
            out.append(d)
        return out

    def processes_facts(self) -> list[dict]:
        out = []
        for p in self.processes:
            d = {"gpu": p.gpu, "pid": p.pid, "name": p.name, "used_mib": p.used_mib}
            _put_known(d, p, ("used_raw", "type", "gi", "ci", "gpu_uuid", "gpu_bus_id", "gpu_name"))
            out.append(d)
        return out

    def _mark(self, lineno: int) -> None:
        """Extend the span of lines this snapshot was read from."""
        if self.first_line is None:
            self.first_line = lineno
        self.last_line = lineno


def _put_known(d: dict, obj, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = getattr(obj, key)
        if value is not None:
            d[key] = value


def _new(fmt: str) -> SmiSnapshot:
    return SmiSnapshot(fmt, None, None, [], [])


# ---------------------------------------------------------------------------
# Cell values

_NA = frozenset({"", "-", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "ERR!", "Unknown Error"})
_MIB_RE = rx.compile(r"(\d+)\s*(?:MiB|MB)?")
_PCT_RE = rx.compile(r"(\d+(?:\.\d+)?)\s*%?")
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_BUS_RE = rx.compile(_BUS)
_MIB_VALUE_RE = rx.compile(r"\d+ MiB")
_PCT_VALUE_RE = rx.compile(r"\d+(?:\.\d+)? %")


def _mib(text: str | None) -> int | None:
    m = _MIB_RE.fullmatch(text.strip()) if text else None
    return to_int(m[1]) if m else None


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return to_int(text) if text.isdigit() else None


def _pct(text: str | None) -> float | None:
    m = _PCT_RE.fullmatch(text.strip()) if text else None
    return to_float(m[1]) if m else None


def _text(text: str | None) -> str | None:
    return None if text is None or text.strip() in _NA else text.strip()


def _version(text: str | None) -> str | None:
    """'610.57.04 [Deprecated; ...]' -> '610.57.04'; 'N/A' -> None."""
    return _text(text.split("[", 1)[0]) if text else None


def _used(proc: SmiProcess, cell: str) -> None:
    """Per-process memory: MiB number, or None plus the raw cell ('N/A', '10052...')."""
    proc.used_mib = _mib(cell)
    if proc.used_mib is None:
        proc.used_raw = cell.strip()


def _mig_summary(modes: list[str]) -> str | None:
    if "Enabled" in modes:
        return "Enabled"
    return "Disabled" if "Disabled" in modes else None


# ---------------------------------------------------------------------------
# Log prefixes: learn the shape of the text before each line's content (digits may
# vary, e.g. timestamps) from the lines that anchor a format, then strip it.

_DIGITS_RE = rx.compile(r"\d+")
_BORDER_RE = rx.compile(r"[+|][-=]{8,}")
_Q_ANCHOR_RE = rx.compile(r"=+NVSMI LOG=+|(?:Driver Version|KMD Version|Attached GPUs)\s+:")
_XML_ANCHOR_RE = rx.compile(r"<(?:\?xml|!DOCTYPE|/?nvidia_smi_log)")
_CSV_FIELD = r"[a-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?: \[[^\]\[]*\])?"
_CSV_FIELD_RE = rx.compile(_CSV_FIELD)
_CSV_FIRST_RE = rx.compile(rf"(?:^|[^\w.\]])({_CSV_FIELD})\s*$")   # first field, after any prefix
_DMON_ANCHOR_RE = rx.compile(r"#\s*(?:gpu|Date)\b")
_PREFIX_ANCHORS = (_BORDER_RE, _Q_ANCHOR_RE, _XML_ANCHOR_RE, None, _DMON_ANCHOR_RE)   # None: CSV header


def _shape_re(prefixes: list[str]) -> object | None:
    """A regex matching all the given prefixes (digit runs generalised); None if they differ or are empty."""
    shapes = {_DIGITS_RE.sub("\0", p) for p in prefixes}
    if len(shapes) != 1:
        return None
    shape = shapes.pop()
    # literals and digit runs only (RE2, not listed: built from the input's own prefixes)
    return rx.compile(r"\d+".join(map(rx.escape, shape.split("\0"))), register=False) if shape else None


def _anchor_at(anchor: object | None, line: str) -> int | None:
    """Where the anchor (None: a CSV header) starts in the line, or None."""
    if anchor is None:
        header = _csv_header_at(line)
        return header[0] if header else None
    m = anchor.search(line)
    return m.start() if m else None


def _learn_prefix(lines: list[str]) -> object | None:
    for anchor in _PREFIX_ANCHORS:
        prefixes = [line[:at] for line in lines if (at := _anchor_at(anchor, line)) is not None]
        if prefixes:
            return _shape_re(prefixes)
    return None


def _rest(line: str, pat: object | None) -> str | None:
    """The line without its prefix; None if the line lacks the prefix."""
    if pat is None:
        return line
    m = pat.match(line)
    return line[m.end():] if m else None


# ---------------------------------------------------------------------------
# Shared line patterns

_ERROR_RE = rx.compile(
    r"NVIDIA-SMI has failed|couldn't communicate with the NVIDIA driver|Failed to initialize NVML"
    r"|No devices were found|Unable to determine the device handle|GPU is lost"
    r"|Driver/library version mismatch")
_WARNING_RE = rx.compile(r"WARNING:", rx.IGNORECASE)
_DATE_RE = rx.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$")
_KV_RE = rx.compile(r"^(\s*)([^:]*?\S)\s+:(?:\s+(.*?))?\s*$")   # -q "Key    : value"
_Q_GPU_RE = rx.compile(rf"GPU ({_BUS})")
_Q_SECTION_RE = rx.compile(r"[A-Za-z][\w .()/+-]*")


# ---------------------------------------------------------------------------
# Default table

_BUS_CELL_RE = rx.compile(rf"({_BUS})(?:\s+(\S+))?")
_NAME_CELL_RE = rx.compile(r"\s*(\d+)\s+(.*?)\s+(\S+)\s*")     # index, name, persistence/driver model
_MEM_CELL_RE = rx.compile(r"(\d+)\s*Mi?B\s*/\s*(\d+)\s*Mi?B")
_FAN_CELL_RE = rx.compile(r"\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*")  # fan temp perf usage / cap
_MIG_ROW_RE = rx.compile(r"\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*")
_PROC_ROW_RE = rx.compile(
    r"\s*(\d+)\s+(?:(\d+|N/A)\s+(\d+|N/A)\s+)?(\d+)\s+([CGM](?:\+[CGM])*)\s+(?:(.*?)\s+)?(\S+)\s*")
_SMI_VER_RE = rx.compile(r"NVIDIA-SMI\s+([\w.]+)")
_DRIVER_RE = rx.compile(r"(?:Driver|KMD) Version:\s*([\w.]+)")
_CUDA_RE = rx.compile(r"CUDA(?: UMD)? Version:\s*([\w./]+)")


def _cells(line: str) -> list[str] | None:
    """Cells of a '| a | b |' row, None for other lines."""
    s = line.strip()
    if len(s) < 2 or s[0] != "|" or s[-1] != "|":
        return None
    return s[1:-1].split("|")


def _parse_table(lines: list[str], start_line: int) -> SmiSnapshot | None:
    snap = _new("table-fragment")
    mig_modes: list[str] = []
    i = 0
    while i < len(lines):
        cells = _cells(lines[i])
        if cells is None:
            if _BORDER_RE.match(lines[i].strip()):
                snap._mark(start_line + i)
            i += 1
            continue
        lineno = start_line + i
        if "NVIDIA-SMI" in lines[i] and _SMI_VER_RE.search(lines[i]):
            if snap.gpus or snap.processes:     # a second snapshot: keep the latest
                warnings = snap.warnings + ["several nvidia-smi tables; kept the last"]
                snap, mig_modes = _new("table"), []
                snap.warnings = warnings
            _table_header(lines[i], snap)
        elif len(cells) == 3 and _BUS_CELL_RE.fullmatch(cells[1].strip()):
            gpu, mig, used = _table_gpu(lines, i, start_line)
            snap.gpus.append(gpu)
            mig_modes.append(mig)
            snap._mark(lineno + used - 1)
            i += used
            continue
        elif len(cells) >= 4 and (m := _MIG_ROW_RE.fullmatch(cells[0])) and (mem := _MEM_CELL_RE.search(cells[1])):
            snap.mig_devices.append({"gpu": to_int(m[1]), "gi": to_int(m[2]), "ci": to_int(m[3]), "mig_dev": to_int(m[4]),
                                     "memory_used_mib": to_int(mem[1]), "memory_total_mib": to_int(mem[2])})
        elif len(cells) == 1 and (m := _PROC_ROW_RE.fullmatch(cells[0])):
            proc = SmiProcess(to_int(m[1]), to_int(m[4]), m[6] or "", None, type=m[5],
                              gi=_int(m[2]), ci=_int(m[3]), line=lineno)
            _used(proc, m[7])
            snap.processes.append(proc)
        snap._mark(lineno)
        i += 1
    if snap.format == "table-fragment" and not snap.gpus and not snap.processes:
        return None
    snap.mig_mode = _mig_summary(mig_modes)
    return snap


def _table_header(line: str, snap: SmiSnapshot) -> None:
    snap.format = "table"
    if m := _DRIVER_RE.search(line):
        snap.driver_version = _version(m[1])
    if m := _CUDA_RE.search(line):
        snap.cuda_version = _version(m[1])


def _table_gpu(lines: list[str], i: int, start_line: int) -> tuple[SmiGpu, str, int]:
    """One GPU row (2 lines before driver 450, 3 after). Returns the GPU, its MIG mode, lines used."""
    c1 = _cells(lines[i])
    m = _NAME_CELL_RE.fullmatch(c1[0])
    index, name, persist = (to_int(m[1]), m[2], m[3]) if m else (None, c1[0].strip() or None, "")
    bus = _BUS_CELL_RE.fullmatch(c1[1].strip())
    gpu = SmiGpu(index, name, None, None, bus_id=bus[1], line=start_line + i)
    bad = [label for label, v in (("name", name), ("persistence", persist), ("display", bus[2]),
                                  ("ecc", c1[2].strip())) if v == "ERR!"]
    if (ecc := _int(c1[2])) is not None and ecc > 0:
        gpu.errors.append(f"volatile uncorrectable ECC errors: {ecc}")
    used, mig = 1, ""
    c2 = _cells(lines[i + 1]) if i + 1 < len(lines) else None
    if c2 is not None and len(c2) == 3 and not _BUS_CELL_RE.fullmatch(c2[1].strip()):
        used = 2
        if mem := _MEM_CELL_RE.search(c2[1]):
            gpu.memory_used_mib, gpu.memory_total_mib = to_int(mem[1]), to_int(mem[2])
        if fan := _FAN_CELL_RE.fullmatch(c2[0]):
            bad += [n for n, v in zip(("fan", "temp", "perf", "power", "power cap"), fan.groups()) if v == "ERR!"]
        elif "ERR!" in c2[0]:
            bad.append("power")
        util = c2[2].split()
        bad += [n for n, v in (("memory", c2[1].strip()), ("util", util[0] if util else "")) if v == "ERR!"]
        c3 = _cells(lines[i + 2]) if i + 2 < len(lines) else None
        if c3 is not None and len(c3) == 3 and not c3[0].strip() and not c3[1].strip():
            used, mig = 3, c3[2].strip()
            if mig == "ERR!":
                bad.append("mig")
    if bad:
        gpu.errors.insert(0, "ERR! in " + "/".join(bad))
    return gpu, mig, used


# ---------------------------------------------------------------------------
# nvidia-smi -q

def _parse_q(lines: list[str], start_line: int) -> SmiSnapshot | None:
    snap = _new("q-fragment")
    stack: list[tuple[int, str]] = []   # open sections: (indent, name)
    gpu: SmiGpu | None = None
    proc: SmiProcess | None = None
    mig: dict | None = None
    mig_modes: list[str] = []
    top: dict[str, str] = {}            # top-level keys (driver, CUDA, attached GPUs)
    for i, raw in enumerate(lines):
        s = raw.strip()
        lineno = start_line + i
        if not s or s == "[...]":
            continue
        if "NVSMI LOG" in s:
            if snap.gpus:                    # looped -q: keep the latest snapshot
                snap, top, mig_modes = _new("q"), {}, []
                snap.warnings.append("several nvidia-smi -q outputs; kept the last")
                gpu = proc = mig = None
            snap.format = "q"
            snap._mark(lineno)
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m := _Q_GPU_RE.fullmatch(s):
            gpu = SmiGpu(len(snap.gpus), None, None, None, bus_id=m[1], line=lineno)
            snap.gpus.append(gpu)
            mig_modes.append("")
            stack = [(indent, "GPU")]
            proc = mig = None
            snap._mark(lineno)
            continue
        kv = _KV_RE.match(raw)
        if kv is None:
            if gpu is not None and _Q_SECTION_RE.fullmatch(s):
                stack.append((indent, s))
                if s == "MIG Device":
                    mig = {"gpu": gpu.index, "gi": None, "ci": None, "mig_dev": None,
                           "memory_used_mib": None, "memory_total_mib": None}
                    snap.mig_devices.append(mig)
                snap._mark(lineno)
            continue
        key, value = kv[2], kv[3] or ""
        path = [name for _, name in stack]
        if gpu is None:
            if not path:
                top[key] = value
                snap._mark(lineno)
            continue
        path = path or ["GPU"]              # indentation lost in the paste
        snap._mark(lineno)
        if "MIG Device" in path:
            _q_mig_key(mig, path, key, value)
        elif "Processes" in path:
            if key == "GPU instance ID" or (key == "Process ID" and (proc is None or proc.pid is not None)):
                proc = SmiProcess(gpu.index, None, None, None, line=lineno)
                snap.processes.append(proc)
            _q_process_key(proc, key, value, lineno)
        elif path[-1] == "MIG Mode" and key == "Current":
            mig_modes[-1] = value
        else:
            _q_gpu_key(gpu, path, key, value)
    if not snap.gpus and not top.keys() & {"Driver Version", "KMD Version", "Attached GPUs"}:
        return None
    snap.driver_version = _version(top.get("KMD Version") or top.get("Driver Version"))
    snap.cuda_version = _version(top.get("CUDA UMD Version") or top.get("CUDA Version"))
    snap.mig_mode = _mig_summary(mig_modes)
    _check_attached(snap, top.get("Attached GPUs"))
    return snap


def _q_gpu_key(gpu: SmiGpu, path: list[str], key: str, value: str) -> None:
    section = path[-1]
    if section == "GPU":
        if key == "Product Name":
            gpu.name = value
        elif key == "GPU UUID":
            gpu.uuid = _text(value)
    elif section == "FB Memory Usage":
        attr = {"Total": "memory_total_mib", "Used": "memory_used_mib",
                "Free": "memory_free_mib", "Reserved": "memory_reserved_mib"}.get(key)
        if attr:
            setattr(gpu, attr, _mib(value))
    elif note := _q_health_note(path, key, value):
        gpu.errors.append(note)


def _q_health_note(path: list[str], key: str, value: str) -> str | None:
    """ECC counts, row remapping and page retirement states worth reporting."""
    count = _int(value)
    section = path[-1]
    if "ECC Errors" in path and section in ("Volatile", "Aggregate") and count:
        return f"ECC {section.lower()} {key}: {count}"
    if section == "Remapped Rows":
        if key in ("Correctable Error", "Uncorrectable Error") and count:
            return f"remapped rows ({key.split()[0].lower()}): {count}"
        if key == "Pending" and value == "Yes":
            return "row remapping pending"
        if key == "Remapping Failure Occurred" and value == "Yes":
            return "row remapping failure occurred"
    if "Retired Pages" in path:
        if key.startswith("Pending") and value == "Yes":
            return "page retirement pending"
        if count:
            return f"retired pages ({section if section != 'Retired Pages' else key}): {count}"
    return None


def _q_mig_key(mig: dict | None, path: list[str], key: str, value: str) -> None:
    if mig is None:
        return
    if path[-1] == "MIG Device":
        attr = {"Index": "mig_dev", "GPU Instance ID": "gi", "Compute Instance ID": "ci"}.get(key)
        if attr:
            mig[attr] = _int(value)
    elif path[-1] in ("FB Memory Usage", "Shared FB Memory Usage") and key in ("Total", "Used"):
        mig[f"memory_{key.lower()}_mib"] = _mib(value)


def _q_process_key(proc: SmiProcess | None, key: str, value: str, lineno: int) -> None:
    if proc is None:
        return
    if key == "GPU instance ID":
        proc.gi = _int(value)
    elif key == "Compute instance ID":
        proc.ci = _int(value)
    elif key == "Process ID":
        proc.pid, proc.line = _int(value), lineno
    elif key == "Type":
        proc.type = value
    elif key == "Name":
        proc.name = value
    elif key == "Used GPU Memory":
        _used(proc, value)


def _check_attached(snap: SmiSnapshot, attached: str | None) -> None:
    count = _int(attached)
    if count is not None and count != len(snap.gpus):
        snap.warnings.append(f"attached GPUs field says {count}, output holds {len(snap.gpus)} GPU block(s)")


# ---------------------------------------------------------------------------
# nvidia-smi -q -x

def _parse_xml(lines: list[str], start_line: int) -> SmiSnapshot | None:
    text = "\n".join(lines)
    begin = text.find("<nvidia_smi_log")
    if begin < 0:
        return None
    import xml.etree.ElementTree as ET  # only XML inputs pay for this import

    close = text.find("</nvidia_smi_log>", begin)
    body = text[begin:close + len("</nvidia_smi_log>")] if close >= 0 else text[begin:]
    snap = _new("q-xml")
    first = text.count("\n", 0, begin)
    snap._mark(start_line + first)
    snap._mark(start_line + first + body.count("\n"))
    try:
        root = ET.fromstring(body)   # starts after any DOCTYPE, so no DTD is read
    except ET.ParseError as exc:
        snap.warnings.append(f"XML could not be parsed: {exc}")
        return snap
    snap.driver_version = _version(root.findtext("kmd_version") or root.findtext("driver_version"))
    snap.cuda_version = _version(root.findtext("cuda_umd_version") or root.findtext("cuda_version"))
    gpu_lines = [start_line + k for k, line in enumerate(lines) if "<gpu id=" in line or line.strip() == "<gpu>"]
    mig_modes = []
    for k, g in enumerate(root.findall("gpu")):
        gpu = _xml_gpu(g, k, gpu_lines[k] if k < len(gpu_lines) else None)
        snap.gpus.append(gpu)
        mig_modes.append(g.findtext("mig_mode/current_mig") or "")
        for md in g.findall("mig_devices/mig_device"):
            snap.mig_devices.append({
                "gpu": k, "gi": _int(md.findtext("gpu_instance_id")), "ci": _int(md.findtext("compute_instance_id")),
                "mig_dev": _int(md.findtext("index")),
                "memory_used_mib": _mib(md.findtext("fb_memory_usage/used")),
                "memory_total_mib": _mib(md.findtext("fb_memory_usage/total"))})
        for p in g.findall("processes/process_info"):
            proc = SmiProcess(k, _int(p.findtext("pid")), p.findtext("process_name") or "", None,
                              type=p.findtext("type"), gi=_int(p.findtext("gpu_instance_id")),
                              ci=_int(p.findtext("compute_instance_id")))
            _used(proc, p.findtext("used_memory") or "")
            snap.processes.append(proc)
    snap.mig_mode = _mig_summary(mig_modes)
    _check_attached(snap, root.findtext("attached_gpus"))
    return snap


def _xml_gpu(g, index: int, line: int | None) -> SmiGpu:
    gpu = SmiGpu(index, g.findtext("product_name"),
                 _mib(g.findtext("fb_memory_usage/total")), _mib(g.findtext("fb_memory_usage/used")),
                 memory_free_mib=_mib(g.findtext("fb_memory_usage/free")),
                 memory_reserved_mib=_mib(g.findtext("fb_memory_usage/reserved")),
                 bus_id=g.get("id") or g.findtext("pci/pci_bus_id"), uuid=_text(g.findtext("uuid")), line=line)
    for scope in ("volatile", "aggregate"):
        for counter in g.findall(f"ecc_errors/{scope}/*"):
            if n := _int(counter.text):
                gpu.errors.append(f"ECC {scope} {counter.tag}: {n}")
    rows = g.find("remapped_rows")
    if rows is not None:
        for tag, note in (("remapped_row_pending", "row remapping pending"),
                          ("remapped_row_failure", "row remapping failure occurred")):
            if (rows.findtext(tag) or "").strip() == "Yes":
                gpu.errors.append(note)
        if n := _int(rows.findtext("remapped_row_unc")):
            gpu.errors.append(f"remapped rows (uncorrectable): {n}")
    if (g.findtext("retired_pages/pending_retirement") or "").strip() == "Yes":
        gpu.errors.append("page retirement pending")
    return gpu


# ---------------------------------------------------------------------------
# --query-gpu / --query-compute-apps CSV and dmon

_CSV_KNOWN = frozenset({
    "timestamp", "index", "name", "uuid", "pci.bus_id", "driver_version", "kmd_version", "count", "serial",
    "memory.total", "memory.used", "memory.free", "memory.reserved", "utilization.gpu", "utilization.memory",
    "temperature.gpu", "power.draw", "pstate", "fan.speed",
    "pid", "process_name", "used_gpu_memory", "used_memory", "gpu_name", "gpu_uuid", "gpu_bus_id", "gpu_serial"})
_APPS_FIELDS = frozenset({"pid", "process_name", "used_gpu_memory", "used_memory"})
_GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
_UNIT_RE = rx.compile(r"\s*\[[^\]]*\]$")
_TS_RE = rx.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?")
_CLOCK_RE = rx.compile(r"(\d\d):(\d\d):(\d\d(?:\.\d+)?)$")
_GPU_NAME_HINT_RE = rx.compile(r"NVIDIA|Tesla|GeForce|Quadro|TITAN|GRID|RTX|\b[ABHLTV]\d{2,3}\b")
_DMON_ROW_RE = rx.compile(r"(?:\d{8}\s+\d\d:\d\d:\d\d\s+)?\d+(?:\s+(?:-?\d+(?:\.\d+)?|-))+")


def _csv_header_at(line: str) -> tuple[int, list[str]] | None:
    """(where the header starts, field names without units) when the line ends with a CSV header
    of nvidia-smi fields; split-based so that long lines cost linear time."""
    if "," not in line:
        return None
    first, *others = line.split(",")
    m = _CSV_FIRST_RE.search(first)
    fields = [f.strip() for f in others]
    if m is None or not all(_CSV_FIELD_RE.fullmatch(f) for f in fields):
        return None
    names = [_UNIT_RE.sub("", f) for f in [m[1], *fields]]
    return (m.start(1), names) if any(n in _CSV_KNOWN for n in names) else None


def _csv_header(line: str) -> list[str] | None:
    header = _csv_header_at(line)
    return header[1] if header else None


def _csv_row(header: list[str], values: list[str]) -> dict | None:
    """The row as {field: value}; None when it does not fit the header."""
    extra = len(values) - len(header)
    if extra < 0:
        return None
    if extra:   # a comma inside a name: glue the surplus back into that column
        col = next((c for c in ("process_name", "name", "gpu_name") if c in header), None)
        if col is None:
            return None
        k = header.index(col)
        values = values[:k] + [",".join(values[k:k + extra + 1])] + values[k + extra + 1:]
    row = dict(zip(header, values))
    return row if all(_csv_value_ok(f, v) for f, v in row.items()) else None


def _csv_value_ok(name: str, value: str) -> bool:
    """Type check of the fields whose values have a known shape."""
    if value in _NA or value.startswith("["):
        return True
    if name in ("pid", "index", "count"):
        return value.isdigit()
    if name.startswith("memory.") or name in ("used_gpu_memory", "used_memory"):
        return _mib(value) is not None
    if name.startswith("utilization."):
        return _pct(value) is not None
    if name == "timestamp":
        return bool(_TS_RE.fullmatch(value))
    return True


def _guess_header(values: list[str]) -> list[str] | None:
    """Field names for a header-less (noheader) --query-gpu row, inferred from the values."""
    names: list[str] = []
    mib: list[int] = []
    for k, v in enumerate(values):
        if _TS_RE.fullmatch(v):
            name = "timestamp"
        elif v.startswith("GPU-"):
            name = "uuid"
        elif _BUS_RE.fullmatch(v):
            name = "pci.bus_id"
        elif _MIB_VALUE_RE.fullmatch(v):
            name = f"mib{len(mib)}"
            mib.append(k)
        elif _PCT_VALUE_RE.fullmatch(v):
            name = "utilization.gpu" if "utilization.gpu" not in names else f"col{k}"
        elif v.isdigit() and not names:
            name = "index"
        elif _GPU_NAME_HINT_RE.search(v) and "name" not in names:
            name = "name"
        else:
            name = f"col{k}"
        names.append(name)
    if not mib or not {"name", "uuid", "pci.bus_id"} & set(names):
        return None
    # one figure is taken as used; else the largest is the total, the others follow --help-query-gpu order
    if len(mib) == 1:
        names[mib[0]] = "memory.used"
        return names
    total = max(mib, key=lambda k: _mib(values[k]))
    names[total] = "memory.total"
    rest = [k for k in mib if k != total]
    order = ["memory.used", "memory.free"] if len(rest) <= 2 else ["memory.reserved", "memory.used", "memory.free"]
    for k, name in zip(rest, order):
        names[k] = name
    return names


def _loop_keys(rows: list[dict]) -> list:
    """Which GPU each --query-gpu row describes (rows repeat per GPU in looped output)."""
    for col in ("index", "uuid", "pci.bus_id"):
        if col in rows[0]:
            return [r[col] for r in rows]
    if "timestamp" not in rows[0]:
        return list(range(len(rows)))
    # no GPU id: one loop iteration is the run of rows stamped within 0.1 s of its first row
    secs = [_seconds(r["timestamp"]) for r in rows]
    period = next((k for k, t in enumerate(secs) if None not in (t, secs[0]) and abs(t - secs[0]) >= 0.1),
                  len(rows))
    return [k % period for k in range(len(rows))]


def _seconds(ts: str) -> float | None:
    m = _CLOCK_RE.search(ts.strip())
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def _csv_gpu(row: dict, lineno: int) -> SmiGpu:
    return SmiGpu(_int(row.get("index")), _text(row.get("name")),
                  _mib(row.get("memory.total")), _mib(row.get("memory.used")),
                  memory_free_mib=_mib(row.get("memory.free")), memory_reserved_mib=_mib(row.get("memory.reserved")),
                  bus_id=_text(row.get("pci.bus_id")), uuid=_text(row.get("uuid")), line=lineno)


def _csv_sample(row: dict, lineno: int) -> SmiSample:
    return SmiSample(row.get("timestamp"), _int(row.get("index")), _mib(row.get("memory.used")),
                     _mib(row.get("memory.total")), _mib(row.get("memory.free")),
                     _pct(row.get("utilization.gpu")), lineno)


def _csv_process(row: dict, lineno: int) -> SmiProcess:
    proc = SmiProcess(None, _int(row.get("pid")), row.get("process_name"), None,
                      gpu_uuid=_text(row.get("gpu_uuid")), gpu_bus_id=_text(row.get("gpu_bus_id")),
                      gpu_name=_text(row.get("gpu_name")), line=lineno)
    _used(proc, row.get("used_gpu_memory", row.get("used_memory", "")))
    return proc


def _dmon_sample(header: list[str], line: str, lineno: int) -> SmiSample:
    row = dict(zip(header, line.split()))
    ts = f"{row['Date']} {row['Time']}" if "Date" in row and "Time" in row else None
    return SmiSample(ts, _int(row.get("gpu")), _int(row.get("fb")), None, None, _pct(row.get("sm")), lineno)


def _parse_columnar(lines: list[str], start_line: int) -> SmiSnapshot | None:
    snap = _new("csv-query-gpu")
    header: list[str] | None = None
    dmon: list[str] | None = None
    gpu_rows: list[tuple[int, dict]] = []
    dmon_samples: list[SmiSample] = []
    seen_apps = False
    for i, raw in enumerate(lines):
        line = raw.strip()
        lineno = start_line + i
        if not line:
            continue
        if line.startswith("#"):
            tokens = line[1:].split()
            if tokens and tokens[0] in ("gpu", "Date"):
                dmon = tokens
                snap._mark(lineno)
            continue
        if dmon and _DMON_ROW_RE.fullmatch(line):
            dmon_samples.append(_dmon_sample(dmon, line, lineno))
            snap._mark(lineno)
            continue
        if fields := _csv_header(line):
            header = fields
            seen_apps |= bool(_APPS_FIELDS & set(header))
            if not _APPS_FIELDS & set(header):
                header = [_GPU_ALIASES.get(f, f) for f in header]
            snap._mark(lineno)
            continue
        values = [v.strip() for v in line.split(",")]
        if header is None and len(values) > 1 and (header := _guess_header(values)):
            snap.warnings.append("CSV without header: columns inferred from the values")
        row = _csv_row(header, values) if header else None
        if row is None:
            continue
        if _APPS_FIELDS & row.keys():
            snap.processes.append(_csv_process(row, lineno))
        else:
            gpu_rows.append((lineno, row))
        snap._mark(lineno)
    if gpu_rows:
        _csv_gpus(snap, gpu_rows)
    elif seen_apps:
        snap.format = "csv-query-apps"
    elif dmon_samples:
        snap.format = "dmon"
        last = {s.gpu: s for s in dmon_samples}
        snap.gpus = [SmiGpu(s.gpu, None, None, s.memory_used_mib, line=s.line) for s in last.values()]
    else:
        return None
    snap.samples += dmon_samples
    return snap


def _csv_gpus(snap: SmiSnapshot, rows: list[tuple[int, dict]]) -> None:
    """GPUs from --query-gpu rows; looped output keeps every row as a sample and the last row per GPU."""
    last: dict = {}
    for key, (lineno, row) in zip(_loop_keys([r for _, r in rows]), rows):
        last[key] = (lineno, row)
    snap.gpus = [_csv_gpu(row, lineno) for lineno, row in last.values()]
    if len(rows) > len(last):
        snap.samples = [_csv_sample(row, lineno) for lineno, row in rows]
    final = rows[-1][1]
    snap.driver_version = _version(final.get("kmd_version") or final.get("driver_version"))
    snap.cuda_version = _version(final.get("cuda_version"))


# ---------------------------------------------------------------------------
# Public API

def parse_smi(lines: list[str], start_line: int = 1) -> SmiSnapshot | None:
    """Parse one nvidia-smi output (any format above). lines have no trailing newline; line numbers in
    the result are start_line-based. None when nothing recognisable."""
    lines = [line.rstrip("\r\n") for line in lines]
    if pat := _learn_prefix(lines):
        lines = [r if (r := _rest(line, pat)) is not None else line for line in lines]
    snap = None
    for parser in (_parse_xml, _parse_table, _parse_q, _parse_columnar):
        if (snap := parser(lines, start_line)) is not None:
            break
    errors = [(k, line[m.start():].strip()) for k, line in enumerate(lines) if (m := _ERROR_RE.search(line))]
    if snap is None:
        if not errors:
            return None
        snap = _new("error")
    if errors:
        snap.error = errors[0][1]
        snap.error_line = start_line + errors[0][0]
        for k, _ in errors:
            snap._mark(start_line + k)
    if snap.format != "q-xml":
        snap.warnings += [line.strip() for line in lines if _WARNING_RE.match(line.strip())]
    return snap


def looks_like_smi(head: str) -> bool:
    """True when this text (the first ~64 KB of an input) is an nvidia-smi output rather than a server log."""
    lines = head.splitlines()
    nonblank = [k for k, line in enumerate(lines) if line.strip()]
    if not nonblank:
        return False
    inside = bytearray(len(lines))
    for start, end in find_smi_blocks(lines):
        inside[start:end] = b"\x01" * (end - start)
    covered = sum(inside[k] for k in nonblank)
    if covered == 0:    # header-less CSV has no anchor line: every line must look like a GPU row
        return all(line.count(",") >= 2 and _guess_header([v.strip() for v in line.split(",")])
                   for line in (lines[k] for k in nonblank[:200]))
    return len(nonblank) - covered <= max(3, len(nonblank) // 10)


# Substrings that can only start an nvidia-smi output; checked before any regex.
_SEEDS = ("NVIDIA-SMI", "NVSMI LOG", "Driver Version", "KMD Version", "Attached GPUs", "<nvidia_smi_log",
          "memory.", "used_gpu_memory", "used_memory", "Processes:", "MIG devices:", "MiB /", "# gpu", "#Date",
          "couldn't communicate", "Failed to initialize NVML", "No devices were found",
          "Unable to determine the device handle")


def find_smi_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) 0-based half-open index ranges of nvidia-smi outputs embedded inside another text."""
    blocks: list[tuple[int, int]] = []
    for i in _seed_lines(lines):
        if blocks and i < blocks[-1][1]:
            continue
        ext = _extent(lines, i)
        if ext is None:
            continue
        start, end = ext
        if blocks and start < blocks[-1][1]:   # grew back into the previous block
            start = blocks.pop()[0]
        blocks.append((start, end))
    return blocks


def _seed_lines(lines: list[str]) -> list[int]:
    """Indexes of lines holding a seed substring (one str.find pass per seed over the whole text)."""
    text = "\n".join(lines)
    starts = list(accumulate((len(line) + 1 for line in lines), initial=0))
    hits = set()
    for seed in _SEEDS:
        pos = text.find(seed)
        while pos >= 0:
            k = bisect_right(starts, pos) - 1
            hits.add(k)
            pos = text.find(seed, starts[k + 1])
    return sorted(hits)


def _extent(lines: list[str], i: int) -> tuple[int, int] | None:
    line = lines[i]
    if "<nvidia_smi_log" in line:
        return _xml_extent(lines, i)
    if _ERROR_RE.search(line):
        return i, i + 1
    if m := _Q_ANCHOR_RE.search(line):
        return _q_extent(lines, i, line[:m.start()])
    if header := _csv_header_at(line):
        return _csv_extent(lines, i, line[:header[0]], header[1])
    if m := _DMON_ANCHOR_RE.search(line):
        return _dmon_extent(lines, i, line[:m.start()])
    if "|" in line:
        return _table_extent(lines, i)
    return None


def _is_blank(line: str, pat: object | None) -> bool:
    rest = _rest(line, pat)
    return not line.strip() or (rest is not None and not rest.strip())


def _grow(lines: list[str], i: int, ok, pat: object | None, blanks: int, back: bool = True) -> tuple[int, int]:
    """Widen [i, i+1) over lines accepted by ok(k), bridging up to `blanks` blank lines."""
    n = len(lines)
    start, end = i, i + 1
    while back and start > 0:
        k = start - 1
        while k >= 0 and start - k <= blanks and _is_blank(lines[k], pat):
            k -= 1
        if k < 0 or not ok(k):
            break
        start = k
    while end < n:
        k = end
        while k < n and k - end < blanks and _is_blank(lines[k], pat):
            k += 1
        if k >= n or not ok(k):
            break
        end = k + 1
    return start, end


def _table_extent(lines: list[str], i: int) -> tuple[int, int] | None:
    n = len(lines)
    border = next((j for j in (i, i - 1, i + 1, i - 2, i + 2, i - 3, i + 3)
                   if 0 <= j < n and _BORDER_RE.search(lines[j])), None)
    if border is None:
        return None
    pat = _shape_re([lines[border][:_BORDER_RE.search(lines[border]).start()]])

    def ok(k: int) -> bool:
        rest = _rest(lines[k], pat)
        if rest is None:
            return False
        s = rest.strip()
        return s[:1] in ("|", "+") or bool(_DATE_RE.search(s) or _WARNING_RE.match(s) or _ERROR_RE.search(s))

    if not ok(i):
        return None
    start, end = _grow(lines, i, ok, pat, blanks=2)
    return (start, end) if start <= border < end else None


def _q_extent(lines: list[str], i: int, prefix: str) -> tuple[int, int]:
    pat = _shape_re([prefix])

    def ok(k: int) -> bool:
        rest = _rest(lines[k], pat)
        if rest is None or not rest.strip():
            return False
        s = rest.strip()
        return bool(_KV_RE.match(rest) or _Q_GPU_RE.fullmatch(s) or "NVSMI LOG" in s or s == "[...]"
                    or (rest[:1].isspace() and _Q_SECTION_RE.fullmatch(s)))

    return _grow(lines, i, ok, pat, blanks=2)


def _csv_extent(lines: list[str], i: int, prefix: str, header: list[str]) -> tuple[int, int]:
    pat = _shape_re([prefix])

    def ok(k: int) -> bool:
        rest = _rest(lines[k], pat)
        return rest is not None and (_csv_row(header, [v.strip() for v in rest.split(",")]) is not None
                                     or _csv_header(rest) is not None)

    return _grow(lines, i, ok, pat, blanks=0, back=False)


def _dmon_extent(lines: list[str], i: int, prefix: str) -> tuple[int, int] | None:
    pat = _shape_re([prefix])

    def ok(k: int) -> bool:
        rest = _rest(lines[k], pat)
        return rest is not None and (rest.lstrip().startswith("#") or bool(_DMON_ROW_RE.fullmatch(rest.strip())))

    start, end = _grow(lines, i, ok, pat, blanks=0, back=False)
    has_row = any(_DMON_ROW_RE.fullmatch((_rest(lines[k], pat) or "").strip()) for k in range(start, end))
    return (start, end) if has_row else None


def _xml_extent(lines: list[str], i: int) -> tuple[int, int]:
    pat = _shape_re([lines[i][:lines[i].index("<nvidia_smi_log")]])
    start = i
    while start > 0 and i - start < 2 and ("<?xml" in lines[start - 1] or "<!DOCTYPE" in lines[start - 1]):
        start -= 1
    end = i
    while end < len(lines) and "</nvidia_smi_log>" not in lines[end]:
        rest = _rest(lines[end], pat)
        if rest is None or not (rest.lstrip().startswith("<") or rest[:1].isspace() or not rest):
            return start, end   # cut short: stop at the first line that is not XML
        end += 1
    return start, min(end + 1, len(lines))
