"""A small snapshot helper: text compared with a file under tests/snapshots/, a unified diff
when they differ, rewritten with `pytest --update-snapshots` (or DIAG_UPDATE_SNAPSHOTS=1).

Volatile parts are normalised before the comparison (`normalise`): the temporary directory a
case's log was written to, the tool's version and a report's generation time.
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "snapshots"
TOOL_LINE = re.compile(r"^diag \S+ — ", re.M)                  # the text header: "diag 0.1.0 — path"
STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


def updating() -> bool:
    return os.environ.get("DIAG_UPDATE_SNAPSHOTS", "") not in ("", "0")


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:80].rstrip("-") or "case"


def normalise(text: str, tmp: Path | None = None, version: str | None = None) -> str:
    if tmp is not None:
        text = text.replace(str(tmp), "<tmp>")
    text = TOOL_LINE.sub("diag <version> — ", text)
    if version:
        text = text.replace(f"diag {version}", "diag <version>")
    text = STAMP.sub("<generated_at>", text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


class SnapshotMismatch(AssertionError):
    pass


def compare(name: str, text: str, root: Path = ROOT) -> None:
    """Fail with a unified diff when `text` differs from the stored snapshot `name` (a relative
    path); write it instead when updating. A missing snapshot fails too (run with
    --update-snapshots to create it), so a new case cannot pass unseen."""
    path = root / name
    if updating():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        raise SnapshotMismatch(f"no snapshot {path.relative_to(root.parent)}: run pytest --update-snapshots and review it")
    stored = path.read_text(encoding="utf-8")
    if stored == text:
        return
    diff = difflib.unified_diff(stored.splitlines(), text.splitlines(), fromfile=f"{name} (stored)",
                                tofile=f"{name} (rendered now)", lineterm="", n=2)
    raise SnapshotMismatch(f"the text render of {name} changed (pytest --update-snapshots if intended):\n"
                           + "\n".join(diff))


def snapshot_name(rule, case) -> str:
    """A rule case's snapshot file under ROOT."""
    return f"{rule.id}/{slug(case.name)}.txt"


def render_text(report, tmp: Path) -> str:
    """The text render of a case's report (no colour), its volatile parts normalised."""
    import diag
    from diag.render.text import render
    return normalise(render(report, color=False), tmp=tmp, version=diag.__version__)

