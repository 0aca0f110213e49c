"""An agent process imports only what its run uses: no MCP SDK, no HTTP stack of ``web_fetch``.

Each check runs in a fresh interpreter (``sys.modules`` of the test process already holds
everything) and lists the modules of packages a plain SAgent run with local tools does not use
(``bench/bench_agent_memory.py`` measures what importing them costs).
"""

from __future__ import annotations

from tests.fresh_imports import imported_modules

NOT_USED = (
    "mcp",
    "mcp_types",
    "sagents.mcp",
    "sagents.gateway",
    "sagents.config._loader",
    "sagents.tool.impl._web_fetch",
)
"""Modules (and their submodules) that no plain agent run with local tools needs."""

HTTP_TRANSPORT = ("httpcore2", "trio")
"""What the model client's HTTP transport imports once it makes a request (as the bare ``openai``
client does): not imported by ``import sagents.agent`` alone."""


def test_importing_sagents_agent_does_not_import_mcp() -> None:
    assert imported_modules("import sagents.agent\n", NOT_USED + HTTP_TRANSPORT) == []


def test_a_tool_turn_with_a_local_tool_does_not_import_mcp() -> None:
    snippet = """
    import anyio
    from sagents.agent import SAgent
    from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
    from sagents.tool import ToolManager, tool

    @tool(permission="read_only")
    async def lookup(key: str) -> str:
        '''Look a key up.'''
        return f"value of {key}"

    async def main() -> None:
        manager = ToolManager()
        manager.register_tool(lookup)
        call = ScriptedToolCall(name="lookup", arguments={"key": "k"}, id="c1")
        script = [ScriptedReply(tool_calls=(call,)), reply("done")]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            events = agent.run_stream([{"role": "user", "content": "go"}], tool_manager=manager)
            done = [event async for event in events][-1]
        assert done.type == "done" and done.reason == "stop", done
        assert {"role": "tool", "tool_call_id": "c1", "content": "value of k"} in done.messages

    anyio.run(main)
    """
    assert imported_modules(snippet, NOT_USED) == []
