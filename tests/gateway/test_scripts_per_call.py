"""A session's run_script host outlives each call; what belongs to a call does not stay in it:
each run's tool calls carry the questioner of the run_script call that ran it (the client of
that call), never that of the call the host was opened for."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.gateway._scripts import GatewayScripts
from sagents.progress import ProgressHub
from sagents.tool import SessionContext, ToolManager
from sagents.tool.questions import Questionnaire, QuestionnaireAnswer
from sagents.tool.tool_base import tool

pytestmark = pytest.mark.anyio


class ClientOf:
    """The questioner of one call's client (it only says whose it is)."""

    def __init__(self, call: str) -> None:
        self.call = call

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        return QuestionnaireAnswer(status="declined", message=self.call)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_each_run_of_a_session_asks_the_client_of_its_own_call(tmp_path: Path) -> None:
    asked: list[str] = []

    @tool(permission="read_only")
    def whose_client(context: SessionContext) -> str:
        """Say whose client this call would ask."""
        questioner = context.questioner
        asked.append(questioner.call if isinstance(questioner, ClientOf) else "nobody")
        return "ok"

    code = "from agent_tools import call\ncall('whose_client', {})\n"
    async with (
        ToolManager() as manager,
        GatewayScripts(
            hub=ProgressHub(),
            workspaces=None,
            limits=ScriptLimits(timeout_s=60.0),
            data_dir=tmp_path / "data",
        ) as scripts,
    ):
        manager.register_tool(whose_client)
        for call in ("first call", "second call"):
            context = SessionContext(
                session_id="0" * 32, permission_mode="auto", questioner=ClientOf(call)
            )
            with anyio.fail_after(60):
                result = await scripts.run(
                    {"code": code, "tools": [], "description": "asks"},
                    context,
                    tools=manager,
                    tool_call_id=None,
                )
            assert not result.is_error, result.text
    assert asked == ["first call", "second call"]
