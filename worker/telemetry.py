"""OpenTelemetry tracing for clients and workers (temporalio's TracingInterceptor).

Spans cover starting an execution, the workflow, every sandbox step and every tool call,
linked across processes through Temporal headers. They go to whatever tracer provider the
application configured with opentelemetry-sdk (nothing is exported until it does), so the
interceptor is on by default; ``CODEMODE_TRACING=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def tracing_enabled() -> bool:
    return os.environ.get("CODEMODE_TRACING", "1").lower() not in ("0", "false", "no", "off")


def interceptors(tracer: Any | None = None) -> list[Any]:
    """The interceptors to install on a client (workers built on it inherit them)."""
    if tracer is None and not tracing_enabled():
        return []
    return tracing_interceptors(tracer)


def tracer_provider_configured() -> bool:
    """Whether this process has a tracer provider to send spans to: one set in code (by the
    application, or ``opentelemetry-instrument``), or named by ``OTEL_PYTHON_TRACER_PROVIDER``.
    Without one, the interceptor's spans are dropped where they are made and it adds no header,
    so a short-lived client (a CLI command) can skip importing it (a third of its start-up)."""
    if os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"):
        return True
    trace = sys.modules.get("opentelemetry.trace")  # (set up before us, if at all)
    return trace is not None and not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def interceptors_for(tracing: bool | Any = None) -> list[Any]:
    """``CodeModePlugin(tracing=...)``'s interceptors: None, on unless ``CODEMODE_TRACING=0``;
    False, none; True, the global tracer provider's; a tracer, that tracer."""
    if tracing is None:
        return interceptors()
    if tracing is False:
        return []
    return tracing_interceptors(None if tracing is True else tracing)


def tracing_interceptors(tracer: Any | None = None) -> list[Any]:
    """temporalio's OpenTelemetry interceptor (client and worker), whatever the environment says."""
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(tracer)]
