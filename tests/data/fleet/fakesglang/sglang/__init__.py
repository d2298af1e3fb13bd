"""A stand-in for SGLang, for the tests of `diag run` (tests/test_fleet_run.py): not SGLang."""
