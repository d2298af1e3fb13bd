"""Mattermost: outgoing webhook and slash command against the real server on loopback."""
from __future__ import annotations

import httpx

from .conftest import MM_TOKEN, SAMPLE, SMI, leaked, seeded_log


def webhook(service: str, text: str, channel: str = "M1", token: str = MM_TOKEN, post_id: str = "p1",
            files: str = "", as_json: bool = False) -> httpx.Response:
    p = {"token": token, "team_id": "TM", "team_domain": "sre", "channel_id": channel, "channel_name": "incidents",
         "timestamp": "1700000000000", "user_id": "u1", "user_name": "oncall", "post_id": post_id,
         "text": text, "trigger_word": "#diag", "file_ids": files}
    if as_json:
        return httpx.post(f"{service}/mattermost", json=p, timeout=30)
    return httpx.post(f"{service}/mattermost", data=p, timeout=30)


def test_outgoing_webhook_answers_in_the_thread_with_markdown(service):
    r = webhook(service, "#diag\n```\n" + seeded_log() + "```", channel="M1", post_id="post1")
    assert r.status_code == 200
    answer = r.json()
    assert answer["response_type"] == "comment"  # a reply to the triggering post
    assert "**" in answer["text"] and "SGL-OOM-021" in answer["text"] and len(answer["text"]) <= 4000
    assert leaked(answer["text"]) == [] and "[REDACTED:hf-token]" in answer["text"]


def test_slash_command_json_and_files_through_the_api(service, stub):
    stub.files["fileid1"] = SAMPLE.read_bytes()
    stub.files["fileid2"] = SMI.read_bytes()
    p = {"token": MM_TOKEN, "team_id": "TM", "channel_id": "M2", "user_id": "u1", "command": "/diag",
         "text": "our node died", "file_ids": ["fileid1", "fileid2"]}
    r = httpx.post(f"{service}/mattermost", json=p, timeout=30)
    assert r.status_code == 200 and r.json()["response_type"] == "in_channel"
    text = r.json()["text"]
    assert "SGL-OOM-021" in text and "RTX PRO 6000" in text
    assert {c["id"] for c in stub.of("mm.download")} >= {"fileid1", "fileid2"}


def test_wrong_or_missing_token_is_401_and_counted(service):
    assert webhook(service, SAMPLE.read_text(), token="wrong").status_code == 401
    assert webhook(service, SAMPLE.read_text(), token="").status_code == 401
    assert httpx.post(f"{service}/mattermost", content=b"garbage", timeout=10).status_code == 401
    metrics = httpx.get(f"{service}/metrics").text
    line = next(l for l in metrics.splitlines() if l.startswith('diag_rejections_total{reason="token"}'))
    assert float(line.split()[-1]) >= 3


def test_second_paste_links_to_the_first(service):
    first = webhook(service, "#diag " + SAMPLE.read_text(), channel="M3", post_id="abc123")
    assert "SGL-OOM-021" in first.json()["text"]
    again = webhook(service, "#diag " + SAMPLE.read_text().replace("09:13", "22:01"), channel="M3", post_id="def456")
    text = again.json()["text"]
    assert text.startswith("🔁 Same failure as") and "/sre/pl/abc123" in text
    other = webhook(service, "#diag " + SAMPLE.read_text(), channel="M4", post_id="ghi789")
    assert "Same failure" not in other.json()["text"]


def test_empty_post_gets_usage(service):
    r = webhook(service, "#diag", channel="M5")
    assert r.status_code == 200 and "found no log" in r.json()["text"] and r.json()["response_type"] == "ephemeral"
