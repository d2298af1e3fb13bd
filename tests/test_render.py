"""The shared views of a report: chat messages within their limits, Block Kit that Slack accepts,
an HTML file that needs no network and no script, and the suggested launch command."""
import datetime
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from diag import commands
from diag.analyze import analyze
from diag.redact import redact_report
from diag.render import html, markdown, slack, slack_blocks
from diag.render.command import before_after, diff
from diag.report import Evidence, Finding, Fix

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
CORPUS = sorted((DATA / "sglang").glob("*.log"))
SAMPLE = ROOT / "samples" / "qwen36-27b-mtp-extra-buffer.log"
SMI = ROOT / "samples" / "rtx-pro-6000-smi.txt"


def markdown_fences_balanced(text: str) -> bool:
    fence = None
    for line in text.splitlines():
        m = re.match(r"^(`{3,})", line)
        if m and fence is None:
            fence = m[1]
        elif m and fence is not None and line.strip() == m[1] and len(m[1]) >= len(fence):
            fence = None
    return fence is None


def slack_fences_balanced(text: str) -> bool:
    return text.count("```") % 2 == 0


def check_chat(report) -> None:
    md, sl, bk = markdown.render(report), slack.render(report), slack_blocks.render(report)
    assert len(md) <= 4000 and markdown_fences_balanced(md)
    assert len(sl) <= 4000 and slack_fences_balanced(sl)
    payload = json.loads(bk)
    blocks = payload["blocks"]
    assert payload["text"] and len(blocks) <= 50
    assert blocks[0]["type"] == "header" and len(blocks[0]["text"]["text"]) <= 150
    for b in blocks:
        assert b["type"] in ("header", "section", "context", "divider")
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000 and slack_fences_balanced(b["text"]["text"])
        if b["type"] == "context":
            assert all(len(e["text"]) <= 3000 for e in b["elements"])


class Strict(HTMLParser):
    """Fails on an end tag that does not close the element open at that point."""
    VOID = {"meta", "link", "br", "img", "hr", "input", "col", "wbr", "source"}
    SVG_VOID = {"rect", "line", "circle", "path", "polyline"}

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


def check_html(text: str) -> Strict:
    assert "<script" not in text.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", text, re.I)
    assert not re.search(r"@import", text)
    parser = Strict()
    parser.feed(text)
    parser.close()
    assert parser.stack == []
    return parser


@pytest.mark.parametrize("log", CORPUS, ids=lambda p: p.stem[:40])
def test_corpus_renders_in_every_view(log):
    report = redact_report(analyze([str(log)]))
    check_chat(report)
    check_html(html.render(report))


def test_founding_sample_chat_message():
    report = redact_report(analyze([str(SAMPLE)], [str(SMI)]))
    md = markdown.render(report)
    lines = md.splitlines()
    assert lines[0].startswith("🔴 **CRITICAL** · `oom.mamba_state` · confidence 0.85")
    assert "leaves no room for the KV cache" in lines[2]
    assert "    18 │ RuntimeError: Not enough memory" in md
    assert "**Memory per GPU** (of 95.6 GiB): " in md and "weights 51.8" in md
    assert "--mamba-scheduler-strategy extra_buffer \\\n" in md and "  --max-running-requests 9 \\\n" in md  # the logged command, changed
    assert "[REDACTED:api-key]" in md and "sk-live" not in md
    assert "Full report: `diag analyze qwen36-27b-mtp-extra-buffer.log --smi rtx-pro-6000-smi.txt --format html`" in md
    sl = slack.render(report)
    assert "*Fix — option 1: cap concurrency at 9 running requests*" in sl and "  --max-running-requests 9 \\\n" in sl


