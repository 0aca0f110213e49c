"""One per-session offer decides tools/list, tools/call and what run_script's scripts may call
(sagents.gateway._offer): a profile's ``tools``, the mode, and loaded skills' ``allowed-tools``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from sagents.core._spec import ToolSource, ToolSpec
from sagents.gateway import Profile
from sagents.gateway._factory import open_gateway
from sagents.gateway._offer import SessionOffer
from sagents.gateway._settings import GatewaySettings, load_profiles
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_configured import text_of, write_config

pytestmark = pytest.mark.anyio

LIMITED_SKILL = """---
name: limited
description: Only adds numbers. Use when asked to add.
allowed-tools: fault__add
---
Add with fault__add.
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _config(tmp_path: Path) -> Path:
    skills = tmp_path / "skills" / "limited"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text(LIMITED_SKILL, encoding="utf-8")
    config = write_config(tmp_path)
    document = json.loads(config.read_text(encoding="utf-8"))
    document["skills"] = {"directories": [str(tmp_path / "skills")]}
    document["profiles"]["adder"] = {"tools": ["fault__add", "run_script"], "mode": "auto"}
    config.write_text(json.dumps(document), encoding="utf-8")
    return config


VISIBLE = "from agent_tools import call\ncall('fault__echo', {'text': 'x'})\n"


async def test_a_profiles_tools_filter_holds_inside_run_script(tmp_path: Path) -> None:
    config = _config(tmp_path)
    adder = load_profiles(config)["adder"]
    settings = GatewaySettings(config=config, profile=adder, mode="auto", workspace=tmp_path / "ws")
    listed_write = {
        "code": "from agent_tools import call\nprint(call('fault__echo', {'text': 'x'}))",
        "tools": ["fault__echo"],
        "description": "write through a script",
    }
    unlisted_write = {
        "code": (
            "from agent_tools import call, ToolError\n"  # a name the pre-flight cannot read:
            "name = 'fault__' + 'echo'\n"  # the run's own refusal is under test
            "try:\n    call(name, {'text': 'x'})\nexcept ToolError as e:\n"
            "    print('refused:', e)\nprint('sum', call('fault__add', {'a': 1, 'b': 2})['sum'])"
        ),
        "tools": [],
        "description": "try a write",
    }
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(90):
            async with Client(gateway.server, mode="legacy") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                rejected = await client.call_tool("run_script", listed_write)
                refused = await client.call_tool("run_script", unlisted_write)
                visible = await client.call_tool("run_script", {**unlisted_write, "code": VISIBLE})
                direct = await client.call_tool("fault__echo", {"text": "x"})
    assert set(tools) == {"fault__add", "run_script"}
    assert "fault__echo" not in (tools["run_script"].description or "")
    assert rejected.is_error is True
    assert "fault__echo" in text_of(rejected)
    assert "not available to scripts" in text_of(rejected)
    text = text_of(refused)
    assert "refused:" in text
    assert "sum 3" in text
    assert visible.is_error is True
    assert "line 2: no tool 'fault__echo' is available to this script" in text_of(visible)
    assert direct.is_error is True


async def test_a_loaded_skills_allowed_tools_narrow_the_session_in_serve(tmp_path: Path) -> None:
    settings = GatewaySettings(config=_config(tmp_path), mode="auto", workspace=tmp_path / "ws")
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(90):
            async with Client(gateway.server, mode="legacy") as client:
                before = {tool.name for tool in (await client.list_tools()).tools}
                loaded = await client.call_tool("load_skill", {"name": "limited"})
                after = {tool.name for tool in (await client.list_tools()).tools}
                echo = await client.call_tool("fault__echo", {"text": "x"})
            async with Client(gateway.server, mode="legacy") as other:
                untouched = {tool.name for tool in (await other.list_tools()).tools}
    assert "fault__echo" in before
    assert loaded.is_error is False, text_of(loaded)
    assert after == {"fault__add", "load_skill", "read_skill_file"}
    assert echo.is_error is True
    assert "fault__echo" in untouched


def _spec(name: str, kind: Any = "mcp", permission: Any = "read_only") -> ToolSpec:
    return ToolSpec(
        name=name,
        description="d",
        input_schema={"type": "object"},
        permission=permission,
        source=ToolSource(kind=kind, server="s" if kind == "mcp" else None),
    )


class _Provider(FakeProvider):
    def __init__(self, specs: list[ToolSpec]) -> None:
        super().__init__()
        self._fixed = specs

    def list_specs(self) -> list[ToolSpec]:
        return list(self._fixed)


async def test_scripts_are_never_offered_builtins_background_tools_or_tool_expansion() -> None:
    provider = _Provider(
        [
            _spec("s__read"),
            _spec("s__drop", permission="destructive"),
            _spec("local_tool", kind="local"),
            _spec("execute_shell_command", kind="builtin", permission="write"),
            _spec("tool_expand_tools", kind="local"),
            _spec("script_status", kind="local"),
        ]
    )
    offer = SessionOffer(provider, mode="auto", profile=Profile(name="p"))
    scripts = offer.for_scripts()
    names = [spec.name for spec in scripts.list_specs()]
    refused = await scripts.run_tool("execute_shell_command", {"command": "id"}, None)
    destructive = await scripts.run_tool("s__drop", {}, None)
    assert names == ["s__read", "s__drop", "local_tool"]  # s__drop: known, refused by policy
    assert refused.is_error is True
    assert refused.error is not None
    assert refused.error.code == "unknown_tool"
    assert destructive.error is not None
    assert destructive.error.code == "not_allowed"
    assert provider.calls == []
