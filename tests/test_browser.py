"""The HTML report in a real headless Chromium: what a reader sees, and that a hostile log stays text.

Skipped without Chromium, unless DIAG_REQUIRE_BROWSER=1 (CI) makes its absence a failure.
Five browser launches in all: one page that frames every report and measures it, the DOM
of two reports as Chromium built them, and two screenshots.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from diag.analyze import analyze
from diag.redact import redact_report
from diag.render import html

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).parent / "data" / "sglang"
SAMPLE = ROOT / "samples" / "qwen36-27b-mtp-extra-buffer.log"
SMI = ROOT / "samples" / "rtx-pro-6000-smi.txt"
LOGS = ["008-qwen3-32b-fp8-tp2-16gb-weights-oom", "010-nccl-unhandled-system-error-comm-init",
        "045-spec-mtp-no-buffer-radix-rejected-pd-decode", "048-spec-v2-eagle3-topk4-tensor-size-mismatch"]
PAYLOAD = ("<script>document.title='PWNED'</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
           "<b>bold</b></td></tr></table></div><div style=\"position:fixed;inset:0;background:red\">")


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    if os.environ.get("DIAG_REQUIRE_BROWSER") == "1":
        pytest.fail("chromium is required (DIAG_REQUIRE_BROWSER=1): apt-get install chromium fonts-dejavu-core")
    pytest.skip("chromium is not installed")


def chromium(work: Path, *args: str) -> str:
    cmd = [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={work / 'profile'}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def hostile_log(path: Path) -> Path:
    """The founding sample with markup and script in its lines and one line of 100 KB."""
    lines = [l for l in SAMPLE.read_text().splitlines() if not l.startswith("$ ")]
    i = next(k for k, l in enumerate(lines) if "RuntimeError: Not enough memory" in l)
    lines[i] += " " + PAYLOAD
    launch = "$ python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --served-model-name '<script>alert(1)</script>'"
    huge = "[2026-05-14 09:13:02 TP0] " + "A" * 50_000 + "<i>" + "B" * 50_000
    path.write_text("\n".join([lines[0], launch] + lines[1:i + 1] + [huge] + lines[i + 1:]) + "\n")
    return path


def fleet_logs(work: Path) -> list[str]:
    """Two ranks' files (the later one's failure first in time) whose first failure carries the payload."""
    rank0 = ["[2025-06-01 12:10:00 TP0] Init torch distributed begin.",
             "[2025-06-01 12:20:01 TP0] Watchdog timeout (self.watchdog_timeout=300)"]
    rank1 = ["[2025-06-01 12:10:00 TP1] Init torch distributed begin.",
             "[2025-06-01 12:10:05 TP1] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/sglang/srt/model_executor/model_runner.py", line 1, in forward',
             f"RuntimeError: CUDA error: an illegal memory access was encountered {PAYLOAD}"]
    out = []
    for name, lines in (("rank0.log", rank0), ("rank1.log", rank1)):
        (work / name).write_text("\n".join(lines) + "\n")
        out.append(str(work / name))
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    chromium_path()
    work = tmp_path_factory.mktemp("browser")
    reports = {"founding": analyze([str(SAMPLE)], [str(SMI)]),
               "hostile": analyze([str(hostile_log(work / "hostile.log"))])}
    reports.update({name: analyze([str(CORPUS / f"{name}.log")]) for name in LOGS})
    reports["fleet"] = analyze(fleet_logs(work))
    for name, report in reports.items():
        (work / f"{name}.html").write_text(html.render(redact_report(report)), encoding="utf-8")
    return {"work": work, "names": list(reports)}


# Frames every report at 1280 px and reports, per frame, what a reader would see.
PROBE = """<!DOCTYPE html><html><head><title>probe</title></head><body>
%s
<pre id="out"></pre>
<script>
window.onload = function () {
  var out = {};
  document.querySelectorAll('iframe').forEach(function (f) {
    var d = f.contentDocument, rc = d.getElementById('root-cause'), fix = d.getElementById('fix');
    var box = rc ? rc.getBoundingClientRect() : null;
    out[f.dataset.name] = {
      title: d.title, overflow: d.documentElement.scrollWidth - d.documentElement.clientWidth,
      rootCause: box ? {top: box.top, height: box.height, text: rc.innerText.slice(0, 4000)} : null,
      bars: d.querySelectorAll('#memory svg rect.bar').length,
      fix: fix ? fix.innerText : null, pwned: d.body.getAttribute('data-pwned'),
      fleet: d.getElementById('fleet') ? d.getElementById('fleet').innerText : null,
      images: d.querySelectorAll('img').length, scripts: d.querySelectorAll('script').length,
      fixedOverlay: Array.prototype.some.call(d.querySelectorAll('div'), function (e) {
        return getComputedStyle(e).position === 'fixed'; })
    };
  });
  document.getElementById('out').textContent = JSON.stringify(out);
};
</script></body></html>"""


@pytest.fixture(scope="module")
def probe(pages) -> dict:
    work = pages["work"]
    frames = "\n".join(f'<iframe data-name="{n}" src="{n}.html" style="width:1280px;height:2400px"></iframe>'
                       for n in pages["names"])
    (work / "probe.html").write_text(PROBE % frames)
    dom = chromium(work, "--allow-file-access-from-files", "--dump-dom", (work / "probe.html").as_uri())
    return json.loads(re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)[1].replace("&amp;", "&")
                      .replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"'))


def png_rows(path: Path) -> list[bytes]:
    """The (filtered) pixel rows of an 8-bit RGB/RGBA PNG: enough to tell a blank page from a report."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, channels = 8, b"", 0, 4
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if kind == b"IHDR":
            width, _, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8
            channels = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + size
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    return [raw[i:i + stride] for i in range(0, len(raw), stride)]


