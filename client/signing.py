"""Signed decisions at the doors: the CLI (``--by NAME``, ``--key FILE``), the MCP front and the
pydantic-ai capability (``CODEMODE_APPROVER`` and ``CODEMODE_APPROVER_KEY``), and the inbox
(issue 36: its service key, ``Signer(..., on_behalf_of=person)``).

A worker with an approvers file counts only signed decisions; whether a pending call needs one
shows in the execution's memo (``signed``), so a door without a key says what to set up
instead of sending a decision that would be ignored."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from codemode.approvals import keys
from codemode.approvals.signing import DecisionKind, DecisionSignature, sign_decision
from codemode.client.decision_hints import decide_command
from codemode.workflows.models import PendingApproval

#: The approver a door decides as (a name in the approvers file) and their private key file
#: (default: the one ``codemode keygen --approver NAME`` made).
APPROVER_ENV = "CODEMODE_APPROVER"
APPROVER_KEY_ENV = "CODEMODE_APPROVER_KEY"


@dataclass(frozen=True)
class Signer:
    """Who signs (and, for a service key such as the inbox's, for whom)."""

    name: str
    key: Ed25519PrivateKey
    on_behalf_of: str | None = None

    @classmethod
    def load(cls, name: str, key_file: str | os.PathLike[str] | None = None, on_behalf_of: str | None = None) -> Signer:
        """``name``'s key (``key_file``, else the keygen one); raises ``ApproverKeyError``."""
        return cls(keys.check_name(name), keys.load_for(name, key_file), on_behalf_of)

    @property
    def public(self) -> str:
        return keys.public_text(self.key.public_key())

    def sign(
        self,
        execution_id: str,
        call: PendingApproval,
        decision: DecisionKind,
        *,
        edited_arguments: dict[str, Any] | None = None,
        answer: Any = None,
        answered: bool = False,
    ) -> DecisionSignature:
        """Sign ``decision`` on ``call``. ``edited_arguments``: the person's edits; the
        signature covers the whole arguments the call then runs with (the asked ones by name,
        edited), as the workflow checks it."""
        if edited_arguments is not None:
            edited_arguments = {**(call.arguments or {}), **edited_arguments}
        return sign_decision(
            self.key,
            signer=self.name,
            execution_id=execution_id,
            call_id=call.call_id,
            decision=decision,
            args=call.args,
            kwargs=call.kwargs,
            edited_arguments=edited_arguments,
            answer=answer,
            answered=answered,
            on_behalf_of=self.on_behalf_of,
        )


def signer_from_env() -> Signer | None:
    """The approver this process decides as (``CODEMODE_APPROVER``), None when unset.
    Raises ``ApproverKeyError`` when it is set but its key cannot be read."""
    name = os.environ.get(APPROVER_ENV)
    if not name:
        return None
    return Signer.load(name, os.environ.get(APPROVER_KEY_ENV) or None)


def own_signer(name: str, key_file: str | os.PathLike[str] | None = None) -> Signer | None:
    """``name``'s signer when ``key_file`` is given or ``name`` has a keygen key; else None
    (the CLI then decides unsigned, which a worker without an approvers file takes)."""
    if key_file is None and not Path(keys.key_path(name)).exists():
        return None
    return Signer.load(name, key_file)


async def signing_required(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether a call of the execution waits for a signed decision (its memo says so)."""
    try:
        entries = await (await handle.describe()).memo_value("pending_approvals", None)
    except RPCError:
        return False
    return any(isinstance(e, dict) and e.get("signed") for e in entries or [])


def setup_hint(door: str, execution_id: str = "ID", call_id: str = "CALL") -> str:
    """What to set up so that ``door`` can sign (said instead of deciding unsigned)."""
    return (
        f"this call needs a signed decision (the worker has an approvers file) and {door} has no key: make one "
        f"with `codemode keygen --approver NAME`, list its public key for NAME in the approvers file, and set "
        f"{APPROVER_ENV}=NAME (and {APPROVER_KEY_ENV}=FILE for a key kept elsewhere) for {door}; "
        f"or decide with `{decide_command('approve', execution_id, call_id, signed=True)}`"
    )


async def pending_call(handle: WorkflowHandle[Any, Any], call_id: str) -> PendingApproval | None:
    """The call ``call_id`` as it waits (its arguments are what a signature covers): from the
    status query, else from the history when no worker answers; None when it does not wait."""
    from codemode.client.following import query_status
    from codemode.client.histories.audit import fetch_audit

    status = await query_status(handle)
    if status is not None:
        pending = status.pending_approvals
    else:  # no worker: as the history shows them (the handle's client reads it)
        pending = (await fetch_audit(handle._client, handle.id)).pending_approvals()
    return next((p for p in pending if p.call_id == call_id), None)


class SigningKeyMissing(ValueError):
    """The call needs a signed decision and this door has no key for the person: says what to set up."""


async def door_signer(
    handle: WorkflowHandle[Any, Any], by: str, key_file: str | os.PathLike[str] | None = None, *, door: str
) -> Signer | None:
    """The signer for ``by`` at a door: ``key_file``, ``CODEMODE_APPROVER_KEY`` when
    ``CODEMODE_APPROVER`` names ``by``, or ``by``'s keygen key; None when there is none and the
    execution does not need one. Raises ``SigningKeyMissing`` when it does."""
    if key_file is None and os.environ.get(APPROVER_ENV) == by:
        key_file = os.environ.get(APPROVER_KEY_ENV) or None
    signer = own_signer(by, key_file)
    if signer is None and await signing_required(handle):
        raise SigningKeyMissing(setup_hint(door, handle.id))
    return signer


async def sign_pending(
    handle: WorkflowHandle[Any, Any],
    call_id: str,
    signer: Signer | None,
    decision: DecisionKind,
    *,
    edited_arguments: dict[str, Any] | None = None,
    answer: Any = None,
    answered: bool = False,
) -> DecisionSignature | None:
    """``signer``'s signature of ``decision`` on the waiting call (None without a signer, or
    when the call does not wait: the decision is then refused as not pending). ``edited_arguments``:
    the person's edits (the signature covers the call's arguments with them); ``answer``
    with ``answered``: the value given instead of the tool."""
    if signer is None:
        return None
    call = await pending_call(handle, call_id)
    if call is None:
        return None
    return signer.sign(handle.id, call, decision, edited_arguments=edited_arguments, answer=answer, answered=answered)
