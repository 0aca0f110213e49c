"""``sagents chat``: a terminal chat with an agent over the configured tools (see
``docs/agent.md``, "sagents chat").

``sagents chat [--config FILE] [--model M] [--base-url URL] [--mode ask|auto|read-only]
[--skills DIR] [--json] [--prompt TEXT] [--no-stream] [--tool-choice C]``

The model endpoint comes from ``--base-url``/``--model`` or ``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` and ``SAGENTS_MODEL``. Text streams as it arrives; tool progress is shown by
stream (stderr in red), run_script progress as a status line; write tools in ``ask`` mode are
approved on the terminal, with the arguments or the script shown whole (wrapped, never cut).
``/tools [NAME]``, ``/skills``, ``/history`` and ``/quit`` are commands; Ctrl-C cancels the turn
(a second one quits), or at the prompt clears the line (a second one in a row quits). ``--json``
prints every event as one NDJSON line on stdout; ``--prompt TEXT`` runs one turn and exits
(approvals are then asked only when stdin is a terminal).

Exit codes: 0 when the last turn ended normally (or there was none); 1 when it ended in an
error or was cancelled; 2 for a usage or configuration error (printed on stderr, with what to
set); 130 when a second Ctrl-C quit during a cancellation (docs/agent.md, "sagents chat").
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

from sagents.cli._tools import ConfigOption, find_config
from sagents.config import load_config
from sagents.core._permissions import PermissionMode, parse_permission_mode
from sagents.errors import ConfigError, ModelConfigError, StoreError
from sagents.tool._context import SessionContext

if TYPE_CHECKING:
    from sagents.store._agents import SqliteAgentStore

__all__ = ["chat"]

_USAGE_EXIT = 2
_CHAT_PREFIX = "chat-"  # the session ids of terminal chats (--resume takes the last one)


def _usage_error(message: str, hint: str | None = None) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    if hint:
        typer.echo(f"hint: {hint}", err=True)
    return typer.Exit(_USAGE_EXIT)


def chat(
    config: ConfigOption = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model: NAME or openai:NAME. Default: $SAGENTS_MODEL."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="An OpenAI-compatible endpoint. Default: $OPENAI_BASE_URL."
        ),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="Permission mode: ask, auto or read-only.")
    ] = "ask",
    skills: Annotated[
        list[Path] | None,
        typer.Option("--skills", metavar="<dir>", help="A directory of skills (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the events as NDJSON.")] = False,
    prompt: Annotated[
        str | None, typer.Option("--prompt", help="Run one turn with this text and exit.")
    ] = None,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Ask the model for whole answers.")
    ] = False,
    tool_choice: Annotated[
        str | None,
        typer.Option(
            "--tool-choice",
            help=(
                "auto, none, required, or the name of an offered tool, asked for until it is "
                "called (some servers ignore tools without it)."
            ),
        ),
    ] = None,
    system: Annotated[str, typer.Option("--system", help="The system prompt.")] = "",
    max_turns: Annotated[
        int,
        typer.Option("--max-turns", metavar="<turns>", min=1, help="Model calls per turn."),
    ] = 20,
    max_history_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-history-tokens",
            metavar="<tokens>",
            min=1,
            help="Summarise older turns when a request passes this many tokens.",
        ),
    ] = None,
    web: Annotated[
        bool,
        typer.Option("--web", help="Serve the chat page in the browser (docs/chat.md)."),
    ] = False,
    host: Annotated[str, typer.Option("--host", help="With --web: the bind address.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", help="With --web: the port (0: a free one).")
    ] = 8767,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue the last chat (and a turn it left waiting for you)."
        ),
    ] = False,
) -> None:
    """Chat with an agent that uses the configured tools and skills."""
    from sagents.agent import ModelSettings, model_from_string
    from sagents.cli._chat_questions import TerminalQuestioner
    from sagents.cli._chat_session import TerminalApprover, run_chat
    from sagents.skill import SkillManager, SkillProxy
    from sagents.store._agents import SqliteAgentStore
    from sagents.tool._approval import Approver

    try:
        chosen: PermissionMode = parse_permission_mode(mode)
    except ValueError as error:
        raise _usage_error(str(error)) from None
    try:
        ModelSettings(tool_choice=tool_choice)
    except ValueError as error:
        raise _usage_error(f"--tool-choice: {error}") from None
    try:
        chat_model = model_from_string(model, base_url=base_url, stream=not no_stream)
    except ModelConfigError as error:
        raise _usage_error(error.message, error.hint) from None
    path = find_config(config)
    loaded = None
    if path is not None:
        try:
            loaded = load_config(path)
        except ConfigError as error:
            raise _usage_error(error.message) from None
    skill_proxy = None
    if skills:
        manager = SkillManager()
        for root in skills:
            if not root.is_dir():
                raise _usage_error(f"--skills {str(root)!r} is not a directory")
            manager.add_skill_dir(root)
        skill_proxy = SkillProxy(manager)
    if web and resume:
        raise _usage_error(
            "--resume is for the terminal chat", "the browser chat keeps its conversations"
        )
    if web:
        _serve_web(chat_model, loaded, skill_proxy, chosen, host, port, system, max_turns,
                   tool_choice, max_history_tokens, model or "")  # fmt: skip
        return
    interactive = sys.stdin.isatty()
    approver: Approver | None = TerminalApprover() if interactive and not as_json else None
    store = SqliteAgentStore()  # the conversation, and a turn paused for the person
    session_id = _last_chat(store) if resume else f"{_CHAT_PREFIX}{uuid.uuid4().hex[:8]}"
    agent = _agent(chat_model, tool_choice, system, max_turns, max_history_tokens, store)
    context = SessionContext(session_id=session_id, permission_mode=chosen)
    questioner = TerminalQuestioner()  # stdin, a terminal or a pipe
    code = run_chat(
        agent, loaded, skill_proxy, context, approver, as_json, prompt, interactive, questioner,
        resume=resume,
    )  # fmt: skip
    raise typer.Exit(code)


def _last_chat(store: SqliteAgentStore) -> str:
    """The session id of the chat saved last (``--resume``)."""
    try:
        found = anyio.run(lambda: store.last_session(prefix=_CHAT_PREFIX))
    except StoreError as error:
        raise _usage_error(error.message, error.hint) from None
    if found is None:
        raise _usage_error(
            f"there is no chat to resume in {store.path}",
            "start one with sagents chat (SAGENTS_DATA_DIR chooses the data directory)",
        )
    return found


def _serve_web(
    chat_model: Any,
    loaded: Any,
    skills: Any,
    mode: PermissionMode,
    host: str,
    port: int,
    system: str,
    max_turns: int,
    tool_choice: str | None,
    max_history_tokens: int | None,
    model_name: str,
) -> None:
    """``--web``: serve the chat page until interrupted (Ctrl-C ends it, exit code 0)."""
    from sagents.audit._store import default_data_dir
    from sagents.cli._chat_web import serve_chat_web
    from sagents.cli._console import console_settings

    try:
        settings = console_settings(
            host=host, port=port, tls_cert=None, tls_key=None, tls_proxy=False
        )
    except ConfigError as error:
        raise _usage_error(error.message, error.hint) from None
    agent = _agent(chat_model, tool_choice, system, max_turns, max_history_tokens)
    try:
        anyio.run(
            lambda: serve_chat_web(
                agent, loaded, skills, mode, settings, default_data_dir(), model_name=model_name
            )
        )
    except ConfigError as error:
        raise _usage_error(error.message, error.hint) from None
    except KeyboardInterrupt:
        typer.echo("sagents chat: stopped", err=True)


def _agent(
    chat_model: Any,
    tool_choice: str | None,
    system: str,
    max_turns: int,
    max_history_tokens: int | None,
    store: SqliteAgentStore | None = None,
) -> Any:
    from sagents.agent import ModelSettings, SAgent

    return SAgent(
        model=chat_model,
        model_settings=ModelSettings(tool_choice=tool_choice),
        system_prompt=system,
        max_turns=max_turns,
        max_history_tokens=max_history_tokens,
        store=store,
    )
