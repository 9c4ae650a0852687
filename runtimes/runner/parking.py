"""How long a parked run's sandbox may keep running before it is released.

A run parked on a person's approval should hold nothing that costs. Where the provider can
pause a sandbox and keep its processes (Docker's freezer, E2B's pause, Blaxel's standby) the
sandbox is paused and kept. Where it cannot (Modal; or a pause that failed) the sandbox keeps
running, so after a grace period it is released, and the run continues on approval in a
fresh sandbox by journal replay, as the python runtime does.

The grace period: ``CODEMODE_PARK_RELEASE_AFTER_<RUNTIME>`` (``CODEMODE_PARK_RELEASE_AFTER_MODAL``,
``CODEMODE_PARK_RELEASE_AFTER_DOCKER``, ``CODEMODE_PARK_RELEASE_AFTER_E2B``,
``CODEMODE_PARK_RELEASE_AFTER_BLAXEL``), else
``CODEMODE_PARK_RELEASE_AFTER``, else ``DEFAULT_RELEASE_AFTER``; or a runtime's own
``park_release_after`` (seconds). Durations: seconds (``90``) or numbers with units ms, s, m,
h, d (``90s``, ``10m``, ``1h30m``). A grace period short enough to spare a quick approval the
replay, long enough not to pay for a sandbox through a long wait.
"""

from __future__ import annotations

import os
import re

__all__ = ["DEFAULT_RELEASE_AFTER", "ENV", "parse_duration", "release_after"]

ENV = "CODEMODE_PARK_RELEASE_AFTER"
#: Ten minutes: a person answering within it finds the run's sandbox as it was.
DEFAULT_RELEASE_AFTER = 600.0

_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, *, name: str = "duration") -> float:
    """Seconds in ``text`` (``90``, ``90s``, ``10m``, ``1h30m``); ValueError saying what is
    accepted when it is not a duration, or not more than zero."""
    value = str(text).strip().replace(" ", "")
    try:
        seconds = float(value)
    except ValueError:
        parts = _PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise ValueError(f"{name}={text!r} is not a duration: give seconds, or e.g. 90s, 10m, 2h, 1h30m") from None
        seconds = sum(float(n) * _SECONDS[u.lower()] for n, u in parts)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{name}={text!r}: the duration must be more than 0")
    return seconds


def release_after(runtime: str, own: float | None = None) -> float:
    """The grace period of a parked sandbox of ``runtime`` that keeps running, in seconds:
    ``own`` (the runtime's setting), else the variables (see the module's docstring)."""
    if own is not None:
        return float(own)
    for name in (f"{ENV}_{runtime.upper()}", ENV):
        value = os.environ.get(name)
        if value:
            return parse_duration(value, name=name)
    return DEFAULT_RELEASE_AFTER
