"""Example host tools. Every public function here becomes a tool (``--tools examples.tools``).

- ``get_weather``: a plain typed function; unknown cities raise ValueError inside the code.
- ``get_forecast``: async, so code can fetch several at once with ``asyncio.gather``.
- ``flaky_exchange_rate``: fails twice per call, then succeeds: Temporal retries it durably
  and the code only sees the success.
- ``send_email``: has a real side effect, so it waits for a person's approval.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from codemode import current_call, tool

_WEATHER = {
    "paris": {"city": "Paris", "temp_c": 18, "sky": "cloudy"},
    "london": {"city": "London", "temp_c": 14, "sky": "rain"},
    "tokyo": {"city": "Tokyo", "temp_c": 24, "sky": "clear"},
}
_attempts: dict[str, int] = {}


def get_weather(city: str) -> dict:
    """Current weather for a city."""
    try:
        return _WEATHER[city.lower()]
    except KeyError:
        raise ValueError(f"unknown city: {city}") from None


async def get_forecast(city: str, days: int = 3) -> list[dict]:
    """Daily forecast for the next `days` days."""
    await asyncio.sleep(0.05)
    base = get_weather(city)
    return [{"day": d + 1, "temp_c": base["temp_c"] + d} for d in range(days)]


@tool(max_attempts=5, timeout=timedelta(seconds=10))
def flaky_exchange_rate(base: str, quote: str) -> float:
    """Exchange rate between two currencies (a flaky upstream: fails twice, then answers)."""
    call = current_call()
    _attempts[call.idempotency_key] = call.attempt
    if call.attempt < 3:
        raise ConnectionError(f"upstream timeout (attempt {call.attempt})")
    return {"EURUSD": 1.08, "USDEUR": 0.93, "GBPUSD": 1.27}.get(base + quote, 1.0)


@tool(requires_approval=True)
def send_email(to: str, subject: str, body: str) -> dict:
    """Send an email. A person must approve each one."""
    return {"sent": True, "to": to, "subject": subject, "message_id": current_call().idempotency_key}
