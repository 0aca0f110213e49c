"""The chat page's Starlette app (docs/chat.md): ``/`` the page, ``POST /ag-ui`` the AG-UI
route, ``/conversation`` a thread's messages for a (re)loaded page, ``/static/`` the script.

Authentication follows the console's rule (docs/console.md, "Security"): nothing that only
reaches the port is the operator. The login URL printed at start (``/?token=SECRET``) or the
login form gives the browser a session cookie (``HttpOnly``, ``SameSite=Strict``); a ``POST``
carries the page's CSRF token (``X-CSRF-Token``); machines send ``Authorization: Bearer``. The
app is served behind the gateway's ``Host``/``Origin`` checks, and every response carries the
console's headers: a CSP without inline script, ``frame-ancestors 'none'``, ``no-store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sagents.gateway._operator_secret import LOGIN_QUERY
from sagents.gateway._web_auth import TooManyLogins, WebAuth
from sagents.gateway.console._app import SecurityHeaders
from sagents.gateway.console._auth import ConsoleAuth, ConsoleSession
from sagents.gateway.console._chat import ChatEndpoints, ChatThreads, request_principal

__all__ = ["CHAT_COOKIE", "ChatThreads", "build_chat_app"]

CHAT_COOKIE = "sagents_chat"
_HERE = Path(__file__).parent


class _Chat:
    def __init__(self, web: WebAuth, *, model: str, secure_cookies: bool) -> None:
        self.web = web
        self.auth = ConsoleAuth()
        self.model = model
        self.secure_cookies = secure_cookies
        self.env = Environment(
            loader=FileSystemLoader(_HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )

    def _session(self, request: Request) -> tuple[ConsoleSession, bool]:
        found = self.auth.session(request.cookies.get(CHAT_COOKIE))
        if found is not None:
            return found, False
        return self.auth.new_session(), True

    def _finish(self, response: Response, session: ConsoleSession, new: bool) -> Response:
        if new:
            response.set_cookie(
                CHAT_COOKIE,
                session.sid,
                path="/",
                httponly=True,
                samesite="strict",
                secure=self.secure_cookies,
            )
        return response

    def _render(self, template: str, status_code: int = 200, **context: object) -> HTMLResponse:
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status_code)

    def _login_page(self, session: ConsoleSession, new: bool, error: str = "") -> Response:
        page = self._render("login.html", 401, csrf=session.csrf, error=error)
        return self._finish(page, session, new)

    def _logged_in(self, request: Request, token: str) -> Response | None:
        principal = self.web.login(request, token)
        if principal is None:
            return None
        old = self.auth.session(request.cookies.get(CHAT_COOKIE))
        if old is not None:
            self.auth.drop(old.sid)  # a new cookie at login: no session fixation
        fresh = self.auth.new_session(principal)
        return self._finish(RedirectResponse("/", 303), fresh, True)

    def _too_many(self, request: Request, error: TooManyLogins) -> Response:
        session, new = self._session(request)
        response = self._login_page(session, new, str(error))
        response.status_code = 429
        response.headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
        return response

    async def index(self, request: Request) -> Response:
        token = request.query_params.get(LOGIN_QUERY)
        if token is not None:
            try:
                answer = self._logged_in(request, token.strip())
            except TooManyLogins as error:
                return self._too_many(request, error)
            if answer is not None:
                return answer
            session, new = self._session(request)
            return self._login_page(session, new, "That login URL's token is not valid.")
        session, new = self._session(request)
        if session.principal is None or session.closed:
            return self._login_page(session, new)
        page = self._render("chat.html", csrf=session.csrf, model=self.model)
        return self._finish(page, session, new)

    async def login(self, request: Request) -> Response:
        form = await request.form()
        session = self.auth.session(request.cookies.get(CHAT_COOKIE))
        csrf = form.get("csrf")
        if session is None or not isinstance(csrf, str) or not self.auth.csrf_ok(session, csrf):
            fresh = self.auth.new_session()
            return self._login_page(fresh, True, "The form expired: enter the token again.")
        token = form.get("token")
        try:
            answer = self._logged_in(request, token.strip() if isinstance(token, str) else "")
        except TooManyLogins as error:
            return self._too_many(request, error)
        return answer or self._login_page(session, False, "That token is not valid.")


def build_chat_app(
    threads: Callable[[], ChatThreads],
    web: WebAuth,
    *,
    model: str = "",
    secure_cookies: bool = False,
    lifespan: Callable[[Starlette], Awaitable[None]] | None = None,
) -> Starlette:
    """The chat page's app (see the module doc).

    Args:
        threads: The AG-UI threads (called per request: they open with the app's lifespan).
        web: The tokens accepted (the operator secret first).
        model: The model's name, shown in the header.
        secure_cookies: Send the cookie with ``Secure`` (TLS, or a TLS proxy in front).
        lifespan: The app's lifespan (it opens the threads).
    """
    chat = _Chat(web, model=model, secure_cookies=secure_cookies)
    endpoints = ChatEndpoints(
        threads,
        lambda request, changes: request_principal(
            web, chat.auth, request, CHAT_COOKIE, state_changing=changes
        ),
    )
    routes = [
        Route("/", chat.index, methods=["GET"]),
        Route("/login", chat.login, methods=["POST"]),
        Route("/ag-ui", endpoints.run, methods=["POST"]),
        Route("/conversation", endpoints.conversation, methods=["GET"]),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders)],
        lifespan=lifespan,  # type: ignore[arg-type]
    )
