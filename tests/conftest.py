"""Hypothesis profiles: the suite runs a bounded, seeded number of examples; `make fuzz` many more."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("suite", max_examples=40, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("fuzz", max_examples=3000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


def pytest_addoption(parser):
    parser.addoption("--update-snapshots", action="store_true", default=False, dest="diag_update_snapshots",
                     help="rewrite tests/snapshots/ from what the code renders now (review the diff, then commit)")


def pytest_configure(config):
    os.environ["DIAG_UPDATE_SNAPSHOTS"] = "1" if config.getoption("diag_update_snapshots") else os.environ.get(
        "DIAG_UPDATE_SNAPSHOTS", "")
