"""The notify config: ``--notify-config FILE`` or ``CODEMODE_NOTIFY_CONFIG`` (JSON or TOML)::

    {"webhooks": [{"url": "https://hooks.example.com/codemode", "secret": "s3cret", "format": "json"},
                  {"url": "https://hooks.slack.com/services/...", "format": "slack", "approver": "ana@example.com"}],
     "email": {"host": "smtp.example.com", "port": 587, "starttls": true, "username": "...",
               "password": "...", "from": "codemode@example.com", "to": ["ana@example.com"]},
     "inbox_url": "https://approvals.example.com",
     "links": {"secret": "another-secret", "ttl": "24h"},
     "reminders": ["4h", "30m"],
     "retry": {"initial_interval": "1s", "maximum_interval": "60s", "give_up_after": "24h"}}

Durations are seconds or ``90s``, ``10m``, ``4h``, ``2d``. A secret may be given as
``{"env": "NAME"}`` to read it from the environment. Read on the worker: a worker decides
which channels exist, the workflow only says what happened."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_VAR = "CODEMODE_NOTIFY_CONFIG"
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class NotifyConfigError(ValueError):
    """A notify config that cannot be used: which file, which key, why."""


def seconds(value: Any) -> float:
    """``90``, ``"90s"``, ``"10m"``, ``"4h"``, ``"2d"`` -> seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = _DURATION.fullmatch(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration (use seconds, or 90s, 10m, 4h, 2d)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _secret(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"env"}:
        got = os.environ.get(str(value["env"]))
        if not got:
            raise ValueError(f"the environment variable {value['env']} is not set")
        return got
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Webhook(_Strict):
    """A webhook channel: a JSON POST per event (or Slack's incoming-webhook shape)."""

    url: str
    secret: str | None = None
    """Signs each request (``X-Codemode-Signature``); without it requests go unsigned."""
    format: Literal["json", "slack"] = "json"
    approver: str | None = None
    """Who the approve/deny links in this channel's messages name (without: only the inbox link)."""

    @field_validator("secret", mode="before")
    @classmethod
    def _from_env(cls, v: Any) -> Any:
        return _secret(v)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url


class Email(_Strict):
    """The email channel: one message per recipient and event, over SMTP (``from`` is the
    sender's address)."""

    host: str
    port: int = 25
    starttls: bool = False
    """Upgrade the connection with STARTTLS (port 587), or speak TLS from the start (``ssl``, port
    465). Either way the server's certificate is verified, against ``ca_file`` when set (a relay
    with a certificate of your own CA), else the system's CAs."""
    ssl: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = None
    sender: str = Field(alias="from")
    to: list[str]
    """Each recipient gets a message of their own, whose links name them."""

    @field_validator("password", mode="before")
    @classmethod
    def _from_env(cls, v: Any) -> Any:
        return _secret(v)

    @model_validator(mode="after")
    def _no_login_in_clear(self) -> Email:
        if self.username and not (self.starttls or self.ssl):
            raise ValueError("email: a username needs starttls or ssl (the password would go in clear)")
        if self.ca_file and not (self.starttls or self.ssl):
            raise ValueError("email: ca_file needs starttls or ssl")
        return self


class Links(_Strict):
    """Signed approve/deny links in messages, which the inbox honours."""

    secret: str
    """Signs approve/deny links (HMAC-SHA256); the inbox checks them with the same secret."""
    ttl: float = 24 * 3600
    """How long a link stays good (and never past the call's deadline)."""

    @field_validator("secret", mode="before")
    @classmethod
    def _from_env(cls, v: Any) -> Any:
        return _secret(v)

    @field_validator("ttl", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return seconds(v)


class Retry(_Strict):
    """How a channel that is down is retried (durations as ``"1s"``, ``"5m"``, ``"2d"`` or seconds)."""

    initial_interval: float = 1.0
    maximum_interval: float = 60.0
    give_up_after: float = 24 * 3600
    """A channel still failing after this long is given up (the event is logged as lost)."""

    @field_validator("initial_interval", "maximum_interval", "give_up_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return seconds(v)


class NotifyConfig(_Strict):
    """Who is told when a call waits for approval: the worker's ``--notify-config`` file
    (JSON, or TOML by its suffix) or ``CODEMODE_NOTIFY_CONFIG``. A secret may be given as
    ``{"env": "NAME"}``."""

    webhooks: list[Webhook] = Field(default_factory=list)
    email: Email | None = None
    inbox_url: str | None = None
    links: Links | None = None
    reminders: list[float] = Field(default_factory=list)
    """Reminders go out this long before the call's deadline (while it still waits)."""
    retry: Retry = Field(default_factory=Retry)

    @field_validator("reminders", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> list[float]:
        return sorted((seconds(x) for x in v or []), reverse=True)

    @field_validator("inbox_url")
    @classmethod
    def _base(cls, url: str | None) -> str | None:
        return url.rstrip("/") if url else url

    def channels(self) -> list[str]:
        """The channel names a delivery activity takes: ``webhook:0``, ``email``."""
        names = [f"webhook:{i}" for i in range(len(self.webhooks))]
        return [*names, "email"] if self.email is not None else names


def load_notify_config(path: str | Path | None = None) -> NotifyConfig | None:
    """The config at ``path`` (or ``$CODEMODE_NOTIFY_CONFIG``); None when neither is set."""
    path = path or os.environ.get(ENV_VAR)
    if not path:
        return None
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise NotifyConfigError(f"notify config {p}: cannot read it: {err.strerror or err}") from None
    try:
        raw = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except ValueError as err:
        kind = "TOML" if p.suffix == ".toml" else "JSON"
        raise NotifyConfigError(f"notify config {p}: not valid {kind}: {err}") from None
    try:
        return NotifyConfig.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in err.errors())
        raise NotifyConfigError(f"notify config {p}: {problems}") from None
