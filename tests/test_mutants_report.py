"""scripts/mutants_report.py: survivors read from mutmut's .meta files, grouped by file and
function, and the ones that change a fix's direction or value flagged."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutants_report.py"
spec = importlib.util.spec_from_file_location("mutants_report", SCRIPT)
R = importlib.util.module_from_spec(spec)
spec.loader.exec_module(R)


def _diff(old: str, new: str) -> str:
    return f"--- a\n+++ b\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def test_classify_direction_value_and_harmless():
    assert "direction" in R.classify(_diff("        return new > old if fix.direction == \"raise\" else new < old",
                                           "        return new >= old if fix.direction == \"raise\" else new < old"))
    assert "direction" in R.classify(_diff("    if mfs > b.mem_fraction_static - MFS_MIN_STEP:",
                                           "    if mfs >= b.mem_fraction_static - MFS_MIN_STEP:"))
    assert R.classify(_diff("    mfs = round(x / MFS_SEARCH_STEP) * MFS_SEARCH_STEP",
                            "    mfs = round(x * MFS_SEARCH_STEP) * MFS_SEARCH_STEP")) == ["value"]
    assert R.classify(_diff('    note = f"{cat.label} spells it"', '    note = f"XX{cat.label} spells itXX"')) == []


def test_report_groups_survivors_and_flags(tmp_path, monkeypatch):
    m = tmp_path / "mutants" / "diag" / "memory"
    m.mkdir(parents=True)
    (m / "options.py.meta").write_text(json.dumps({"exit_code_by_key": {
        "diag.memory.options.x__lower_fraction__mutmut_1": 0,
        "diag.memory.options.x__lower_fraction__mutmut_2": 1,
        "diag.memory.options.x_after__mutmut_1": 0}}), encoding="utf-8")
    diffs = {"diag.memory.options.x__lower_fraction__mutmut_1": _diff("    if mfs > cur:", "    if mfs < cur:"),
             "diag.memory.options.x_after__mutmut_1": _diff('    out = {"fits": nb.fits}', '    out = {"XXfitsXX": nb.fits}')}
    monkeypatch.setattr(R, "diff_of", lambda name, src: diffs[name])
    here = Path.cwd()
    text, flagged, counts = R.report(tmp_path / "mutants")
    assert counts == {"survived": 2, "killed": 1}
    assert flagged == 1
    assert "## diag/memory/options.py :: _lower_fraction (1)" in text
    assert "## diag/memory/options.py :: after (1)" in text
    assert "**[direction]**" in text and "mutmut_2" not in text
    assert R.main(["--mutants", str(tmp_path / "mutants"), "--fail-on-flagged"]) == 1
    assert R.main(["--mutants", str(tmp_path / "nothing")]) == 2
    assert Path.cwd() == here                 # main() changes folder for mutmut's API and comes back