def test_reports_read_well_in_chromium(probe):
    for name, seen in probe.items():
        assert seen["rootCause"] and seen["rootCause"]["height"] > 50, name
        assert seen["rootCause"]["top"] < 1000, name  # the root cause is near the top, under the banner
        assert seen["overflow"] <= 0, f"{name}: wider than the window"
        assert seen["scripts"] == 0 and seen["images"] == 0, name
    founding = probe["founding"]
    assert founding["bars"] >= 5
    assert "--max-running-requests 9" in founding["fix"]
    assert "RuntimeError: Not enough memory" in founding["rootCause"]["text"]
    assert probe["008-qwen3-32b-fp8-tp2-16gb-weights-oom"]["bars"] >= 2
    assert "export NCCL_" in probe["010-nccl-unhandled-system-error-comm-init"]["fix"]
    assert "--speculative-eagle-topk 1" in probe["048-spec-v2-eagle3-topk4-tensor-size-mismatch"]["fix"]


def test_hostile_log_stays_text(pages, probe):
    seen = probe["hostile"]
    assert seen["title"].startswith("diag: ") and seen["pwned"] is None and not seen["fixedOverlay"]
    assert "<script>document.title='PWNED'</script>" in seen["rootCause"]["text"]  # shown as text
    assert "more characters" in seen["rootCause"]["text"]  # the 100 KB line is cut, not laid out whole
    # the DOM Chromium built from the file itself, without the probe's file access
    dom = chromium(pages["work"], "--dump-dom", (pages["work"] / "hostile.html").as_uri())
    assert "PWNED" not in re.search(r"<title>(.*?)</title>", dom, re.S)[1]
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "<img" not in dom and "<script" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_fleet_section_reads_and_stays_text(probe):
    """The first failing rank and its cascade, with log markup in the first failure shown as text."""
    seen = probe["fleet"]
    assert seen["pwned"] is None and not seen["fixedOverlay"] and seen["overflow"] <= 0
    assert "First failure: TP1 at 2025-06-01 12:10:05" in seen["fleet"]
    assert "<script>document.title='PWNED'</script>" in seen["fleet"] and "its cascade" in seen["fleet"]
    assert seen["title"].startswith("diag: ") and "PWNED" not in seen["title"]
    assert all(seen["fleet"] is None for name, seen in probe.items() if name != "fleet")


def test_founding_report_dom_and_screenshots(pages):
    work = pages["work"]
    dom = chromium(work, "--dump-dom", (work / "founding.html").as_uri())
    assert 'id="root-cause"' in dom and 'id="fix"' in dom and "--max-running-requests 9" in dom
    assert re.search(r'<svg[^>]*>.*?<rect class="bar"', dom, re.S)
    for name in ("founding", "hostile"):
        shot = work / f"{name}.png"
        chromium(work, f"--screenshot={shot}", "--window-size=1280,2400", (work / f"{name}.html").as_uri())
        rows = png_rows(shot)
        assert len(rows) == 2400
        assert len(set(rows)) > 200, f"{name}: the screenshot is (nearly) blank"
