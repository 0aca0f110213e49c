"""A sub-agent (``SAgent.as_tool``) shares its caller's todo list, under its own name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import TodoStore, register_builtin_tools
from tests.agent.helpers import collect, done_of

pytestmark = pytest.mark.anyio


async def test_a_sub_agent_writes_the_callers_list_as_its_own_owner(tmp_path: Path) -> None:
    store = TodoStore(path=tmp_path / "todo.sqlite3")
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["todo_write", "todo_read"], todo=store)

    def sub_step(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            item = {"id": "b", "content": "research", "blocked_by": ["a"]}
            return tool_call("todo_write", {"items": [item]}, id="sub_1")
        return reply("noted")

    async with ScriptedModel(sub_step) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False)
        manager.register_tool(helper.as_tool("researcher", "Researches.", tools=["todo_write"]))
        script = [
            tool_call("todo_write", {"items": [{"id": "a", "content": "plan"}]}, id="c1"),
            tool_call("researcher", {"task": "add your task"}, id="c2"),
            reply("ok"),
        ]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            context = SessionContext(session_id="x", agent="lead", permission_mode="auto")
            done_of(
                await collect(
                    agent,
                    [{"role": "user", "content": "go"}],
                    tool_manager=manager,
                    session_context=context,
                )
            )
    items = await store.read(SessionContext(session_id="x"))
    assert [(i.id, i.owner, i.blocked_by) for i in items] == [
        ("a", "lead", ()),
        ("b", "researcher", ("a",)),
    ]
