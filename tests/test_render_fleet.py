"""Several servers, runs and ranks in every view (issue 12): the Markdown, Slack, Block Kit, HTML
and terminal views say which run or server failed and what the others did, and name the first
failing rank with its cascade folded; from the report alone (the JSON renders the same), within
Slack's limits, escaped. Inputs are real corpus logs put together as tests/test_fleet_runs.py does."""
from __future__ import annotations

import datetime
import json
import re

from diag.analyze import analyze
from diag.redact import redact_report
from diag.render import html, markdown, slack, slack_blocks, text
from diag.report import Report

from test_fleet_runs import ARCH, NODE1, PROXY, failed_run, healthy, node0_lines, write

VIEWS = {"markdown": markdown.render, "slack": slack.render, "slack_blocks": slack_blocks.render, "html": html.render,
         "text": text.render}


def every_view(report: Report) -> dict[str, str]:
    out = {name: fn(report) for name, fn in VIEWS.items()}
    back = Report.from_json(json.loads(report.dumps()))
    assert {name: fn(back) for name, fn in VIEWS.items()} == out       # the report alone, not the facts
    back.facts = {}
    assert _fleet_part(markdown.render(back)) == _fleet_part(out["markdown"])
    return out


def _fleet_part(md: str) -> str:
    return "\n\n".join(p for p in md.split("\n\n") if p.startswith(("**Runs**", "**Servers", "**First failure**")))


def blocks(out: str) -> list[dict]:
    payload = json.loads(out)
    assert len(payload["blocks"]) <= 12
    assert all(len(b["text"]["text"]) <= 3000 for b in payload["blocks"] if b["type"] == "section")
    return payload["blocks"]


def test_a_failed_run_then_a_healthy_one(tmp_path):
    log = write(tmp_path, "pod.log", failed_run() + healthy(datetime.datetime(2024, 12, 13, 2, 0)))
    out = every_view(analyze([log]))
    md = _fleet_part(out["markdown"])
    assert md.startswith("**Runs** · 2 server runs (restarts) in the inputs: run 1 failed, run 2 serving; the diagnosis is of run 1")
    assert "- **run 1 ▶** · lines 1–17 · failed · `env.http_proxy` SGL-ENV-012 — line 15: AssertionError" in md
    assert "- run 2 · lines 18–45, re-launched · serving" in md
    assert "*Runs* · 2 server runs" in out["slack"] and "• *run 1 ▶*" in out["slack"]
    fleet = [b for b in blocks(out["slack_blocks"]) if b["type"] == "section" and b["text"]["text"].startswith("*Runs*")]
    assert len(fleet) == 1 and "run 2 · lines 18–45" in fleet[0]["text"]["text"]
    h = out["html"]
    section = h.split('<section id="fleet">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Runs</h2>" in section and "<code>env.http_proxy</code>" in section and "re-launched" in section
    assert h.index('id="root-cause"') < h.index('id="fleet"') < h.index('id="fix"')
    assert "  ▶ run 1 (lines 1–17): failed, env.http_proxy — line 15: AssertionError" in out["text"]
    assert "    run 2 (lines 18–45, re-launched): serving, no failure found" in out["text"]


def test_unrelated_servers_given_together():
    out = every_view(analyze([str(PROXY), str(ARCH)]))
    md = _fleet_part(out["markdown"])
    assert "**Servers** · 2 separate servers in the inputs, 2 failed; the diagnosis is of server 2" in md
    assert f"- server 1 · {PROXY.name} · failed · `env.http_proxy`" in md
    assert f"- **server 2 ▶** · {ARCH.name} · failed · `env.cuda_arch_driver`" in md
    assert "**Runs**" not in md                  # one run each: the server rows say it
    assert "<h2>Servers</h2>" in out["html"]


def test_the_first_failing_rank_and_its_cascade(tmp_path):
    report = analyze([write(tmp_path, "node0.log", node0_lines()), str(NODE1)])
    out = every_view(report)
    md = _fleet_part(out["markdown"])
    assert md.startswith("**First failure** · 17 ranks, 2 failed")
    assert f"- TP8 at 2026-02-25 15:39:25 ({NODE1.name} line 46): torch.AcceleratorError: CUDA error: out of memory" in md
    n = report.ranks["cascade_count"]
    assert f"then {n} later failures on TP6 over 601 s" in md and "its cascade" in md
    assert "**Runs**" not in md and "**Servers**" not in md
    section = out["html"].split('<section id="fleet">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Ranks</h2>" in section and "First failure: TP8 at 2026-02-25 15:39:25" in section
    assert "+600 s" in section and "node0.log:11" in section
    assert "First failure: TP8 at 2026-02-25 15:39:25" in out["text"] and f"then {n} later failures on TP6" in out["text"]


def test_one_server_run_shows_no_fleet_part():
    out = every_view(analyze([str(PROXY)]))
    assert _fleet_part(out["markdown"]) == "" and 'id="fleet"' not in out["html"]


def test_a_crash_loop_fits_slacks_limits(tmp_path):
    """Thirty restarts: the message stays within 4,000 characters, the sections within 3,000; the
    chosen run is always listed and what is left out is said."""
    lines = []
    for _ in range(30):
        lines += failed_run()
    lines += healthy(datetime.datetime(2024, 12, 13, 3, 0))
    report = analyze([write(tmp_path, "crashloop.log", lines)])
    assert len(report.runs) == 31
    out = every_view(report)
    for name in ("markdown", "slack"):
        assert len(out[name]) <= 4000, name
        assert re.search(r"… \d+ more: \d+ failed \(env\.http\\?_proxy\), 1 serving", out[name]) and "run 1 ▶" in out[name]
        assert "31 server runs (restarts) in the inputs" in out[name]
    blocks(out["slack_blocks"])
    assert out["html"].count("re-launched") == 30      # the HTML lists every run
    assert "… 11 more: 10 failed (env.http_proxy), 1 serving" in out["text"]           # the terminal lists 20 of them
    assert out["text"].count("re-launched") == 19


def test_log_text_in_a_run_is_escaped_in_every_view(tmp_path):
    """A run's first error line carries markup: it stays text in Markdown, Slack and the HTML."""
    evil = "RuntimeError: <script>alert(1)</script> *bold* _it_ `tick` <!channel> [x](http://evil)"
    bad = [l.replace("AssertionError: res=<Response [502]>, res.text=''", evil) for l in failed_run()]
    report = analyze([write(tmp_path, "pod.log", healthy(datetime.datetime(2024, 12, 13, 0, 0)) + bad)])
    assert any(r.get("first_error") and "<script>" in r["first_error"]["text"] for r in report.runs)
    out = every_view(redact_report(report))
    md = _fleet_part(out["markdown"])
    assert "\\<script\\>" in md and "\\*bold\\*" in md and "\\[x\\](http://" in md
    sl = out["slack"]
    assert "&lt;script&gt;" in sl and "<!channel>" not in sl and "&lt;!channel&gt;" in sl
    section = out["html"].split('<section id="fleet">', 1)[1].split("</section>", 1)[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script" not in section
    for b in blocks(out["slack_blocks"]):
        if b["type"] == "section":
            assert not re.search(r"<(?!https?://)[!@#]", b["text"]["text"])
