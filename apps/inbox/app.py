"""The inbox's aiohttp application: the pages, the forms, and every decision through
``send_decision`` (the one function every door uses) as the authenticated person."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from temporalio.client import Client

from codemode.approvals.notify.signing import LinkClaim, LinkError, read_link_token
from codemode.apps.inbox import data, views
from codemode.apps.inbox.auth import COOKIE, InboxAuth
from codemode.apps.inbox.signing import SigningRefused, sign_for_person
from codemode.client.following import DecisionRefused, send_decision
from codemode.workflows.models import Answer, Decision

if TYPE_CHECKING:
    from codemode.client.signing import Signer

#: A form larger than this is refused (413) before it is read.
MAX_FORM_BYTES = 64 * 1024
MAX_COMMENT = 2000
#: Who is signed in, set on the request by the authentication middleware.
IDENTITY = web.RequestKey("identity", str)


@dataclass
class Inbox:
    client: Client
    auth: InboxAuth
    #: Checks signed links (the notify config's ``links.secret``); None: links are refused.
    links_secret: str | None = None
    #: The inbox's service key: signs every decision on behalf of the authenticated person
    #: (``apps/inbox/signing.py``); None: decisions go unsigned, refused where one is needed.
    signer: Signer | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FORM_BYTES, middlewares=[self._authenticate])
        app.router.add_get("/", self.index)
        app.router.add_get("/calls/{execution_id}/{call_id}", self.show_call)
        app.router.add_post("/calls/{execution_id}/{call_id}", self.decide_call)
        app.router.add_get("/decisions", self.decisions)
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
        if request.path in ("/login", "/healthz") or request.path.startswith("/link/"):
            return await handler(request)
        identity = self.auth.identify(request)
        if identity is None:
            return views.page(
                "login.html",
                status=401,
                title="Sign in",
                identity=None,
                error="You are not signed in: open the inbox through your sign-in proxy, or sign in with your token.",
            )
        request[IDENTITY] = identity
        return await handler(request)

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        token = request.query.get("token")
        if token:  # a login link (``codemode inbox`` prints one when it made the token)
            return self._logged_in(token) or views.page(
                "login.html", status=401, title="Sign in", identity=None, error="That token is not known here."
            )
        return views.page("login.html", title="Sign in", identity=None, error=None)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = str(form.get("token", "")).strip()
        return self._logged_in(token) or views.page(
            "login.html", status=401, title="Sign in", identity=None, error="That token is not known here."
        )

    def _logged_in(self, token: str) -> web.StreamResponse | None:
        if not token or self.auth.user_of(token) is None:
            return None
        response = web.HTTPSeeOther("/")
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    # -- pages ------------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        tool = request.query.get("tool") or None
        rows = await data.pending_calls(self.client)
        tools = sorted({r.tool for r in rows})
        shown = [r for r in rows if tool is None or r.tool == tool]
        return views.page("list.html", title="Waiting", identity=request[IDENTITY], rows=shown, tools=tools, tool=tool)

    async def decisions(self, request: web.Request) -> web.StreamResponse:
        rows = await data.recent_decisions(self.client)
        return views.page("decisions.html", title="Recent decisions", identity=request[IDENTITY], rows=rows)

    async def show_call(self, request: web.Request, notice: str | None = None, kind: str = "") -> web.StreamResponse:
        execution_id, call_id = request.match_info["execution_id"], request.match_info["call_id"]
        view = await data.call_view(self.client, execution_id, call_id)
        identity = request[IDENTITY]
        if view is None or (view.call is None and not view.pending):
            return views.message(
                "Unknown call",
                f"There is no call {call_id} in execution {execution_id}.",
                status=404,
                identity=identity,
            )
        if notice is None and not view.pending:
            notice, kind = "This call is not waiting for a decision any more.", ""
        return views.page(
            "call.html",
            title=view.call.summary if view.call else call_id,
            identity=identity,
            view=view,
            code=views.code_lines(view.audit.code, view.call.line if view.call else None),
            csrf=self.auth.csrf(identity),
            notice=notice,
            notice_kind=kind,
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
        try:
            decision = _decision_from_form(form, call_id, identity)
        except ValueError as err:
            return await self._refused(request, f"Nothing was sent: {err}", status=400)
        return await self._send(request, execution_id, decision)

    async def _send(self, request: web.Request, execution_id: str, decision: Decision) -> web.StreamResponse:
        handle = self.client.get_workflow_handle(execution_id)
        try:
            await sign_for_person(handle, decision, self.signer)
            record = await send_decision(handle, decision)
        except (DecisionRefused, SigningRefused) as err:
            return await self._refused(request, f"Nothing was decided: {err}")
        verb = "Answered" if decision.answer is not None else "Approved" if decision.approve else "Denied"
        later = "" if record is not None else " No worker is running: it takes effect when one starts."
        if request.path.startswith("/link/"):
            return views.message(
                f"{verb}",
                f"{verb} call {decision.call_id} of {execution_id} as {decision.by}.{later}",
                identity=decision.by,
                back=None,
            )
        return await self.show_call(request, notice=f"{verb} as {decision.by}.{later}", kind="ok")

    async def _refused(self, request: web.Request, text: str, status: int = 409) -> web.StreamResponse:
        if request.path.startswith("/link/"):
            return views.message("Nothing was decided", text, status=status, back=None)
        response = await self.show_call(request, notice=text, kind="error")
        response.set_status(status)
        return response

    # -- signed links -----------------------------------------------------------------------

    def _claim(self, token: str) -> LinkClaim:
        if not self.links_secret:
            raise LinkError("this inbox does not take approval links (no links secret in its notify config)")
        return read_link_token(self.links_secret, token)

    async def show_link(self, request: web.Request) -> web.StreamResponse:
        try:
            claim = self._claim(request.match_info["token"])
        except LinkError as err:
            return views.message("This link decides nothing", str(err), status=403, back=None)
        view = await data.call_view(self.client, claim.execution_id, claim.call_id)
        if view is None or not view.pending:
            return views.message(
                "This link decides nothing",
                "The call is not waiting for a decision any more "
                "(it was decided, or its time ran out): this link has been used or is too late.",
                status=409,
                back=None,
            )
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
        form = await request.post()
        comment = str(form.get("comment", "")).strip()[:MAX_COMMENT] or None
        decision = Decision(
            call_id=claim.call_id, approve=claim.action == "approve", by=claim.approver, comment=comment, door="link"
        )
        return await self._send(request, claim.execution_id, decision)


def _decision_from_form(form: Any, call_id: str, identity: str) -> Decision:
    """The decision a posted form asks for; ValueError saying what is wrong with it."""
    action = str(form.get("action", ""))
    comment = str(form.get("comment", "")).strip()
    if len(comment) > MAX_COMMENT:
        raise ValueError(f"the comment is over {MAX_COMMENT} characters")
    base = {"call_id": call_id, "by": identity, "comment": comment or None, "door": "inbox"}
    if action == "approve":
        return Decision(approve=True, **base)
    if action == "deny":
        if not comment:
            raise ValueError("say why it is denied: the code sees the reason")
        return Decision(approve=False, **base)
    if action == "edit":
        arguments = _json_field(form, "arguments", "the arguments")
        if not isinstance(arguments, dict):
            raise ValueError("the arguments must be a JSON object: parameter name -> value")
        return Decision(approve=True, arguments=arguments, **base)
    if action == "answer":
        return Decision(approve=True, answer=Answer(value=_json_field(form, "result", "the result")), **base)
    raise ValueError("unknown action: approve, deny, edit or answer")


def _json_field(form: Any, name: str, what: str) -> Any:
    text = str(form.get(name, "")).strip()
    if not text:
        raise ValueError(f"{what} are missing" if what.endswith("s") else f"{what} is missing")
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValueError(f"{what} is not valid JSON: {err}") from None
