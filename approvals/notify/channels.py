"""Sending one event on one channel: a webhook (JSON, or a Slack incoming-webhook message with
the links as buttons) or email over SMTP (stdlib). Raise on failure: the delivery activity's
retry policy sends again, with the same idempotency key and the same body."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import smtplib
import ssl
from datetime import datetime
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from codemode.approvals.notify.config import Email, NotifyConfig, Webhook
from codemode.approvals.notify.events import NotifyRequest, code_text, event_body, headline, undo_lines
from codemode.approvals.notify.signing import SIGNATURE_HEADER, LinkClaim, make_link_token, sign_webhook
from codemode.approvals.signing import sha256_of

#: How long one attempt at a receiver may take.
ATTEMPT_SECONDS = 10.0


class ChannelRefused(Exception):
    """The receiver answered that it will never take this event (a 4xx; an untrusted
    certificate, a refused login): not retried."""


def links_for(config: NotifyConfig, req: NotifyRequest, approver: str | None) -> dict[str, str]:
    """The inbox link and, for an event that asks for a decision and a named approver, signed
    approve/deny links that name them, the run and the call's arguments. Each lives at most the
    links' ``ttl`` from when its event was due (a reminder's: its point before the deadline),
    and never past the deadline. Deterministic per event and approver (same on retries)."""
    if not config.inbox_url:
        return {}
    links = {"inbox": f"{config.inbox_url}/calls/{req.execution_id}/{req.call_id}"}
    if approver is None or config.links is None or req.event not in ("approval.requested", "approval.reminder"):
        return links
    if config.links.refuses(req.tool) or not req.run_id:
        return links  # no link decides this tool's calls (or the run is too old to be named)
    start = req.asked_at.timestamp() if req.asked_at else 0.0
    if req.event == "approval.reminder" and req.deadline is not None and req.reminder is not None:
        if 0 <= req.reminder < len(config.reminders):
            start = max(start, req.deadline.timestamp() - config.reminders[req.reminder])
    expires = start + config.links.ttl
    if req.deadline is not None:
        expires = min(expires, req.deadline.timestamp())
    digest = sha256_of(req.arguments) if req.arguments is not None else ""
    for action in ("approve", "deny"):
        nonce = hashlib.sha256(f"{req.idempotency_key}|{approver}|{action}".encode()).hexdigest()[:16]
        claim = LinkClaim(
            req.execution_id,
            req.call_id,
            action,
            approver,
            int(expires),
            nonce,
            run_id=req.run_id,
            arguments_sha256=digest,
            issued=int(start),
        )
        links[action] = f"{config.inbox_url}/link/{make_link_token(config.links.secret, claim)}"
    return links


def webhook_label(index: int, hook: Webhook) -> str:
    """How a webhook is named wherever a person or a history may read it: ``webhook:0
    (hooks.slack.com)``. Never its URL: a Slack webhook's path is its credential."""
    return f"webhook:{index} ({urlsplit(hook.url).hostname or '?'})"


def scrub(text: str, hook: Webhook, label: str) -> str:
    """``text`` (an error's) with the webhook's URL, and its path and query, replaced by ``label``."""
    parts = urlsplit(hook.url)
    for secret in sorted(
        {hook.url, hook.url.split("?", 1)[0], parts.path + (f"?{parts.query}" if parts.query else ""), parts.path},
        key=len,
        reverse=True,
    ):
        if secret and secret != "/":
            text = text.replace(secret, label)
    return text


async def send_webhook(config: NotifyConfig, hook: Webhook, req: NotifyRequest, index: int = 0) -> int:
    """POST the event; raise ``ChannelRefused`` (never retried) or ``ConnectionError``, whose
    messages name the webhook by ``webhook_label`` only."""
    label = webhook_label(index, hook)
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
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(hook.url, data=body, headers=headers) as resp,
        ):
            if resp.status < 300:
                return resp.status
            text = scrub((await resp.text())[:300], hook, label)
            if 400 <= resp.status < 500 and resp.status not in (408, 425, 429):
                raise ChannelRefused(f"{label} refused the event: HTTP {resp.status}: {text}")
            raise ConnectionError(f"{label} answered HTTP {resp.status}: {text}")
    except (ChannelRefused, ConnectionError):
        raise
    except Exception as err:  # aiohttp's errors may carry the URL: said again without it
        raise ConnectionError(f"{label}: {type(err).__name__}: {scrub(str(err), hook, label)}") from None


