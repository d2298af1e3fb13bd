"""`diag serve` never answers with a fifth exit code (issue 10): an internal error in the analysis,
or one the handlers did not expect, is a clean 500 with the report contract's meaning (nothing
concluded: exit code 3, as the CLI says), or a polite chat reply; never the exception's text.

The routes, the app's handlers and `analysis.run` are the real ones; only the worker pool runs
the job in this process, so the pipeline can be broken for the test."""
from __future__ import annotations

import asyncio
import warnings

import pytest

with warnings.catch_warnings():   # starlette's note that its test client will move to httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import diag.analyze
from diag.serve import analysis
from diag.serve.app import create_app
from diag.serve.settings import Settings

from .conftest import SAMPLE

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"


class InProcessPool:
    """The pool's interface, running `analysis.run` here (or raising what `fail` says)."""

    workers, queue, pending, capacity, running = 1, 1, 0, 2, True

    def __init__(self, fail: Exception | None = None):
        self.fail = fail

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def run(self, job):
        if self.fail is not None:
            raise self.fail
        return analysis.run(job)


def client(pool: InProcessPool) -> TestClient:
    app = create_app(Settings(mattermost_tokens=["mm-token"], workers=1, queue=1))
    app.state.service.pool = pool
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture()
def broken(monkeypatch):
    def analyze(*args, **kwargs):
        raise ValueError(f"secret {SECRET} in the message")
    monkeypatch.setattr(diag.analyze, "analyze", analyze)


def test_an_internal_error_in_the_analysis_is_a_clean_500(broken):
    with client(InProcessPool()) as c:
        r = c.post("/v1/analyze", content=SAMPLE.read_bytes())
        assert r.status_code == 500
        assert r.json() == {"error": "internal error (ValueError) while analysing; nothing concluded", "exit_code": 3}
        assert r.headers["x-diag-exit-code"] == "3" and SECRET not in r.text
        assert 'diag_requests_total{channel="http",outcome="error"} 1.0' in c.get("/metrics").text


def test_an_unexpected_error_in_a_handler_is_a_clean_500_too():
    with client(InProcessPool(fail=RuntimeError(f"boom {SECRET}"))) as c:
        r = c.post("/v1/analyze", content=SAMPLE.read_bytes())
        assert r.status_code == 500 and r.headers["content-type"].startswith("application/json")
        assert r.json() == {"error": "internal error (RuntimeError); nothing concluded", "exit_code": 3}
        assert r.headers["x-diag-exit-code"] == "3" and SECRET not in r.text
        assert c.get("/healthz").status_code == 200          # the service goes on


def test_mattermost_gets_a_polite_reply(broken):
    for pool in (InProcessPool(), InProcessPool(fail=RuntimeError(SECRET))):
        with client(pool) as c:
            r = c.post("/mattermost", data={"token": "mm-token", "text": SAMPLE.read_text()[:20000], "channel_id": "C1"})
            assert r.status_code == 200 and r.json()["text"] == analysis.INTERNAL_REPLY and SECRET not in r.text


def test_chat_replies_and_every_answer_keep_the_contracts_codes(broken, tmp_path):
    app = create_app(Settings(workers=1, queue=1))
    svc = app.state.service
    svc.pool = InProcessPool()
    with analysis.Spool(1 << 20) as spool:
        spool.add("a.log", SAMPLE.read_bytes())
        result, outcome, message = asyncio.run(svc.analyse_for_chat(analysis.Job(inputs=list(spool.inputs))))
    assert result is None and outcome == "error" and message == analysis.INTERNAL_REPLY
    assert "nothing was concluded" in message and SECRET not in message
    import inspect
    import re
    from diag.serve import app as app_mod, http_api, mattermost, slack
    for mod in (analysis, app_mod, http_api, mattermost, slack):
        src = inspect.getsource(mod)
        assert not re.search(r'(?<![\w])(?:code|exit_code)=4\b|"exit_code": 4\b', src), mod.__name__
