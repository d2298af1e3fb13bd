"""The real service on loopback (uvicorn in a thread, worker processes and all), a Slack Web
API stub on loopback that the bot's client is pointed at, and helpers to sign requests."""
from __future__ import annotations

import tempfile
import contextlib
import gzip
import hashlib
import hmac
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from diag.serve.app import create_app
from diag.serve.settings import Settings

from .stub import BOT_TOKEN, MM_BOT_TOKEN, SlackStub

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "qwen36-27b-mtp-extra-buffer.log"
SMI = ROOT / "samples" / "rtx-pro-6000-smi.txt"
DATA = ROOT / "tests" / "data"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
MM_TOKEN = "mm-outgoing-token-123"
MiB = 1024 * 1024

SECRETS = {
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "api": "Zq8sLxw4Rt", "fqdn": "gpu-node-7.corp.example.com",
    "ip4": "10.20.30.40", "pw": "hunter2pass", "aws": "AKIAIOSFODNN7EXAMPLE", "gh": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.payload.sig", "pw2": "s3cr3t-Passw0rd", "email": "alice.smith@example.org",
    "user": "/home/alice/",
}


def seeded_log() -> str:
    """The founding sample with secrets in its launch command and around the failure."""
    s = SECRETS
    lines = [l for l in SAMPLE.read_text().splitlines() if not l.startswith("$ ")]
    launch = (f"$ HF_TOKEN={s['hf']} python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --api-key {s['api']} "
              f"--host {s['fqdn']} --dist-init-addr {s['ip4']}:5000 --mamba-scheduler-strategy extra_buffer "
              "--speculative-algorithm EAGLE --mem-fraction-static 0.755")
    extra = [f"[2026-05-14 09:13:02 TP0] upload https://bob:{s['pw']}@mirror.internal.example.net/x failed; mail "
             f"{s['email']}; {s['aws']} {s['gh']}",
             f"[2026-05-14 09:13:02 TP0] Authorization: Bearer {s['bearer']} password={s['pw2']}"]
    i = next(k for k, l in enumerate(lines) if "RuntimeError: Not enough memory" in l)
    return "\n".join([lines[0], launch] + lines[1:i + 1] + extra + lines[i + 1:]) + "\n"


def leaked(text: str) -> list[str]:
    return [k for k, v in SECRETS.items() if v in text]


def heavy_gz(lines: int = 40_000) -> bytes:
    """A small upload (~100 KB) that takes over a second to analyse: error lines, each one an event
    the parser must read (batch lines no longer do: the fast reader takes 200k of them in ~0.3 s)."""
    text = "".join(f"RuntimeError: NCCL error: unhandled system error (#{i})\n" for i in range(lines))
    return gzip.compress(text.encode(), compresslevel=6)


def sign(body: bytes, timestamp: int | None = None, secret: str = SIGNING_SECRET) -> dict:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    sig = "v0=" + hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


@contextlib.contextmanager
def running(app, **config):
    """Serve an ASGI app with uvicorn on a free loopback port, in a thread; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", timeout_keep_alive=5, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 90
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.fixture(scope="session")
def stub():
    s = SlackStub()
    with running(s.app) as base:
        s.base = base
        yield s


def settings_for(stub: SlackStub, **overrides) -> Settings:
    netloc = stub.base.split("://", 1)[1]
    values = dict(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_api_url=f"{stub.base}/api/",
                  slack_file_hosts=[netloc], mattermost_tokens=[MM_TOKEN], mattermost_url=stub.base,
                  mattermost_bot_token=MM_BOT_TOKEN, workers=2, queue=64, max_bytes=8 * MiB, chat_max_bytes=1 * MiB,
                  time_limit=30, body_timeout=1.0, idle_timeout=0.75, download_timeout=10)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def service(stub):
    """The service as an SRE team would run it, with the test's limits (8 MiB, 1 s per body)."""
    app = create_app(settings_for(stub))
    with running(app, limit_concurrency=200) as base:
        yield base


@pytest.fixture(scope="session")
def strict(stub):
    """One worker, one queue place, 0.4 s per analysis, a bearer token on the HTTP API."""
    app = create_app(settings_for(stub, workers=1, queue=1, time_limit=0.4, api_tokens=["api-token-1"]))
    with running(app) as base:
        yield base


@pytest.fixture()
def http(service):
    with httpx.Client(base_url=service, timeout=30) as client:
        yield client


@pytest.fixture()
def clean_stub(stub):
    stub.reset()
    return stub


@pytest.fixture(autouse=True, scope="session")
def _private_tempdir(tmp_path_factory):
    """The service's temporary files in a folder of this test session only (other test runs on the
    same machine create theirs in the system's temporary folder)."""
    old = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tmp"))
    yield
    tempfile.tempdir = old
