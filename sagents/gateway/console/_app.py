"""The console's Starlette app: login, pages and forms, and the routes of every page
(docs/console.md). The Runs and Run pages live in :mod:`~sagents.gateway.console._runs`, the
live updates' stream in :mod:`~sagents.gateway.console._events`, the Chat page's endpoints in
:mod:`~sagents.gateway.console._chat`.

Served at ``/console/`` by ``sagents serve --transport http`` (behind the gateway's ``Host`` and
``Origin`` checks) and by ``sagents console --data-dir DIR`` (records and audit only). Every
response carries a Content-Security-Policy without inline script (``script-src 'self'``) and
``frame-ancestors 'none'``; templates autoescape, and text written by a model, a tool or a
script is shown with its control characters as escapes
(:func:`~sagents.core._literal.printable`).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagents.audit._store import SqliteAuditStore
from sagents.core._literal import printable
from sagents.errors import StoreError, TaskNotFoundError
from sagents.gateway._operator_secret import LOGIN_QUERY, OperatorSecret
from sagents.gateway._pending import PendingApprovals
from sagents.gateway._settings import ApprovalRoute
from sagents.gateway._tasks import GatewayTasks
from sagents.gateway._tool_changes import ToolChanges
from sagents.gateway._web_auth import Principal, TooManyLogins, WebAuth
from sagents.gateway._workspaces import Workspaces
from sagents.gateway.console._auth import COOKIE_NAME, ConsoleAuth, ConsoleSession
from sagents.gateway.console._chat import ChatEndpoints, ChatThreads, request_principal
from sagents.gateway.console._events import LiveEvents, ids_of, page_frames
from sagents.gateway.console._live import LiveRuns
from sagents.gateway.console._oauth_login import ConsoleOAuthLogin
from sagents.gateway.console._records import (
    AuditFilter,
    filter_audit,
    format_number,
    format_time,
    read_todo,
    todo_sessions,
)
from sagents.gateway.console._runs import AUDIT_SCAN, RunPages
from sagents.mcp._convert import TOOL_NAME_SEPARATOR
from sagents.mcp._pins import definition_diff

if TYPE_CHECKING:
    from sagents.gateway._upstream_logins import UpstreamLogins

__all__ = ["CONSOLE_PATH", "ConsoleData", "SecurityHeaders", "build_console_app", "page_frames"]

CONSOLE_PATH = "/console"
UPSTREAM_CALLBACK_PATH = CONSOLE_PATH + "/oauth/upstream/callback"
"""Where an upstream server's authorization server sends the browser back after an
"Authorize" of the Servers page (docs/oauth.md)."""
UPSTREAM_LOGIN_COOKIE = "sagents_upstream_login"
"""Binds an upstream login to the browser that started it (only sent to the callback)."""
"""Where the console is served (pages under ``/console/``)."""

_HERE = Path(__file__).parent
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = (
    (b"content-security-policy", _CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer makes Origin "null"
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)
"""Sent on every console response: pages, errors, static files and unknown paths alike."""
_AUDIT_SHOWN = 200
_CHAT_STATIC = _HERE.parent / "_chat" / "static"  # the chat page's script, shared with chat --web


@dataclass(kw_only=True)
class ConsoleData:
    """What the console shows; a gateway fills every field, ``sagents console`` the disk ones.

    Attributes:
        workspaces: The sessions' workspaces (run records).
        audit_path: The audit store's file. todo_path: The built-in todo store's file.
        live: The gateway's live events (None: no gateway).
        pending: Approvals waiting for the console (None: no gateway).
        approvals: Who the gateway asks (``--approvals``).
        tasks: The gateway's background calls (None: no gateway).
        owner_of: The identity of a session's credential ("" when unknown).
        operator_tokens: Tokens of the operator; session_tokens: profiles' tokens.
        secure_cookies: Send the cookie with ``Secure`` (TLS, or a TLS proxy in front).
        secret: The operator secret; None: the one of the data directory (the audit file's
            directory), made when there is none (:mod:`sagents.gateway._operator_secret`).
        oauth_login: Logging in through the gateway's OAuth authorization server; None: not
            offered.
        tool_changes: The gateway's held changes of upstream tool definitions (None: no
            gateway, or one without a configuration).
        upstream_logins: The gateway's ``"auth": "oauth"`` servers and their logins (the
            Servers page's "Authorize"; docs/oauth.md); None: none.
        public_base: The gateway's public URL (``oauth.publicUrl``), for the redirect URI of
            an upstream login; None: the request's own origin.
        chat: The AG-UI threads of the Chat page (called per request); None: no Chat page
            (the config has no ``agent`` section).
        chat_model: The chat's model, shown on the page.
    """

    workspaces: Workspaces
    audit_path: Path
    todo_path: Path
    live: LiveRuns | None = None
    pending: PendingApprovals | None = None
    approvals: ApprovalRoute = "elicitation"
    tasks: GatewayTasks | None = None
    owner_of: Callable[[str], str] = field(default=lambda _session_id: "")
    operator_tokens: tuple[str, ...] = ()
    session_tokens: tuple[str, ...] = ()
    secure_cookies: bool = False
    secret: OperatorSecret | None = None
    oauth_login: ConsoleOAuthLogin | None = None
    tool_changes: ToolChanges | None = None
    upstream_logins: UpstreamLogins | None = None
    public_base: str | None = None
    chat: Callable[[], ChatThreads] | None = None
    chat_model: str = ""

    def web_auth(self) -> WebAuth:
        """The tokens the console accepts (the secret made when there is none yet)."""
        secret = self.secret or OperatorSecret.load_or_create(self.audit_path.parent)
        return WebAuth(
            secret=secret,
            operator_tokens=self.operator_tokens,
            session_tokens=self.session_tokens,
        )


def _environment() -> Environment:
    env = Environment(
        # the Chat page's body is the one of ``sagents chat --web`` (_chat/templates)
        loader=FileSystemLoader([_HERE / "templates", _HERE.parent / "_chat" / "templates"]),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=lambda value: printable(value) if isinstance(value, str) else value,
    )
    env.filters["time"] = format_time
    env.filters["number"] = format_number
    env.filters["short"] = lambda value: str(value)[:8] if value else ""
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False, default=str)
    return env


class Console:
    """The console's pages and forms over one :class:`ConsoleData`."""

    def __init__(self, data: ConsoleData) -> None:
        self.data = data
        self.web = data.web_auth()
        self.auth = ConsoleAuth(on_close=data.live.close_streams if data.live else None)
        self.env = _environment()
        self.audit = SqliteAuditStore(path=data.audit_path)

    # -- plumbing ------------------------------------------------------------------------------

    def _session(self, request: Request) -> tuple[ConsoleSession, bool]:
        found = self.auth.session(request.cookies.get(COOKIE_NAME))
        if found is not None:
            return found, False
        return self.auth.new_session(), True

    def _caller(self, request: Request) -> tuple[ConsoleSession, bool, Principal | None]:
        """The request's session (new: a cookie to set) and who it acts as: a bearer token's
        principal (a machine: the session is a throwaway, no cookie), else the session's."""
        bearer = self.web.bearer(request)
        if bearer is not None:
            return ConsoleSession(sid="", principal=bearer), False, bearer
        session, new = self._session(request)
        return session, new, None if session.closed else session.principal

    def _secure(self, request: Request) -> bool:
        return self.data.secure_cookies or request.url.scheme == "https"

    def _finish(
        self, response: Response, request: Request, session: ConsoleSession, new: bool
    ) -> Response:
        if new:
            response.set_cookie(
                COOKIE_NAME,
                session.sid,
                path=CONSOLE_PATH + "/",
                httponly=True,
                samesite="strict",
                secure=self._secure(request),
            )
        return response

    def _html(
        self, session: ConsoleSession, template: str, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            csrf=session.csrf,
            base=CONSOLE_PATH,
            gateway=self.data.live is not None,
            principal=session.principal,
            page=template.removesuffix(".html"),
            approvals_route=self.data.approvals,
            pending_count=self._pending_count(session.principal),
            oauth_login=self.data.oauth_login is not None,
            chat=self.data.chat is not None,
            **context,
        )
        return HTMLResponse(html, status_code=status_code)

    def _pending_count(self, principal: Principal | None) -> int:
        """How many approvals wait for ``principal`` (the navigation shows it on every page)."""
        if principal is None or self.data.pending is None:
            return 0
        owner = None if principal.operator else principal.identity
        return len(self.data.pending.pending(owner=owner))

    def _page(
        self,
        request: Request,
        session: ConsoleSession,
        new: bool,
        template: str,
        status_code: int = 200,
        **context: Any,
    ) -> Response:
        response = self._html(session, template, status_code, **context)
        return self._finish(response, request, session, new)

    def _login_required(
        self, request: Request, session: ConsoleSession, new: bool, error: str = ""
    ) -> Response:
        return self._page(request, session, new, "login.html", status_code=401, error=error)

    async def _form(self, request: Request) -> dict[str, str]:
        form = await request.form()
        return {k: v for k, v in form.items() if isinstance(v, str)}

    def visible(self, principal: Principal, session_id: str) -> bool:
        """Whether ``principal`` may see what the session ``session_id`` did."""
        return principal.operator or principal.may_see(self.data.owner_of(session_id))

    def page(
        self, handler: Callable[[Request, ConsoleSession, Principal], Any]
    ) -> Callable[[Request], Any]:
        """A GET page that needs a logged-in principal."""

        async def endpoint(request: Request) -> Response:
            session, new, principal = self._caller(request)
            if principal is None:
                return self._login_required(request, session, new)
            response = await handler(request, session, principal)
            return self._finish(response, request, session, new)

        return endpoint

    def action(
        self, handler: Callable[[Request, ConsoleSession, Principal, dict[str, str]], Any]
    ) -> Callable[[Request], Any]:
        """A POST that needs a logged-in principal and the session's CSRF token."""

        async def endpoint(request: Request) -> Response:
            form = await self._form(request)
            bearer = self.web.bearer(request)
            if bearer is not None:  # a browser cannot be made to send this header: no CSRF
                machine = ConsoleSession(sid="", principal=bearer)
                return cast(Response, await handler(request, machine, bearer, form))
            session = self.auth.session(request.cookies.get(COOKIE_NAME))
            given = form.get("csrf") or request.headers.get("x-csrf-token")
            if session is None or not self.auth.csrf_ok(session, given):
                return self._finish(
                    PlainTextResponse("missing or wrong CSRF token", status_code=403),
                    request,
                    session or self.auth.new_session(),
                    False,
                )
            if session.principal is None or session.closed:
                return self._login_required(request, session, False)
            response = await handler(request, session, session.principal, form)
            return self._finish(response, request, session, False)

        return endpoint

    def render(
        self, request: Request, session: ConsoleSession, template: str, **ctx: Any
    ) -> Response:
        return self._html(session, template, **ctx)

    # -- login ---------------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        session, new, principal = self._caller(request)
        if principal is not None:
            return self._finish(
                RedirectResponse(f"{CONSOLE_PATH}/runs", 303), request, session, new
            )
        return self._login_required(request, session, new)

    def _logged_in(self, request: Request, token: str) -> Response | None:
        """Log the request's browser in with ``token``: see :meth:`logged_in_as`; None when
        the token is not accepted.

        Raises:
            TooManyLogins: this client failed too often lately.
        """
        principal = self.web.login(request, token)
        return self.logged_in_as(request, principal) if principal is not None else None

    def logged_in_as(self, request: Request, principal: Principal) -> Response:
        """A new session of ``principal`` for the request's browser: a new cookie and a
        redirect to the Runs page (a token given in the URL leaves the address bar)."""
        old = self.auth.session(request.cookies.get(COOKIE_NAME))
        if old is not None:
            self.auth.drop(old.sid)  # a new cookie after login: no session fixation
        fresh = self.auth.new_session(principal)
        return self._finish(RedirectResponse(f"{CONSOLE_PATH}/runs", 303), request, fresh, True)

    def login_failed(self, request: Request, error: str) -> Response:
        session, new = self._session(request)
        return self._login_required(request, session, new, error=error)

    def _too_many(self, request: Request, error: TooManyLogins) -> Response:
        session, new = self._session(request)
        response = self._page(
            request, session, new, "login.html", status_code=429, error=str(error)
        )
        response.headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
        return response

    async def login(self, request: Request) -> Response:
        session = self.auth.session(request.cookies.get(COOKIE_NAME))
        form = await self._form(request)
        if session is None or not self.auth.csrf_ok(session, form.get("csrf")):
            fresh = self.auth.new_session()
            return self._page(
                request, fresh, True, "login.html", status_code=403,
                error="The form expired: enter the token again.",
            )  # fmt: skip
        try:
            answer = self._logged_in(request, form.get("token", "").strip())
        except TooManyLogins as error:
            return self._too_many(request, error)
        if answer is None:
            return self._login_required(request, session, False, error="That token is not valid.")
        return answer

    async def logout(
        self, request: Request, session: ConsoleSession, principal: Principal, form: dict[str, str]
    ) -> Response:
        self.auth.drop(session.sid)
        response = RedirectResponse(f"{CONSOLE_PATH}/login", 303)
        response.delete_cookie(COOKIE_NAME, path=CONSOLE_PATH + "/")
        return response

    # -- approvals -----------------------------------------------------------------------------

    async def approvals(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        pending = self.data.pending
        if pending is not None:
            await pending.refresh()  # cards a gone process held (a restart, a replica's end)
        items = [] if pending is None else pending.pending(owner=None if p.operator else p.identity)
        return self.render(
            request, session, "approvals.html", items=items, pending_ids=",".join(ids_of(items))
        )

    async def answer(
        self, request: Request, session: ConsoleSession, p: Principal, form: dict[str, str]
    ) -> Response:
        pending = self.data.pending
        decision = form.get("decision", "")
        if pending is None or decision not in ("allow_once", "allow_session", "deny"):
            return PlainTextResponse("unknown decision", status_code=400)
        try:
            found = await pending.settle(
                request.path_params["approval_id"],
                cast(Any, decision),
                by=None if p.operator else p.identity,
            )
        except ValueError as error:
            return PlainTextResponse(str(error), status_code=400)
        except StoreError as error:  # a card restored after a restart: its answer is not kept
            return PlainTextResponse(f"the answer was not recorded: {error}", status_code=503)
        if not found:
            return PlainTextResponse(
                "no such approval is waiting (answered already, timed out, or not yours)",
                status_code=404,
            )
        return RedirectResponse(f"{CONSOLE_PATH}/approvals", 303)

    # -- background ----------------------------------------------------------------------------

    async def background(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        rows: list[dict[str, Any]] = []
        if self.data.tasks is not None:
            # running calls and those that ended lately (ended ones leave the live registry
            # once the store has them)
            for info in reversed(self.data.tasks.operator_view()):
                if not self.visible(p, info.session_id):
                    continue
                rows.append(
                    {
                        "id": info.task_id,
                        "tool": info.tool,
                        "session_id": info.session_id,
                        "status": info.status,
                        "started_at": info.started_at,
                        "finished_at": info.finished_at,
                        "result": info.result.text[:500] if info.result is not None else "",
                    }
                )
        return self.render(request, session, "background.html", tasks=rows)

    async def cancel(
        self, request: Request, session: ConsoleSession, p: Principal, form: dict[str, str]
    ) -> Response:
        tasks = self.data.tasks
        task_id = request.path_params["task_id"]
        found = None
        if tasks is not None:
            found = next((t for t in tasks.live.list_all() if t.task_id == task_id), None)
        if tasks is None or found is None or not self.visible(p, found.session_id):
            return PlainTextResponse("no such background call", status_code=404)
        try:
            with anyio.fail_after(30):
                await tasks.live.cancel(found.session_id, task_id)
        except TaskNotFoundError:
            return PlainTextResponse("no such background call", status_code=404)
        return RedirectResponse(f"{CONSOLE_PATH}/background", 303)

    # -- changed tool definitions --------------------------------------------------------------

    async def tools(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        changes = self.data.tool_changes
        rows: list[dict[str, str]] = []
        error = ""
        if changes is not None and p.operator:
            try:
                pins = await changes.changed()
            except StoreError as failure:
                pins, error = [], failure.message
            rows = [
                {
                    "name": f"{pin.server}{TOOL_NAME_SEPARATOR}{pin.tool}",
                    "server": pin.server,
                    "tool": pin.tool,
                    "digest": pin.digest,
                    "offered_digest": pin.offered_digest or "",
                    "diff": definition_diff(pin),
                }
                for pin in pins
            ]
        return self.render(
            request, session, "tools.html", changes=rows, error=error, operator=p.operator
        )

    async def accept_tool(
        self, request: Request, session: ConsoleSession, p: Principal, form: dict[str, str]
    ) -> Response:
        changes = self.data.tool_changes
        if not p.operator:
            return PlainTextResponse("only the operator accepts tool changes", status_code=403)
        server, tool = form.get("server", ""), form.get("tool") or None
        shown = form.get("offered_digest") or None  # the change on the page the operator saw
        if changes is None or not server:
            return PlainTextResponse("no such changed tool", status_code=404)
        try:
            accepted = await changes.accept(server, tool, offered_digest=shown)
        except StoreError as error:
            return PlainTextResponse(error.message, status_code=503)
        if not accepted:
            return PlainTextResponse(
                "no such changed tool (accepted already, changed back, or changed again since "
                "the page was shown: reload it to see the definition offered now)",
                status_code=404,
            )
        return RedirectResponse(f"{CONSOLE_PATH}/tools", 303)

    # -- upstream servers that need a login (docs/oauth.md) -----------------------------------

    @staticmethod
    def _upstream_principal(p: Principal) -> str:
        """Whose upstream logins a console session manages: the operator's are the local
        operator's (the principal of clients without a token, whose login lists the tools);
        anyone else's are those of their own MCP sessions."""
        return "" if p.operator else p.identity

    async def servers(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        logins = self.data.upstream_logins
        rows: list[dict[str, Any]] = []
        if logins is not None:
            who = self._upstream_principal(p)
            for name, params in sorted(logins.servers.items()):
                rows.append(
                    {
                        "name": name,
                        "url": params.url,
                        "logged_in": await logins.logged_in(name, who),
                    }
                )
        return self.render(
            request,
            session,
            "servers.html",
            servers=rows,
            message=request.query_params.get("message", ""),
        )

    async def authorize(
        self, request: Request, session: ConsoleSession, p: Principal, form: dict[str, str]
    ) -> Response:
        logins = self.data.upstream_logins
        server = form.get("server", "")
        if logins is None or server not in logins.servers or not session.sid:
            return PlainTextResponse('no such "auth": "oauth" server', status_code=404)
        origin = self.data.public_base or f"{request.url.scheme}://{request.url.netloc}"
        binding = secrets.token_urlsafe(32)  # this browser finishes the login, nobody else
        try:
            url = await logins.start(
                server,
                self._upstream_principal(p),
                redirect_uri=origin + UPSTREAM_CALLBACK_PATH,
                owner=binding,
            )
        except RuntimeError as error:
            return PlainTextResponse(f"the login cannot start: {error}", status_code=502)
        response = RedirectResponse(url, 303)
        response.set_cookie(
            UPSTREAM_LOGIN_COOKIE,
            binding,
            max_age=int(logins.wait_s),
            path=UPSTREAM_CALLBACK_PATH,
            httponly=True,
            samesite="lax",  # sent on the redirect back from the authorization server
            secure=self._secure(request),
        )
        return response

    async def upstream_callback(self, request: Request) -> Response:
        """The authorization server's redirect back: no console session is needed (its
        cookie is ``SameSite=Strict``, not sent on that redirect); the flow was started for
        the principal of the session that pressed "Authorize", and only the browser holding
        that flow's cookie may finish it."""
        logins = self.data.upstream_logins
        query = request.query_params
        if logins is None:
            return PlainTextResponse("no login is waiting", status_code=404)
        try:
            server, failure = await logins.finish(
                request.cookies.get(UPSTREAM_LOGIN_COOKIE, ""),
                query.get("state", ""),
                query.get("code", ""),
                query.get("iss"),
                query.get("error"),
            )
        except LookupError as error:
            return PlainTextResponse(str(error), status_code=400)
        message = f"Logged in to {server}." if failure is None else f"{server}: {failure}"
        response = RedirectResponse(
            f"{CONSOLE_PATH}/servers?{urlencode({'message': message})}", 303
        )
        response.delete_cookie(UPSTREAM_LOGIN_COOKIE, path=UPSTREAM_CALLBACK_PATH)
        return response

    # -- audit and todo ------------------------------------------------------------------------

    async def audit_page(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        query = request.query_params
        wanted = AuditFilter(
            tool=query.get("tool", "").strip(),
            status=query.get("status", "").strip(),
            session=query.get("session", "").strip(),
            since=_parse_time(query.get("since", "")),
            until=_parse_time(query.get("until", "")),
            search=query.get("q", "").strip(),
        )
        entries = []
        if self.data.audit_path.is_file():
            entries = await self.audit.entries(limit=AUDIT_SCAN)
        visible = [e for e in entries if self.visible(p, e.session_id or "")]
        shown = filter_audit(visible, wanted, _AUDIT_SHOWN)
        return self.render(
            request, session, "audit.html", entries=shown, filters=query,
            tools=sorted({e.tool for e in visible}), statuses=sorted({e.status for e in visible}),
        )  # fmt: skip

    async def todo(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        path = self.data.todo_path
        sessions = [s for s in await anyio.to_thread.run_sync(todo_sessions, path)
                    if self.visible(p, s)]  # fmt: skip
        chosen = request.query_params.get("session") or (sessions[0] if sessions else "")
        items = []
        if chosen in sessions:
            items = await anyio.to_thread.run_sync(read_todo, path, chosen)
        return self.render(
            request, session, "todo.html", sessions=sessions, chosen=chosen, items=items,
            exists=path.is_file(),
        )  # fmt: skip

    # -- chat ----------------------------------------------------------------------------------

    async def chat_page(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        return self.render(request, session, "chat.html", model=self.data.chat_model)

    async def index(self, request: Request) -> Response:
        """``/console/``: with ``?token=`` (the login URL printed at start), log the browser in
        and drop the token from the address bar; else on to the Runs page."""
        token = request.query_params.get(LOGIN_QUERY)
        if token is None:
            return RedirectResponse(f"{CONSOLE_PATH}/runs", 303)
        try:
            answer = self._logged_in(request, token.strip())
        except TooManyLogins as error:
            return self._too_many(request, error)
        if answer is not None:
            return answer
        fresh, new = self._session(request)
        return self._login_required(
            request, fresh, new, error="That login URL's token is not valid."
        )


def _parse_time(value: str) -> float | None:
    """``YYYY-mm-dd[ HH:MM[:SS]]`` (UTC, a ``T`` also accepted) or Unix seconds; None if empty
    or unreadable."""
    value = value.strip().replace("T", " ")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import calendar

    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(value, fmt)))
        except ValueError:
            continue
    return None


def build_console_app(data: ConsoleData) -> Starlette:
    """The console as an ASGI app whose routes start with ``/console`` (see the module doc).

    When ``data.live`` and ``data.pending`` are set, pending-approval changes are passed to the
    open pages as ``approvals.changed`` events.
    """
    console = Console(data)
    runs, events = RunPages(console), LiveEvents(console)
    if data.live is not None and data.pending is not None:
        live = data.live
        data.pending.listeners.append(
            lambda session_id: live.broadcast(session_id, {"type": "approvals.changed"})
        )
    routes = [
        Route(CONSOLE_PATH, console.index),
        Route(CONSOLE_PATH + "/", console.index),
        Route(CONSOLE_PATH + "/login", console.login_page, methods=["GET"]),
        Route(CONSOLE_PATH + "/login", console.login, methods=["POST"]),
        Route(CONSOLE_PATH + "/logout", console.action(console.logout), methods=["POST"]),
        Route(CONSOLE_PATH + "/runs", console.page(runs.runs)),
        Route(CONSOLE_PATH + "/runs/{script_id}", console.page(runs.run)),
        Route(CONSOLE_PATH + "/runs/{script_id}/files/{name}", console.page(runs.run_file)),
        Route(CONSOLE_PATH + "/approvals", console.page(console.approvals)),
        Route(
            CONSOLE_PATH + "/approvals/{approval_id}",
            console.action(console.answer),
            methods=["POST"],
        ),
        Route(CONSOLE_PATH + "/background", console.page(console.background)),
        Route(
            CONSOLE_PATH + "/background/{task_id}/cancel",
            console.action(console.cancel),
            methods=["POST"],
        ),
        Route(CONSOLE_PATH + "/tools", console.page(console.tools)),
        Route(
            CONSOLE_PATH + "/tools/accept", console.action(console.accept_tool), methods=["POST"]
        ),
        Route(CONSOLE_PATH + "/servers", console.page(console.servers)),
        Route(
            CONSOLE_PATH + "/servers/authorize",
            console.action(console.authorize),
            methods=["POST"],
        ),
        Route(UPSTREAM_CALLBACK_PATH, console.upstream_callback),
        Route(CONSOLE_PATH + "/audit", console.page(console.audit_page)),
        Route(CONSOLE_PATH + "/todo", console.page(console.todo)),
        Route(CONSOLE_PATH + "/events", events.events),
        Mount(CONSOLE_PATH + "/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    if data.chat is not None:
        chat = ChatEndpoints(
            data.chat,
            lambda request, changes: request_principal(
                console.web, console.auth, request, COOKIE_NAME, state_changing=changes
            ),
        )
        routes += [
            Route(CONSOLE_PATH + "/chat", console.page(console.chat_page)),
            Route(CONSOLE_PATH + "/ag-ui", chat.run, methods=["POST"]),
            Route(CONSOLE_PATH + "/chat/conversation", chat.conversation),
            Mount(CONSOLE_PATH + "/chat/static", StaticFiles(directory=_CHAT_STATIC)),
        ]
    if data.oauth_login is not None:
        routes += data.oauth_login.routes(console.logged_in_as, console.login_failed)
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)])


class SecurityHeaders:
    """Puts :data:`_HEADERS` on every response of the app (replacing any of the same name)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in _HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
