"""One report for every view: the JSON carries what the HTML shows, validates against the shipped
schema, reads back into the same report, and no renderer reads anything but the report."""
from __future__ import annotations

import ast
import dataclasses
import datetime
import functools
import importlib
import json
import math
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from diag import memory as M  # noqa: E402
from diag.analyze import analyze, analyze_with_facts  # noqa: E402
from diag.facts import Facts  # noqa: E402
from diag.memory.provenance import ITEM_KEYS  # noqa: E402
from diag.redact import redact_report  # noqa: E402
from diag.report import SOURCES, Evidence, Finding, Fix, InputInfo, Launch, Report  # noqa: E402
from diag.report_build import BUCKETS, CONTEXT_CHARS, MAX_SAMPLES, RADIUS, clip  # noqa: E402
from diag.rules.schema import Rule  # noqa: E402
from diag.taxonomy import CATEGORIES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
SAMPLE = ROOT / "samples" / "qwen36-27b-mtp-extra-buffer.log"
SMI = ROOT / "samples" / "rtx-pro-6000-smi.txt"
LOGS = sorted(p for sub in ("sglang", "extra", "extra2", "blind") for p in (DATA / sub).glob("*.log"))
SMIS = sorted(p for p in (DATA / "smi").iterdir() if p.suffix != ".json")
VIEWS = ("text", "markdown", "slack", "slack_blocks", "html")
from schemacheck import SCHEMA, VALIDATOR, as_json, check  # noqa: E402,F401


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["properties"]["schema"]["const"] == "diag.report/2"


@functools.lru_cache(maxsize=None)
def corpus(path: Path) -> tuple[Report, Facts]:
    """The analysis of one corpus input (shared by the tests here; none of them changes it)."""
    return analyze_with_facts([str(path)])


@pytest.mark.parametrize("path", LOGS + SMIS, ids=lambda p: f"{p.parent.name}/{p.stem[:24]}")
def test_corpus_reports_validate_and_read_back(path):
    report, facts = corpus(path)
    for r in (report, redact_report(report)):
        data = check(r)
        assert Report.from_json(data).to_json() == data
    # never credit nvidia-smi when no snapshot was given
    if not facts.gpus:
        for f in data["findings"]:
            m = f["memory"]
            assert all(s["source"] != "nvidia-smi" for s in (m.get("sources") or {}).values())
            assert all(i["source"] != "nvidia-smi" and "nvidia-smi" not in i["note"] for i in m.get("items") or [])


