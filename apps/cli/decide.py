"""``codemode approve`` (``--args``: approve edited arguments), ``codemode deny``, ``codemode answer``
(a person's result instead of the tool) and ``codemode cancel``: a person's decisions on a
running execution. Approve and deny answer tool calls waiting for approval (signals, recorded
even while no worker runs); cancel asks Temporal to cancel the whole execution.

A session's id (``session:NAME``, what the UI shows as an agent workflow's child) stands for
its running cell: the execution that waits for the decision.

Imports click and ``common`` only: ``codemode approve --help`` is read while a run waits."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from codemode.apps.cli.common import find_execution, open_client, os_user
from codemode.apps.command_line import EXIT_OK, Fail, connection_options, note

if TYPE_CHECKING:
    from codemode.client.signing import Signer
    from codemode.worker.connection import Target


def _json_option(text: str | None, flag: str) -> object:
    """The value of a JSON flag (``--args``, ``--result``), or a clear error."""
    import json

    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        raise Fail(f"{flag} is not JSON: {err}") from None


def _decision_command(approve: bool) -> click.Command:
    verb = "approve" if approve else "deny"
    text_flag = "--comment" if approve else "--reason"

    @click.argument("execution_id", metavar="ID")
    @click.argument("call_id", required=False)
    @click.option("--all", "every", is_flag=True, help=f"{verb.capitalize()} every call waiting for approval.")
    @click.option(
        "--by",
        default=None,
        help="Who decides [default: the OS user]; signs with their key from `codemode keygen --approver NAME` "
        "when there is one (a worker with an approvers file counts only signed decisions).",
    )
    @click.option("--key", "key_file", default=None, help="Sign with this private key file instead.")
    @click.option(text_flag, "text", default=None, help="A comment." if approve else "Why it is denied.")
    @connection_options
    def command(
        execution_id: str,
        call_id: str | None,
        every: bool,
        by: str | None,
        key_file: str | None,
        text: str | None,
        target: Target,
        **extra: object,
    ) -> int:
        if call_id is not None and every:
            raise Fail("give a CALL_ID or --all, not both")
        edits = _json_option(extra.get("edits"), "--args")
        if edits is not None and (every or not isinstance(edits, dict)):
            raise Fail("--args takes a JSON object of the arguments to change, for one call")
        import asyncio

        signer = _signer(by or os_user(), key_file)
        return asyncio.run(
            _decide(approve, execution_id, call_id, every, by or os_user(), text, target, signer, edits=edits)
        )

    if approve:
        command = click.option(
            "--args",
            "edits",
            default=None,
            metavar="JSON",
            help='Approve with these arguments changed: a JSON object, e.g. \'{"amount": 100}\' '
            "(checked against the tool's parameters before anything runs).",
        )(command)
    command.__doc__ = (
        f"{verb.capitalize()} a tool call waiting for approval (CALL_ID as printed by run/status), "
        "or every waiting call with --all.\n\n"
        "ID is an execution's id, or a session's (session:NAME): then the call waits in the session's "
        "running cell."
    )
    return click.command(name=verb)(command)


@click.command(name="answer")
@click.argument("execution_id", metavar="ID")
@click.argument("call_id", required=False)
@click.option("--result", "result", required=True, metavar="JSON", help="The call's result, as JSON.")
@click.option(
    "--by",
    default=None,
    help="Who answers [default: the OS user]; signs with their key from `codemode keygen --approver NAME` "
    "when there is one (a worker with an approvers file counts only signed decisions).",
)
@click.option("--key", "key_file", default=None, help="Sign with this private key file instead.")
@click.option("--comment", "text", default=None, help="A comment.")
@connection_options
def answer(
    execution_id: str,
    call_id: str | None,
    result: str,
    by: str | None,
    key_file: str | None,
    text: str | None,
    target: Target,
) -> int:
    """Answer a tool call waiting for approval instead of the tool: the code gets RESULT as the
    call's result and the tool does not run (RESULT must fit what the tool returns)."""
    import asyncio

    from codemode.workflows.models import Answer

    value = _json_option(result, "--result")
    signer = _signer(by or os_user(), key_file)
    return asyncio.run(
        _decide(True, execution_id, call_id, False, by or os_user(), text, target, signer, answer=Answer(value=value))
    )


def _signer(by: str, key_file: str | None) -> Signer | None:
    """``by``'s signer (``--key FILE``, else their keygen key), None when they have none."""
    from codemode.approvals.keys import ApproverKeyError
    from codemode.client.signing import own_signer

    try:
        return own_signer(by, key_file)
    except ApproverKeyError as err:
        raise Fail(str(err)) from None


