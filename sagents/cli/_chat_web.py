"""``sagents chat --web``: the chat page and its AG-UI route on loopback (docs/chat.md).

Kept apart from :mod:`sagents.cli._chat` so that ``sagents --help`` imports neither the agent
loop nor Starlette.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from sagents.agent import SAgent
from sagents.agent.ag_ui import open_ag_ui_threads
from sagents.cli._chat_tools import open_chat_tools
from sagents.core._permissions import PermissionMode
from sagents.gateway._chat import build_chat_app
from sagents.gateway._http_server import secure_app, serve_asgi, web_auth_of
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._settings import GatewaySettings
from sagents.skill import SkillProxy
from sagents.tool.impl import TodoStore
from sagents.tool.tool_manager import ToolManager

__all__ = ["DEFAULT_CHAT_PORT", "serve_chat_web"]

DEFAULT_CHAT_PORT = 8767


async def serve_chat_web(
    agent: SAgent,
    loaded: Any,
    skills: SkillProxy | None,
    mode: PermissionMode,
    settings: GatewaySettings,
    data_dir: Path,
    *,
    model_name: str = "",
    register: Callable[[ToolManager], object] | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the chat page until cancelled; prints the login URL on stderr (and reports it
    through ``task_status``). ``register`` adds tools to the session's manager.

    Raises:
        ConfigError: the address cannot be bound; the operator secret cannot be made.
    """
    secret = OperatorSecret.load_or_create(data_dir)
    web = web_auth_of(settings, secret)
    async with AsyncExitStack() as stack:
        manager = await stack.enter_async_context(
            open_chat_tools(agent.model, loaded, questionnaire=True)
        )
        if register is not None:  # an embedding application's own tools
            register(manager)
        threads = await stack.enter_async_context(
            open_ag_ui_threads(
                agent,
                tool_manager=manager,
                skill_manager=skills,
                permission_mode=mode,
                data_dir=data_dir,
                todo=TodoStore(),
            )
        )
        app = build_chat_app(
            lambda: threads,
            web,
            model=model_name,
            secure_cookies=settings.tls_cert is not None or settings.tls_proxy,
        )
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                serve_asgi, lambda p: secure_app(app, settings, p, web=web), settings
            )
            scheme = "https" if settings.tls_cert else "http"
            url = secret.login_url(f"{scheme}://{settings.host}:{port}/")
            print(f"sagents chat: open {url}", file=sys.stderr, flush=True)
            task_status.started(url)
