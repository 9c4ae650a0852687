"""The inbox's aiohttp application: the pages, the forms, and every decision through
``send_decision`` (the one function every door uses) as the authenticated person.

Every response says it is not to be framed, cached or referred from (``SECURITY_HEADERS``);
signing in is a POST of the token, answered with a session cookie (``auth.py``)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web
from temporalio.client import Client

from codemode.approvals.notify.config import Links
from codemode.approvals.notify.signing import LinkClaim, LinkError, read_link_token
from codemode.approvals.signing import sha256_of
from codemode.apps.inbox import bulk, data, views
from codemode.apps.inbox.auth import BadIdentity, InboxAuth
from codemode.apps.inbox.signing import SigningRefused, sign_for_person
from codemode.apps.inbox.wording import how_to_sign_in, json_problem, refusal
from codemode.client.following import DecisionRefused, send_decision
from codemode.workflows.models import Answer, Decision

if TYPE_CHECKING:
    from codemode.client.signing import Signer

log = logging.getLogger(__name__)
#: A form larger than this is refused (413) before it is read.
MAX_FORM_BYTES = 64 * 1024
MAX_COMMENT = 2000
#: Who is signed in, set on the request by the authentication middleware.
IDENTITY = web.RequestKey("identity", str)
#: On every response: never framed (clickjacking), never cached (pages show pending calls and
#: carry forms' tokens), never named in a Referer (a link's token is in its path).
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


@dataclass
class Inbox:
    client: Client
    auth: InboxAuth
    #: Checks signed links (the notify config's ``links``: its secret, ``ttl`` and the tools no
    #: link may decide); None: links are refused. A bare secret: the default ``ttl``.
    links: Links | str | None = None
    #: The inbox's service key: signs every decision on behalf of the authenticated person
    #: (``apps/inbox/signing.py``); None: decisions go unsigned, refused where one is needed.
    signer: Signer | None = None
    #: How to get in, said on the sign-in page (``codemode dev``: the link it printed).
    sign_in_hint: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.links, str):
            self.links = Links(secret=self.links)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FORM_BYTES, middlewares=[self._authenticate, self._styled_errors])
        app.on_response_prepare.append(_security_headers)
        app.router.add_get("/", self.index)
        app.router.add_get("/waiting.json", self.waiting_json)
        app.router.add_post("/bulk", self.bulk)
        app.router.add_get("/calls/{execution_id}/{call_id}", self.show_call)
        app.router.add_post("/calls/{execution_id}/{call_id}", self.decide_call)
        app.router.add_get("/decisions", self.decisions)
        app.router.add_static("/static/", views.STATIC)
        app.router.add_get("/link/{token}", self.show_link)
        app.router.add_post("/link/{token}", self.use_link)
        app.router.add_get("/login", self.login_page)
        app.router.add_post("/login", self.login)
        app.router.add_get("/healthz", self.healthz)
        return app

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    # -- who is here ------------------------------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = request.raw_path.split("?", 1)[0].lower()
        if "/." in raw or "%2e" in raw or "%2f" in raw or "\\" in raw:
            # A path a proxy may route one way and this server resolve another: refused.
            return views.message("Bad request", "This address is not one the inbox serves.", status=400, back=None)
        try:
            identity = self.auth.identify(request)
        except BadIdentity as err:
            return views.message("Bad request", f"Who you are cannot be told: {err}.", status=400, back=None)
        if request.path in ("/login", "/healthz") or request.path.startswith(("/link/", "/static/")):
            if identity is not None:
                request[IDENTITY] = identity
            return await handler(request)
        if identity is None:
            back = request.path_qs if request.method == "GET" else request.path
            return self._sign_in(back, "You are not signed in.")
        request[IDENTITY] = identity
        return await handler(request)

    @web.middleware
    async def _styled_errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """An address the inbox does not serve gets a page in its own words, not the framework's."""
        try:
            return await handler(request)
        except web.HTTPNotFound:
            text = "There is no page at this address. The waiting calls are listed on the first page."
            return views.message("Not found", text, status=404, identity=request.get(IDENTITY))
        except web.HTTPMethodNotAllowed:
            text = "This page only shows; it takes no form."
            return views.message("Not here", text, status=405, identity=request.get(IDENTITY))
        except web.HTTPException:
            raise
        except Exception:  # noqa: BLE001 - said to the person in words; the traceback goes to the log
            log.exception("inbox: %s %s failed", request.method, request.path)
            text = "The inbox could not show this page (it says why in its log). Nothing was decided by it."
            return views.message("Something went wrong", text, status=500, identity=request.get(IDENTITY), kind="error")

    def _sign_in(self, back: str | None, error: str | None, status: int = 401) -> web.Response:
        """The sign-in page: how to get in here, and a token field when tokens are how."""
        return views.page(
            "login.html",
            status=status,
            title="Sign in",
            identity=None,
            error=error,
            hint=self.sign_in_hint or how_to_sign_in(self.auth.trusted_header is not None, bool(self.auth.users)),
            tokens=bool(self.auth.users),
            next=_local(back),
        )

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        # The token is posted (never in an address: it would stay in the history, the logs and
        # a Referer); a ``?token=`` here signs nobody in. A printed sign-in link carries it after
        # ``#`` (never sent to any server), which the page's script posts.
        return self._sign_in(request.query.get("next"), None, status=200)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token, back = str(form.get("token", "")).strip(), str(form.get("next", "") or "")
        identity = self.auth.user_of(token) if token else None
        if identity is None:
            return self._sign_in(back, "That token is not known here.")
        # Back to the page the person asked for (a plain 303: returning an HTTPException is deprecated).
        response = web.Response(status=303, headers={"Location": _local(back)})
        self.auth.set_session(response, request, identity)  # a session, never the token itself
        return response

    # -- pages ------------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        tool = request.query.get("tool") or None
        rows = await data.pending_calls(self.client)
        tools = sorted({r.tool for r in rows})
        shown = [r for r in rows if tool is None or r.tool == tool]
        identity = request[IDENTITY]
        return views.page(
            "list.html",
            title="Waiting",
            page_name="list",
            identity=identity,
            rows=shown,
            tools=tools,
            tool=tool,
            waiting_count=len(rows),
            csrf=self.auth.csrf(identity),
        )

    async def waiting_json(self, request: web.Request) -> web.StreamResponse:
        """The list's rows as they are now, for the page's script (a live list)."""
        tool = request.query.get("tool") or None
        rows = await data.pending_calls(self.client)
        shown = [r for r in rows if tool is None or r.tool == tool]
        return web.json_response(
            {"count": len(rows), "keys": [r.key for r in shown], "rows": views.render("_rows.html", rows=shown)}
        )

    async def decisions(self, request: web.Request) -> web.StreamResponse:
        rows = await data.recent_decisions(self.client)
        return views.page(
            "decisions.html", title="Recent decisions", page_name="decisions", identity=request[IDENTITY], rows=rows
        )

    async def show_call(
        self,
        request: web.Request,
        notice: str | None = None,
        kind: str = "",
        *,
        errors: dict[str, str] | None = None,
        typed: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        execution_id, call_id = request.match_info["execution_id"], request.match_info["call_id"]
        view = await data.call_view(self.client, execution_id, call_id)
        identity = request[IDENTITY]
        if view is None or (view.call is None and not view.pending):
            return views.message(
                "Unknown call",
                f"There is no call {call_id} in run {execution_id}: it may have been deleted, or the address is "
                "mistyped.",
                status=404,
                identity=identity,
            )
        if errors and not view.pending:  # no form to say it at: the call was decided meanwhile
            notice, kind, errors = " ".join(errors.values()), "error", None
        return views.page(
            "call.html",
            title=view.call.summary if view.call else call_id,
            page_name="call",
            identity=identity,
            view=view,
            code=views.code_lines(view.audit.code, view.call.line if view.call else None),
            csrf=self.auth.csrf(identity),
            notice=notice,
            notice_kind=kind,
            errors=errors or {},
            typed=typed or {},
            next_call=await data.next_waiting(self.client, after=(execution_id, call_id)),
        )

    # -- deciding ---------------------------------------------------------------------------

    async def decide_call(self, request: web.Request) -> web.StreamResponse:
        identity = request[IDENTITY]
        execution_id, call_id = request.match_info["execution_id"], request.match_info["call_id"]
        form = await request.post()
        if not self.auth.check_csrf(identity, str(form.get("csrf", ""))):
            return views.message(
                "Refused",
                "This form is stale or did not come from the inbox: reload the page.",
                status=403,
                identity=identity,
            )
        action, typed = str(form.get("action", "")), _typed(form)
        try:
            decision = _decision_from_form(form, call_id, identity)
        except ValueError as err:
            return await self._refused(request, f"Nothing was sent: {err}", status=400, action=action, typed=typed)
        return await self._send(request, execution_id, decision, action=action, typed=typed)

    async def _send(
        self,
        request: web.Request,
        execution_id: str,
        decision: Decision,
        *,
        action: str = "",
        typed: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        handle = self.client.get_workflow_handle(execution_id)
        try:
            await sign_for_person(handle, decision, self.signer)
            record = await send_decision(handle, decision)
        except (DecisionRefused, SigningRefused) as err:
            return await self._refused(request, f"Nothing was decided: {refusal(str(err))}", action=action, typed=typed)
        verb = "Answered" if decision.answer is not None else "Approved" if decision.approve else "Denied"
        if decision.rollback:
            verb = "Denied and rolled back"
        later = "" if record is not None else " No worker is running: it takes effect when one starts."
        if request.path.startswith("/link/"):
            return views.message(
                f"{verb}",
                f"{verb} call {decision.call_id} of {execution_id} as {decision.by}.{later}",
                identity=decision.by,
                back=None,
                kind="denied" if verb == "Denied" else "ok",
            )
        if record is not None and record.decision == "counted":  # an N-of-M rule: more approvals to come
            notice, kind = f"Your approval is counted, as {decision.by}; the call needs {record.needed} more.", "ok"
        else:
            notice, kind = f"{verb} as {decision.by}.{later}", "denied" if verb == "Denied" else "ok"
        return await self.show_call(request, notice=notice, kind=kind)

    async def _refused(
        self,
        request: web.Request,
        text: str,
        status: int = 409,
        *,
        action: str = "",
        typed: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        if request.path.startswith("/link/"):
            return views.message("Nothing was decided", text, status=status, back=None, kind="error")
        if action in ("approve", "deny", "edit", "answer"):  # said at the form, what was typed kept
            response = await self.show_call(request, errors={action: text}, typed=typed)
        else:
            response = await self.show_call(request, notice=text, kind="error")
        response.set_status(status)
        return response

    async def bulk(self, request: web.Request) -> web.StreamResponse:
        """Approve or deny the calls selected on the list, each decided (and signed) on its own."""
        return await bulk.decide_selected(self.client, self.auth, self.signer, request, request[IDENTITY])

    # -- signed links -----------------------------------------------------------------------

    def _claim(self, token: str) -> LinkClaim:
        links = self.links
        if not isinstance(links, Links):
            raise LinkError("this inbox does not take approval links (no links secret in its notify config)")
        return read_link_token(links.secret, token, ttl=links.ttl)

    def _link_refusal(self, request: web.Request, claim: LinkClaim, view: Any) -> web.StreamResponse | None:
        """Why this link may not decide this call here, as the page to show (None: it may): the
        call it names must be the one waiting (its run, its arguments), the tool must take link
        decisions, and with sign-in configured the person signed in must be the link's approver."""
        refused = "This link decides nothing"
        if view is None or not view.pending:
            return views.message(
                refused,
                "The call is not waiting for a decision any more "
                "(it was decided, or its time ran out): this link has been used or is too late.",
                status=409,
                back=None,
            )
        call = view.call
        tool, asked = (call.tool, call.arguments) if call is not None else ("<code>", None)
        arguments = sha256_of(asked) if asked is not None else ""
        run = view.audit.first_run_id
        if (run and claim.run_id != run) or claim.arguments_sha256 != arguments:
            return views.message(
                refused, "This link was made for another run or other arguments.", status=403, back=None
            )
        if isinstance(self.links, Links) and self.links.refuses(tool):
            return views.message(refused, f"Calls of {tool} are decided in the inbox only.", status=403, back=None)
        if self.auth.configured:
            identity = request.get(IDENTITY)
            if identity is None:
                return self._sign_in(request.path, f"Sign in as {claim.approver} to use this link.")
            if identity.casefold() != claim.approver.casefold():
                return views.message(
                    refused,
                    f"This link is for {claim.approver}; you are signed in as {identity}.",
                    status=403,
                    identity=identity,
                    back=None,
                )
        return None

    async def show_link(self, request: web.Request) -> web.StreamResponse:
        try:
            claim = self._claim(request.match_info["token"])
        except LinkError as err:
            return views.message("This link decides nothing", str(err), status=403, back=None)
        view = await data.call_view(self.client, claim.execution_id, claim.call_id)
        refusal = self._link_refusal(request, claim, view)
        if refusal is not None:
            return refusal
        return views.page(
            "link.html",
            title="Confirm",
            identity=None,
            view=view,
            claim=claim,
            code=views.code_lines(view.audit.code, view.call.line if view.call else None),
        )

    async def use_link(self, request: web.Request) -> web.StreamResponse:
        try:
            claim = self._claim(request.match_info["token"])
        except LinkError as err:
            return views.message("This link decides nothing", str(err), status=403, back=None)
        refusal = self._link_refusal(
            request, claim, await data.call_view(self.client, claim.execution_id, claim.call_id)
        )
        if refusal is not None:
            return refusal
        form = await request.post()
        comment = str(form.get("comment", "")).strip()[:MAX_COMMENT] or None
        decision = Decision(
            call_id=claim.call_id, approve=claim.action == "approve", by=claim.approver, comment=comment, door="link"
        )
        return await self._send(request, claim.execution_id, decision)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def _local(back: str | None) -> str:
    """Where to go after signing in: a path of this inbox (never another site), else the list."""
    if not back or not back.startswith("/") or back.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(back)
    return "/" if parts.scheme or parts.netloc else back


def _typed(form: Any) -> dict[str, str]:
    """What the person typed, to show again with a refusal (by form)."""
    action = str(form.get("action", ""))
    typed = {f"{action}_comment": str(form.get("comment", ""))}
    if action == "edit":
        typed["arguments"] = str(form.get("arguments", ""))
    if action == "answer":
        typed["result"] = str(form.get("result", ""))
    return typed


def _decision_from_form(form: Any, call_id: str, identity: str) -> Decision:
    """The decision a posted form asks for; ValueError saying what is wrong with it."""
    action = str(form.get("action", ""))
    comment = str(form.get("comment", "")).strip()
    if len(comment) > MAX_COMMENT:
        raise ValueError(f"the comment is over {MAX_COMMENT} characters.")
    base = {"call_id": call_id, "by": identity, "comment": comment or None, "door": "inbox"}
    if action == "approve":
        return Decision(approve=True, **base)
    if action in ("deny", "deny_rollback"):
        if not comment:
            raise ValueError("say why it is denied: the code sees the reason.")
        return Decision(approve=False, rollback=action == "deny_rollback", **base)
    if action == "edit":
        arguments = _json_field(form, "arguments", "the arguments are")
        if not isinstance(arguments, dict):
            raise ValueError('the arguments must be a JSON object of names and values, like {"to": "bo@example.com"}.')
        return Decision(approve=True, arguments=arguments, **base)
    if action == "answer":
        return Decision(approve=True, answer=Answer(value=_json_field(form, "result", "the result is")), **base)
    raise ValueError("this form asks for no decision the inbox knows (approve, deny, deny and roll back, edit or answer).")


def _json_field(form: Any, name: str, what: str) -> Any:
    """``what``: ``the arguments are``, ``the result is``."""
    text = str(form.get(name, "")).strip()
    if not text:
        raise ValueError(
            f"{what} missing: write them as JSON." if what.endswith("are") else f"{what} missing: write it as JSON."
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} not valid JSON: {json_problem(err)}.") from None
