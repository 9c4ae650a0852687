"""The functions the LLM's code may call: each runs as its own durable activity."""

from codemode import tool


def get_weather(city: str) -> dict:
    """Current weather of a city."""
    return {"city": city, "temp_c": {"Paris": 18, "Tokyo": 24}.get(city, 15)}


@tool(requires_approval=True)
def send_report(to: str, body: str) -> dict:
    """Send a report (a person approves each one)."""
    return {"sent": True, "to": to}
