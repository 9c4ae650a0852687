"""What a decision signs, and signing it: ``sign_decision`` for every door (the CLI, the MCP
front, pydantic-ai, the inbox) and ``verify_signature`` for the workflow and ``--verify``.

A signature covers one canonical JSON document: the execution id, the call id, the decision
(``approve``, ``deny`` or ``answer``), the SHA-256 of the arguments approved (the edited ones
when a person edited them, else the call's own ``{"args": [...], "kwargs": {...}}``), the
SHA-256 of the answer when a person answered instead of the tool, the time, the signer and,
for a service key signing for a person it authenticated, that person."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from codemode.approvals import keys

DecisionKind = Literal["approve", "deny", "answer"]
#: The version of the signed document's shape.
VERSION = 1


class DecisionSignature(BaseModel):
    """A decision's signature and the claims it signs (so a mismatch says which one)."""

    #: Who holds the key (a person, or a service such as the inbox).
    signer: str
    #: The public key that signed, ``ed25519:BASE64`` (the history keeps it: verifiable later
    #: even after the approvers file dropped it).
    key: str
    signed_at: datetime
    #: Base64 Ed25519 signature of ``signed_document(...)``.
    signature: str
    #: A service key signing for the person it authenticated: that person.
    on_behalf_of: str | None = None
    execution_id: str
    call_id: str
    decision: DecisionKind
    arguments_sha256: str
    answer_sha256: str | None = None

    @property
    def approver(self) -> str:
        """The person who decided (the signer, or whom a service signed for)."""
        return self.on_behalf_of or self.signer


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same bytes for the same value everywhere."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def approved_arguments(args: list[Any], kwargs: dict[str, Any], edited: dict[str, Any] | None = None) -> Any:
    """What the arguments hash covers: the edited arguments, else the call's as asked."""
    return edited if edited is not None else {"args": list(args), "kwargs": dict(kwargs)}


def arguments_sha256(args: list[Any], kwargs: dict[str, Any], edited: dict[str, Any] | None = None) -> str:
    return sha256_of(approved_arguments(args, kwargs, edited))


def answer_sha256(answer: Any) -> str:
    return sha256_of({"answer": answer})


def _utc(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def signed_document(sig: DecisionSignature) -> bytes:
    """The bytes a signature signs, from its claims."""
    return canonical_json(
        {
            "v": VERSION,
            "execution_id": sig.execution_id,
            "call_id": sig.call_id,
            "decision": sig.decision,
            "arguments_sha256": sig.arguments_sha256,
            "answer_sha256": sig.answer_sha256,
            "signed_at": _utc(sig.signed_at),
            "signer": sig.signer,
            "on_behalf_of": sig.on_behalf_of,
        }
    )


def sign_decision(
    private_key: Ed25519PrivateKey,
    *,
    signer: str,
    execution_id: str,
    call_id: str,
    decision: DecisionKind,
    args: list[Any],
    kwargs: dict[str, Any],
    edited_arguments: dict[str, Any] | None = None,
    answer: Any = None,
    answered: bool = False,
    on_behalf_of: str | None = None,
    signed_at: datetime | None = None,
) -> DecisionSignature:
    """Sign one decision on a pending call (its ``args``/``kwargs`` as the call asked them;
    ``edited_arguments`` when the person approves other arguments; ``answer`` with
    ``answered=True`` or ``decision="answer"`` when the person answers instead of the tool).
    The inbox signs with its service key and ``on_behalf_of`` the person it authenticated."""
    keys.check_name(signer)
    if on_behalf_of is not None:
        keys.check_name(on_behalf_of)
    has_answer = answered or decision == "answer"
    unsigned = DecisionSignature(
        signer=signer,
        key=keys.public_text(private_key.public_key()),
        signed_at=(signed_at or datetime.now(UTC)).astimezone(UTC),
        signature="",
        on_behalf_of=on_behalf_of,
        execution_id=execution_id,
        call_id=call_id,
        decision=decision,
        arguments_sha256=arguments_sha256(args, kwargs, edited_arguments),
        answer_sha256=answer_sha256(answer) if has_answer else None,
    )
    return unsigned.model_copy(update={"signature": keys.sign(private_key, signed_document(unsigned))})


def verify_signature(sig: DecisionSignature) -> bool:
    """Whether the signature holds over its own claims (by the key it names)."""
    return keys.verify(sig.key, sig.signature, signed_document(sig))
