"""Whether a signed grant pre-approves a call a saved snippet's own code made (the sandbox step
asks when the call needs a person; a snippet's entry is ``entries.py``'s).

A call is the snippet's only when the host knows it (``runtimes/prelude.py``): on Monty, from
the position the VM reports; on any runtime, when the whole code is one call of the snippet with
literal arguments the host checked. A grant counts only when: its signature holds; it is for
this very version (its content hash) and parameter schema; it names the tool; it has not
expired; and the worker's approvers file lists the signer's key and lets the signer alone
decide this call (one approver, no four-eyes rule, no policy rule that denies it). It is read
when the call asks, so a grant removed since (``codemode snippets revoke``) no longer counts.
Whatever is decided is recorded with the call (``CallRequest.granted``): the audit shows it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from codemode.approvals import approvers_file as config
from codemode.approvals.snippet_signing import SnippetGrant, parameters_sha256, verify_grant
from codemode.runtimes.prelude import Prelude
from codemode.storage import BlobStore
from codemode.storage.encryption import Keyring

from ..models import CallRequest
from ..records import GrantUse
from .library import SnippetLibrary
from .models import parse_origin

log = logging.getLogger(__name__)


class SnippetCalls:
    """A worker's view of the snippet library (per Temporal namespace) and its approvers file."""

    def __init__(self, store: BlobStore, keys: Keyring | None = None, approvers: Path | None = None) -> None:
        self.store, self.keys, self.approvers = store, keys, approvers

    def library(self, namespace: str) -> SnippetLibrary:
        return SnippetLibrary(self.store, namespace, keys=self.keys)

    # -- a call of the snippet's own code needs approval -------------------------------------

    async def grant(self, request: CallRequest, prelude: Prelude | None, namespace: str) -> None:
        """Pre-approve ``request`` when a valid grant covers it (``requires_approval`` off and
        ``granted`` set); else leave it waiting, saying why a grant did not count."""
        parsed = parse_origin(request.origin)
        part = prelude.part_of(request.origin) if prelude is not None and request.origin else None
        if parsed is None or part is None:
            return
        name, version = parsed
        grants = await self.library(namespace).grants(name, version)
        if not grants:
            return
        if self.approvers is None:
            request.approval_reason = _joined(
                request.approval_reason,
                f"snippet {name}'s grant is not counted: this worker has no approvers file to check its signer",
            )
            return
        try:
            file = config.load(self.approvers)
        except config.ApproversFileError as err:
            request.approval_reason = _joined(request.approval_reason, f"grants not counted: {err}")
            return
        gate = file.gate(request.tool, request.arguments or {})
        why = ""
        for grant in reversed(grants):  # newest first
            why = _refusal(grant, request.tool, version, parameters_sha256(part.parameters_schema), gate)
            if not why:
                request.requires_approval = False
                request.granted = GrantUse(
                    snippet=name,
                    version=version,
                    grant_id=grant.grant_id,
                    signer=grant.signer,
                    key=grant.key,
                    approvers_file=file.sha256,
                )
                return
        request.approval_reason = _joined(request.approval_reason, f"snippet {name}'s grant does not cover it: {why}")


def _refusal(grant: SnippetGrant, tool: str, version: str, schema_sha: str, gate: Any) -> str:
    """Why ``grant`` does not pre-approve this call ("" when it does)."""
    if not verify_grant(grant):
        return f"grant {grant.grant_id}'s signature does not hold"
    if grant.version != version:
        return f"grant {grant.grant_id} is for version {grant.version[:12]}"
    if grant.parameters_sha256 != schema_sha:
        return f"grant {grant.grant_id} is for another parameter schema"
    if tool not in grant.tools:
        return f"grant {grant.grant_id} does not name {tool}"
    if grant.expired(datetime.now(UTC)):
        return f"grant {grant.grant_id} expired at {grant.expires_at:%Y-%m-%d %H:%M} UTC"
    if gate.keys.get(grant.key) != grant.signer:
        return f"the approvers file does not list the key of {grant.signer!r} that signed grant {grant.grant_id}"
    if not gate.may_decide(grant.signer):
        return f"{grant.signer!r} may not decide {tool} ({gate.rule})"
    if gate.required > 1 or gate.four_eyes:
        return f"{gate.rule} needs {gate.required} approvers or four eyes: one person's grant is not enough"
    if gate.verdict == "deny":
        return f"the approvers file's policy denies it ({gate.policy_rule})"
    return ""


def _joined(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second
