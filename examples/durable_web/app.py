"""One agent served across HTTP requests: a run that needs the user's approval pauses in one
request, and any worker process resumes it in a later one (docs/agent.md, "Pausing and
resuming").

Run two workers on one store (the embedded SQLite store of a shared data directory, or
PostgreSQL with ``SAGENTS_STORE=postgresql://...``), with the same signing key::

    export SAGENTS_STATE_KEY=$(python -c "import secrets; print(secrets.token_hex(32))")
    export OPENAI_BASE_URL=... OPENAI_API_KEY=... NOTES_DIR=/tmp/notes
    uvicorn --app-dir examples/durable_web app:app --port 8001 &
    uvicorn --app-dir examples/durable_web app:app --port 8002 &

    curl -s localhost:8001/chat -d '{"session_id": "s1", "message": "note that milk is out"}'
    # {"status": "interrupted", "state_id": "...", "interruptions": [{"id": "call_1", ...}]}
    curl -s localhost:8002/resume -d '{"session_id": "s1", "state_id": "...",
                                       "decisions": {"call_1": {"approve": "once"}}}'
    # {"status": "done", "output": "Noted."}

The state never leaves the server: the client gets its id and what it waits for. A decision is
``{"approve": "once" | "session"}``, ``{"deny": "reason"}`` or ``{"answers": {...}}`` (a
questionnaire). A store that fails (the database down, the disk full) answers 503 with its
``store_unavailable`` error, also for a pause it could not keep (never a ``state_id`` nobody
can resume): send the message again once the store answers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sagents.agent import RunResult, RunState, SAgent
from sagents.errors import SagentsError, StoreError
from sagents.store import open_store, parse_store_url
from sagents.tool import SessionContext, ToolManager, tool


def notes_dir() -> Path:
    """Where ``write_note`` appends (``NOTES_DIR``)."""
    return Path(os.environ.get("NOTES_DIR", "notes"))


@tool(permission="write")
def write_note(text: str) -> str:
    """Append a line to the user's notes.

    Args:
        text: The line to add.
    """
    folder = notes_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "notes.txt").open("a", encoding="utf-8") as notes:
        notes.write(text + "\n")
    return f"noted: {text}"


@tool(permission="read_only")
def read_notes() -> str:
    """The user's notes."""
    path = notes_dir() / "notes.txt"
    return path.read_text(encoding="utf-8") if path.exists() else "(no notes)"


TOOLS = ToolManager()
TOOLS.register_tool(write_note)
TOOLS.register_tool(read_notes)
AGENT: dict[str, SAgent] = {}


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    location = parse_store_url(os.environ.get("SAGENTS_STORE"))
    async with (
        open_store(location, data_dir=Path(os.environ.get("SAGENTS_DATA_DIR", "data"))) as store,
        SAgent(  # leaving it saves a session the store did not keep, or logs it as lost
            model=os.environ.get("SAGENTS_MODEL", "openai:gpt-4.1-mini"),
            system_prompt="You keep the user's notes.",
            run_script=False,
            store=store,
        ) as agent,
    ):
        AGENT["agent"] = agent
        yield


def _answer(result: RunResult) -> JSONResponse:
    if result.state is not None and result.error is not None:  # a pause the store did not keep
        return _failed(result.error)  # (nobody could resume it): the message is sent again
    if result.state is not None:
        return JSONResponse(
            {
                "status": "interrupted",
                "state_id": result.state.state_id,
                "interruptions": [item.to_json() for item in result.interruptions],
            }
        )
    if result.reason == "error":
        return _failed(result.error or {})
    return JSONResponse({"status": "done", "reason": result.reason, "output": result.output})


def _failed(error: Mapping[str, Any]) -> JSONResponse:
    """503 when the store failed (try again once it answers), else 502 (the model)."""
    status = 503 if str(error.get("code", "")).startswith("store_") else 502
    return JSONResponse({"status": "error", "error": dict(error)}, status_code=status)


def _refused(error: SagentsError, status: int = 409) -> JSONResponse:
    return JSONResponse({"status": "refused", "error": error.to_dict()}, status_code=status)


async def _body(request: Request) -> dict[str, Any]:
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("session_id"), str):
        raise ValueError("the body is a JSON object with a string 'session_id'")
    return body


async def chat(request: Request) -> JSONResponse:
    """``{"session_id", "message"}``: one user message of the conversation."""
    try:
        body = await _body(request)
    except ValueError as error:
        return JSONResponse({"status": "bad_request", "error": str(error)}, status_code=400)
    agent = AGENT["agent"]
    context = SessionContext(session_id=body["session_id"])
    try:
        session = await agent.load_session(context.session_id)
    except SagentsError as error:  # StoreError: the store failed; RunStateError: unreadable
        return _failed(error.to_dict())
    history = session.messages if session is not None else []
    message = {"role": "user", "content": str(body.get("message", ""))}
    result = await agent.run(
        [*history, message], tool_manager=TOOLS, session_context=context, approvals="defer"
    )
    return _answer(result)


def _decide(state: RunState, decisions: Mapping[str, Any]) -> None:
    for item_id, decision in decisions.items():
        if "approve" in decision:
            state.approve(item_id, scope="session" if decision["approve"] == "session" else "once")
        elif "deny" in decision:
            state.deny(item_id, reason=str(decision["deny"] or ""))
        else:
            state.answer(item_id, dict(decision.get("answers") or {}))


async def resume(request: Request) -> JSONResponse:
    """``{"session_id", "state_id", "decisions": {item id: decision}}``."""
    try:
        body = await _body(request)
        decisions = body.get("decisions")
        if not isinstance(decisions, dict) or not all(
            isinstance(d, dict) for d in decisions.values()
        ):
            raise ValueError("'decisions' maps each item id to an object")
    except ValueError as error:
        return JSONResponse({"status": "bad_request", "error": str(error)}, status_code=400)
    agent = AGENT["agent"]
    try:
        state = await agent.load_state(str(body.get("state_id")))
        if state is None:
            return JSONResponse({"status": "not_found"}, status_code=404)
        _decide(state, decisions)
        result = await agent.run(
            state=state,
            tool_manager=TOOLS,
            session_context=SessionContext(session_id=body["session_id"]),
        )
    except StoreError as error:  # the paused run cannot be read now: try again later
        return _failed(error.to_dict())
    except SagentsError as error:  # RunStateError: edited, another session, resumed already
        return _refused(error)
    return _answer(result)


async def worker(request: Request) -> JSONResponse:
    """Which process answers (the demo runs two)."""
    return JSONResponse({"pid": os.getpid()})


app = Starlette(
    routes=[
        Route("/chat", chat, methods=["POST"]),
        Route("/resume", resume, methods=["POST"]),
        Route("/worker", worker, methods=["GET"]),
    ],
    lifespan=lifespan,
)
