"""Sending one event on one channel: a webhook (JSON, or a Slack incoming-webhook message with
the links as buttons) or email over SMTP (stdlib). Raise on failure: the delivery activity's
retry policy sends again, with the same idempotency key and the same body."""

from __future__ import annotations

import asyncio
import hashlib
import json
import smtplib
import ssl
from datetime import datetime
from email.message import EmailMessage
from typing import Any

import aiohttp

from codemode.approvals.notify.config import Email, NotifyConfig, Webhook
from codemode.approvals.notify.events import NotifyRequest, code_text, event_body, headline
from codemode.approvals.notify.signing import SIGNATURE_HEADER, LinkClaim, make_link_token, sign_webhook

#: How long one attempt at a receiver may take.
ATTEMPT_SECONDS = 10.0


class ChannelRefused(Exception):
    """The receiver answered that it will never take this event (a 4xx; an untrusted
    certificate, a refused login): not retried."""


def links_for(config: NotifyConfig, req: NotifyRequest, approver: str | None) -> dict[str, str]:
    """The inbox link and, for an event that asks for a decision and a named approver, signed
    approve/deny links that name them. Deterministic per event and approver (same on retries)."""
    if not config.inbox_url:
        return {}
    links = {"inbox": f"{config.inbox_url}/calls/{req.execution_id}/{req.call_id}"}
    if approver is None or config.links is None or req.event not in ("approval.requested", "approval.reminder"):
        return links
    start = req.asked_at.timestamp() if req.asked_at else 0.0
    expires = start + config.links.ttl
    if req.deadline is not None:
        expires = (
            min(expires, req.deadline.timestamp()) if req.event == "approval.requested" else req.deadline.timestamp()
        )
    for action in ("approve", "deny"):
        nonce = hashlib.sha256(f"{req.idempotency_key}|{approver}|{action}".encode()).hexdigest()[:16]
        claim = LinkClaim(req.execution_id, req.call_id, action, approver, int(expires), nonce)
        links[action] = f"{config.inbox_url}/link/{make_link_token(config.links.secret, claim)}"
    return links


async def send_webhook(config: NotifyConfig, hook: Webhook, req: NotifyRequest) -> int:
    links = links_for(config, req, hook.approver)
    payload = slack_message(req, links) if hook.format == "slack" else event_body(req, links)
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": req.idempotency_key,
        "X-Codemode-Event": req.event,
    }
    if hook.secret:
        headers[SIGNATURE_HEADER] = sign_webhook(hook.secret, body)
    timeout = aiohttp.ClientTimeout(total=ATTEMPT_SECONDS)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(hook.url, data=body, headers=headers) as resp,
    ):
        if resp.status < 300:
            return resp.status
        text = (await resp.text())[:300]
        if 400 <= resp.status < 500 and resp.status not in (408, 425, 429):
            raise ChannelRefused(f"{hook.url} refused the event: HTTP {resp.status}: {text}")
        raise ConnectionError(f"{hook.url} answered HTTP {resp.status}: {text}")


def slack_message(req: NotifyRequest, links: dict[str, str]) -> dict[str, Any]:
    """An incoming-webhook message: the headline, the call and its code, the links as buttons."""
    lines = [f"*{headline(req)}*", f"Execution `{req.execution_id}`, call `{req.call_id}`"]
    if req.deadline is not None and req.event in ("approval.requested", "approval.reminder"):
        lines.append(f"Decide before {req.deadline.isoformat(timespec='minutes')}")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{code_text(req.code)}```"}},
    ]
    buttons = [
        {"type": "button", "text": {"type": "plain_text", "text": label}, "url": links[key], **extra}
        for key, label, extra in (
            ("approve", "Approve", {"style": "primary"}),
            ("deny", "Deny", {"style": "danger"}),
            ("inbox", "Open in the inbox", {}),
        )
        if key in links
    ]
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": headline(req), "blocks": blocks}


def email_text(req: NotifyRequest, links: dict[str, str]) -> str:
    parts = [
        headline(req),
        "",
        f"Execution: {req.execution_id}",
        f"Call: {req.call_id} ({req.tool})",
        f"Arguments: {json.dumps(req.arguments, default=str) if req.arguments is not None else '(see the inbox)'}",
    ]
    if req.deadline is not None:
        parts.append(f"Deadline: {req.deadline.isoformat(timespec='minutes')}")
    if req.decided is not None:
        d = req.decided
        parts.append(
            f"Decision: {d.decision} by {d.by or 'nobody'} via {d.door or '?'}"
            + (f": {d.comment}" if d.comment else "")
        )
    parts += ["", "The code (> marks the call):", code_text(req.code), ""]
    for key, label in (("approve", "Approve"), ("deny", "Deny"), ("inbox", "Open in the inbox")):
        if key in links:
            parts.append(f"{label}: {links[key]}")
    return "\n".join(parts) + "\n"


async def send_email(config: NotifyConfig, mail: Email, req: NotifyRequest) -> int:
    """One message per recipient (their links name them). Message-ID is stable per event and
    recipient, so a retry that resends is recognisable."""
    messages = []
    for rcpt in mail.to:
        msg = EmailMessage()
        msg["Subject"] = headline(req)
        msg["From"] = mail.sender
        msg["To"] = rcpt
        msg["Message-ID"] = f"<{hashlib.sha256(f'{req.idempotency_key}|{rcpt}'.encode()).hexdigest()[:32]}@codemode>"
        msg["X-Codemode-Event"] = req.event
        msg["Idempotency-Key"] = req.idempotency_key
        msg["Date"] = datetime.now().astimezone().strftime("%a, %d %b %Y %H:%M:%S %z")
        msg.set_content(email_text(req, links_for(config, req, rcpt)))
        messages.append(msg)
    try:
        await asyncio.to_thread(_smtp_send, mail, messages)
    except ssl.SSLCertVerificationError as err:
        raise ChannelRefused(
            f"email: {mail.host}:{mail.port}'s certificate is not trusted ({err.verify_message})"
        ) from None
    except smtplib.SMTPAuthenticationError as err:
        raise ChannelRefused(
            f"email: {mail.host}:{mail.port} refused the login of {mail.username}: {err.smtp_code}"
        ) from None
    return len(messages)


def _smtp_send(mail: Email, messages: list[EmailMessage]) -> None:
    # smtplib without a context does not check the server's certificate: always pass one.
    tls = ssl.create_default_context(cafile=mail.ca_file)
    if mail.ssl:
        connection = smtplib.SMTP_SSL(mail.host, mail.port, timeout=ATTEMPT_SECONDS, context=tls)
    else:
        connection = smtplib.SMTP(mail.host, mail.port, timeout=ATTEMPT_SECONDS)
    with connection as smtp:
        if mail.starttls:
            smtp.starttls(context=tls)
        if mail.username:
            smtp.login(mail.username, mail.password or "")
        for msg in messages:
            smtp.send_message(msg)
