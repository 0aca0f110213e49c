"""Peak memory of an agent process: SAgent against the bare client and the peers.

Run: ``.venv/bin/python bench/bench_agent_memory.py`` (the peers come from
``bench/setup-peers.sh``, in ``bench/.venv-peers``). One scripted Chat Completions server runs in
a process of its own (``bench/bench_agent_loop.py --serve``); then, each in a fresh process, the
bare ``openai`` client, SAgent, pydantic-ai's ``Agent`` and the OpenAI Agents SDK's ``Runner``
import what they need, run one streamed text turn and one streamed tool turn (one local tool
call) against it, and print their peak resident set size (``ru_maxrss``). Prints the MB of each
and SAgent's ratio to pydantic-ai's (not a test; the figures are this machine's).

This file imports nothing of sagents or the SDKs at its top, so that a side's process holds only
what that side imports.
"""

from __future__ import annotations

import os
import resource
import sys
from contextlib import aclosing

import anyio

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_PYTHON = os.path.join(HERE, ".venv-peers", "bin", "python")
PEERS_SCRIPT = os.path.join(HERE, "peers", "agent_loop_peers.py")
SERVER = os.path.join(HERE, "bench_agent_loop.py")
SIDES = {"bare": "bare openai client", "sagents": "SAgent"}
PEERS = ("pydantic-ai Agent", "OpenAI Agents Runner")


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def _bare_turns(base_url: str) -> None:
    """The requests SAgent's two turns make, through the bare client (streamed)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a key up.",
                "parameters": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}},
                    "required": ["key"],
                },
            },
        }
    ]
    for text in ("hello", "use the tool"):
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": text}],
            tools=tools,  # type: ignore[arg-type]
            stream=True,
        )
        async for _chunk in stream:
            pass
    await client.close()


async def _sagents_turns(base_url: str) -> None:
    from sagents.agent import OpenAIChatModel, SAgent
    from sagents.tool import ToolManager, tool

    model = OpenAIChatModel("m", base_url=base_url, api_key="bench", stream=True)
    agent = SAgent(model=model, run_script=False)
    manager = ToolManager()
    manager.register_tool(tool(permission="read_only")(lookup))
    for text in ("hello", "use the tool"):
        messages = [{"role": "user", "content": text}]
        async with aclosing(agent.run_stream(messages, tool_manager=manager)) as events:
            async for _event in events:
                pass
    await model.aclose()


async def _side(side: str, base_url: str) -> None:
    await (_bare_turns if side == "bare" else _sagents_turns)(base_url)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


async def main() -> None:
    if not await anyio.Path(PEERS_PYTHON).exists():
        print("no peers: run bench/setup-peers.sh first (installs them in bench/.venv-peers)")
        return
    rows: dict[str, float] = {}
    async with await anyio.open_process([sys.executable, SERVER, "--serve"]) as server:
        assert server.stdout is not None
        assert server.stdin is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await server.stdout.receive()
        base_url = line.decode().strip()
        for side, name in SIDES.items():
            done = await anyio.run_process([sys.executable, __file__, side, base_url], check=True)
            rows[name] = float(done.stdout)
        for name in PEERS:
            done = await anyio.run_process(
                [PEERS_PYTHON, PEERS_SCRIPT, "--rss", name, base_url], check=True
            )
            rows[name] = float(done.stdout)
        await server.stdin.aclose()  # the server ends when its stdin does
    print("peak RSS of a process running one streamed text turn and one tool turn, MB:")
    for name, mb in rows.items():
        print(f"  {name:<22} {mb:7.1f}")
    print(f"  SAgent / pydantic-ai   {rows['SAgent'] / rows['pydantic-ai Agent']:7.2f}x")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        anyio.run(_side, sys.argv[1], sys.argv[2])
    else:
        anyio.run(main)
