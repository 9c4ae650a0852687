"""A running worker that loses its credential (an API key rotated, a certificate expired) or its
server keeps running: the SDK polls again with backoff, silently, and picks up where it was once
Temporal accepts it again; runs wait on the server meanwhile. This watcher says so in the log:
one line when the worker's calls start being refused (naming the address, the namespace, the
credential and what the server said) and one when they are accepted again."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from temporalio.client import Client

from codemode.worker.connection import ConnectionRefused, Target, check_namespace_reachable

log = logging.getLogger("codemode.worker")

#: How often a worker asks Temporal for its namespace (one small call).
CHECK_EVERY = timedelta(seconds=10)


def target_of(client: Client) -> Target:
    """What the client connects to, for messages (no secret)."""
    config = client.service_client.config
    tls = config.tls
    has_cert = bool(getattr(tls, "client_cert", None))
    return Target(
        address=config.target_host,
        namespace=client.namespace,
        api_key=config.api_key,
        tls=tls,
        client_cert="(the client's certificate)" if has_cert else None,
    )


async def watch_reachability(client: Client, every: timedelta = CHECK_EVERY) -> None:
    """Log when this worker's calls to Temporal start and stop being refused; runs until cancelled."""
    target = target_of(client)
    refused: str | None = None
    while True:
        await asyncio.sleep(every.total_seconds())
        try:
            await check_namespace_reachable(client, target)
        except ConnectionRefused as err:
            if err.reason != refused:
                log.warning(
                    "%s. This worker keeps polling and resumes when Temporal accepts it again; no run is lost. "
                    "A rotated API key or a renewed certificate: restart it with the new one.",
                    err,
                )
            refused = err.reason
        except Exception as err:  # a network fault the SDK will ride out too
            reason = f"{type(err).__name__}: {err}"
            if reason != refused:
                log.warning("cannot reach Temporal at %s: %s; this worker keeps polling", target.describe(), reason)
            refused = reason
        else:
            if refused is not None:
                log.warning("Temporal at %s accepts this worker again", target.describe())
            refused = None
