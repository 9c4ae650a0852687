"""Approvals through the client: the person in front of the MCP client is asked (form
elicitation: what the call is, with its arguments; approve or deny, and a comment), and the
answer is applied through the workflow's ``decide`` Update as ``mcp:<client or subject>``.

Both protocol eras the SDK speaks:

- up to 2025-11-25, the server sends ``elicitation/create`` in the middle of the call and
  waits for the answer here, at most ``--approval-wait``;
- from 2026-07-28, the call answers ``InputRequiredResult`` (the questions, and a state the
  SDK seals) and the client retries it with the person's answers: nothing waits here.

A decline, a cancel, an error or no answer in time leaves the call parked: the run waits
durably for ``codemode approve``/``deny`` or the web UI. Nothing here lets a model decide:
the only path to ``decide`` is a person's answer to a form the client shows.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.elicitation import AcceptedElicitation, render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field
from temporalio.client import WorkflowHandle

from codemode.client.decision_hints import decide_command
from codemode.client.following import DecisionRefused, send_decision
from codemode.client.signing import Signer, setup_hint, sign_pending, signer_from_env, signing_required
from codemode.workflows.models import Answer as ModelAnswer
from codemode.workflows.models import Decision, PendingApproval

log = logging.getLogger(__name__)

#: First protocol revision whose ``tools/call`` carries elicitation in an ``InputRequiredResult``.
INPUT_REQUIRED_VERSION = "2026-07-28"
#: Arguments shown in a question, at most (the full call is in the audit).
ARGS_SHOWN_MAX = 2_000
_STATE_VERSION = 1


class ApprovalForm(BaseModel):
    """What the person answers."""

    decision: Literal["approve", "deny", "answer"] = Field(
        title="Decision", description="Run this call, refuse it, or answer it yourself (the tool does not run)."
    )
    comment: str = Field(default="", title="Comment", description="Optional; recorded in the audit.")
    arguments: str = Field(
        default="",
        title="Edited arguments",
        description='Optional, with approve: a JSON object of the arguments to change, e.g. {"amount": 100}.',
    )
    result: str = Field(default="", title="Your answer", description="With answer: the call's result, as JSON.")


@dataclass(frozen=True)
class Answer:
    approve: bool
    comment: str | None
    #: Edited arguments approved instead of the asked ones.
    arguments: dict[str, Any] | None = None
    #: The person's answer instead of the tool (``codemode.workflows.models.Answer``).
    answer: ModelAnswer | None = None


def _from_form(form: ApprovalForm) -> Answer | None:
    """The decision a filled form says, or None when its JSON cannot be read (left parked)."""
    comment = form.comment or None
    try:
        if form.decision == "answer":
            return Answer(approve=True, comment=comment, answer=ModelAnswer(value=json.loads(form.result or "null")))
        edits = json.loads(form.arguments) if form.decision == "approve" and form.arguments.strip() else None
    except ValueError:
        return None
    if edits is not None and not isinstance(edits, dict):
        return None
    return Answer(approve=form.decision == "approve", comment=comment, arguments=edits)


def can_elicit(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}`` counts)."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def asks_by_input_required(ctx: Context[Any, Any]) -> bool:
    """Whether this connection elicits by ``InputRequiredResult`` (2026-07-28 and later)."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def decider(ctx: Context[Any, Any]) -> str:
    """Who the audit records: ``mcp:`` and the authenticated subject over HTTP (a named
    token), else the name the client gave for itself."""
    token = get_access_token()
    if token is not None and token.subject:
        return f"mcp:{token.subject}"
    params = ctx.session.client_params
    name = params.client_info.name if params is not None and params.client_info is not None else ""
    return f"mcp:{name or 'client'}"


def question(execution_id: str, p: PendingApproval, address_flag: str = "") -> str:
    """What the person is shown: the call, its arguments in full (up to a limit), where it runs."""
    args = json.dumps(
        {"args": p.args, "kwargs": p.kwargs} if p.args else p.kwargs, indent=2, ensure_ascii=False, default=str
    )
    if len(args) > ARGS_SHOWN_MAX:
        args = args[:ARGS_SHOWN_MAX] + f"\n… ({len(args):,} characters in all)"
    return (
        f"Code running in execution {execution_id} wants to call {p.tool} (call {p.call_id}), "
        f"which needs a person's approval:\n\n{p.summary or p.tool}\n\nArguments:\n{args}\n\n"
        "Approve or deny it. Closing this without an answer leaves the run waiting; decide later "
        f"with `{decide_command('approve', execution_id, p.call_id, flags=address_flag)}` or "
        f"`{decide_command('deny', execution_id, p.call_id, flags=address_flag)}`."
    )


# -- up to 2025-11-25: ask now, wait here -------------------------------------------------------