#: Slack's control characters in mrkdwn text (https://api.slack.com/reference/surfaces/formatting#escaping).
_SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def slack_escape(text: str) -> str:
    """Text the model wrote, safe in a Slack mrkdwn field: ``&``, ``<`` and ``>`` escaped as
    Slack says (no ``<!channel>``, no ``<https://x|fake link>``, no user mention)."""
    return "".join(_SLACK_ESCAPES.get(c, c) for c in text)


def slack_code(text: str) -> str:
    """Text for inside a Slack code block: escaped, and a run of three backticks broken (a
    zero-width space between them), so the code cannot close the block and write outside it."""
    return slack_escape(text).replace("```", "`\u200b`\u200b`")


def slack_message(req: NotifyRequest, links: dict[str, str]) -> dict[str, Any]:
    """An incoming-webhook message: the headline, the call and its code, the links as buttons.
    Everything the code or a model wrote is escaped (``slack_escape``, ``slack_code``)."""
    title = slack_escape(headline(req))
    lines = [f"*{title}*", f"Execution `{slack_code(req.execution_id)}`, call `{slack_code(req.call_id)}`"]
    if req.deadline is not None and req.event in ("approval.requested", "approval.reminder"):
        lines.append(f"Decide before {req.deadline.isoformat(timespec='minutes')}")
    if req.undo is not None and req.event in ("approval.requested", "approval.reminder"):
        lines += undo_lines(req.undo)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{slack_code(code_text(req.code))}```"}},
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
    return {"text": title, "blocks": blocks}


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
    if req.undo is not None:
        parts += undo_lines(req.undo)
    parts += ["", "The code (> marks the call):", code_text(req.code), ""]
    for key, label in (("approve", "Approve"), ("deny", "Deny"), ("inbox", "Open in the inbox")):
        if key in links:
            parts.append(f"{label}: {links[key]}")
    return "\n".join(parts) + "\n"


async def send_email(config: NotifyConfig, mail: Email, req: NotifyRequest) -> int:
    """One message per recipient (their links name them). Message-ID is stable per event and
    recipient, so a retry that resends is recognisable."""
    messages = []
    try:
        for rcpt in mail.to:
            msg = EmailMessage()
            msg["Subject"] = header_value(headline(req))
            msg["From"] = header_value(mail.sender)
            msg["To"] = header_value(rcpt)
            msg["Message-ID"] = (
                f"<{hashlib.sha256(f'{req.idempotency_key}|{rcpt}'.encode()).hexdigest()[:32]}@codemode>"
            )
            msg["X-Codemode-Event"] = header_value(req.event)
            msg["Idempotency-Key"] = header_value(req.idempotency_key)
            msg["Date"] = datetime.now().astimezone().strftime("%a, %d %b %Y %H:%M:%S %z")
            msg.set_content(email_text(req, links_for(config, req, rcpt)))
            msg.as_bytes()  # what sending would do with it: a message that cannot be is refused here
            messages.append(msg)
    except (ValueError, TypeError, LookupError) as err:  # built again on a retry, the same way: never retried
        raise ChannelRefused(f"email: the message cannot be built: {type(err).__name__}: {err}") from None
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


#: Characters a header value may not hold: control characters (CR and LF above all), and the
#: Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
#: A header value longer than this is cut (a summary the model made long).
MAX_HEADER = 300


def header_value(text: str) -> str:
    """A header value from text the model may have written: every run of control characters
    (a newline in a summary) becomes one space, and it is cut to ``MAX_HEADER`` characters."""
    clean = " ".join(_CONTROL.sub(" ", text).split())
    return clean if len(clean) <= MAX_HEADER else clean[: MAX_HEADER - 1] + "…"


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
