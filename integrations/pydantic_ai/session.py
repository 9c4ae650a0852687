"""Which session a ``run_code`` call runs in, and what the model is told about it.

* **Outside a workflow**: one session per conversation. pydantic-ai (2.62 and later) gives
  every run a ``conversation_id``: the one passed to ``agent.run``, else the latest one on the
  ``message_history``, else a new one. A run resumed from its message history (with
  ``deferred_tool_results`` after an approval, or the user's next message) therefore keeps
  its session, in any process; ``agent.run(..., conversation_id="new")`` starts a fresh one.
* **Inside a workflow** (pydantic-ai's Temporal durability): one session per agent workflow,
  agent and tool, started as the workflow's child so it ends with it. Its name comes only from
  what the workflow's history fixes (never from its run id, which a reset changes), so a
  replayed workflow finds the same session.

A session that closed (its idle timeout, or a person closed it) is followed by ``NAME.2``,
``NAME.3``...: the call that finds it closed runs in a fresh namespace, and the model is told.
"""

from __future__ import annotations

from datetime import timedelta

from codemode.workflows.session_models import session_name_for

#: How long an agent's session waits for its next call before it closes and deletes its state.
#: A day: the call after a person's decision or the user's next message usually comes within
#: it, and an idle session holds little (a Monty dump in the store; python lets its process go
#: after 15 minutes and rebuilds it by replay; e2b keeps its sandbox paused). A cell waiting for
#: an approval is not idle. Inside a workflow the session also ends with the workflow.
AGENT_SESSION_IDLE_TIMEOUT = timedelta(hours=24)

#: What the model reads in the tool's description about the session.
SESSION_DESCRIPTION = (
    " State persists across calls, like cells of a notebook: variables, functions and imports that one call "
    "defines are there in the next ones, so reuse them instead of fetching or computing again. "
    "`restart=true` starts this call from an empty namespace (everything defined before is gone)."
)

#: What the instructions add when calls share a session.
SESSION_INSTRUCTIONS = (
    "Each call of `{tool}` continues the same Python session: the globals an earlier call left (data, "
    "functions, imports) are still defined, and what a call did before an uncaught error stays. Pass "
    "`restart=true` only to start over from an empty namespace."
)


def conversation_session_name(tool: str, conversation_id: str) -> str:
    """The session of ``tool`` in the conversation ``conversation_id`` (``run_code-<id>``)."""
    return session_name_for(tool, conversation_id)


def workflow_session_name(workflow_id: str, agent: str | None, tool: str) -> str:
    """The session of ``tool`` of the agent ``agent`` in the workflow ``workflow_id``."""
    return session_name_for(workflow_id, *([agent] if agent else []), tool)


def replaced_notice(why: str) -> str:
    """What the model is told when its session had closed and this call started a new one."""
    return (
        f"Your earlier session had closed ({why}): this call ran in a fresh namespace, and what earlier calls "
        "defined is gone. Define again what you still need."
    )
