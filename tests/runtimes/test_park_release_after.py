"""``CODEMODE_PARK_RELEASE_AFTER``: how long a parked sandbox that cannot pause may keep running.
Durations as the CLI takes them; a runtime's own variable, then the general one, then 10 min;
bad input is a clear error naming the variable."""

from __future__ import annotations

import pytest

from codemode.runtimes.runner.parking import DEFAULT_RELEASE_AFTER, parse_duration, release_after


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("2d", 172800.0), ("500ms", 0.5)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10 minutes", "-5", "0", "0s", "inf", "nan"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="CODEMODE_PARK_RELEASE_AFTER="):
        parse_duration(text, name="CODEMODE_PARK_RELEASE_AFTER")


def test_a_runtimes_own_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEMODE_PARK_RELEASE_AFTER", raising=False)
    monkeypatch.delenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", raising=False)
    assert release_after("modal") == DEFAULT_RELEASE_AFTER == 600.0
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER", "2m")
    assert release_after("modal") == 120.0
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", "30s")
    assert release_after("modal") == 30.0 and release_after("e2b") == 120.0
    assert release_after("modal", own=5.0) == 5.0
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", "later")
    with pytest.raises(ValueError, match="CODEMODE_PARK_RELEASE_AFTER_MODAL='later' is not a duration"):
        release_after("modal")
