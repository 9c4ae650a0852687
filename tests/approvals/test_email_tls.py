"""The email channel to a relay that requires STARTTLS and a login, as a real one does: the
server's certificate is verified (against ``ca_file``: the relay's certificate comes from a CA
of our own, made with openssl), the password goes only over TLS, and a relay whose certificate
the CA did not sign gets nothing. A call that waits, then expires, through the worker."""

from __future__ import annotations

import ssl
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from codemode.activities import ToolRegistry
from codemode.approvals.notify.channels import ChannelRefused, send_email
from codemode.approvals.notify.config import NotifyConfig
from codemode.approvals.notify.events import NotifyRequest
from codemode.client.executions import start_execution
from codemode.worker.dev_server import free_port
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.secure_front.rig import make_certificates

from .conftest import TOOLS_MODULE
from .receivers import smtp_server
from .test_notifications import CODE


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("smtp-certs")
    make_certificates(path)
    return path


def _relay_tls(certs: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs / "server.pem", certs / "server.key")
    return ctx


def _email(port: int, **extra: object) -> dict:
    return {
        "host": "127.0.0.1",
        "port": port,
        "starttls": True,
        "username": "codemode",
        "password": {"env": "CODEMODE_TEST_SMTP_PASSWORD"},
        "from": "codemode@example.com",
        "to": ["ana@example.com"],
        **extra,
    }


async def test_a_call_reaches_a_relay_that_requires_starttls_and_a_login(
    client, task_queue, events_file, certs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_TEST_SMTP_PASSWORD", "s3cret")
    smtp, mailbox = smtp_server(free_port(), tls=_relay_tls(certs), users={"codemode": "s3cret"})
    config = NotifyConfig.model_validate({"email": _email(smtp.port, ca_file=str(certs / "ca.pem"))})
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=config)
    try:
        async with worker.running():
            request = CodeExecutionRequest(code=CODE, approval_timeout=timedelta(seconds=3))
            handle = await start_execution(client, request, task_queue=task_queue)
            assert not (await handle.result()).success
            await mailbox.wait_for(2)
    finally:
        smtp.stop()
    subjects = [m["Subject"] for m in mailbox.messages]
    assert subjects[0] == "Approval needed: send_money(to='bob', amount=900)", subjects
    assert subjects[1].startswith("No decision in time"), subjects
    assert mailbox.logins == ["codemode", "codemode"]


async def test_a_relay_whose_certificate_the_ca_did_not_sign_gets_nothing(certs: Path) -> None:
    smtp, mailbox = smtp_server(free_port(), tls=_relay_tls(certs), users={"codemode": "s3cret"})
    # The rig's other CA: the relay's certificate does not chain to it.
    config = NotifyConfig.model_validate(
        {"email": _email(smtp.port, password="s3cret", ca_file=str(certs / "rogue-ca.pem"))}
    )
    req = NotifyRequest(event="approval.requested", execution_id="exec-x", call_id="1", tool="send_money")
    try:
        assert config.email is not None
        with pytest.raises(ChannelRefused, match="certificate is not trusted"):
            await send_email(config, config.email, req)
        # Without ca_file the system's CAs do not know the rig's CA either.
        plain = NotifyConfig.model_validate({"email": _email(smtp.port, password="s3cret")})
        assert plain.email is not None
        with pytest.raises(ChannelRefused, match="certificate is not trusted"):
            await send_email(plain, plain.email, req)
    finally:
        smtp.stop()
    assert mailbox.messages == [] and mailbox.logins == []


async def test_a_wrong_password_is_refused_not_retried(certs: Path) -> None:
    smtp, mailbox = smtp_server(free_port(), tls=_relay_tls(certs), users={"codemode": "s3cret"})
    config = NotifyConfig.model_validate({"email": _email(smtp.port, password="wrong", ca_file=str(certs / "ca.pem"))})
    req = NotifyRequest(event="approval.requested", execution_id="exec-x", call_id="1", tool="send_money")
    try:
        assert config.email is not None
        with pytest.raises(ChannelRefused, match="refused the login of codemode: 535"):
            await send_email(config, config.email, req)
    finally:
        smtp.stop()
    assert mailbox.messages == []


def test_a_login_without_tls_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ValidationError, match="password would go in clear"):
        NotifyConfig.model_validate({"email": {**_email(25, password="x"), "starttls": False}})