async def _decide(
    approve: bool,
    execution_id: str,
    call_id: str | None,
    every: bool,
    by: str,
    text: str | None,
    target: Target,
    signer: Signer | None = None,
    *,
    edits: object = None,
    answer: object = None,
) -> int:
    """Decide one pending call, or every pending call (``--all``)."""
    import json

    from temporalio.client import WorkflowExecutionStatus

    from codemode.client.backend import has_workers
    from codemode.client.following import DecisionRefused, closed_word, query_status, send_decision
    from codemode.client.signing import setup_hint, signing_required

    client = await open_client(target, quick=True)
    found = await find_execution(client, execution_id)
    if found.handle is None:
        raise Fail(
            f"no cell of session {found.session} is running, so no call waits for approval "
            f"(see: codemode session show {found.session})"
        )
    handle, desc, execution_id = found.handle, found.description, found.execution_id
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise Fail(f"execution {execution_id} is already closed ({closed_word(desc.status)}); nothing to decide")
    status = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    from_history = status is None
    if status is not None:
        pending = status.pending_approvals
    else:  # no worker: the calls waiting, as the history shows them
        from codemode.client.histories.audit import fetch_audit

        pending = (await fetch_audit(client, execution_id)).pending_approvals()
    ids = ", ".join(p.call_id for p in pending) or "none"
    if every:
        if not pending:
            raise Fail(f"no call of {execution_id} is waiting for approval")
        chosen = pending
    elif call_id is None:
        if len(pending) != 1:
            raise Fail(f"missing CALL_ID; pending call ids of {execution_id}: {ids} (or --all for every one)")
        chosen = pending  # exactly one call waits: no doubt which
    else:
        chosen = [p for p in pending if p.call_id == call_id]
        if not chosen:
            raise Fail(f"call {call_id!r} of {execution_id} is not waiting for approval; pending call ids: {ids}")
    verb = "answered" if answer is not None else "approved" if approve else "denied"
    kind = "answer" if answer is not None else "approve" if approve else "deny"
    from codemode.workflows.models import Answer, Decision

    if signer is None and await signing_required(handle):
        raise Fail(setup_hint(f"codemode {kind}", execution_id, chosen[0].call_id))
    for p in chosen:
        decision = Decision(
            call_id=p.call_id, approve=approve, by=by, comment=text, arguments=edits, answer=answer, door="cli"
        )
        if signer is not None:  # over the arguments the call runs with (edited: the asked ones changed)
            value = answer.value if isinstance(answer, Answer) else None
            decision.signature = signer.sign(
                execution_id, p, kind, edited_arguments=edits, answer=value, answered=answer is not None
            )
        try:
            recorded = await send_decision(handle, decision, via_update=not from_history)
        except DecisionRefused as err:
            raise Fail(f"call {p.call_id} of {execution_id} was not decided: {err}") from None
        from_history = from_history or recorded is None  # no worker answered: sent as a signal
        signed = f" (signed with {signer.public[:20]}…)" if signer else ""
        if recorded is not None and recorded.decision == "counted":
            click.echo(
                f"✓ {'approval' if kind == 'approve' else kind} of call {p.call_id} ({p.summary}) of {execution_id} "
                f"by {by} counted{signed}; "
                f"{recorded.needed} more needed"
            )
            continue
        edited = ""
        if recorded is not None and recorded.approved_arguments is not None:
            edited = f" with arguments {json.dumps(recorded.approved_arguments, default=str)}"
        click.echo(f"✓ {verb} call {p.call_id} ({p.summary}) of {execution_id} as {by}{edited}{signed}")
    if from_history:
        note("note: no worker is running; the decision is recorded and takes effect when one starts.")
    note(f"See the outcome with: codemode result {execution_id}")
    return EXIT_OK


approve = _decision_command(approve=True)
deny = _decision_command(approve=False)


# -- cancel ---------------------------------------------------------------------------------------------

#: How long `cancel` waits to report how the execution closed, when a worker is there to close it.
CANCEL_WAIT_SECONDS = 10.0


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option("--reason", default=None, help="Why, recorded in the history [default: cancelled by the OS user].")
@connection_options
def cancel(execution_id: str, reason: str | None, target: Target) -> int:
    """Cancel an execution: it stops where it is, even while it waits for approval."""
    import asyncio

    return asyncio.run(_cancel(execution_id, reason or f"cancelled by {os_user()}", target))


async def _cancel(execution_id: str, reason: str, target: Target) -> int:
    import asyncio

    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
    from temporalio.exceptions import CancelledError

    from codemode.apps.cli.common import existing_handle
    from codemode.client import display
    from codemode.client.backend import has_workers
    from codemode.client.following import closed_word

    client = await open_client(target, quick=True)
    handle, desc = await existing_handle(client, execution_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise Fail(f"execution {execution_id} is already closed ({closed_word(desc.status)}); nothing to cancel")
    await handle.cancel(reason=reason)
    if not await has_workers(client, desc.task_queue):
        click.echo(f"✓ cancellation of {execution_id} requested ({reason})")
        note("note: no worker is running; the execution is cancelled when one starts.")
        return EXIT_OK
    try:
        outcome = await asyncio.wait_for(handle.result(), CANCEL_WAIT_SECONDS)
    except WorkflowFailureError as err:
        if isinstance(err.cause, CancelledError):
            click.echo(f"✓ cancelled {execution_id} ({reason})")
        else:
            click.echo(f"✓ cancellation of {execution_id} requested; it closed as failed: {err.cause or err}")
        return EXIT_OK
    except TimeoutError:
        click.echo(f"✓ cancellation of {execution_id} requested ({reason}); it has not closed yet")
        note(f"It closes when a worker next runs it; see where it stands with: codemode status {execution_id}")
        return EXIT_OK
    # The workflow saw the cancellation through and returned an outcome of its own.
    click.echo(f"✓ cancelled {execution_id} ({reason})")
    note(display.outcome_summary(outcome))
    return EXIT_OK
