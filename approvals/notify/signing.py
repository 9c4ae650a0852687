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


@dataclass(frozen=True)
class LinkClaim:
    execution_id: str
    call_id: str
    action: str  # approve | deny
    approver: str
    expires: int
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_link_token(secret: str, claim: LinkClaim) -> str:
    payload = json.dumps(
        {
            "e": claim.execution_id,
            "c": claim.call_id,
            "a": claim.action,
            "by": claim.approver,
            "exp": claim.expires,
            "n": claim.nonce,
        },
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(secret.encode(), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def read_link_token(secret: str, token: str, *, now: float | None = None) -> LinkClaim:
    """The claim of a good link; ``LinkError`` saying why not otherwise."""
    try:
        head, _, tail = token.partition(".")
        payload, mac = _unb64(head), _unb64(tail)
    except (ValueError, TypeError):
        raise LinkError("this link is not a valid approval link (it may have been cut or altered)") from None
    expected = hmac.new(secret.encode(), payload, hashlib.sha256).digest()
    if not tail or not hmac.compare_digest(expected, mac):
        raise LinkError("this link was altered or was not issued here: it decides nothing")
    try:
        raw = json.loads(payload)
        claim = LinkClaim(str(raw["e"]), str(raw["c"]), str(raw["a"]), str(raw["by"]), int(raw["exp"]), str(raw["n"]))
    except (ValueError, KeyError, TypeError):
        raise LinkError("this link is not a valid approval link") from None
    if claim.action not in ("approve", "deny"):
        raise LinkError("this link is not a valid approval link")
    if (time.time() if now is None else now) >= claim.expires:
        raise LinkError("this link has expired: open the inbox to decide")
    return claim
