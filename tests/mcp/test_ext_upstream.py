"""Upstream servers offering the MCP Tasks and Skills extensions (a real stdio server built on
the gateway's extension code, tests/mcp/servers/ext_server.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from sagents.errors import SkillError
from sagents.mcp._session import negotiate
from sagents.skill import SkillManager
from sagents.skill.mcp_skills import fetch_mcp_skills
from sagents.tool import ToolManager
from tests.mcp.helpers import ROOT, SERVERS

pytestmark = pytest.mark.anyio


def _skills(root: Path) -> Path:
    skill = root / "pdf-tools"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Fill PDF forms\nlicense: MIT\n---\n"
        "Use scripts/fill.py\n",
        encoding="utf-8",
    )
    (skill / "scripts" / "fill.py").write_bytes(b"print('fill')\n")
    return root


def ext_server(skills: Path) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(
        command=sys.executable,
        args=[str(SERVERS / "ext_server.py"), str(skills)],
        env=env,
        cwd=str(ROOT),
    )


@asynccontextmanager
async def session_with(params: StdioServerParameters, era: str) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        if era == "legacy":
            await session.initialize()
        else:
            await negotiate(session, discover_timeout=10)
        yield session


def structured(result: Any) -> dict[str, Any]:
    assert result.structured is not None, result
    return dict(result.structured)


async def test_a_long_upstream_call_runs_as_a_task_and_is_polled_to_its_result(
    tmp_path: Path,
) -> None:
    params = ext_server(_skills(tmp_path / "skills"))
    async with ToolManager() as tm:
        with anyio.fail_after(60):
            await tm.register_mcp_server(name="up", params=params)
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def slow() -> None:
                    results.append(await tm.run_tool("up__slow", {}))

                tg.start_soon(slow)
                while not structured(await tm.run_tool("up__seen", {}))["started"]:
                    await anyio.lowlevel.checkpoint()  # each round trip is real I/O
                seen = structured(await tm.run_tool("up__seen", {}))
                while seen["methods"].get("tasks/get", 0) == 0:  # polled, not held open
                    seen = structured(await tm.run_tool("up__seen", {}))
                await tm.run_tool("up__release", {})
    [result] = results
    assert not result.is_error
    assert result.text == "slow done"


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_an_upstreams_skills_join_a_skill_manager_verified(tmp_path: Path, era: str) -> None:
    params = ext_server(_skills(tmp_path / "skills"))
    with anyio.fail_after(60):
        async with session_with(params, era) as session:
            root = await fetch_mcp_skills(session, "up", tmp_path / "cache")
    manager = SkillManager()
    manager.add_skill_dir(root)
    skill = manager.get_skill("pdf-tools")
    assert skill is not None
    assert skill.description == "Fill PDF forms"
    assert skill.files == ("SKILL.md", "scripts/fill.py")
    assert (skill.path / "scripts" / "fill.py").read_bytes() == b"print('fill')\n"
    assert root == tmp_path / "cache" / "up"


async def test_fetching_skills_refuses_a_server_name_that_is_a_path(tmp_path: Path) -> None:
    params = ext_server(_skills(tmp_path / "skills"))
    with anyio.fail_after(60):
        async with session_with(params, "auto") as session:
            with pytest.raises(SkillError, match="namespace"):
                await fetch_mcp_skills(session, "../evil", tmp_path / "cache")
    assert not (tmp_path / "evil").exists()


async def test_cancelling_a_call_that_became_a_task_sends_tasks_cancel(tmp_path: Path) -> None:
    params = ext_server(_skills(tmp_path / "skills"))
    async with ToolManager() as tm:
        with anyio.fail_after(60):
            await tm.register_mcp_server(name="up", params=params)
            async with anyio.create_task_group() as tg:
                tg.start_soon(tm.run_tool, "up__slow", {})
                seen = structured(await tm.run_tool("up__seen", {}))
                while seen["methods"].get("tasks/get", 0) == 0:  # it is a task, being polled
                    seen = structured(await tm.run_tool("up__seen", {}))
                tg.cancel_scope.cancel()
            seen = structured(await tm.run_tool("up__seen", {}))
    assert seen["methods"].get("tasks/cancel", 0) == 1
    # SEP-2663: not for tasks; the one notifications/cancelled ends the task's listen stream
    # (2026-07-28 "Subscriptions": how a stdio client ends a subscription)
    assert seen["methods"].get("subscriptions/listen", 0) == 2  # list changes, and the task
    assert seen["methods"].get("notifications/cancelled", 0) == 1
