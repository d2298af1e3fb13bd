"""The same log, pasted as people paste it, gets the same diagnosis.

A real failure log reaches diag through a chat client, a forum, a web page, a log collector or a
terminal, and each leaves its marks: a code block's indentation, a collector's timestamp, no-break
spaces and typographic quotes from a rendered page, HTML escapes from its source, a blank line
after every line, a Ray actor's tag, a journal's prefix. Each form below is applied to every log of
tests/data/sglang (real logs users pasted in public issues); the top finding's category must stay
what diag answers for the log as posted. The forms were found by applying them to every labelled
log (the harness in the comment at the end): before the cleaner handled them, no-break spaces
changed 202 of 279 answers, HTML escapes 38, typographic quotes 15, indentation 7, double spacing 9,
and later a viewer's line numbers 35 of 205.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from diag.analyze import analyze

DATA = Path(__file__).parent / "data" / "sglang"
LOGS = sorted(DATA.glob("*.log"))


def _lines(t: str) -> list[str]:
    return t.splitlines()


FORMS = {
    "markdown-quote": lambda t: "\n".join("> " + l for l in _lines(t)),
    "indented-code-block": lambda t: "\n".join("    " + l for l in _lines(t)),
    "tab-indented": lambda t: "\n".join("\t" + l for l in _lines(t)),
    "docker-timestamps": lambda t: "\n".join("2026-05-14T10:00:00.123456789Z " + l for l in _lines(t)),
    "kubectl-cri": lambda t: "\n".join("2026-05-14T10:00:00.123456789Z stderr F " + l for l in _lines(t)),
    "journald": lambda t: "\n".join("May 14 10:00:00 gpu-node-3 python3[4242]: " + l for l in _lines(t)),
    "ray-actor-tag": lambda t: "\n".join("(SGLangEngine pid=1234) " + l for l in _lines(t)),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "fenced": lambda t: "```\n" + t + "\n```",
    "ansi-colour": lambda t: "\n".join("\x1b[31m" + l + "\x1b[0m" for l in _lines(t)),
    "no-break-spaces": lambda t: t.replace(" ", "\u00a0"),
    "typographic-quotes": lambda t: t.replace("'", "\u2019"),
    "html-escaped": lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    .replace('"', "&quot;").replace("'", "&#39;"),
    "terminal-padding": lambda t: "\n".join(l + "   " for l in _lines(t)),
    "double-spaced": lambda t: "\n\n".join(_lines(t)),
    "cat-n-line-numbers": lambda t: "\n".join(f"{i + 1:6d}\t{l}" for i, l in enumerate(_lines(t))),
    "viewer-line-numbers": lambda t: "\n".join(f"{i + 101} {l}" for i, l in enumerate(_lines(t))),
}


_TMP = Path(tempfile.mkdtemp(prefix="diag-paste-forms-"))
atexit.register(shutil.rmtree, _TMP, True)


@functools.lru_cache(maxsize=None)
def _category(text: str) -> str | None:
    path = _TMP / "paste.log"
    path.write_text(text, encoding="utf-8")
    report = analyze([str(path)])
    return report.findings[0].category if report.findings else report.status


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_paste_form_keeps_the_diagnosis(form):
    changed = []
    for log in LOGS:
        text = log.read_text(encoding="utf-8", errors="replace")
        if form == "double-spaced" and sum(1 for l in _lines(text) if l.strip()) < 3:
            continue          # two lines with a blank between them are not told from a log's own blank line
        if form.endswith("line-numbers") and len(_lines(text)) < 3:
            continue          # nor two numbered lines from a log's own leading numbers
        want = _category(text)
        got = _category(FORMS[form](text))
        if got != want:
            changed.append(f"{log.name}: {want} -> {got}")
    assert not changed, f"{form} changed {len(changed)} of {len(LOGS)}:\n" + "\n".join(changed)


def test_a_dash_an_editor_made_of_a_flags_hyphens_is_read_as_the_flag():
    from diag.clean import _strip_ansi
    assert _strip_ansi("python -m sglang.launch_server \u2014mem-fraction-static 0.8") == \
        "python -m sglang.launch_server --mem-fraction-static 0.8"
    assert _strip_ansi("releases 0.4.1\u20130.5.14") == "releases 0.4.1\u20130.5.14"     # a range stays


def test_a_flattened_traceback_is_cut_into_its_records(tmp_path):
    """A traceback copied from a rendered page, its newlines turned into spaces."""
    flat = ('Traceback (most recent call last):   File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", '
            'line 2790, in run_scheduler_process     scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank) '
            '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 600, in _create_buffers '
            '    torch.zeros( torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total '
            'capacity of 23.52 GiB of which 13.00 MiB is free.')
    path = tmp_path / "flat.log"
    path.write_text(flat + "\n")
    report = analyze([str(path)])
    assert report.findings[0].category == "oom.kv_pool"
    assert any("line breaks" in n for i in report.inputs for n in i.notes)


def test_a_long_line_quoting_an_exception_is_not_taken_for_a_flattened_paste(tmp_path):
    line = ("[2025-12-09 14:26:50 TP0] Corrupted safetensors file detected: /root/.cache/huggingface/hub/models--org--m/"
            "snapshots/0a1b/model-00007-of-00031.safetensors - SafetensorError: Error while deserializing header: "
            "incomplete metadata, file not fully covered")
    path = tmp_path / "one.log"
    path.write_text("[2025-12-09 14:26:49 TP0] Load weight begin. avail mem=94.10 GB\n" + line + "\n")
    report = analyze([str(path)])
    assert not any("line breaks" in n for i in report.inputs for n in i.notes)
    assert report.findings[0].rule == "SGL-ENV-050"

# The harness that found the forms (run over every labelled set, not in the suite):
#   for each labelled log whose answer is right, apply each form and count the answers that change.


def test_the_users_prompt_line_above_the_log_does_not_replace_the_logs_command(tmp_path):
    """Two launch commands in one paste: the one that says the most about the server is read (the
    user's short prompt line above a log that echoes the full command, or a relaunch)."""
    from diag.analyze import analyze_with_facts
    p = tmp_path / "two-commands.log"
    p.write_text("$ python -m sglang.launch_server --model-path /models/x\n"
                 "python -m sglang.launch_server --model-path /models/x --tp-size 2 --speculative-algorithm EAGLE "
                 "--speculative-num-steps 3 --mem-fraction-static 0.8\n"
                 "ValueError: something failed\n")
    _, facts = analyze_with_facts([str(p)])
    assert facts.flag("--tp-size") == 2 or str(facts.flag("--tp-size")) == "2"
    assert facts.flag("--speculative-algorithm") == "EAGLE" and facts.launch_event.line == 2


@pytest.mark.parametrize("line, category", [
    # an SGLang message whose detail is the exception ('…: RuntimeError: …') stays one message
    ("Capture cuda graph failed: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.02 GiB is free.", "oom.cuda_graph"),
    ("Exception in ModelRunner: ValueError: Loaded weights leave no GPU memory for the KV cache under "
     "--mem-fraction-static=0.88.", "oom.kv_pool"),
    # prose or code before a quoted exception is cut off
    ("sglang is installing the latest vllm, looks like this file was removed from vllm 0.4.0  "
     "`ModuleNotFoundError: No module named 'vllm.model_executor.input_metadata`", "env.import_error"),
])
def test_one_line_quotes(line, category, tmp_path):
    p = tmp_path / "one.log"
    p.write_text(line + "\n")
    assert analyze([str(p)]).findings[0].category == category
