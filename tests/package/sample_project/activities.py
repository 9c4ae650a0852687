"""The user's own Temporal activities, named as Temporal's samples name them: code mode's
activities live under ``codemode.activities`` and never shadow this module."""

from temporalio import activity


@activity.defn
async def compose_greeting(name: str) -> str:
    return f"Hello, {name}!"
