"""The report JSON against the shipped JSON Schema (diag/schema), for the tests that check reports."""
from __future__ import annotations

import json

import jsonschema

from diag.report import Report, json_schema

SCHEMA = json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)   # built once: validate() checks the schema on every call


def as_json(report: Report) -> dict:
    """What `diag analyze --format json` prints, parsed (the writer refuses NaN and Infinity)."""
    return json.loads(report.dumps())


def check(report: Report) -> dict:
    data = as_json(report)
    errors = sorted(VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5])
    return data