async def ask(
    ctx: Context[Any, Any], execution_id: str, p: PendingApproval, wait_seconds: float, address_flag: str = ""
) -> Answer | None:
    """The person's answer, or None (declined, cancelled, an error, or no answer in time)."""
    with anyio.move_on_after(wait_seconds):
        try:
            got = await ctx.elicit(question(execution_id, p, address_flag), ApprovalForm)
        except Exception as err:  # noqa: BLE001 (the client refused or sent a malformed answer: leave it parked)
            log.info("elicitation for call %s of %s failed: %s", p.call_id, execution_id, err)
            return None
        if isinstance(got, AcceptedElicitation):
            return _from_form(got.data)
        return None
    log.info("no answer within %ss for call %s of %s", wait_seconds, p.call_id, execution_id)
    return None


# -- from 2026-07-28: the questions go back in the result, the answers come with the retry -------


def input_required(execution_id: str, pending: list[PendingApproval], address_flag: str = "") -> InputRequiredResult:
    """The questions for every pending call, and what the retry needs to find the run again."""
    schema = render_elicitation_schema(ApprovalForm)
    requests = {
        _key(p.call_id): ElicitRequest(
            params=ElicitRequestFormParams(message=question(execution_id, p, address_flag), requested_schema=schema)
        )
        for p in pending
    }
    state = {"v": _STATE_VERSION, "execution_id": execution_id, "calls": [p.call_id for p in pending]}
    return InputRequiredResult(input_requests=requests, request_state=json.dumps(state))


@dataclass(frozen=True)
class Retry:
    """A retried call: the run it is about, and the person's answer for each call asked."""

    execution_id: str
    answers: dict[str, Answer | None]


def retry_of(ctx: Context[Any, Any]) -> Retry | None:
    """The answers a retry carries (None on a first round). The SDK has already checked the
    state is one this server sealed for this request."""
    raw = ctx.request_state
    if not raw:
        return None
    try:
        state = json.loads(raw)
        execution_id, calls = str(state["execution_id"]), [str(c) for c in state["calls"]]
    except (ValueError, KeyError, TypeError):
        return None
    responses = ctx.input_responses or {}
    answers: dict[str, Answer | None] = {}
    for call_id in calls:
        got = responses.get(_key(call_id))
        answers[call_id] = _answer(got) if isinstance(got, ElicitResult) else None
    return Retry(execution_id=execution_id, answers=answers)


def _key(call_id: str) -> str:
    return f"approve-call-{call_id}"


def _answer(result: ElicitResult) -> Answer | None:
    if result.action != "accept" or result.content is None:
        return None
    try:
        form = ApprovalForm.model_validate(result.content)
    except ValueError:
        return None
    return _from_form(form)


# -- applying an answer ----------------------------------------------------------------------------


async def apply(
    handle: WorkflowHandle[Any, Any], call_id: str, answer: Answer, by: str, *, worker_up: bool = True
) -> bool:
    """Record the decision as a person's (``codemode.client.following.send_decision``): the ``decide``
    Update when a worker is up (it says at once whether the decision landed), else the signal,
    which the server keeps until a worker is back. False when the call was no longer waiting
    (decided meanwhile, from a terminal or the web UI). Raises ``RPCError`` when Temporal
    itself is unreachable."""
    signer = signer_from_env()
    token = get_access_token()
    if signer is not None and token is not None and token.subject and token.subject != signer.name:
        # Over HTTP the server authenticated the person (a named token): its key signs for them,
        # as a service (``signs_for`` in the approvers file), and the record says both.
        signer = Signer(signer.name, signer.key, on_behalf_of=token.subject)
    answered = answer.answer is not None
    signature = await sign_pending(
        handle,
        call_id,
        signer,
        "answer" if answered else "approve" if answer.approve else "deny",
        edited_arguments=answer.arguments,
        answer=answer.answer.value if answer.answer is not None else None,
        answered=answered,
    )
    if signer is not None:  # the person at this client signs (CODEMODE_APPROVER): they decide, not "mcp:..."
        by = signer.on_behalf_of or signer.name
    try:
        await send_decision(
            handle,
            Decision(
                call_id=call_id,
                approve=answer.approve,
                by=by,
                comment=answer.comment,
                arguments=answer.arguments,
                answer=answer.answer,
                door="mcp",
                signature=signature,
            ),
            via_update=worker_up,
        )
    except DecisionRefused as err:
        log.info("call %s of %s was not decided here: %s", call_id, handle.id, err)
        return False
    return True


async def cannot_sign(handle: WorkflowHandle[Any, Any], pending: list[PendingApproval]) -> str | None:
    """What to set up when the calls need a signed decision (the worker has an approvers file)
    and this server has no key for the person at its client (``CODEMODE_APPROVER``); else None.
    The person is then not asked: an unsigned answer would only be ignored."""
    if signer_from_env() is not None or not await signing_required(handle):
        return None
    first = pending[0].call_id if pending else "CALL"
    return setup_hint("this MCP server", handle.id, first)
