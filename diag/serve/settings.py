"""Settings of `diag serve`: defaults, then an optional TOML config file, then environment
variables (the environment wins). Tokens and secrets can come from either; a config file
that holds them should be readable by the service's user only.

    DIAG_CONFIG=/etc/diag/serve.toml      # or `diag serve --config PATH`

Environment variables (config-file keys in brackets):

    SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET   [slack] bot_token, signing_secret
    DIAG_SLACK_API_URL                      [slack] api_url (default https://slack.com/api/)
    DIAG_SLACK_FILE_HOSTS                   [slack] file_hosts (default files.slack.com)
    DIAG_SLACK_COMMAND, DIAG_SLACK_SHORTCUT [slack] command (/diag), shortcut (diagnose_with_diag)
    DIAG_MATTERMOST_TOKENS                  [mattermost] tokens (comma-separated in the environment)
    DIAG_MATTERMOST_URL, DIAG_MATTERMOST_BOT_TOKEN  [mattermost] url, bot_token (to read attached files)
    DIAG_API_TOKENS                         [http] tokens (bearer tokens for POST /v1/analyze; none: open)
    DIAG_ALLOW_UNREDACTED                   [http] allow_unredacted (lets ?redact=false through)
    DIAG_ALLOWED_TEAMS, DIAG_ALLOWED_CHANNELS  [access] teams, channels (none: all)
    DIAG_SGLANG_VERSION                     [defaults] sglang_version; [teams.<team id>] sglang_version per team
    DIAG_TEAM_VERSIONS                      "T0123=0.5.10,T0456=0.4.9"
    DIAG_MAX_BYTES, DIAG_CHAT_MAX_BYTES     [limits] max_bytes (64MiB), chat_max_bytes (2MiB)
    DIAG_WORKERS, DIAG_QUEUE                [limits] workers (CPU count), queue (32)
    DIAG_TIME_LIMIT                         [limits] time_limit (60 s of analysis per request)
    DIAG_BODY_TIMEOUT, DIAG_IDLE_TIMEOUT    [limits] body_timeout (60 s to send a body), idle_timeout (10 s)
    DIAG_DOWNLOAD_TIMEOUT                   [limits] download_timeout (60 s per file from the chat platform)
    DIAG_MAX_CONNECTIONS                    [limits] max_connections (256)
    DIAG_DEDUP_SECONDS                      [limits] dedup_seconds (86400)
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from typing import Mapping

MiB = 1024 * 1024


class SettingsError(Exception):
    """A setting that cannot be used; the message is one line for the operator."""


@dataclass
class Settings:
    slack_bot_token: str = ""
    slack_signing_secret: str = ""
    slack_api_url: str = "https://slack.com/api/"
    slack_file_hosts: list[str] = field(default_factory=lambda: ["files.slack.com"])
    slack_command: str = "/diag"
    slack_shortcut: str = "diagnose_with_diag"
    mattermost_tokens: list[str] = field(default_factory=list)
    mattermost_url: str = ""
    mattermost_bot_token: str = ""
    api_tokens: list[str] = field(default_factory=list)
    allow_unredacted: bool = False
    allowed_teams: list[str] = field(default_factory=list)
    allowed_channels: list[str] = field(default_factory=list)
    sglang_version: str = ""
    team_versions: dict[str, str] = field(default_factory=dict)
    max_bytes: int = 64 * MiB
    chat_max_bytes: int = 2 * MiB
    workers: int = 0            # 0: the CPUs this process may use
    queue: int = 32
    time_limit: float = 60.0
    body_timeout: float = 60.0
    idle_timeout: float = 10.0
    download_timeout: float = 60.0
    max_connections: int = 256
    dedup_seconds: float = 86400.0

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_signing_secret and self.slack_bot_token)

    @property
    def mattermost_enabled(self) -> bool:
        return bool(self.mattermost_tokens)

    def worker_count(self) -> int:
        if self.workers > 0:
            return self.workers
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)

    def version_for(self, team: str | None) -> str | None:
        return self.team_versions.get(team or "") or self.sglang_version or None

    def allows(self, team: str | None, channel: str | None) -> bool:
        if self.allowed_teams and (team or "") not in self.allowed_teams:
            return False
        return not self.allowed_channels or (channel or "") in self.allowed_channels


# config-file (section, key) and environment variable(s) of each setting
SOURCES: dict[str, tuple[tuple[str, str], tuple[str, ...]]] = {
    "slack_bot_token": (("slack", "bot_token"), ("DIAG_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN")),
    "slack_signing_secret": (("slack", "signing_secret"), ("DIAG_SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET")),
    "slack_api_url": (("slack", "api_url"), ("DIAG_SLACK_API_URL",)),
    "slack_file_hosts": (("slack", "file_hosts"), ("DIAG_SLACK_FILE_HOSTS",)),
    "slack_command": (("slack", "command"), ("DIAG_SLACK_COMMAND",)),
    "slack_shortcut": (("slack", "shortcut"), ("DIAG_SLACK_SHORTCUT",)),
    "mattermost_tokens": (("mattermost", "tokens"), ("DIAG_MATTERMOST_TOKENS",)),
    "mattermost_url": (("mattermost", "url"), ("DIAG_MATTERMOST_URL",)),
    "mattermost_bot_token": (("mattermost", "bot_token"), ("DIAG_MATTERMOST_BOT_TOKEN",)),
    "api_tokens": (("http", "tokens"), ("DIAG_API_TOKENS",)),
    "allow_unredacted": (("http", "allow_unredacted"), ("DIAG_ALLOW_UNREDACTED",)),
    "allowed_teams": (("access", "teams"), ("DIAG_ALLOWED_TEAMS",)),
    "allowed_channels": (("access", "channels"), ("DIAG_ALLOWED_CHANNELS",)),
    "sglang_version": (("defaults", "sglang_version"), ("DIAG_SGLANG_VERSION",)),
    "team_versions": (("", "teams"), ("DIAG_TEAM_VERSIONS",)),
    "max_bytes": (("limits", "max_bytes"), ("DIAG_MAX_BYTES",)),
    "chat_max_bytes": (("limits", "chat_max_bytes"), ("DIAG_CHAT_MAX_BYTES",)),
    "workers": (("limits", "workers"), ("DIAG_WORKERS",)),
    "queue": (("limits", "queue"), ("DIAG_QUEUE",)),
    "time_limit": (("limits", "time_limit"), ("DIAG_TIME_LIMIT",)),
    "body_timeout": (("limits", "body_timeout"), ("DIAG_BODY_TIMEOUT",)),
    "idle_timeout": (("limits", "idle_timeout"), ("DIAG_IDLE_TIMEOUT",)),
    "download_timeout": (("limits", "download_timeout"), ("DIAG_DOWNLOAD_TIMEOUT",)),
    "max_connections": (("limits", "max_connections"), ("DIAG_MAX_CONNECTIONS",)),
    "dedup_seconds": (("limits", "dedup_seconds"), ("DIAG_DEDUP_SECONDS",)),
}
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*$", re.I)
UNITS = {"": 1, "B": 1, "K": 1024, "M": MiB, "G": 1024 * MiB}


def parse_size(value) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = SIZE.match(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (e.g. 64MiB)")
    return int(float(m[1]) * UNITS[(m[2] or "")[:1].upper()])


def _list(value) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a yes/no value: {value!r}")


def _teams(value) -> dict[str, str]:
    if isinstance(value, dict):  # [teams.T0123] sglang_version = "0.5.10"
        out = {}
        for team, table in value.items():
            version = table.get("sglang_version") if isinstance(table, dict) else table
            if not isinstance(version, str):
                raise ValueError(f"[teams.{team}] needs sglang_version = \"X.Y.Z\"")
            out[str(team)] = version
        return out
    out = {}
    for item in _list(value):
        team, sep, version = item.partition("=")
        if not sep or not team.strip() or not version.strip():
            raise ValueError(f"{item!r} is not TEAM=VERSION")
        out[team.strip()] = version.strip()
    return out


def _convert(name: str, value):
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if name in ("max_bytes", "chat_max_bytes"):
        return parse_size(value)
    if name == "team_versions":
        return _teams(value)
    if kind == "list[str]":
        return _list(value)
    if kind == "bool":
        return _bool(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return str(value)


def load(config: str | None = None, env: Mapping[str, str] | None = None, **overrides) -> Settings:
    """Settings from the config file (`config`, else $DIAG_CONFIG), the environment and
    keyword overrides, in rising order of precedence; SettingsError for a bad value."""
    env = os.environ if env is None else env
    path = config or env.get("DIAG_CONFIG") or None
    table: dict = {}
    if path:
        try:
            with open(path, "rb") as f:
                table = tomllib.load(f)
        except FileNotFoundError:
            raise SettingsError(f"{path}: no such config file") from None
        except OSError as exc:
            raise SettingsError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: not valid TOML ({exc})") from None
    values: dict = {}
    for name, ((section, key), names) in SOURCES.items():
        raw, origin = None, None
        part = table if not section else table.get(section, {})
        if isinstance(part, dict) and key in part:
            raw, origin = part[key], f"{path}: [{section}] {key}" if section else f"{path}: [{key}]"
        for var in names:
            if env.get(var, "") != "":
                raw, origin = env[var], f"${var}"
                break
        if name in overrides and overrides[name] is not None:
            raw, origin = overrides[name], name
        if raw is None:
            continue
        try:
            values[name] = _convert(name, raw)
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"{origin}: {exc}") from None
    settings = Settings(**values)
    _check(settings)
    return settings


def _check(s: Settings) -> None:
    for name in ("max_bytes", "chat_max_bytes", "queue", "max_connections"):
        if getattr(s, name) <= 0:
            raise SettingsError(f"{name} must be positive")
    for name in ("time_limit", "body_timeout", "idle_timeout", "download_timeout", "dedup_seconds"):
        if not getattr(s, name) > 0:
            raise SettingsError(f"{name} must be a positive number of seconds")
    if s.workers < 0:
        raise SettingsError("workers must be 0 (one per CPU) or more")
    if bool(s.slack_bot_token) != bool(s.slack_signing_secret):
        raise SettingsError("Slack needs both SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or neither)")
    if not s.slack_api_url.endswith("/"):
        s.slack_api_url += "/"
    if not s.slack_command.startswith("/"):
        raise SettingsError(f"the Slack command must start with '/': {s.slack_command!r}")
    if s.mattermost_bot_token and not s.mattermost_url:
        raise SettingsError("DIAG_MATTERMOST_BOT_TOKEN needs DIAG_MATTERMOST_URL (the server it reads files from)")
