"""Signatures: the webhook header (Stripe's scheme: ``X-Codemode-Signature: t=UNIX,v1=HEX``,
HMAC-SHA256 of ``"{t}.{body}"``) and the approve/deny links' tokens (a payload naming the
call, the action and the approver, with an expiry, HMAC-signed; single use because the
workflow records the decision and accepts one per call)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

SIGNATURE_HEADER = "X-Codemode-Signature"
#: A webhook signature older than this is refused by ``verify_webhook`` (replays).
TOLERANCE_SECONDS = 300


def sign_webhook(secret: str, body: bytes, at: int | None = None) -> str:
    t = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify_webhook(secret: str, body: bytes, header: str, *, now: float | None = None) -> bool:
    """What a receiver does: recompute the MAC over the timestamp and the raw body."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        t = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((time.time() if now is None else now) - t) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


class LinkError(ValueError):
    """A link that decides nothing: altered, expired, or not a link at all."""


#: A links secret shorter than this (in bytes) is refused when the config is read.
MIN_SECRET_BYTES = 32
#: The version of a link token (links made before issue 45 decide nothing now).
LINK_VERSION = "2"


def check_link_secret(secret: str) -> str:
    """Refuse a links secret too short to be one (``ValueError``)."""
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ValueError(
            f"the links secret must be at least {MIN_SECRET_BYTES} bytes (it is {len(secret.encode())}): "
            "make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return secret


def link_key(secret: str) -> bytes:
    """The key that signs links, derived from the secret for this one purpose (HKDF-SHA256)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"codemode approval links v2").derive(
        secret.encode()
    )


@dataclass(frozen=True)
class LinkClaim:
    execution_id: str
    call_id: str
    action: str  # approve | deny
    approver: str
    expires: int
    nonce: str
    #: The first run id of the execution's chain, and the SHA-256 of the call's arguments by
    #: name (``arguments_sha256``): a link decides only the call it was made for.
    run_id: str = ""
    arguments_sha256: str = ""
    #: When it was made (its expiry is never more than the links' ``ttl`` after it).
    issued: int = 0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_link_token(secret: str, claim: LinkClaim) -> str:
    payload = json.dumps(
        {
            "v": LINK_VERSION,
            "e": claim.execution_id,
            "r": claim.run_id,
            "c": claim.call_id,
            "h": claim.arguments_sha256,
            "a": claim.action,
            "by": claim.approver,
            "iat": claim.issued,
            "exp": claim.expires,
            "n": claim.nonce,
        },
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(link_key(secret), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def read_link_token(secret: str, token: str, *, now: float | None = None, ttl: float | None = None) -> LinkClaim:
    """The claim of a good link; ``LinkError`` saying why not otherwise. ``ttl``: the longest a
    link may live (one whose expiry is further from when it was made decides nothing)."""
    try:
        head, _, tail = token.partition(".")
        payload, mac = _unb64(head), _unb64(tail)
    except (ValueError, TypeError):
        raise LinkError("this link is not a valid approval link (it may have been cut or altered)") from None
    expected = hmac.new(link_key(secret), payload, hashlib.sha256).digest()
    if not tail or not hmac.compare_digest(expected, mac):
        raise LinkError("this link was altered or was not issued here: it decides nothing")
    try:
        raw = json.loads(payload)
        if raw.get("v") != LINK_VERSION:
            raise ValueError("version")
        claim = LinkClaim(
            str(raw["e"]),
            str(raw["c"]),
            str(raw["a"]),
            str(raw["by"]),
            int(raw["exp"]),
            str(raw["n"]),
            run_id=str(raw["r"]),
            arguments_sha256=str(raw["h"]),
            issued=int(raw["iat"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LinkError("this link is not a valid approval link") from None
    if claim.action not in ("approve", "deny"):
        raise LinkError("this link is not a valid approval link")
    if (time.time() if now is None else now) >= claim.expires:
        raise LinkError("this link has expired: open the inbox to decide")
    if ttl is not None and claim.expires - claim.issued > ttl + 1:
        raise LinkError("this link lives longer than links may here: it decides nothing")
    return claim
