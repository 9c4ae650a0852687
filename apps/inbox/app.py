"""The inbox's aiohttp application: the pages, the forms, and every decision through
``send_decision`` (the one function every door uses) as the authenticated person.

Every response says it is not to be framed, cached or referred from (``SECURITY_HEADERS``);
signing in is a POST of the token, answered with a session cookie (``auth.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from temporalio.client import Client

from codemode.approvals.notify.config import Links
from codemode.approvals.notify.signing import LinkClaim, LinkError, read_link_token
from codemode.approvals.signing import sha256_of
from codemode.apps.inbox import data, views
from codemode.apps.inbox.auth import BadIdentity, InboxAuth
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

    def __post_init__(self) -> None:
        if isinstance(self.links, str):
            self.links = Links(secret=self.links)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FORM_BYTES, middlewares=[self._authenticate])
        app.on_response_prepare.append(_security_headers)
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
        try:
            identity = self.auth.identify(request)
        except BadIdentity as err:
            return views.message("Bad request", f"Who you are cannot be told: {err}.", status=400, back=None)
        if request.path in ("/login", "/healthz") or request.path.startswith("/link/"):
            if identity is not None:
                request[IDENTITY] = identity
            return await handler(request)
        if identity is None:
            return _sign_in("You are not signed in: open the inbox through your sign-in proxy, or sign in with your token.")
        request[IDENTITY] = identity
        return await handler(request)

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        # The token is posted (never in an address: it would stay in the history, the logs and
        # a Referer); a ``?token=`` here signs nobody in.
        return views.page("login.html", title="Sign in", identity=None, error=None)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = str(form.get("token", "")).strip()
        identity = self.auth.user_of(token) if token else None
        if identity is None:
            return _sign_in("That token is not known here.")
        response = web.Response(status=303, headers={"Location": "/"})
        self.auth.set_session(response, request, identity)  # a session, never the token itself
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
                return _sign_in(f"Sign in as {claim.approver} to use this link.")
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


def _sign_in(error: str) -> web.StreamResponse:
    """The sign-in page (401), saying why."""
    return views.page("login.html", status=401, title="Sign in", identity=None, error=error)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


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
