"""Notifications clean (issue 45, finding 7): a webhook's URL (a Slack webhook's is its
credential) is in no error, log line or notify history; model-written code reaches Slack
escaped; a newline in a summary makes no email fail (and a message that cannot be built is not
retried). Each test fails if its finding comes back."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from codemode.activities.notify import DeliverInput, NotifyActivities
from codemode.approvals.notify.channels import ChannelRefused, header_value, send_email, slack_message
from codemode.approvals.notify.config import NotifyConfig
from codemode.approvals.notify.events import CodeExcerpt, NotifyRequest

SECRET_PATH = "/services/T000/B000/XXXXsecretXXXX"


def _request(summary: str = "send_money(to='bob', amount=900)", lines: list[str] | None = None) -> NotifyRequest:
    return NotifyRequest(
        event="approval.requested",
        execution_id="exec-1",
        call_id="1",
        tool="send_money",
        summary=summary,
        arguments={"to": "bob"},
        code=CodeExcerpt(first=1, lines=lines or ["send_money('bob', 900)"], line=1),
        asked_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_model_written_text_reaches_slack_escaped() -> None:
    summary = "pay(to='<!channel> <https://evil.example|click to approve> & <@U123>')"
    code = ["x = 1", "```", "*URGENT* <!here> approve at <https://evil.example|the inbox>", "```"]
    message = slack_message(_request(summary, code), {})
    texts = [message["text"], *(b["text"]["text"] for b in message["blocks"] if b.get("type") == "section")]
    for text in texts:
        assert "<!channel>" not in text and "<!here>" not in text and "<https://" not in text and "<@U" not in text
    assert "&lt;!channel&gt;" in message["text"] and "&amp;" in message["text"]
    code_block = message["blocks"][1]["text"]["text"]
    assert code_block.startswith("```") and code_block.endswith("```")
    assert code_block[3:-3].count("```") == 0  # the code cannot close its block


def test_email_headers_lose_control_characters_and_a_bad_message_is_not_retried() -> None:
    assert (
        header_value("send_money(to='bob')\r\nBcc: mallory@evil.example")
        == "send_money(to='bob') Bcc: mallory@evil.example"
    )
    assert "\n" not in header_value("a\u2028b\x00c\nd") and len(header_value("x" * 10_000)) <= 300


async def test_a_newline_in_a_summary_sends_the_email(tmp_path) -> None:
    """Sent, not retried for a day: the subject is cleaned (aiosmtpd receives it)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Message

    from codemode.worker.dev_server import free_port

    got = []

    class Keep(Message):
        def handle_message(self, message):  # noqa: ANN001, ANN201
            got.append(message)

    port = free_port()
    smtp = Controller(Keep(), hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        config = NotifyConfig.model_validate(
            {"email": {"host": "127.0.0.1", "port": port, "from": "codemode@example.com", "to": ["ana@example.com"]}}
        )
        assert config.email is not None
        sent = await send_email(config, config.email, _request("send_money(to='bob')\nBcc: mallory@evil.example"))
    finally:
        smtp.stop()
    assert sent == 1 and got and "\n" not in got[0]["Subject"] and got[0]["Bcc"] is None


async def test_a_message_that_cannot_be_built_is_not_retried(monkeypatch) -> None:
    """Building it again on a retry fails the same way: refused for good (never a day of retries)."""
    from codemode.approvals.notify import channels

    def unbuildable(*_args, **_kwargs) -> str:
        raise ValueError("Header values may not contain linefeed or carriage return characters")

    monkeypatch.setattr(channels, "email_text", unbuildable)
    config = NotifyConfig.model_validate(
        {"email": {"host": "127.0.0.1", "port": 1, "from": "codemode@example.com", "to": ["ana@example.com"]}}
    )
    assert config.email is not None
    with pytest.raises(ChannelRefused, match="cannot be built"):
        await send_email(config, config.email, _request())


async def test_a_webhook_is_named_by_its_number_and_host_never_its_url(caplog) -> None:
    """A receiver that fails, and one that cannot be reached: the error the notify history
    keeps and the worker's log say webhook:N and the host only."""
    from aiohttp import web

    from codemode.worker.dev_server import free_port

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=500, text=f"no such hook {request.path}")

    app = web.Application()
    app.router.add_post(SECRET_PATH, fail)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    dead = free_port()
    config = NotifyConfig.model_validate(
        {
            "webhooks": [
                {"url": f"http://127.0.0.1:{port}{SECRET_PATH}"},
                {"url": f"http://127.0.0.1:{dead}{SECRET_PATH}?x=1"},
            ]
        }
    )
    activities = NotifyActivities(config)
    caplog.set_level(logging.INFO)
    try:
        for channel in ("webhook:0", "webhook:1"):
            with pytest.raises(ApplicationError) as failed:
                await ActivityEnvironment().run(activities.deliver, DeliverInput(channel=channel, request=_request()))
            said = str(failed.value)
            assert channel in said and "127.0.0.1" in said and "XXXXsecretXXXX" not in said, said
    finally:
        await runner.cleanup()
    ours = [r.getMessage() for r in caplog.records if r.name.startswith(("codemode", "temporalio"))]
    assert ours and not [m for m in ours if "XXXXsecretXXXX" in m]


async def test_the_notify_history_never_holds_a_webhooks_url(client, task_queue, events_file) -> None:
    """End to end: a call parks, its webhook's receiver is down (a Slack-like URL whose path is
    the credential); the notify workflow retries. The failure the server shows for its delivery
    names webhook:0 and the host, and neither its history (plan, inputs) nor the run's holds
    the URL."""
    import asyncio

    from codemode.activities import ToolRegistry
    from codemode.client.executions import start_execution
    from codemode.client.following import send_decision
    from codemode.worker.dev_server import free_port
    from codemode.worker.worker import CodeModeWorker
    from codemode.workflows.models import CodeExecutionRequest

    from .conftest import TOOLS_MODULE
    from .test_decisions import parked

    dead = free_port()
    config = NotifyConfig.model_validate(
        {
            "webhooks": [{"url": f"http://127.0.0.1:{dead}{SECRET_PATH}", "secret": "whsec-test"}],
            "retry": {"initial_interval": "0.2s", "maximum_interval": "0.5s"},
        }
    )
    code = "r = send_money('bob', 900)\nr['amount']"
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=config)
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        run_id = (await handle.describe()).raw_description.workflow_execution_info.first_run_id or handle.result_run_id
        notify = client.get_workflow_handle(f"codemode-notify:{run_id}:{pending.call_id}:requested")
        failure = ""
        for _ in range(300):
            try:
                acts = (await notify.describe()).raw_description.pending_activities
            except Exception:  # not started yet
                acts = []
            failure = " ".join(a.last_failure.message for a in acts if a.attempt >= 2)
            if failure:
                break
            await asyncio.sleep(0.1)
        assert "webhook:0" in failure and "127.0.0.1" in failure and "XXXXsecretXXXX" not in failure, failure
        await send_decision(handle, pending.call_id, approve=True, by="ana", door="cli")
        assert (await handle.result()).output == 900
        await notify.terminate("the test is done")
    for h in (notify, handle):  # every event's bytes: payloads (inputs, results) and failures
        raw = b"".join(e.SerializeToString() for e in (await h.fetch_history()).events)
        assert b"XXXXsecretXXXX" not in raw and b"/services/" not in raw
    raw = b"".join(e.SerializeToString() for e in (await notify.fetch_history()).events)
    assert b"webhook:0" in raw  # the plan and the delivery name the channel by its number
