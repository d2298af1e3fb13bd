"""Feeding a text to the SGLang log parser line by line, as the readers do (for parser tests)."""
from __future__ import annotations

from diag.parse.sglang import LogParser


def parse(text: str) -> LogParser:
    p = LogParser(0)
    for n, line in enumerate(text.strip("\n").splitlines(), 1):
        p.feed(n, line)
    p.finish()
    return p
