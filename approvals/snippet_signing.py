"""What a person signs about a saved snippet (issue 48): its promotion (who vouched for which
content, from which run) and a grant (which of its calls they approve ahead of time).

Both sign a canonical JSON document with the person's Ed25519 approver key (``keys.py``), like a
decision (``signing.py``). A grant is bound to the snippet's version (the hash of its whole
content: code, parameters, the tools it calls and their signatures) and to the SHA-256 of its
parameter schema, never to its name alone: a snippet saved again with other code, other
parameters or against other tool signatures is another version, and no grant of the old one
covers it. A grant lists the tools (canonical ids) whose calls it approves and may expire."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, Field

from codemode.approvals import keys
from codemode.approvals.signing import canonical_json, sha256_of

#: The version of the signed documents' shape.
VERSION = 1


def _utc(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def parameters_sha256(schema: dict[str, Any]) -> str:
    """The hash a grant carries of a snippet's parameter schema."""
    return sha256_of({"parameters": schema})


class PromotionSignature(BaseModel):
    """A person's signature over a snippet's promotion."""

    signer: str
    key: str
    signed_at: datetime
    signature: str
    name: str
    version: str
    source_execution: str


def _promotion_document(sig: PromotionSignature) -> bytes:
    return canonical_json(
        {
            "v": VERSION,
            "kind": "snippet-promotion",
            "name": sig.name,
            "version": sig.version,
            "source_execution": sig.source_execution,
            "signer": sig.signer,
            "signed_at": _utc(sig.signed_at),
        }
    )


def sign_promotion(
    private_key: Ed25519PrivateKey,
    *,
    signer: str,
    name: str,
    version: str,
    source_execution: str,
    signed_at: datetime | None = None,
) -> PromotionSignature:
    keys.check_name(signer)
    unsigned = PromotionSignature(
        signer=signer,
        key=keys.public_text(private_key.public_key()),
        signed_at=(signed_at or datetime.now(UTC)).astimezone(UTC),
        signature="",
        name=name,
        version=version,
        source_execution=source_execution,
    )
    return unsigned.model_copy(update={"signature": keys.sign(private_key, _promotion_document(unsigned))})


def verify_promotion(sig: PromotionSignature) -> bool:
    return keys.verify(sig.key, sig.signature, _promotion_document(sig))


class SnippetGrant(BaseModel):
    """Calls of one snippet version a person approves ahead of time."""

    name: str
    version: str
    parameters_sha256: str
    #: The tools (canonical ids) whose calls, made by the snippet's own code, run unasked.
    tools: list[str] = Field(default_factory=list)
    signer: str
    key: str
    granted_at: datetime
    expires_at: datetime | None = None
    #: Why, for the audit (signed too).
    note: str = ""
    signature: str = ""

    @property
    def grant_id(self) -> str:
        """Short and stable: the hash of what it signs."""
        return sha256_of({"grant": _grant_document(self).decode()})[:16]

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def _grant_document(grant: SnippetGrant) -> bytes:
    return canonical_json(
        {
            "v": VERSION,
            "kind": "snippet-grant",
            "name": grant.name,
            "version": grant.version,
            "parameters_sha256": grant.parameters_sha256,
            "tools": sorted(grant.tools),
            "signer": grant.signer,
            "granted_at": _utc(grant.granted_at),
            "expires_at": _utc(grant.expires_at) if grant.expires_at is not None else None,
            "note": grant.note,
        }
    )


def sign_grant(
    private_key: Ed25519PrivateKey,
    *,
    signer: str,
    name: str,
    version: str,
    parameters_schema: dict[str, Any],
    tools: list[str],
    expires_at: datetime | None = None,
    note: str = "",
    granted_at: datetime | None = None,
) -> SnippetGrant:
    keys.check_name(signer)
    if not tools:
        raise ValueError("a grant names the tools whose calls it approves")
    unsigned = SnippetGrant(
        name=name,
        version=version,
        parameters_sha256=parameters_sha256(parameters_schema),
        tools=sorted(dict.fromkeys(tools)),
        signer=signer,
        key=keys.public_text(private_key.public_key()),
        granted_at=(granted_at or datetime.now(UTC)).astimezone(UTC),
        expires_at=expires_at.astimezone(UTC) if expires_at is not None else None,
        note=note,
    )
    return unsigned.model_copy(update={"signature": keys.sign(private_key, _grant_document(unsigned))})


def verify_grant(grant: SnippetGrant) -> bool:
    """Whether the grant's signature holds over its own claims (by the key it names)."""
    return keys.verify(grant.key, grant.signature, _grant_document(grant))
