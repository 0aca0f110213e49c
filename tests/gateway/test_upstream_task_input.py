"""An upstream task's own questions (``input_required``) through ``sagents serve``: asked of the
client whose call it is, as its era allows, answered back with ``tasks/update``; a client that
cannot answer gets a clear failure and the upstream task is cancelled.

Upstream: tests/mcp/servers/ext_server.py (``up``), whose ``ask`` tool asks one form
elicitation through its task (the Tasks extension on the gateway's own extension code).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.gateway._factory import open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings
from sagents.mcp._ext_types import UpdateTaskRequest, UpdateTaskRequestParams
from sagents.mcp._tasks_client import TasksClient
from tests.gateway.test_ext_tasks import until

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
EXT_SERVER = ROOT / "tests" / "mcp" / "servers" / "ext_server.py"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def write_config(root: Path) -> Path:
    skill = root / "skills" / "pdf-tools"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf-tools\ndescription: PDFs\n---\nx\n")
    document = {
        "mcpServers": {
            "up": {
                "command": sys.executable,
                "args": [str(EXT_SERVER), str(root / "skills")],
                "env": {"PYTHONPATH": str(ROOT)},
                "permission": "write",  # runs in auto mode without the gateway's own approval
            }
        }
    }
    path = root / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConfiguredGateway]:
    config = write_config(tmp_path_factory.mktemp("task-input"))
    async with open_gateway(GatewaySettings(config=config, mode="auto")) as shared:
        yield shared


async def methods(client: Client) -> dict[str, int]:
    result = await client.call_tool("up__seen", {})
    assert result.structured_content is not None
    return dict(result.structured_content["methods"])


class Asked:
    """A client's elicitation callback: records the messages, answers ``answer``."""

    def __init__(self, answer: mt.ElicitResult) -> None:
        self.answer = answer
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: Any) -> mt.ElicitResult:
        self.messages.append(params.message)
        return self.answer


async def test_a_handshake_client_is_asked_and_its_answer_reaches_the_upstream_task(
    gateway: ConfiguredGateway,
) -> None:
    asked = Asked(mt.ElicitResult(action="accept", content={"colour": "blue"}))
    bystander = Asked(mt.ElicitResult(action="decline"))
    with anyio.fail_after(60):
        async with (
            Client(gateway.server, mode="legacy", elicitation_callback=asked) as client,
            Client(gateway.server, mode="legacy", elicitation_callback=bystander) as other,
        ):
            result = await client.call_tool("up__ask_twice", {})
            await other.call_tool("up__seen", {})
            seen = await methods(client)
    assert not result.is_error, result
    assert isinstance(result.content[0], mt.TextContent)
    assert result.content[0].text == "answer: accept blue; accept blue"
    assert asked.messages == [
        "MCP server 'up' asks: Which colour?",
        "MCP server 'up' asks: And again?",
    ]
    assert bystander.messages == []  # another session is never asked
    assert seen.get("tasks/update", 0) >= 2


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_cannot_answer_gets_a_clear_failure_and_the_task_is_cancelled(
    gateway: ConfiguredGateway, mode: str
) -> None:
    with anyio.fail_after(60):
        async with Client(gateway.server, mode=mode) as client:
            before = (await methods(client)).get("tasks/cancel", 0)
            result = await client.call_tool("up__ask", {})
            after = (await methods(client)).get("tasks/cancel", 0)
    assert result.is_error
    assert isinstance(result.content[0], mt.TextContent)
    text = result.content[0].text
    assert "asked for input (elicitation/create)" in text
    assert "cannot be asked" in text
    assert "cancelled" in text
    assert after == before + 1


async def test_a_tasks_client_answers_the_upstream_question_on_its_own_task(
    gateway: ConfiguredGateway,
) -> None:
    async def never(context: Any, params: Any) -> mt.ElicitResult:
        raise AssertionError("a task asks through tasks/get, never by a request mid-call")

    with anyio.fail_after(60):
        async with Client(
            gateway.server, extensions=[TasksClient()], elicitation_callback=never
        ) as client:
            created = await client.session.call_tool("up__ask", {}, allow_claimed=True)
            task_id = created.model_dump(by_alias=True)["taskId"]
            asking = await until(client, task_id, "input_required")
            assert asking.input_requests is not None
            [(key, request)] = asking.input_requests.items()
            assert isinstance(request, mt.ElicitRequest)
            assert isinstance(request.params, mt.ElicitRequestFormParams)
            assert request.params.message == "MCP server 'up' asks: Which colour?"
            answer = mt.ElicitResult(action="accept", content={"colour": "red"})
            update = UpdateTaskRequest(
                params=UpdateTaskRequestParams(task_id=task_id, input_responses={key: answer})
            )
            await client.session.send_request(update, mt.EmptyResult)
            done = await until(client, task_id, "completed")
    assert done.result is not None
    assert done.result["content"][0]["text"] == "answer: accept red"


async def test_an_upstream_that_dies_while_the_user_is_asked_ends_the_call(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    async with open_gateway(GatewaySettings(config=config, mode="auto")) as gateway:
        supervisor = gateway.manager.mcp_supervisor
        assert supervisor is not None

        async def kill_then_answer(context: Any, params: Any) -> mt.ElicitResult:
            pid = supervisor.status("up").pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            while supervisor.status("up").pid == pid:
                await supervisor.wait_started(1)
                await anyio.lowlevel.checkpoint()
            return mt.ElicitResult(action="accept", content={"colour": "red"})

        with anyio.fail_after(60):
            async with Client(
                gateway.server, mode="legacy", elicitation_callback=kill_then_answer
            ) as client:
                result = await client.call_tool("up__ask", {})
    assert result.is_error
    assert isinstance(result.content[0], mt.TextContent)
    assert "unavailable" in result.content[0].text
