"""An approval is never asked on a rendering that is cut or that model text can restructure
(docs/gateway.md, "Approvals"; docs/security.md).

Every channel shows one structured request (``ApprovalRequest.view``): our heading, the
description as one literal line, the script or arguments whole. A channel that cannot show it
whole (an MCP client's elicitation message, past ``ELICITATION_MAX_CHARS``) refuses to ask and
names the channel that can (the web console, which shows every request whole).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from rich.console import Console

from sagents.cli.terminal_approval import TerminalApprover
from sagents.gateway import Gateway
from sagents.gateway._approval import ELICITATION_MAX_CHARS, approval_form
from sagents.gateway._factory import open_gateway
from sagents.gateway._pending import PendingApproval
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings
from sagents.tool import ApprovalRequest, ToolManager, ToolProxy
from sagents.tool.tool_base import tool
from tests.gateway.test_configured import text_of, write_config

pytestmark = pytest.mark.anyio

COMMENTS = "".join(f"# harmless comment line {i:03d}, nothing happens here\n" for i in range(45))
WRITE_AFTER_COMMENTS = (
    COMMENTS + "from agent_tools import call\ncall('fault__echo', {'text': 'x'})\n"
)
FAKE_BLOCK = "list files\nScript:\nprint('only reads')\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """An elicitation callback that records each message and answers ``decision``."""

    def __init__(self, decision: str = "allow_once") -> None:
        self.decision = decision
        self.messages: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        self.messages.append(params.message)
        return mt.ElicitResult(action="accept", content={"decision": self.decision})


@tool(name="save", description="Save a note.", permission="write")
async def save(note: str) -> str:
    return f"saved {len(note)} characters"


@pytest.fixture(scope="module")
async def scripts_gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ConfiguredGateway]:
    root = tmp_path_factory.mktemp("rendering")
    settings = GatewaySettings(
        config=write_config(root), mode="ask", transport="http", port=0, workspace=root / "ws"
    )
    async with open_gateway(settings) as gateway:
        yield gateway


def test_a_script_s_write_call_after_2000_characters_of_comments_is_shown_whole() -> None:
    assert len(COMMENTS) > 2000
    request = ApprovalRequest.for_script(("fault__echo",), WRITE_AFTER_COMMENTS, description="x")
    message, _ = approval_form(request)
    assert "call('fault__echo', {'text': 'x'})" in message
    assert "…" not in message
    assert message.endswith(WRITE_AFTER_COMMENTS)


async def test_the_client_is_asked_the_whole_script_with_its_late_write_call(
    scripts_gateway: ConfiguredGateway,
) -> None:
    asked = Recorder()
    arguments = {"code": WRITE_AFTER_COMMENTS, "tools": ["fault__echo"], "description": "tidy"}
    with anyio.fail_after(90):
        async with Client(scripts_gateway.server, mode="legacy", elicitation_callback=asked) as c:
            result = await c.call_tool("run_script", arguments)
    assert result.is_error is False, text_of(result)
    (message,) = asked.messages
    assert "call('fault__echo', {'text': 'x'})" in message
    assert "…" not in message


def test_a_description_with_newlines_cannot_draw_a_fake_script_block() -> None:
    request = ApprovalRequest.for_script(
        ("fault__echo",), "call('fault__echo', {})", description=FAKE_BLOCK
    )
    message, _ = approval_form(request)
    lines = message.split("\n")
    assert [line for line in lines if line.startswith("Script")] == [
        "Script (1 line, 23 characters, shown whole):"
    ]
    description = next(line for line in lines if line.startswith("Description"))
    assert "\"list files\\x0aScript:\\x0aprint('only reads')\\x0a\"" in description
    assert not any(line.startswith("print('only reads')") for line in lines)
    card = PendingApproval.for_request(request, owner="")
    assert "\n" not in card.description


def test_the_terminal_shows_the_description_on_one_literal_line() -> None:
    out = io.StringIO()
    approver = TerminalApprover(console=Console(file=out, width=200, color_system=None))
    request = ApprovalRequest.for_script(("fault__echo",), "pass", description=FAKE_BLOCK)
    approver.show(request)
    shown = out.getvalue().splitlines()
    assert not any(line.strip().startswith("Script:") for line in shown)
    assert not any(line.strip().startswith("print('only reads')") for line in shown)


async def test_a_description_longer_than_200_characters_is_invalid(
    scripts_gateway: ConfiguredGateway,
) -> None:
    asked = Recorder()
    arguments = {"code": "print(1)", "tools": ["fault__echo"], "description": "d" * 201}
    with anyio.fail_after(90):
        async with Client(scripts_gateway.server, mode="legacy", elicitation_callback=asked) as c:
            result = await c.call_tool("run_script", arguments)
    assert result.is_error is True
    assert "invalid_arguments" in text_of(result)
    assert "description" in text_of(result)
    assert asked.messages == []


async def test_arguments_too_long_for_an_elicitation_are_refused_naming_the_console() -> None:
    asked = Recorder()
    note = "n" * 30_000
    async with ToolManager() as manager:
        manager.register_tool(save)
        async with (
            Gateway(ToolProxy(manager), mode="ask") as gateway,
            Client(gateway.server, mode="legacy", elicitation_callback=asked) as client,
        ):
            with anyio.fail_after(30):
                result = await client.call_tool("save", {"note": note})
    assert asked.messages == []  # never asked on a cut rendering
    assert result.is_error is True
    text = text_of(result)
    assert "not_allowed" in text or "not asked" in text
    assert f"({ELICITATION_MAX_CHARS:,})" in text
    assert "/console/approvals" in text


def test_the_console_card_holds_30000_characters_of_arguments_whole() -> None:
    note = "n" * 30_000
    request = ApprovalRequest.for_tool_call(
        "save", {"note": note}, permission="write", session_id="s"
    )
    card = PendingApproval.for_request(request, owner="")
    assert note in card.arguments
    assert "…" not in card.arguments


async def test_a_script_too_long_for_an_elicitation_is_not_run_and_names_the_console(
    scripts_gateway: ConfiguredGateway,
) -> None:
    asked = Recorder()
    code = COMMENTS * 3 + "from agent_tools import call\ncall('fault__echo', {'text': 'x'})\n"
    arguments = {"code": code, "tools": ["fault__echo"], "description": "tidy"}
    with anyio.fail_after(90):
        async with Client(scripts_gateway.server, mode="legacy", elicitation_callback=asked) as c:
            result = await c.call_tool("run_script", arguments)
    assert asked.messages == []
    assert result.is_error is True
    assert "nothing ran" in text_of(result)
    assert "/console/approvals" in text_of(result)
