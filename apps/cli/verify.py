"""``codemode history ID --verify``: re-check every decision of an execution offline
(``client/histories/verify.py``), from the server's history or an exported one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.apps.cli.common import emit, existing_handle, open_client
from codemode.apps.command_line import EXIT_OK, Fail

if TYPE_CHECKING:
    from codemode.worker.connection import Target

#: Exit code when a decision does not verify.
EXIT_NOT_VERIFIED = 1


async def verify_command(
    execution_id: str, as_json: bool, approvers_path: str | None, history_file: str | None, target: Target
) -> int:
    from temporalio.client import WorkflowHistory

    from codemode.approvals import approvers_file as config
    from codemode.client.histories.audit import fetch_runs
    from codemode.client.histories.verify import verification_lines, verify_runs

    approvers = None
    if approvers_path:
        try:
            approvers = config.load(approvers_path)
        except config.ApproversFileError as err:
            raise Fail(str(err)) from None
    if history_file:
        try:
            text = Path(history_file).read_text()
            runs = [WorkflowHistory.from_json(execution_id, text).events]
        except (OSError, ValueError) as err:
            raise Fail(f"cannot read the history {history_file}: {err}") from None
        from codemode.storage import blob_store_for
        from codemode.worker.converter import data_converter

        converter = data_converter(blob_store_for(None))
    else:
        client = await open_client(target, quick=True)
        await existing_handle(client, execution_id)
        runs, _ = await fetch_runs(client, execution_id)
        converter = client.data_converter
    result = await verify_runs(execution_id, runs, converter, approvers)
    emit(result, verification_lines(result), as_json=as_json)
    if not result.ok:
        click.echo(f"✗ not verified: {', '.join('call ' + d.call_id for d in result.decisions if not d.ok)}", err=True)
        return EXIT_NOT_VERIFIED
    return EXIT_OK