def crowded(report):
    """The root cause with 40 long evidence lines, 20 options and 30 other findings."""
    f = report.findings[0]
    f.evidence = [Evidence(0, 100 + i, f"line {i} ``` <b>*bold*</b> & _it_ " + "x" * 400) for i in range(40)]
    f.options = [{"option": n, "title": f"option number {n} " + "y" * 80} for n in range(1, 21)]
    f.fix = [Fix(flag=f"--flag-{n}", value=str(n), option=n, why="because " * 20) for n in range(1, 21)]
    report.findings += [Finding("SGL-X", "config.other", "warning", 0.5, f"other finding {k} " + "z" * 150, "s")
                        for k in range(30)]
    commands.attach(report)
    return report


def test_long_report_is_shortened_with_a_note():
    report = crowded(analyze([str(SAMPLE)]))
    check_chat(report)
    md, sl = markdown.render(report), slack.render(report)
    assert "more evidence lines omitted" in md and "more findings omitted" in md
    assert "Full report: `diag analyze" in md and "Full report: `diag analyze" in sl
    blocks = json.loads(slack_blocks.render(report))["blocks"]
    assert any("omitted" in b["text"]["text"] for b in blocks if b["type"] == "section")


def test_log_text_cannot_format_or_break_the_message():
    report = crowded(analyze([str(SAMPLE)]))
    report.findings[0].title = "Crash in *worker* <!channel> _x_ & `y`"
    md, sl = markdown.render(report), slack.render(report)
    assert r"\*worker\*" in md and r"\<!channel\>" in md
    assert "<!channel>" not in sl and "&lt;!channel&gt;" in sl and "*worker*" not in sl and "&amp;" in sl
    # inside code blocks only the fence matters: a longer Markdown fence, a broken-up one in Slack
    assert "````text" in md and "``` <b>*bold*</b>" in md
    assert "```" not in sl.split("```", 2)[1].replace("```", "")


def test_chat_paste_input(tmp_path):
    paste = tmp_path / "paste.txt"
    body = SAMPLE.read_text().splitlines()
    paste.write_text("here is the log:\n```\n" + "\n".join("> " + line for line in body) + "\n```\nany idea?\n")
    report = redact_report(analyze([str(paste)]))
    assert report.findings and report.findings[0].category == "oom.mamba_state"
    md = markdown.render(report)
    check_chat(report)
    assert "\n> " not in md and "RuntimeError: Not enough memory" in md


def test_launch_command_before_and_after():
    report = analyze([str(DATA / "sglang" / "048-spec-v2-eagle3-topk4-tensor-size-mismatch.log")])
    before, after = before_after(report)
    assert before[0].startswith("SGLANG_ENABLE_SPEC_V2=1 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python -m sglang.launch_server")
    assert all(line.endswith(" \\") for line in after[:-1]) and not after[-1].endswith("\\")
    changes = [(op, line.strip(" \\")) for op, line in diff(before, after) if op != " "]
    assert ("-", "--speculative-eagle-topk 4") in changes and ("+", "--speculative-eagle-topk 1") in changes
    assert ("+", "--speculative-num-draft-tokens 6") in changes
    assert len(after) == len(before)  # replaced where they were, nothing appended


def test_env_and_external_env_and_removal():
    report = analyze([str(ROOT / "samples" / "qwen36-27b-no-buffer-spec-refused.log")])
    f = report.findings[0]
    f.fix = [Fix(flag="--mamba-scheduler-strategy", value="extra_buffer"), Fix(env="SGLANG_ENABLE_SPEC_V2", value="1"),
             Fix(external_env="NCCL_P2P_DISABLE", value="1"), Fix(flag="--port", action="remove")]
    commands.attach(report)  # the commands are computed when the report is built: again after a change
    before, after = before_after(report)
    assert before[0].startswith("SGLANG_ENABLE_SPEC_V2=1 python")  # the prompt '$' is not part of it
    assert after[0] == "export NCCL_P2P_DISABLE=1"
    assert after[1].startswith("SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server")
    assert "  --mamba-scheduler-strategy extra_buffer \\" in after and not any("--port" in a for a in after)


