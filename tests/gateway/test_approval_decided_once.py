"""One approval decision per call, whatever the path (docs/gateway.md, "Approvals").

The gateway's one policy step decides each ``tools/call`` (allowed, denied, approved once,
approved for the session) before anything runs, and the decision travels with the call: a
run_script's calls inside the sandbox are never decided again, a grant ("Allow for this
session") lives in the store and reaches run_script, and a run_script's one approval takes the
same round trip as a direct write call on every protocol version.

Real peers: ``sagents serve`` as a subprocess over stdio, the upstream
``tests/mcp/servers/fault_server.py`` (``fault__echo`` is a write tool there), the ``mcp`` SDK's
client.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

from tests.gateway.test_configured import ROOT, text_of, write_config

pytestmark = pytest.mark.anyio

ECHO_SCRIPT = "from agent_tools import call\nprint(call('fault__echo', {'text': 'from-script'}))"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(tmp_path: Path) -> StdioServerParameters:
    """``sagents serve`` over stdio in ``ask`` mode, its data under ``tmp_path``."""
    config = write_config(tmp_path)
    code = "from sagents.cli.main import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    args = ["-c", code, "serve", "--config", str(config), "--mode", "ask"]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


class Answers:
    """An elicitation callback that records each message and gives one fixed decision."""

    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.messages: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        self.messages.append(params.message)
        return mt.ElicitResult(action="accept", content={"decision": self.decision})


async def test_allow_for_this_session_spares_the_next_direct_call_and_a_script(
    tmp_path: Path,
) -> None:
    answers = Answers("allow_session")
    script = {"code": ECHO_SCRIPT, "tools": ["fault__echo"], "description": "echo once more"}
    with anyio.fail_after(90):
        async with Client(serve(tmp_path), mode="legacy", elicitation_callback=answers) as client:
            first = await client.call_tool("fault__echo", {"text": "one"})
            second = await client.call_tool("fault__echo", {"text": "two"})
            ran = await client.call_tool("run_script", script)
    assert text_of(first) == "one"
    assert text_of(second) == "two"
    assert ran.is_error is False, text_of(ran)
    assert "from-script" in text_of(ran)
    assert len(answers.messages) == 1, answers.messages  # only the first call was asked
    assert "fault__echo" in answers.messages[0]


async def test_a_2026_client_approves_a_run_script_through_the_input_required_round_trip(
    tmp_path: Path,
) -> None:
    answers = Answers("allow_once")
    script = {"code": ECHO_SCRIPT, "tools": ["fault__echo"], "description": "echo from a script"}
    with anyio.fail_after(90):
        async with Client(serve(tmp_path), mode="auto", elicitation_callback=answers) as client:
            direct = await client.call_tool("fault__echo", {"text": "direct"})
            ran = await client.call_tool("run_script", script)
    assert text_of(direct) == "direct"
    assert ran.is_error is False, text_of(ran)
    assert "from-script" in text_of(ran)
    assert len(answers.messages) == 2, answers.messages  # the direct call, then the script
    assert "run_script" in answers.messages[1]
    assert "fault__echo" in answers.messages[1]


async def test_a_2026_client_that_denies_a_run_script_gets_a_rejection_and_nothing_runs(
    tmp_path: Path,
) -> None:
    answers = Answers("deny")
    script = {"code": ECHO_SCRIPT, "tools": ["fault__echo"], "description": "echo from a script"}
    with anyio.fail_after(90):
        async with Client(serve(tmp_path), mode="auto", elicitation_callback=answers) as client:
            ran = await client.call_tool("run_script", script)
    assert ran.is_error is True
    assert "from-script" not in text_of(ran)
    assert "the user did not approve the write tools fault__echo" in text_of(ran)
    assert len(answers.messages) == 1


async def test_a_script_the_preflight_refuses_is_never_asked_about(tmp_path: Path) -> None:
    answers = Answers("allow_once")
    broken = (
        "from agent_tools import call\n"
        "call('fault__echo', {'text': 'x'})\n"
        "call('fault__ech', {'text': 'x'})\n"
    )
    script = {"code": broken, "tools": ["fault__echo"], "description": "echo with a typo"}
    with anyio.fail_after(90):
        async with Client(serve(tmp_path), mode="legacy", elicitation_callback=answers) as client:
            refused = await client.call_tool("run_script", script)
    assert refused.is_error is True
    assert "line 3: no tool 'fault__ech' is available to this script" in text_of(refused)
    assert answers.messages == []  # the gateway's approval step checks the script first
