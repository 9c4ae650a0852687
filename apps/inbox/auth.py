"""Who is at the inbox. The identity recorded as a decision's ``by`` comes from here, never
from a form field:

- a trusted header (``X-Forwarded-Email`` set by oauth2-proxy and its like), believed only
  from the ``--trusted-proxy`` addresses;
- a users file of hashed tokens (``{"users": {"ana@example.com": "sha256:<hex>"}}``, JSON or
  TOML): the token comes as ``Authorization: Bearer`` or the login cookie;
- (signed links carry their own approver: ``app.py``).

Anything else is nobody: the page answers 401 with how to log in."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

COOKIE = "codemode_inbox"
#: Length limit of an identity (a header or a users-file name).
MAX_IDENTITY = 200


class AuthConfigError(ValueError):
    """A users file or proxy address that cannot be used."""


def hash_token(token: str) -> str:
    """What a users file holds for ``token``: ``sha256:<hex>`` (tokens are long and random)."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def load_users(path: str | Path) -> dict[str, str]:
    """Name -> ``sha256:<hex>`` from a users file (JSON, or TOML by its ``.toml`` suffix)."""
    p = Path(path)
    try:
        text = p.read_text()
        raw = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as err:
        raise AuthConfigError(f"users file {p}: {err}") from None
    users = raw.get("users") if isinstance(raw, dict) else None
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise AuthConfigError(f'users file {p}: expected {{"users": {{"name": "sha256:<hex of the token>"}}}}')
    out = {}
    for name, digest in users.items():
        digest = digest if digest.startswith("sha256:") else f"sha256:{digest}"
        if len(digest) != 71:
            raise AuthConfigError(f"users file {p}: {name}'s entry is not a sha256 hex digest")
        out[str(name)] = digest.lower()
    return out


@dataclass
class InboxAuth:
    trusted_header: str | None = None
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(default_factory=list)
    #: Name -> ``sha256:<hex>`` of their token.
    users: dict[str, str] = field(default_factory=dict)
    #: Signs the forms' CSRF tokens (per process).
    form_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def build(cls, trusted_header: str | None, trusted_proxies: list[str], users_file: str | None) -> InboxAuth:
        try:
            proxies = [ipaddress.ip_network(p, strict=False) for p in trusted_proxies]
        except ValueError as err:
            raise AuthConfigError(f"--trusted-proxy: {err}") from None
        if trusted_header and not proxies:
            raise AuthConfigError("--trusted-header needs --trusted-proxy: the addresses allowed to set it")
        return cls(trusted_header, proxies, load_users(users_file) if users_file else {})

    @property
    def configured(self) -> bool:
        return bool(self.trusted_header or self.users)

    def identify(self, request: web.Request) -> str | None:
        """The authenticated person, or None."""
        if self.trusted_header and self._from_proxy(request.remote):
            value = request.headers.get(self.trusted_header, "").strip()
            if value and len(value) <= MAX_IDENTITY:
                return value
        token = self.token_of(request)
        return self.user_of(token) if token else None

    def user_of(self, token: str) -> str | None:
        digest = hash_token(token)
        for name, expected in self.users.items():
            if hmac.compare_digest(digest, expected):
                return name
        return None

    @staticmethod
    def token_of(request: web.Request) -> str | None:
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip() or None
        return request.cookies.get(COOKIE) or None

    def _from_proxy(self, remote: str | None) -> bool:
        if not remote:
            return False
        try:
            addr = ipaddress.ip_address(remote)
        except ValueError:
            return False
        return any(addr in net for net in self.trusted_proxies)

    def csrf(self, identity: str) -> str:
        return hmac.new(self.form_secret, identity.encode(), hashlib.sha256).hexdigest()[:32]

    def check_csrf(self, identity: str, token: str) -> bool:
        return hmac.compare_digest(self.csrf(identity), token or "")
