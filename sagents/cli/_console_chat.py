"""The console's Chat page for ``sagents serve --transport http``: the agent of the config's
``agent`` section over the AG-UI route, with the tools each console login is offered
(docs/console.md, "Chat").

Kept apart from :mod:`sagents.cli._serve` so that the agent loop is imported only when the
config asks for the page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from sagents.audit._store import default_data_dir
from sagents.config._loader import load_config
from sagents.errors import ConfigError, ModelConfigError
from sagents.gateway._http_server import console_allowed
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._runtime import ConfiguredGateway, builtin_todo_store
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings

if TYPE_CHECKING:
    from sagents.agent import ChatModel
    from sagents.agent.ag_ui import AgUiThreads

__all__ = ["CHAT_SESSION_PREFIX", "agent_model", "open_console_chat"]

CHAT_SESSION_PREFIX = "chat:"
"""Put before a chat thread's id to make its session id: the gateway's own session ids (hex)
can never be named by a thread."""


def agent_model(settings: GatewaySettings) -> ChatModel | None:
    """The model of the config's ``agent`` section, when the console will serve the Chat page
    (None otherwise); checked before anything starts. The caller closes it (``aclose``).

    Raises:
        ConfigError: the config cannot be read, or ``agent.model`` names no usable model (no
            endpoint or key configured, or its adapter is not installed).
    """
    if settings.config is None or not console_allowed(settings):
        return None
    section = load_config(settings.config).agent
    if section is None:
        return None
    from sagents.agent import model_from_string

    try:
        return model_from_string(section.model)
    except ModelConfigError as error:
        raise ConfigError(
            error.message, file=str(settings.config), key="agent.model", hint=error.hint
        ) from None


@asynccontextmanager
async def open_console_chat(
    gateway: Gateway, settings: GatewaySettings, *, model: ChatModel | None = None
) -> AsyncIterator[AgUiThreads | None]:
    """The Chat page's threads, or None when there is no page (no ``agent`` section, or no
    console); leaving cancels every run (each history saved) and closes the model.

    Args:
        gateway: The entered gateway whose tools the chat calls.
        settings: Its settings (whether the console is served).
        model: The chat model (:func:`agent_model`'s, an embedding application's, a
            test's); None: the one ``agent.model`` names, closed on leaving.

    Raises:
        ConfigError: ``agent.model`` names no usable model (its adapter is not installed).
    """
    section = gateway.config.agent if isinstance(gateway, ConfiguredGateway) else None
    if section is None or not console_allowed(settings):
        yield None
        return
    assert isinstance(gateway, ConfiguredGateway)
    from sagents.agent import SAgent
    from sagents.agent.ag_ui import open_ag_ui_threads
    from sagents.gateway._chat._tools import chat_tools

    async with AsyncExitStack() as stack:
        if model is None:
            model = agent_model(settings)
            assert model is not None  # the section is there and the console is served
            stack.push_async_callback(model.aclose)
        # run_script is the gateway's (its policy, approval, sandbox and audit): not the loop's
        agent = SAgent(model=model, system_prompt=section.system, run_script=False)
        secret = OperatorSecret.load_or_create(default_data_dir())
        threads = await stack.enter_async_context(
            open_ag_ui_threads(
                agent,
                tools_for=chat_tools(gateway, secret),
                permission_mode=settings.mode,
                data_dir=default_data_dir(),
                todo=builtin_todo_store(gateway),
                session_prefix=CHAT_SESSION_PREFIX,
            )
        )
        yield threads
