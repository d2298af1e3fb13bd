"""Settings from defaults, a TOML file and the environment; the `diag serve` command's errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diag.serve.settings import MiB, SettingsError, load, parse_size


def test_defaults():
    s = load(env={})
    assert (s.max_bytes, s.chat_max_bytes, s.queue, s.time_limit, s.dedup_seconds) == (64 * MiB, 2 * MiB, 32, 60.0, 86400.0)
    assert not s.slack_enabled and not s.mattermost_enabled and s.worker_count() >= 1
    assert s.slack_api_url == "https://slack.com/api/" and s.slack_file_hosts == ["files.slack.com"]


def test_file_then_environment(tmp_path):
    cfg = tmp_path / "serve.toml"
    cfg.write_text('''
[slack]
bot_token = "xoxb-from-file"
signing_secret = "file-secret"
api_url = "http://127.0.0.1:9999/api"
[mattermost]
tokens = ["t1", "t2"]
[access]
channels = ["C1"]
[limits]
max_bytes = "16MiB"
workers = 3
time_limit = 20
[defaults]
sglang_version = "0.4.9"
[teams.T1]
sglang_version = "0.5.10"
''')
    s = load(str(cfg), env={"DIAG_MAX_BYTES": "32M", "DIAG_TEAM_VERSIONS": "T2=0.5.2", "SLACK_BOT_TOKEN": "xoxb-env"})
    assert s.slack_bot_token == "xoxb-env" and s.slack_signing_secret == "file-secret" and s.slack_enabled
    assert s.slack_api_url == "http://127.0.0.1:9999/api/"
    assert s.mattermost_tokens == ["t1", "t2"] and s.max_bytes == 32 * MiB and s.worker_count() == 3
    assert s.team_versions == {"T2": "0.5.2"}  # the environment replaces the file's table
    assert s.version_for("T2") == "0.5.2" and s.version_for("T9") == "0.4.9"
    assert s.allows("T1", "C1") and not s.allows("T1", "C2")
    assert load(str(cfg), env={}).team_versions == {"T1": "0.5.10"}
    assert load(str(cfg), env={"DIAG_CONFIG": "/nonexistent"}).workers == 3  # the argument wins over $DIAG_CONFIG


@pytest.mark.parametrize("env, message", [
    ({"DIAG_MAX_BYTES": "lots"}, "$DIAG_MAX_BYTES: not a size"),
    ({"DIAG_WORKERS": "two"}, "$DIAG_WORKERS"),
    ({"DIAG_QUEUE": "0"}, "queue must be positive"),
    ({"DIAG_TIME_LIMIT": "-1"}, "time_limit must be a positive"),
    ({"SLACK_BOT_TOKEN": "xoxb-1"}, "needs both"),
    ({"DIAG_TEAM_VERSIONS": "T1"}, "not TEAM=VERSION"),
    ({"DIAG_ALLOW_UNREDACTED": "maybe"}, "yes/no"),
    ({"DIAG_CONFIG": "/nonexistent/serve.toml"}, "no such config file"),
])
def test_bad_settings_are_one_line(env, message):
    with pytest.raises(SettingsError, match=message.replace("$", r"\$")):
        load(env=env)


def test_bad_toml(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[limits\nmax_bytes = 1")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load(str(cfg), env={})


@pytest.mark.parametrize("text, n", [("64MiB", 64 * MiB), ("1.5G", int(1.5 * 1024 * MiB)), ("512k", 512 * 1024),
                                     ("100", 100), (2048, 2048)])
def test_parse_size(text, n):
    assert parse_size(text) == n


def test_diag_serve_reports_bad_settings_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "diag", "serve", "--config", str(tmp_path / "none.toml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("diag: error: ") and "no such config file" in r.stderr


def test_the_plain_cli_does_not_load_the_service():
    code = ("import sys; from diag.cli import app; heavy = [m for m in ('starlette', 'uvicorn', 'slack_bolt', "
            "'slack_sdk', 'aiohttp', 'prometheus_client', 'pebble', 'httpx', 'diag.serve.app') if m in sys.modules]; "
            "print(heavy)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_deploy_files_agree_with_the_service():
    root = Path(__file__).resolve().parents[2]
    s = load(str(root / "deploy" / "serve.example.toml"), env={})
    assert s.max_bytes == 64 * MiB and s.team_versions == {"T0123ABCD": "0.5.10"} and not s.slack_enabled
    manifest = (root / "deploy" / "slack-app-manifest.yml").read_text()
    assert f"command: {s.slack_command}" in manifest and f"callback_id: {s.slack_shortcut}" in manifest
    assert manifest.count("/slack/events") == 3  # events, the command and interactivity: one path
    for scope in ("app_mentions:read", "chat:write", "commands", "files:read", "files:write", "im:history"):
        assert f"- {scope}" in manifest
    docker = (root / "Dockerfile").read_text()
    assert 'pip install ".[serve]"' in docker and "USER 10001" in docker and '"--host", "0.0.0.0"' in docker


def test_diag_serve_runs_and_stops(tmp_path):
    """The command itself: it listens, answers, and exits cleanly on SIGTERM; a port in use is one line."""
    import os
    import signal
    import socket
    import time

    import httpx
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DIAG_"))} | {"DIAG_WORKERS": "1"}
    r = subprocess.run([sys.executable, "-m", "diag", "serve", "--port", str(port)], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2 and r.stderr == f"diag: error: cannot listen on 127.0.0.1:{port} (Address already in use)\n"
    busy.close()
    proc = subprocess.Popen([sys.executable, "-m", "diag", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        sample = Path(__file__).resolve().parents[2] / "samples" / "qwen36-27b-mtp-extra-buffer.log"
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/analyze?format=markdown", content=sample.read_bytes(), timeout=30)
        assert reply.status_code == 200 and "SGL-OOM-021" in reply.text
        assert httpx.post(f"http://127.0.0.1:{port}/slack/events", content=b"{}", timeout=5).status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status says what stopped it
    assert proc.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in out
    assert "Slack off, Mattermost off" in out and "Traceback" not in out