def test_schema_and_model_agree():
    """Every field the model writes is named in the schema, and the enums are the model's own."""
    defs = SCHEMA["$defs"]
    report = analyze([str(SAMPLE)], [str(SMI)])
    data = check(report)
    assert set(data) == set(SCHEMA["properties"]) == set(SCHEMA["required"])
    assert set(defs["finding"]["properties"]) == set(data["findings"][0])
    assert set(defs["finding"]["properties"]["category"]["enum"]) == set(CATEGORIES)
    assert defs["number_source"]["properties"]["source"]["enum"] == list(SOURCES)
    assert defs["budget_item"]["properties"]["source"]["enum"] == list(SOURCES)
    assert set(defs["budget_item"]["properties"]["name"]["enum"]) == set(ITEM_KEYS)
    # every field of the model classes: to_json writes it, and the schema names it
    full = Finding("SGL-OOM-001", "oom.kv_pool", "error", 0.5, "t", "s",
                   evidence=[Evidence(0, 3, "x", "symptom", [{"line": 2, "text": "y", "cut": 0}])],
                   fix=[Fix(flag="--a", value="1", was="2", why="w", option=1, direction="raise"), Fix(env="E", value="1", option=2),
                        Fix(external_env="N", action="remove", option=3, direction="remove")],
                   fix_safety="safe",
                   options=[{"option": 1, "title": "t", "cost": 1, "arithmetic": "a", "fits": True}],
                   commands=[{"option": 1, "before": ["a"], "after": ["b"], "changes": ["--a 1"]}])
    for obj, name in ((full, "finding"), (full.evidence[0], "evidence"), (InputInfo("p", "unknown", 1, 2, ["n"]), "input"),
                      (Launch(["python"], {"--a": "--a"}, {"E": "1"}, "python", "log", 0, 1), "launch")):
        written = set(obj.to_json())
        assert written <= set(defs[name]["properties"]), f"{name}: {written - set(defs[name]['properties'])} not in the schema"
        fields = {f.name for f in dataclasses.fields(obj)} - {"rank_score", "inside"}   # ranking only, never shown
        assert fields <= written, f"{name}: fields {fields - written} are not written to the JSON"
    assert {k for fx in full.fix for k in fx.to_json()} <= set(defs["fix"]["properties"])
    # every number a memory budget can write has a place and a source in the schema
    dep = M.Deployment.from_flags({"--model-path": "Qwen/Qwen3.6-27B", "--speculative-algorithm": "EAGLE",
                                   "--mamba-scheduler-strategy": "extra_buffer"}, "0.5.10", gpu_total_mib=97887,
                                  gpu_total_source="nvidia-smi")
    j = M.budget(dep, M.Readings(pre_load_free_gib=94.31, weights_gib=51.75, after_load_free_gib=42.56)).to_json()
    memory = defs["memory"]["properties"]
    assert set(j) - {"provenance"} <= set(memory), set(j) - set(memory)
    assert set(j["provenance"]) <= set(memory["sources"]["propertyNames"]["enum"])


def test_the_schema_catches_mistakes():
    data = check(analyze([str(SAMPLE)], [str(SMI)]))

    def invalid(change) -> bool:
        bad = json.loads(json.dumps(data))
        change(bad)
        return not VALIDATOR.is_valid(bad)

    assert invalid(lambda d: d.update(status="broken"))
    assert invalid(lambda d: d.pop("timeline"))
    assert invalid(lambda d: d["findings"][0].update(severity="fatal"))
    assert invalid(lambda d: d["findings"][0].update(category="oom.everything"))
    assert invalid(lambda d: d["findings"][0].update(confidence="high"))
    assert invalid(lambda d: d["findings"][0]["fix"][0].update(env="X"))           # a flag and a variable at once
    assert invalid(lambda d: d["findings"][0]["fix"][0].update(action="delete"))
    assert invalid(lambda d: d["findings"][0]["fix"][0].update(direction="sideways"))
    assert invalid(lambda d: d["findings"][0]["evidence"][0].update(role="cause"))
    assert invalid(lambda d: d["findings"][0]["memory"]["items"][0].update(source="a guess"))
    assert invalid(lambda d: d["findings"][0]["memory"].update(weights_gib="51.75 GiB"))
    assert invalid(lambda d: d["findings"][0].update(surprise=1))                  # a field the schema does not know
    assert invalid(lambda d: d["inputs"][0].update(kind="syslog"))
    assert invalid(lambda d: d["timeline"]["startup"]["marks"][0].update(kind="blip"))


def test_no_nan_or_infinity_and_valid_utf8():
    report = analyze([str(SAMPLE)])
    report.findings[0].memory["weights_gib"] = float("nan")
    report.findings[0].memory["items"][0]["gib"] = float("inf")
    report.findings[0].summary = "broken \udcff byte"
    text = report.dumps()
    assert "NaN" not in text and "Infinity" not in text
    text.encode("utf-8")
    data = json.loads(text)
    assert data["findings"][0]["memory"]["weights_gib"] is None and data["findings"][0]["memory"]["items"][0]["gib"] is None
    assert data["findings"][0]["summary"] == "broken \ufffd byte"


# -- the renderers read the report and nothing else ----------------------------------------

