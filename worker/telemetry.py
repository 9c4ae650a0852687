"""OpenTelemetry tracing for clients and workers (temporalio's TracingInterceptor).

Spans cover starting an execution, the workflow, every sandbox step and every tool call,
linked across processes through Temporal headers. They go to whatever tracer provider the
application configured with opentelemetry-sdk (nothing is exported until it does), so the
interceptor is on by default; ``CODEMODE_TRACING=0`` turns it off.
"""

from __future__ import annotations

import os
from typing import Any

from temporalio.contrib.opentelemetry import TracingInterceptor


def tracing_enabled() -> bool:
    return os.environ.get("CODEMODE_TRACING", "1").lower() not in ("0", "false", "no", "off")


def interceptors(tracer: Any | None = None) -> list[Any]:
    """The interceptors to install on a client (workers built on it inherit them)."""
    if tracer is None and not tracing_enabled():
        return []
    return tracing_interceptors(tracer)


def tracing_interceptors(tracer: Any | None = None) -> list[Any]:
    """temporalio's OpenTelemetry interceptor (client and worker), whatever the environment says."""
    return [TracingInterceptor(tracer)]
