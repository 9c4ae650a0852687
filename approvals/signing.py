"""What a decision signs, and signing it: ``sign_decision`` for every door (the CLI, the MCP
front, pydantic-ai, the inbox) and ``verify_signature`` for the workflow and ``--verify``.

A signature covers one canonical JSON document: the execution id and its run (the first run id
of its chain: an execution id used again is another run), the call id, the decision
(``approve``, ``deny`` or ``answer``), the SHA-256 of the arguments approved (the edited ones
when a person edited them, else the call's own ``{"args": [...], "kwargs": {...}}``), the
SHA-256 of the answer when a person answered instead of the tool, the comment or reason (the
code sees a denial's reason), the door it came through, the time, the signer and, for a
service key signing for a person it authenticated, that person. (Version 1 documents, made
before issue 45, covered neither the comment, the door nor the run: they verify, and a run of
generation-45 refuses them.)

A start may be signed too (``sign_start``): who started the run, over the execution id and
the code's SHA-256, so a rule that needs to know who started (four eyes) knows it for sure."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from codemode.approvals import keys

DecisionKind = Literal["approve", "deny", "answer"]
#: The version of the signed document's shape (2: with the run, the comment and the door).
VERSION = 2


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
    #: The shape of the signed document (1: before issue 45, without the fields below).
    v: int = 1
    #: The first run id of the execution's chain (``PendingApproval.run_id``).
    run_id: str | None = None
    #: The comment or the denial's reason, exactly as sent (None: none).
    comment: str | None = None
    #: The door the decision came through (``cli``, ``inbox``, ``link``, ``mcp``, ``signal``...).
    door: str | None = None
    #: A denial that also rolls the run back (issue 47): in the document only when true (in
    #: either version), so every signature made without it keeps its bytes.
    rollback: bool = False

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


def _check_names(signer: str, on_behalf_of: str | None) -> None:
    keys.check_name(signer)
    if on_behalf_of is not None:
        keys.check_name(on_behalf_of)


def signed_document(sig: DecisionSignature) -> bytes:
    """The bytes a signature signs, from its claims (in the shape of its version). One
    canonical document: issue 45's v2 adds the run, the comment and the door; issue 47 adds
    ``"rollback": true`` for "deny and roll back" (absent otherwise, in v1 and v2 alike)."""
    document: dict[str, Any] = {
        "v": 1 if sig.v < 2 else sig.v,
        "execution_id": sig.execution_id,
        "call_id": sig.call_id,
        "decision": sig.decision,
        "arguments_sha256": sig.arguments_sha256,
        "answer_sha256": sig.answer_sha256,
        "signed_at": _utc(sig.signed_at),
        "signer": sig.signer,
        "on_behalf_of": sig.on_behalf_of,
    }
    if sig.v >= 2:
        document.update(run_id=sig.run_id, comment=sig.comment, door=sig.door)
    if sig.rollback:
        document["rollback"] = True
    return canonical_json(document)


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
    run_id: str | None = None,
    comment: str | None = None,
    door: str | None = None,
    rollback: bool = False,
) -> DecisionSignature:
    """Sign one decision on a pending call (its ``args``/``kwargs`` as the call asked them;
    ``edited_arguments`` when the person approves other arguments; ``answer`` with
    ``answered=True`` or ``decision="answer"`` when the person answers instead of the tool;
    ``run_id``, ``comment`` and ``door`` exactly as the decision carries them). The inbox
    signs with its service key and ``on_behalf_of`` the person it authenticated.
    ``rollback``: a denial that rolls the run back ("deny and roll back")."""
    _check_names(signer, on_behalf_of)
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
        v=VERSION,
        run_id=run_id,
        comment=comment,
        door=door,
        rollback=rollback,
    )
    return unsigned.model_copy(update={"signature": keys.sign(private_key, signed_document(unsigned))})


def verify_signature(sig: DecisionSignature) -> bool:
    """Whether the signature holds over its own claims (by the key it names)."""
    return keys.verify(sig.key, sig.signature, signed_document(sig))


class StartSignature(BaseModel):
    """Who started a run, signed: by the person's own key, or by a service (a front that
    authenticated them) ``on_behalf_of`` them. Checked by the approval gate against the
    approvers file; a rule that needs to know who started (four eyes) trusts only this."""

    signer: str
    key: str
    signed_at: datetime
    signature: str
    on_behalf_of: str | None = None
    execution_id: str
    code_sha256: str

    @property
    def starter(self) -> str:
        return self.on_behalf_of or self.signer


def code_sha256(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def start_document(sig: StartSignature) -> bytes:
    return canonical_json(
        {
            "v": 1,
            "kind": "start",
            "execution_id": sig.execution_id,
            "code_sha256": sig.code_sha256,
            "signed_at": _utc(sig.signed_at),
            "signer": sig.signer,
            "on_behalf_of": sig.on_behalf_of,
        }
    )


def sign_start(
    private_key: Ed25519PrivateKey,
    *,
    signer: str,
    execution_id: str,
    code: str,
    on_behalf_of: str | None = None,
    signed_at: datetime | None = None,
) -> StartSignature:
    """Sign that ``on_behalf_of`` (else ``signer``) starts ``execution_id`` with ``code``."""
    _check_names(signer, on_behalf_of)
    unsigned = StartSignature(
        signer=signer,
        key=keys.public_text(private_key.public_key()),
        signed_at=(signed_at or datetime.now(UTC)).astimezone(UTC),
        signature="",
        on_behalf_of=on_behalf_of,
        execution_id=execution_id,
        code_sha256=code_sha256(code),
    )
    return unsigned.model_copy(update={"signature": keys.sign(private_key, start_document(unsigned))})


def verify_start(sig: StartSignature) -> bool:
    return keys.verify(sig.key, sig.signature, start_document(sig))
