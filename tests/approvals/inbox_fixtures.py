"""An inbox served in-process on a free port, for the HTTP and browser tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from codemode.approvals.notify.signing import LinkClaim, make_link_token
from codemode.apps.inbox.auth import InboxAuth, hash_token
from codemode.apps.inbox.serve import RunningInbox, start_inbox
from codemode.worker.dev_server import free_port

LINKS_SECRET = "links-secret-for-tests"
TOKEN = "tok-for-ben-0123456789"


@pytest.fixture
async def inbox(client) -> AsyncIterator[RunningInbox]:
    """Trusts X-Forwarded-Email from 127.0.0.1 (as behind oauth2-proxy); ben has a token."""
    auth = InboxAuth.build("X-Forwarded-Email", ["127.0.0.1"], None)
    auth.users = {"ben@example.com": hash_token(TOKEN)}
    running = await start_inbox(client, auth, port=free_port(), links_secret=LINKS_SECRET)
    yield running
    await running.stop()


def link(
    execution_id: str, call_id: str, action: str = "approve", *, expires_in: float = 3600, nonce: str = "n1"
) -> str:
    claim = LinkClaim(execution_id, call_id, action, "carol@example.com", int(time.time() + expires_in), nonce)
    return make_link_token(LINKS_SECRET, claim)
