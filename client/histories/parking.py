"""What the audit says a run's sandbox did while the run waited for a person: paused, in
standby, or kept running (and released after the grace period). Never "paused" for a
sandbox that kept running."""

from __future__ import annotations

from codemode.activities.models import ParkResult


def release_text(summary: str, runtime: str) -> str:
    """What a ``sandbox_release`` did, from its summary. A run recorded before ``sandbox_park``
    existed asked to "pause" even a sandbox that cannot pause (Modal's kept running)."""
    if summary.startswith("pause"):
        if runtime == "modal":
            return "asked to pause the sandbox while the run waits (Modal cannot: it kept running)"
        return "paused the sandbox while the run waits"
    if summary.startswith("release the parked sandbox"):
        return "released the parked sandbox" + summary.removeprefix("release the parked sandbox")
    return "released the sandbox"


def park_text(parked: ParkResult | None) -> str:
    if parked is None:
        return "parked the sandbox"
    text = {
        "paused": "paused the sandbox while the run waits",
        "standby": "the sandbox goes to standby while the run waits",
        "running": "the sandbox keeps running while the run waits",
        "nothing": "nothing to park",
    }[parked.parked_as]
    if parked.why:
        text += f" ({parked.why})"
    if parked.release_after is not None:
        text += f"; released after {parked.release_after:g}s if the run still waits"
    return text