RENDER = ROOT / "diag" / "render"
FORBIDDEN_MODULES = ("facts", "analyze", "report_build", "parse", "events", "rules", "memory", "launch", "clean", "read")


def test_no_renderer_imports_facts_or_reads_extras():
    # (`diag rules show` is a view of a rule: its fields are allowed too)
    report_names = {f.name for cls in (Report, Finding, Evidence, Fix, InputInfo, Launch, Rule) for f in dataclasses.fields(cls)}
    facts_only = {f.name for f in dataclasses.fields(Facts)} - report_names - set(dir(dict)) - set(dir(list)) - set(dir(str))
    for path in sorted(RENDER.glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                continue  # charts.batches is a function of a module, not the facts' batches
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                assert not set(parts) & set(FORBIDDEN_MODULES), f"{path.name} imports {node.module}"
                assert not {a.name for a in node.names} & set(FORBIDDEN_MODULES), f"{path.name} imports {node.names}"
            elif isinstance(node, ast.Import):
                assert not any(set(a.name.split(".")) & set(FORBIDDEN_MODULES) for a in node.names), path.name
            elif isinstance(node, ast.Attribute):
                assert node.attr != "extras", f"{path.name}:{node.lineno} reads .extras"
                assert node.attr not in facts_only, f"{path.name}:{node.lineno} reads the facts' .{node.attr}"
    assert not hasattr(Report("clean"), "extras")


def render_all(report: Report) -> dict[str, str]:
    return {v: importlib.import_module(f"diag.render.{v}").render(report) for v in VIEWS}


CASES = [([SAMPLE], [SMI]), ([DATA / "sglang" / "048-spec-v2-eagle3-topk4-tensor-size-mismatch.log"], []),
         ([DATA / "sglang" / "019-libnvrtc-missing-no-cuda-toolkit.log"], []),
         ([DATA / "sglang" / "036-llama3-8b-large-prefill-batch-oom-max-prefill.log"], []),
         ([DATA / "smi" / "041-csv-query-gpu-loop-rtx3090-wsl-unknown.csv"], [])]


@pytest.mark.parametrize("logs,smi", CASES, ids=lambda x: x[0].stem[:20] if x else "")
def test_every_view_of_the_json_is_the_view_of_the_report(logs, smi):
    report = analyze([str(p) for p in logs], [str(p) for p in smi])
    for r in (report, redact_report(report)):
        back = Report.from_json(json.loads(r.dumps()))
        assert render_all(back) == render_all(r)


def test_every_corpus_view_of_the_json_is_the_same():
    for path in LOGS + SMIS:
        report = redact_report(corpus(path)[0])
        assert render_all(Report.from_json(as_json(report))) == render_all(report), path.name


# -- what the HTML shows is in the JSON ------------------------------------------------------

def test_json_carries_the_patched_command_of_every_option():
    data = check(analyze([str(DATA / "sglang" / "048-spec-v2-eagle3-topk4-tensor-size-mismatch.log")]))
    launch, f = data["launch"], data["findings"][0]
    assert launch["source"] == "log" and launch["line"] >= 1 and "--speculative-eagle-topk" in launch["argv"]
    assert launch["env"]["SGLANG_ENABLE_SPEC_V2"] == "1"
    options = {c["option"]: c for c in f["commands"]}
    assert set(options) == {fx["option"] for fx in f["fix"]}
    for n, c in options.items():
        assert c["before"][0].startswith("SGLANG_ENABLE_SPEC_V2=1 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python")
        for fx in f["fix"]:
            if fx["option"] == n and fx.get("flag") and fx.get("value"):
                assert any(line.strip(" \\") == f"{fx['flag']} {fx['value']}" for line in c["after"]), (n, fx)
    # without a command in the log: the changes alone, CUDA_HOME before the variable that reads it
    f = check(analyze([str(DATA / "sglang" / "019-libnvrtc-missing-no-cuda-toolkit.log")]))["findings"][0]
    assert f["commands"][0]["before"] is None and f["commands"][0]["after"] is None
    assert f["commands"][0]["changes"] == ["export CUDA_HOME=/usr/local/cuda",
                                           'export LD_LIBRARY_PATH="$CUDA_HOME/lib64:$LD_LIBRARY_PATH"']


def test_launch_option_is_the_source_when_given(tmp_path):
    from diag.analyze import Options
    data = check(analyze([str(DATA / "sglang" / "019-libnvrtc-missing-no-cuda-toolkit.log")],
                         options=Options(launch="python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2")))
    assert data["launch"]["source"] == "option" and data["launch"]["line"] is None
    assert data["launch"]["written"]["--tp-size"] == "--tp"


def test_evidence_context_is_the_lines_around_it_bounded():
    report, facts = corpus(SAMPLE)
    for f in report.findings:
        for e in f.evidence:
            assert 1 <= len(e.context) <= 2 * RADIUS + 1
            for c in e.context:
                assert abs(c["line"] - e.line) <= RADIUS
                full = facts.context[(e.input, c["line"])]
                assert full.startswith(c["text"]) and len(c["text"]) + c["cut"] == len(full)
                assert len(c["text"]) <= (2000 if c["line"] == e.line else CONTEXT_CHARS)


def test_a_cut_never_leaves_part_of_a_word():
    secret = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    line = "x" * 380 + " token " + secret + " tail"
    kept, cut = clip(line, CONTEXT_CHARS)
    assert kept == "x" * 380 + " token" and cut == len(line) - len(kept)
    assert clip("y" * 500, CONTEXT_CHARS) == ("y" * 400, 100)  # one word longer than the limit: cut inside it
    assert clip("short", CONTEXT_CHARS) == ("short", 0)


def test_memory_numbers_say_where_they_came_from():
    data = check(analyze([str(SAMPLE)], [str(SMI)]))
    m = data["findings"][0]["memory"]
    numbers = {k for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numbers <= set(m["sources"]), numbers - set(m["sources"])
    assert m["sources"]["total_gib"] == {"source": "nvidia-smi", "at": [{"input": 1, "line": 9}]}
    lines = SAMPLE.read_text().splitlines()
    for key in ("weights_gib", "pre_load_free_gib", "after_load_free_gib"):
        s = m["sources"][key]
        assert s["source"] == "log" and s["at"][0]["input"] == 0
        assert f"{m[key]:.2f}" in lines[s["at"][0]["line"] - 1], key  # the line that printed it
    items = {i["name"]: i for i in m["items"]}
    assert items["total"]["source"] == "nvidia-smi" and items["weights"]["source"] == "log" and items["weights"]["at"]
    assert items["cuda_context"]["source"] == "formula" and items["cuda_context"]["from"] == ["total_gib", "pre_load_free_gib"]
    assert all(i["source"] in SOURCES for i in m["items"])


def serving_log(path: Path, batches: int) -> Path:
    t0 = datetime.datetime(2026, 5, 14, 9, 12, 0)

    def ts(s):
        return (t0 + datetime.timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")

    lines = [f"[{ts(0)}] $ python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct",
             f"[{ts(8)} TP0] Load weight begin. avail mem=78.50 GB",
             f"[{ts(31)} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.40 GB, mem usage=14.99 GB.",
             f"[{ts(32)} TP0] KV Cache is allocated. #tokens: 400000, K size: 24.41 GB, V size: 24.41 GB",
             f"[{ts(60)}] The server is fired up and ready to roll!"]
    for i in range(batches):
        lines.append(f"[{ts(70 + i)} TP0] Decode batch. #running-req: {1 + i % 7}, #token: {i}, token usage: {(i % 100) / 100:.2f}, "
                     f"gen throughput (token/s): {100 + i % 50:.2f}, #queue-req: {i % 3}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_batch_statistics_are_bounded_buckets(tmp_path):
    small = check(analyze([str(serving_log(tmp_path / "small.log", 14))]))["timeline"]["batches"]
    b = small["buckets"]
    assert len(b["x"]) == 14 and b["running"]["max"] == [1 + i % 7 for i in range(14)]  # one line per bucket
    assert small["axis"] == "time" and small["range"] == [0.0, 13.0] and small["first_line"] == 6
    big = check(analyze([str(serving_log(tmp_path / "big.log", 20_000))]))
    t = big["timeline"]["batches"]
    b = t["buckets"]
    assert len(b["x"]) == BUCKETS and sum(b["lines"]) == t["lines"] == 20_000
    assert max(b["running"]["max"]) == 7 and min(b["running"]["min"]) == 1 and max(b["queue"]["max"]) == 2
    assert all(lo <= last <= hi for lo, last, hi in zip(b["usage"]["min"], b["usage"]["last"], b["usage"]["max"]))
    assert all(mn <= mean <= mx for mn, mean, mx in zip(b["throughput"]["min"], b["throughput"]["mean"], b["throughput"]["max"]))
    assert b["usage"]["last"][-1] == pytest.approx(((20_000 - 1) % 100) / 100)
    assert len(json.dumps(big["timeline"])) < 100_000
    startup = big["timeline"]["startup"]
    assert [m["kind"] for m in startup["marks"]] == ["span", "point"]
    assert startup["start"] == "2026-05-14 09:12:00" and startup["marks"][0]["start"] == 8.0


def test_gpu_memory_samples_keep_the_peaks(tmp_path):
    rows = ["timestamp, index, memory.used [MiB], memory.total [MiB]"]
    t0 = datetime.datetime(2026, 5, 14, 9, 0, 0)
    for i in range(3000):
        for g in (0, 1):
            used = 90_000 if (g, i) == (1, 1234) else 1000 + i
            rows.append(f"{(t0 + datetime.timedelta(seconds=i)).strftime('%Y/%m/%d %H:%M:%S.000')}, {g}, {used} MiB, 97887 MiB")
    smi = tmp_path / "loop.csv"
    smi.write_text("\n".join(rows) + "\n")
    g = check(analyze([str(smi)]))["timeline"]["gpu_memory"]
    assert g["count"] == 6000 and len(g["samples"]) <= MAX_SAMPLES and g["axis"] == "time"
    assert max(s["used_mib"] for s in g["samples"] if s["gpu"] == 1) == 90_000
    assert g["range"] == [0.0, 2999.0]
    assert all(not math.isnan(s["at"]) for s in g["samples"])


def test_a_reading_from_a_message_cites_the_line_that_printed_it(tmp_path):
    """The fraction a refusal prints is read once (the catalog's fields, facts) and keeps its line,
    whichever spelling the message uses ('--mem-fraction-static=0.5' as well as 'mem_fraction_static=')."""
    from diag.report_build import reading_lines
    log = tmp_path / "s.log"
    log.write_text("[2026-03-02 09:12:40 TP0] Load weight begin. avail mem=93.80 GB\n"
                   "[2026-03-02 09:13:30 TP0] Load weight end. elapsed=50.10 s, type=Qwen3_5ForConditionalGeneration, "
                   "avail mem=42.10 GB, mem usage=51.70 GB.\n"
                   "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. "
                   "Raise --mem-fraction-static above 0.552 (minimum viable = 1 - available/pre = 0.5512). "
                   "If using speculative decoding, draft weights are now counted.\n")
    report, facts = analyze_with_facts([str(log)])
    assert facts.readings["mem_fraction_static"] == 0.5 and facts.readings["min_viable_fraction"] == 0.5512
    at = reading_lines(facts)
    assert at["mem_fraction_static"] == at["min_viable_fraction"] == at["suggested_fraction"] == (0, 3)
    sources = report.findings[0].memory["sources"]
    assert sources["mem_fraction_static"]["at"] == [{"input": 0, "line": 3}]
