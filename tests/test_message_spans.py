"""The catalog-matched message's span on a finding's trigger evidence (issue 10, part 5): the
parser's match (Event.msg) placed on the line, carried in the JSON, kept through redaction
(moved onto the redacted text), and highlighted by the HTML."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from diag.analyze import analyze
from diag.redact import redact_report
from diag.render import html
from diag.report import Evidence, Finding, Report, json_schema

DATA = Path(__file__).parent / "data"

VALIDATOR = jsonschema.Draft202012Validator(json_schema())   # built once: validate() checks the schema on every call


def triggers(report: Report) -> list[Evidence]:
    return [e for e in report.findings[0].evidence if e.role == "trigger"]


def marked(e: Evidence) -> list[str]:
    return [e.text[a:b] for a, b, k in e.spans if k == "message"]


def test_the_matched_message_is_spanned_in_its_line():
    nccl = triggers(analyze([str(DATA / "sglang" / "010-nccl-unhandled-system-error-comm-init.log")]))
    assert marked(nccl[0]) == ["unhandled system error (run with NCCL_DEBUG=INFO for details)"]
    assert nccl[0].text.startswith("RuntimeError: NCCL error: ")          # the exception's type and prefix stay plain
    # a prefixed line: the span starts after the log prefix
    wd = triggers(analyze([str(DATA / "extra2" / "y10-watchdog-all-ranks-busy-300pct-cpu.log")]))
    for e in wd:
        assert marked(e) == ["Watchdog timeout (self.watchdog_timeout=300)"] and e.text.startswith("[2025-")


def test_spans_over_the_corpus_fall_on_the_line_and_validate():
    seen = 0
    for path in sorted((DATA / "sglang").glob("*.log"))[:40]:
        report = analyze([str(path)])
        data = json.loads(report.dumps())
        VALIDATOR.validate(data)
        assert Report.from_json(data).to_json() == data
        for f in report.findings:
            for e in f.evidence:
                for a, b, kind in e.spans:
                    assert kind == "message" and e.role == "trigger" and 0 <= a < b <= len(e.text), path.name
                    assert e.text[a:b].strip() == e.text[a:b] and "\n" not in e.text[a:b]
                    seen += 1
    assert seen >= 25


def _report(text: str, message: str, context: list[dict]) -> Report:
    a = text.index(message)
    ev = Evidence(0, 5, text, "trigger", context, [(a, a + len(message), "message")])
    f = Finding("SGL-X", "runtime.other", "error", 0.5, "t", "s", evidence=[ev])
    return Report("findings", findings=[f])


def test_redaction_keeps_the_span_moved_and_redacts_the_context():
    msg = "CUDA error: an illegal memory access was encountered"
    text = f"[2026-05-14 09:13:02 TP0] worker gpu-node-17.cluster.internal user alice@example.com: RuntimeError: {msg}"
    ctx = [{"line": 4, "text": "token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 on gpu-node-17.cluster.internal", "cut": 0},
           {"line": 5, "text": text, "cut": 0}]
    out = redact_report(_report(text, msg, ctx))
    e = out.findings[0].evidence[0]
    assert "gpu-node-17" not in e.text and "alice" not in e.text
    assert marked(e) == [msg]                                         # moved with the shorter text
    assert all("hf_AbCd" not in c["text"] and "gpu-node-17" not in c["text"] for c in e.context)
    assert "[REDACTED" not in e.text.split("RuntimeError")[1]           # a message span is not a secret
    assert e.context[1]["text"] == e.text                               # the shown line is the evidence's own


def test_the_html_highlights_the_message_as_text():
    msg = "CUDA error: <script>alert(1)</script> was encountered"
    text = f"[2026-05-14 09:13:02 TP0] RuntimeError: {msg}"
    h = html.render(_report(text, msg, [{"line": 5, "text": text, "cut": 0}]))
    assert re.findall(r'<mark class="msg">(.*?)</mark>', h) == ["CUDA error: &lt;script&gt;alert(1)&lt;/script&gt; was encountered"]
    assert "<script>" not in h
    # a span that does not fall on the shown text is left out, never misplaced
    r = _report(text, msg, [{"line": 5, "text": "other text entirely", "cut": 0}])
    assert '<mark class="msg">' not in html.render(r)
