"""The agent loop's own overhead per turn, on every model adapter, against the bare SDK client.

Run: ``.venv/bin/python bench/bench_agent_loop.py``. For each API (Chat Completions, Responses,
Anthropic Messages, Gemini), streamed and whole, both sides talk to the same scripted model
server (``sagents.testing.ScriptedModel(api=...)``) on 127.0.0.1 in the same run:

- baseline: the provider's official client making the same request, the same tool offered
  (``AsyncOpenAI``'s ``chat.completions`` or ``responses``, ``AsyncAnthropic``'s
  ``messages``, ``google-genai``'s ``aio.models``), and reading the whole answer;
- text turn: one ``SAgent.run_stream`` run whose model answers with text (one model call);
- tool turn: one run with one local tool call (two model calls), against two bare calls.

Prints the median CPU milliseconds per turn and the ratios (not a test; numbers vary with
load). The server runs in this process, so its time is in both sides.

``--peers``: the same turns on Chat Completions for SAgent, the bare ``openai`` client,
pydantic-ai's ``Agent`` and the OpenAI Agents SDK's ``Runner`` (``bench/setup-peers.sh``
installs them into ``bench/.venv-peers``; they run in a child process of that venv,
``bench/peers/agent_loop_peers.py``), all against one scripted server in a process of its own,
so that each side's CPU time is its own client's only.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio
from anthropic import AsyncAnthropic
from google import genai
from openai import AsyncOpenAI

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager, tool

TURNS = 20
REPEATS = 5
TEXT = "The answer is forty-two, as computed by the scripted model. " * 4
APIS = ("chat", "responses", "anthropic", "gemini")
# what a request carrying a tool result holds, in each wire format
_RESULT_MARKERS = ('"role": "tool"', "function_call_output", "tool_result", "functionResponse")


@tool(permission="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _script(body: dict[str, Any]) -> ScriptedReply:
    text = json.dumps(body)
    answered = any(marker in text for marker in _RESULT_MARKERS)
    if "use the tool" in text and not answered:
        return tool_call("lookup", {"key": "k"})
    return reply(TEXT)


async def _median_ms(turn: Callable[[], Awaitable[None]]) -> float:
    """Median over REPEATS of the mean CPU time of one turn, in milliseconds.

    CPU time of this process (``time.process_time``: client, loop and server together), which
    a shared, loaded machine disturbs far less than wall time does.
    """
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(TURNS):
            await turn()
        runs.append((time.process_time() - start) / TURNS * 1000)
    return statistics.median(runs)


def _bare(
    api: str, base_url: str, stream: bool, manager: ToolManager
) -> tuple[Callable[[], Awaitable[None]], Any]:
    """The bare client's call for ``api`` (and the client, to close), offering the manager's
    tools as the API's export gives them (what the adapter sends)."""
    root = base_url.removesuffix("/v1")
    if api == "chat":
        openai_client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)

        async def chat() -> None:
            messages: Any = [{"role": "user", "content": "hello"}]
            tools: Any = manager.get_openai_tools()
            if not stream:
                await openai_client.chat.completions.create(
                    model="m", messages=messages, tools=tools
                )
                return
            chunks = await openai_client.chat.completions.create(
                model="m",
                messages=messages,
                tools=tools,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _chunk in chunks:
                pass

        return chat, openai_client
    if api == "responses":
        responses_client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)

        async def responses() -> None:
            tools: Any = manager.get_responses_tools()
            asked: Any = [{"role": "user", "content": "hello"}]
            if not stream:
                await responses_client.responses.create(model="m", input=asked, tools=tools)
                return
            events = await responses_client.responses.create(
                model="m", input=asked, tools=tools, stream=True
            )
            async for _event in events:
                pass

        return responses, responses_client
    if api == "anthropic":
        anthropic_client = AsyncAnthropic(base_url=root, api_key="bench", max_retries=0)

        async def messages() -> None:
            asked: Any = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
            tools: Any = manager.get_anthropic_tools()
            if not stream:
                await anthropic_client.messages.create(
                    model="m", max_tokens=8192, messages=asked, tools=tools
                )
                return
            events = await anthropic_client.messages.create(
                model="m", max_tokens=8192, messages=asked, tools=tools, stream=True
            )
            async for _event in events:
                pass

        return messages, anthropic_client
    gemini_client = genai.Client(api_key="bench", http_options={"base_url": root})

    async def gemini() -> None:
        models = gemini_client.aio.models
        asked: Any = [{"role": "user", "parts": [{"text": "hello"}]}]
        config: Any = {
            "tools": [{"function_declarations": manager.get_gemini_tools()}],
            "automatic_function_calling": {"disable": True},
        }
        if not stream:
            await models.generate_content(model="m", contents=asked, config=config)
            return
        chunks = await models.generate_content_stream(model="m", contents=asked, config=config)
        async for _chunk in chunks:
            pass

    return gemini, gemini_client.aio


