"""Who is at the inbox. The identity recorded as a decision's ``by`` comes from here, never
from a form field:

- a trusted header (``X-Forwarded-Email`` set by oauth2-proxy and its like), believed only
  from the ``--trusted-proxy`` addresses (the socket's peer, never ``X-Forwarded-For``), and
  only when the request carries it once;
- a users file of hashed tokens (``{"users": {"ana@example.com": "sha256:<hex>"}}``, JSON or
  TOML): the token comes as ``Authorization: Bearer``, or once, posted to ``/login``, which
  answers with a session cookie (``session``): signed, bound to the person, expiring; never
  the token itself;
- (signed links carry their own approver: ``app.py``; with sign-in configured the signed-in
  person must be that approver).

Anything else is nobody: the page answers 401 with how to log in. An identity that is not a
name the approvals can record (``approvals/keys.py``) is a 400."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from codemode.approvals import keys

log = logging.getLogger(__name__)

COOKIE = "codemode_inbox"
#: Length limit of an identity (a header or a users-file name).
MAX_IDENTITY = 200
#: How long a session cookie lasts.
SESSION_SECONDS = 8 * 3600
#: A proxy range wider than this many addresses is taken, with a warning.
WIDE_RANGE = 2**16


class AuthConfigError(ValueError):
    """A users file or proxy address that cannot be used."""


class BadIdentity(ValueError):
    """The request says who it is in a way that cannot be believed: a repeated identity header,
    or a name the approvals cannot record. The page answers 400."""


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
        try:
            keys.check_name(str(name))
        except keys.ApproverKeyError as err:
            raise AuthConfigError(f"users file {p}: {err}") from None
        out[str(name)] = digest.lower()
    return out


def proxy_networks(addresses: list[str]) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[str]]:
    """The ``--trusted-proxy`` networks, and warnings for wide ones. A range of every address
    (``/0``) is refused: it would believe anyone who sets the header."""
    networks, warnings = [], []
    for address in addresses:
        try:
            net = ipaddress.ip_network(address, strict=False)
        except ValueError as err:
            raise AuthConfigError(f"--trusted-proxy: {err}") from None
        if net.prefixlen == 0:
            raise AuthConfigError(
                f"--trusted-proxy {address}: every address would be believed to be the proxy (anyone could set the "
                "identity header); give the proxy's own address or network"
            )
        if net.num_addresses > WIDE_RANGE:
            warnings.append(
                f"--trusted-proxy {address} trusts {net.num_addresses:,} addresses to set the identity header: "
                "narrow it to the proxy's own address if you can"
            )
        networks.append(net)
    return networks, warnings


@dataclass
class InboxAuth:
    trusted_header: str | None = None
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(default_factory=list)
    #: Name -> ``sha256:<hex>`` of their token.
    users: dict[str, str] = field(default_factory=dict)
    #: Signs the forms' CSRF tokens and the session cookies (per process: a restart signs out).
    form_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    #: What the configuration warns of (a wide proxy range), for the command to say.
    warnings: list[str] = field(default_factory=list)
    session_seconds: int = SESSION_SECONDS

    @classmethod
    def build(cls, trusted_header: str | None, trusted_proxies: list[str], users_file: str | None) -> InboxAuth:
        proxies, warnings = proxy_networks(trusted_proxies)
        if trusted_header and not proxies:
            raise AuthConfigError("--trusted-header needs --trusted-proxy: the addresses allowed to set it")
        for warning in warnings:
            log.warning("%s", warning)
        return cls(trusted_header, proxies, load_users(users_file) if users_file else {}, warnings=warnings)

    @property
    def configured(self) -> bool:
        return bool(self.trusted_header or self.users)

    def identify(self, request: web.Request) -> str | None:
        """The authenticated person, or None. Raises ``BadIdentity`` (a 400)."""
        if self.trusted_header and self._from_proxy(request.remote):
            values = request.headers.getall(self.trusted_header, [])
            if len(values) > 1:
                raise BadIdentity(f"the {self.trusted_header} header comes {len(values)} times: say who you are once")
            value = values[0].strip() if values else ""
            if value:
                return self._checked(value)
        token = self.bearer(request)
        if token:
            return self.user_of(token)
        return self.session_of(request.cookies.get(COOKIE, ""))

    @staticmethod
    def _checked(identity: str) -> str:
        if len(identity) > MAX_IDENTITY:
            raise BadIdentity(f"an identity of over {MAX_IDENTITY} characters")
        try:
            return keys.check_name(identity)
        except keys.ApproverKeyError:
            raise BadIdentity(
                "this identity cannot be recorded as who decided: use letters, digits, '.', '_', '@', '+' or '-'"
            ) from None

    def user_of(self, token: str) -> str | None:
        digest = hash_token(token)
        found = None
        for name, expected in self.users.items():
            if hmac.compare_digest(digest, expected):
                found = name
        return found

    @staticmethod
    def bearer(request: web.Request) -> str | None:
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip() or None
        return None

    # -- sessions -------------------------------------------------------------------------

    def session_for(self, identity: str, now: float | None = None) -> str:
        """A session cookie's value: the person and an expiry, signed (not the token)."""
        expires = int((time.time() if now is None else now) + self.session_seconds)
        body = f"{_b64(identity.encode())}.{expires}"
        return f"{body}.{self._mac('session', body)}"

    def session_of(self, value: str, now: float | None = None) -> str | None:
        """The person a session cookie names, while it is good; else None."""
        try:
            who, expires, mac = value.split(".")
            identity = _unb64(who).decode()
            good = hmac.compare_digest(self._mac("session", f"{who}.{expires}"), mac)
            if not good or int(expires) <= (time.time() if now is None else now):
                return None
        except (ValueError, UnicodeDecodeError):
            return None
        return identity

    def set_session(self, response: web.StreamResponse, request: web.Request, identity: str) -> None:
        response.set_cookie(
            COOKIE,
            self.session_for(identity),
            httponly=True,
            samesite="Strict",
            path="/",
            max_age=self.session_seconds,
            secure=self.behind_https(request),
        )

    def behind_https(self, request: web.Request) -> bool:
        """Whether the person reaches the inbox over HTTPS (this server's TLS, or a trusted
        proxy's ``X-Forwarded-Proto: https``): then the cookie is ``Secure``."""
        if request.secure:
            return True
        proto = request.headers.get("X-Forwarded-Proto", "")
        return self._from_proxy(request.remote) and proto.split(",")[0].strip().lower() == "https"

    def _mac(self, purpose: str, text: str) -> str:
        return hmac.new(self.form_secret, f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()

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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
