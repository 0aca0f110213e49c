"""``sagents chat`` while its store (the embedded SQLite store on a full disk) fails: a paused
turn whose resume the store refused (the claim cannot be written) is continued, with the
answers already given, before the chat's next turn, so that no later turn leaves it waiting
in the store for ``--resume`` to take over (docs/agent.md, "sagents chat")."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from rich.console import Console
from typer.testing import CliRunner

from sagents.agent import SAgent
from sagents.cli._chat_session import EXIT_TURN_FAILED, ChatRenderer, _Chat
from sagents.cli.main import app
from sagents.store._agents import SqliteAgentStore
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import ApprovalAnswer, ApprovalRequest, SessionContext, ToolProxy
from tests.agent.helpers import RUN_TIMEOUT_S, saving_tools
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio


class _FillingApprover:
    """Allows each call, once it has filled the disk (the paused run is stored by then)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fillers: list[Path] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.fillers.append(fill_disk(self.folder))
        return "allow_once"


async def test_a_turn_whose_resume_the_store_refused_continues_before_the_next_turn(
    small_disk: Path,
) -> None:
    runs: list[str] = []
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    script = [tool_call("save", {"path": "x"}), reply("saved"), reply("welcome")]
    approver = _FillingApprover(small_disk)
    async with ScriptedModel(script) as model:
        chat = _Chat(
            agent=SAgent(model=model.chat_model(), store=store, run_script=False),
            tools=ToolProxy([saving_tools(runs)]),
            skills=None,
            context=SessionContext(session_id="chat-1"),
            approver=approver,
            questioner=None,
            renderer=ChatRenderer(out=Console(file=io.StringIO()), err=Console(file=io.StringIO())),
            as_json=False,
        )
        with anyio.fail_after(RUN_TIMEOUT_S):
            refused = await chat.turn("save x")
            assert refused is not None
            assert refused.error is not None
            assert refused.error["code"] == "store_unavailable"
            assert runs == []  # the approved call did not run: nothing was claimed
            still = await chat.turn("thanks")  # the store still refuses: it goes first
            assert still is not None
            assert still.error is not None
            assert still.error["code"] == "store_unavailable"
            assert runs == []
            approver.fillers.pop().unlink()
            thanked = await chat.turn("thanks")
            pending = await store.pending_state("chat-1")
    assert runs == ["x"]  # the approved call ran once, before the next turn
    assert thanked is not None
    assert thanked.messages[-1]["content"] == "welcome"
    users = [m["content"] for m in thanked.messages if m["role"] == "user"]
    assert users == ["save x", "thanks"]  # the message said while it waited was not sent
    assert pending is None  # nothing left waiting for --resume


def test_a_prompt_whose_session_the_store_did_not_keep_exits_1_and_says_so(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SAGENTS_MODEL", "SAGENTS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(small_disk))
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    anyio.run(lambda: store.load_session("made"))  # the file exists: reads go on when full
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel([reply("answered")])) as model,
    ):
        fill_disk(small_disk)
        result = CliRunner().invoke(
            app,
            ["chat", "--prompt", "hi", "--base-url", model.base_url, "--model", "m"],
            catch_exceptions=False,
        )
    assert "answered" in result.stdout  # the answer was shown
    assert result.exit_code == EXIT_TURN_FAILED, result.output
    assert "was not saved" in result.stderr
    assert "chat-" in result.stderr  # naming the session
