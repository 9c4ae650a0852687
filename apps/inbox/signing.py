"""The inbox signs decisions with its own service key, on behalf of the person it
authenticated (issue 37): the approvers file lists the inbox (``[people.inbox]``) with its key
and the people it ``signs_for``; each signature then names both, and the record says both.

``codemode inbox --signing-key FILE`` (``codemode dev --inbox-signing-key FILE``; env
``CODEMODE_INBOX_SIGNING_KEY``), signer name ``--signer NAME`` (env ``CODEMODE_INBOX_SIGNER``,
default ``inbox``). Without a key, a call that needs a signed decision is not decided
unsigned: the person is told what to set up."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from temporalio.client import WorkflowHandle

from codemode.client.signing import Signer, pending_call
from codemode.workflows.models import Decision

SIGNING_KEY_ENV = "CODEMODE_INBOX_SIGNING_KEY"
SIGNER_ENV = "CODEMODE_INBOX_SIGNER"
DEFAULT_SIGNER = "inbox"


def inbox_signer(key_file: str | os.PathLike[str] | None, name: str | None = None) -> Signer | None:
    """The inbox's signer from its key file (None without one). Raises ``ApproverKeyError``."""
    if not key_file:
        return None
    return Signer.load(name or os.environ.get(SIGNER_ENV) or DEFAULT_SIGNER, key_file)


class SigningRefused(ValueError):
    """Nothing is sent: the call needs a signed decision and the inbox has no key, or it does
    not wait any more."""


async def sign_for_person(handle: WorkflowHandle[Any, Any], decision: Decision, signer: Signer | None) -> None:
    """Sign ``decision`` (as the inbox, on behalf of ``decision.by``, the authenticated person)
    over the waiting call; raises ``SigningRefused`` when the call needs a signature and there
    is no key, or when the call does not wait any more (nothing is sent then either)."""
    if decision.call_id is None:
        return
    pending = await pending_call(handle, decision.call_id)
    if pending is None:
        raise SigningRefused("the call is not waiting for a decision any more (it was decided, or its time ran out)")
    if signer is None:
        if pending.signed:
            raise SigningRefused(
                "this call needs a signed decision (the workers have an approvers file) and the inbox has no "
                f"signing key: start it with --signing-key FILE (or {SIGNING_KEY_ENV}) and list its public key "
                f"as [people.{DEFAULT_SIGNER}] with signs_for in the approvers file"
            )
        return
    person = dataclasses.replace(signer, on_behalf_of=decision.by)
    answered = decision.answer is not None
    kind = "answer" if answered else "approve" if decision.approve else "deny"
    decision.signature = person.sign(
        handle.id,
        pending,
        kind,
        edited_arguments=decision.arguments,
        answer=decision.answer.value if decision.answer is not None else None,
        answered=answered,
    )