async def _measure(api: str, stream: bool) -> tuple[float, float, float, float]:
    async with ScriptedModel(_script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(stream=stream), run_script=False)
        manager = ToolManager()
        manager.register_tool(lookup)
        bare, client = _bare(api, server.base_url, stream, manager)

        async def bare_two_calls() -> None:
            await bare()
            await bare()

        def agent_turn(text: str) -> Callable[[], Awaitable[None]]:
            messages = [{"role": "user", "content": text}]

            async def run() -> None:
                async with aclosing(agent.run_stream(messages, tool_manager=manager)) as events:
                    async for _event in events:
                        pass

            return run

        await bare()  # warm up both paths
        await agent_turn("hello")()
        results = (
            await _median_ms(bare),
            await _median_ms(agent_turn("hello")),
            await _median_ms(bare_two_calls),
            await _median_ms(agent_turn("use the tool")),
        )
        await client.aclose() if hasattr(client, "aclose") else await client.close()
    return results


async def main() -> None:
    print(
        f"{'API':<10} {'mode':<7} {'bare':>7} {'text turn':>10} {'ratio':>6} "
        f"{'2 bare':>7} {'tool turn':>10} {'ratio':>6}   (CPU ms per turn)"
    )
    for api in APIS:
        for stream in (True, False):
            bare, text, bare2, tool_turn = await _measure(api, stream)
            mode = "stream" if stream else "whole"
            print(
                f"{api:<10} {mode:<7} {bare:7.2f} {text:10.2f} {text / bare:5.2f}x "
                f"{bare2:7.2f} {tool_turn:10.2f} {tool_turn / bare2:5.2f}x"
            )


PEERS_PYTHON = os.path.join(os.path.dirname(__file__), ".venv-peers", "bin", "python")
PEERS_SCRIPT = os.path.join(os.path.dirname(__file__), "peers", "agent_loop_peers.py")


async def _serve() -> None:
    """``--serve``: the scripted Chat Completions server, until stdin closes."""
    async with ScriptedModel(_script, api="chat") as server:
        print(server.base_url, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)


async def _sagents_side(base_url: str, stream: bool) -> dict[str, float]:
    """CPU ms of a text and a tool turn for the bare client and SAgent (this process only)."""
    from sagents.agent import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=base_url, api_key="bench", stream=stream)
    agent = SAgent(model=model, run_script=False)
    manager = ToolManager()
    manager.register_tool(lookup)
    bare, client = _bare("chat", base_url, stream, manager)

    async def bare_two_calls() -> None:
        await bare()
        await bare()

    def agent_turn(text: str) -> Callable[[], Awaitable[None]]:
        messages = [{"role": "user", "content": text}]

        async def run() -> None:
            async with aclosing(agent.run_stream(messages, tool_manager=manager)) as events:
                async for _event in events:
                    pass

        return run

    await bare()
    await agent_turn("use the tool")()
    results = {
        "bare text": await _median_ms(bare),
        "text": await _median_ms(agent_turn("hello")),
        "bare tool": await _median_ms(bare_two_calls),
        "tool": await _median_ms(agent_turn("use the tool")),
    }
    await client.close()
    await model.aclose()
    return results


async def peers() -> None:
    if not await anyio.Path(PEERS_PYTHON).exists():
        print("no peers: run bench/setup-peers.sh first (installs them in bench/.venv-peers)")
        return
    async with await anyio.open_process([sys.executable, __file__, "--serve"]) as server:
        assert server.stdout is not None
        assert server.stdin is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await server.stdout.receive()
        base_url = line.decode().strip()
        ours = {}
        for mode in ("stream", "whole"):
            ours[mode] = await _sagents_side(base_url, mode == "stream")
        peer_run = await anyio.run_process(
            [PEERS_PYTHON, PEERS_SCRIPT, base_url, str(TURNS), str(REPEATS)], check=True
        )
        theirs: dict[str, dict[str, dict[str, float]]] = json.loads(peer_run.stdout)
        await server.stdin.aclose()  # the server ends when its stdin does
    names = list(theirs)
    print(
        f"{'mode':<7} {'turn':<5} {'bare':>7} {'SAgent':>7} "
        + " ".join(f"{name:>21}" for name in names)
        + f" {'vs better peer':>15} {'vs bare':>8}   (CPU ms per turn, client only)"
    )
    for mode in ("stream", "whole"):
        for turn in ("text", "tool"):
            mine = ours[mode][turn]
            bare = ours[mode][f"bare {turn}"]
            peer_ms = [theirs[name][mode][turn] for name in names]
            print(
                f"{mode:<7} {turn:<5} {bare:7.2f} {mine:7.2f} "
                + " ".join(f"{ms:21.2f}" for ms in peer_ms)
                + f" {mine / min(peer_ms):14.2f}x {mine / bare:7.2f}x"
            )


if __name__ == "__main__":
    if "--serve" in sys.argv:
        anyio.run(_serve)
    elif "--peers" in sys.argv:
        anyio.run(peers)
    else:
        anyio.run(main)
