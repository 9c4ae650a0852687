"""A number a runtime reads from a ``CODEMODE_*`` variable: unset or empty gives the default,
anything else must be a number of at least ``minimum`` or the worker refuses to start, naming
the variable and what it expects (a typo never silently becomes the default)."""

from __future__ import annotations

import os
from collections.abc import Callable


def number_from_env(name: str, default: float, *, cast: Callable[[str], float], minimum: float, expected: str) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = cast(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ValueError(f"{name}={value!r}: expected {expected}")
    return number
