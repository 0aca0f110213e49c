"""Building the console for a running gateway, or for a data directory alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette

from sagents.audit._store import AUDIT_FILE, default_data_dir
from sagents.gateway._http_server import MCP_PATH
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._protected_resource import ProtectedResource
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._scripts import WORKSPACES_DIR, GatewayScripts
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._workspaces import Workspaces
from sagents.gateway.console._app import ConsoleData, build_console_app
from sagents.gateway.console._live import LiveRuns
from sagents.gateway.console._oauth_login import CALLBACK_PATH, ConsoleOAuthLogin
from sagents.progress._hub import ProgressHub
from sagents.tool.impl._todo import TODO_FILE

if TYPE_CHECKING:
    from sagents.gateway.console._chat import ChatThreads

__all__ = ["console_for_gateway", "data_dir_console"]


def console_for_gateway(
    gateway: Gateway,
    settings: GatewaySettings,
    *,
    secret: OperatorSecret | None = None,
    oauth: ProtectedResource | None = None,
    chat: ChatThreads | None = None,
) -> Starlette:
    """The console of an entered gateway: its hub's events, pending approvals, background calls
    and the records and audit of its data dir.

    The console watches the gateway's progress hub from now on (for the gateway's lifetime).

    Args:
        gateway: The gateway. settings: Its tokens and cookie settings.
        secret: The operator secret; None: the data dir's (made when there is none).
        oauth: ``/mcp``'s protected resource: with the gateway's client (``oauth.clientId``),
            the console also logs in through its authorization server.
        chat: The AG-UI threads of the Chat page (docs/console.md, "Chat"); None: no Chat
            page.
    """
    live = LiveRuns(owner_of=gateway.session_owner)
    hub = getattr(gateway.progress, "hub", None)
    if isinstance(hub, ProgressHub):
        hub.watch(live)
    if isinstance(gateway.scripts, GatewayScripts):
        gateway.scripts.watch_starts(live.note_start)
    data_dir = default_data_dir()
    workspace = gateway.workspace
    if isinstance(workspace, Workspaces):
        workspaces = workspace
    elif isinstance(workspace, str):
        workspaces = Workspaces(Path(workspace), shared=True)
    else:
        workspaces = Workspaces(data_dir / WORKSPACES_DIR)
    data = ConsoleData(
        workspaces=workspaces,
        audit_path=data_dir / AUDIT_FILE,
        todo_path=data_dir / TODO_FILE,
        live=live,
        pending=gateway.pending,
        approvals=gateway.approvals,
        tasks=gateway.tasks,
        owner_of=gateway.session_owner,
        operator_tokens=(settings.bearer_token,) if settings.bearer_token else (),
        session_tokens=tuple(settings.token_profiles),
        secure_cookies=settings.tls_cert is not None or settings.tls_proxy,
        secret=secret,
        oauth_login=_oauth_login(settings, oauth),
        tool_changes=gateway.tool_changes if isinstance(gateway, ConfiguredGateway) else None,
        upstream_logins=(
            gateway.upstream_logins if isinstance(gateway, ConfiguredGateway) else None
        ),
        public_base=oauth.resource.removesuffix(MCP_PATH) if oauth is not None else None,
        chat=(lambda: chat) if chat is not None else None,
        chat_model=_chat_model(gateway),
    )
    return build_console_app(data)


def _chat_model(gateway: Gateway) -> str:
    if not isinstance(gateway, ConfiguredGateway) or gateway.config.agent is None:
        return ""
    return gateway.config.agent.model


def _oauth_login(
    settings: GatewaySettings, oauth: ProtectedResource | None
) -> ConsoleOAuthLogin | None:
    config = settings.oauth
    if oauth is None or config is None or config.client_id is None:
        return None
    base = oauth.resource.removesuffix(MCP_PATH)  # the gateway's public URL
    return ConsoleOAuthLogin(
        oauth,
        client_id=config.client_id,
        client_secret=config.client_secret or "",
        redirect_uri=base + CALLBACK_PATH,
        secure_cookies=settings.tls_cert is not None or settings.tls_proxy,
    )


def data_dir_console(
    data_dir: Path,
    *,
    workspace: Path | None = None,
    shared_workspace: bool = False,
    token: str | None = None,
    secure_cookies: bool = False,
    secret: OperatorSecret | None = None,
) -> Starlette:
    """The console of a data directory without a gateway (``sagents console``): past runs'
    records and the audit, read only.

    Args:
        data_dir: The gateway's data dir (``audit.sqlite3``, ``todo.sqlite3``, ``workspaces/``).
        workspace: The sessions' workspaces root, when the gateway ran with ``--workspace``.
        shared_workspace: That root was one shared workspace (``--shared-workspace``).
        token: Another token of the operator (``SAGENTS_GATEWAY_TOKEN``), besides the secret.
        secure_cookies: Send the session cookie with ``Secure``.
        secret: The operator secret; None: ``data_dir``'s own (made when there is none).
    """
    data = ConsoleData(
        workspaces=Workspaces(workspace or data_dir / WORKSPACES_DIR, shared=shared_workspace),
        audit_path=data_dir / AUDIT_FILE,
        todo_path=data_dir / TODO_FILE,
        operator_tokens=(token,) if token else (),
        secure_cookies=secure_cookies,
        secret=secret or OperatorSecret.load_or_create(data_dir),
    )
    return build_console_app(data)
