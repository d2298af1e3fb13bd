"""The hand lists as the shipped catalog serves them: every example of every hand entry is found
by Catalog.match_all (the anchor pre-filter included), and the builder reads a hand regex's
anchors from its parse tree, one per alternative."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from diag.messages import Catalog
from diag.messages import template as T

ROOT = Path(__file__).resolve().parent.parent
HAND = ROOT / "diag" / "messages" / "data" / "hand"
sys.path.insert(0, str(ROOT / "scripts"))
import build_catalog as B  # noqa: E402


def examples():
    for path in sorted(HAND.glob("*.toml")):
        for e in tomllib.loads(path.read_text(encoding="utf-8"))["message"]:
            for x in e["examples"]:
                yield e["id"], x


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.open()


def test_every_hand_example_is_found_by_the_shipped_catalog(cat):
    missed, unfindable = [], []
    for eid, line in examples():
        if eid in {m.id for m in cat.match_all(line)}:
            continue
        # the pre-filter finds lines by ASCII-led words; a line of only CJK text (bash's
        # 'Killed' in a zh_CN locale) has none, so only the reference test covers it
        (unfindable if not T.TOKEN.search(line) else missed).append((eid, line))
    assert not missed, missed[:10]
    assert len(unfindable) <= 10, unfindable


def test_regex_anchors_come_from_the_parse_tree():
    # a named group's name is syntax, not text of the line
    keys = T.anchor_keys(B._regex_literals(r"Call to (?P<call>\w+) failed\b")[0])
    assert "call" not in keys and "failed" in keys
    # one pseudo-template per alternative, each with its own words
    alts = B._regex_literals(r"(?:\bcudaErrorIllegalAddress\b|an illegal memory access was encountered\b)")
    assert len(alts) == 2
    assert T.anchor_keys(alts[0]) == {"cudaErrorIllegalAddress"}
    assert "memory access" in T.anchor_keys(alts[1])
    # \s+ separates words; optional parts and classes cut; (?i) gives nothing to anchor on
    # (a word at the regex's open start is left out: the match may begin inside a longer word)
    assert T.anchor_keys(B._regex_literals(r"was\s+reserved\s+\S+\s+PyTorch\b")[0]) == {"reserved", "PyTorch"}
    assert T.anchor_keys(B._regex_literals(r"(?i:exit code) (?P<c>\d+)")[0]) == set()