def test_fragment_without_launch_command():
    report = analyze([str(DATA / "sglang" / "019-libnvrtc-missing-no-cuda-toolkit.log")])
    before, after = before_after(report)
    assert before is None
    # CUDA_HOME is set before the variable that reads it
    assert after == ["export CUDA_HOME=/usr/local/cuda", 'export LD_LIBRARY_PATH="$CUDA_HOME/lib64:$LD_LIBRARY_PATH"']


def serving_log(path: Path, batches: int = 400) -> Path:
    """A server that starts, serves `batches` batch lines with rising token usage, then runs out of memory."""
    t0 = datetime.datetime(2026, 5, 14, 9, 12, 0)

    def ts(s):
        return (t0 + datetime.timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")

    lines = [f"[{ts(0)}] $ python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --mem-fraction-static 0.88",
             f"[{ts(8)} TP0] Load weight begin. avail mem=78.50 GB",
             f"[{ts(31)} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.40 GB, mem usage=14.99 GB.",
             f"[{ts(32)} TP0] KV Cache is allocated. #tokens: 400000, K size: 24.41 GB, V size: 24.41 GB",
             f"[{ts(60)}] The server is fired up and ready to roll!"]
    for i in range(batches):
        usage = min(0.99, 0.05 + i / batches)
        lines.append(f"[{ts(70 + 3 * i)} TP0] Decode batch. #running-req: {10 + i // 10}, #token: {int(usage * 400000)}, "
                     f"token usage: {usage:.2f}, gen throughput (token/s): {900 + 200 * math.sin(i / 30):.2f}, #queue-req: 0")
    end = 70 + 3 * batches
    lines += [f"[{ts(end)} TP0] Scheduler hit an exception: Traceback (most recent call last):",
              '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1700, in forward_decode',
              "    return self.model.forward(",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
              "79.19 GiB of which 1.05 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use.",
              f"[{ts(end + 1)}] Received sigquit from a child process. It usually means the child failed."]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_html_timeline_from_batches_and_smi_loop(tmp_path):
    log = serving_log(tmp_path / "serve.log")
    report = redact_report(analyze([str(log)], [str(DATA / "smi" / "041-csv-query-gpu-loop-rtx3090-wsl-unknown.csv")]))
    page = html.render(report)
    parser = check_html(page)
    assert "Token usage (KV pool)" in page and "Decode throughput" in page and "GPU memory used (nvidia-smi)" in page
    polylines = [a["points"] for t, a in parser.tags if t == "polyline"]
    assert len(polylines) >= 3 and all(len(p.split()) >= 2 for p in polylines)
    assert "averaged into 240 points" in page and "From 400 batch lines of TP0" in page
    assert "serving" in page and "torch.OutOfMemoryError (line" in page


def test_html_sections_of_the_founding_sample():
    page = html.render(redact_report(analyze([str(SAMPLE)], [str(SMI)])))
    parser = check_html(page)
    ids = [a.get("id") for _, a in parser.tags if a.get("id")]
    assert ["root-cause", "memory", "fix", "timeline", "gpus", "unchecked"] == [i for i in ids if "-title" not in i]
    bars = [a for t, a in parser.tags if t == "rect" and a.get("class") == "bar"]
    assert len(bars) >= 5
    assert "GPU total 95.6 GiB" in page and "RuntimeError (line 18)" in page
    assert '<tr class="trigger"><td class="ln">18</td>' in page
    assert "@media print" in page and "secrets removed" in page


def test_html_without_findings():
    report = analyze([str(DATA / "sglang" / "036-llama3-8b-large-prefill-batch-oom-max-prefill.log")])
    report.findings = []
    report.status = "clean"
    page = html.render(report)
    check_html(page)
    assert "No failure found in the input" in page
    check_chat(report)
    assert markdown.render(report).startswith("🟢 **CLEAN**")
