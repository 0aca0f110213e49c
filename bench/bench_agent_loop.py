"""The agent loop's own overhead per turn, on every model adapter, against the bare SDK client.

Run: ``.venv/bin/python bench/bench_agent_loop.py``. For each API (Chat Completions, Responses,
Anthropic Messages, Gemini), streamed and whole, both sides talk to the same scripted model
server (``sagents.testing.ScriptedModel(api=...)``) on 127.0.0.1 in the same run:

- baseline: the provider's official client making the same request, the same tool offered
  (``AsyncOpenAI``'s ``chat.completions`` or ``responses``, ``AsyncAnthropic``'s
  ``messages``, ``google-genai``'s ``aio.models``), and reading the whole answer;
- text turn: one ``SAgent.run_stream`` run whose model answers with text (one model call),
  and the same through ``SAgent.run``;
- tool turn: one run with one local tool call (two model calls), against the bare client's
  same two requests (the task; then the task, the model's tool call and its result: the
  history a user of the bare client sends back, in the API's own form).

Prints the median CPU milliseconds per turn and the ratios (not a test; numbers vary with
load). The turns run interleaved, REPEATS rounds of each in turn, and each ratio is the median
of the rounds' ratios, so that a change of the machine's load falls on both sides of it. The server
runs in this process, so its time is in both sides.

``--api NAME`` (repeatable: ``chat``, ``responses``, ``anthropic``, ``gemini``): only those
APIs (with or without ``--count``).

``--async-tool``: the tool turn's tool is an ``async def`` (with or without the other options),
so that the figures show the tool turn without the worker thread a sync tool runs in.

``--count``: instead of CPU time, the event-loop callbacks (``call_soon``) and loop iterations
(selector waits) per turn, server included, on a loop that counts them: a deterministic figure
of the task switching a turn costs, where CPU time varies with the machine's load.

``--calls``: instead of CPU time, the Python calls per turn (``cProfile``'s count, server
included): deterministic, and where the loop's own work shows apart from the task switching.

``--peers``: the same turns on Chat Completions for SAgent, the bare ``openai`` client,
pydantic-ai's ``Agent`` and the OpenAI Agents SDK's ``Runner`` (``bench/setup-peers.sh``
installs them into ``bench/.venv-peers``; they run in a child process of that venv,
``bench/peers/agent_loop_peers.py``), all against one scripted server in a process of its own,
so that each side's CPU time is its own client's only.
"""

from __future__ import annotations

import asyncio
import contextvars
import cProfile
import json
import os
import pstats
import selectors
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVarTuple, Unpack

import anyio
from anthropic import AsyncAnthropic
from google import genai
from openai import AsyncOpenAI

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager, tool

TURNS = 20
REPEATS = 7
TEXT = "The answer is forty-two, as computed by the scripted model. " * 4
APIS = ("chat", "responses", "anthropic", "gemini")
# what a request carrying a tool result holds, in each wire format
_RESULT_MARKERS = ('"role": "tool"', "function_call_output", "tool_result", "functionResponse")
_ARGUMENTS = '{"key": "k"}'
_RESULT = "value of k"
# The bare client's requests, in each API's form: a text turn's, and a tool turn's second one
# (the task, the model's call of lookup, its result); its first one is the task alone.
_ASKED: dict[str, dict[str, Any]] = {
    "chat": {
        "text": [{"role": "user", "content": "hello"}],
        "task": [{"role": "user", "content": "use the tool"}],
        "answered": [
            {"role": "user", "content": "use the tool"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": _ARGUMENTS},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": _RESULT},
        ],
    },
    "responses": {
        "text": [{"role": "user", "content": "hello"}],
        "task": [{"role": "user", "content": "use the tool"}],
        "answered": [
            {"role": "user", "content": "use the tool"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": _ARGUMENTS},
            {"type": "function_call_output", "call_id": "c1", "output": _RESULT},
        ],
    },
    "anthropic": {
        "text": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "task": [{"role": "user", "content": [{"type": "text", "text": "use the tool"}]}],
        "answered": [
            {"role": "user", "content": [{"type": "text", "text": "use the tool"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"key": "k"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": _RESULT}],
            },
        ],
    },
    "gemini": {
        "text": [{"role": "user", "parts": [{"text": "hello"}]}],
        "task": [{"role": "user", "parts": [{"text": "use the tool"}]}],
        "answered": [
            {"role": "user", "parts": [{"text": "use the tool"}]},
            {
                "role": "model",
                "parts": [{"function_call": {"name": "lookup", "args": {"key": "k"}}}],
            },
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "lookup", "response": {"result": _RESULT}}}
                ],
            },
        ],
    },
}


@tool(permission="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(name="lookup", permission="read_only")
async def async_lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _tool() -> Any:
    """The tool the tool turn calls: ``lookup``, a plain function (run in a worker thread, as
    every sync tool is), or with ``--async-tool`` the same as an ``async def`` (run on the
    event loop: the tool turn without the worker thread's hand-overs)."""
    return async_lookup if "--async-tool" in sys.argv else lookup


def _script(body: dict[str, Any]) -> ScriptedReply:
    text = json.dumps(body)
    answered = any(marker in text for marker in _RESULT_MARKERS)
    if "use the tool" in text and not answered:
        return tool_call("lookup", {"key": "k"})
    return reply(TEXT)


async def _mean_ms(turn: Callable[[], Awaitable[None]]) -> float:
    """The mean CPU time of one turn over TURNS turns, in milliseconds.

    CPU time of this process (``time.process_time``: client, loop and server together), which
    a shared, loaded machine disturbs far less than wall time does.
    """
    start = time.process_time()
    for _ in range(TURNS):
        await turn()
    return (time.process_time() - start) / TURNS * 1000


async def _interleaved(turns: Turns) -> dict[str, list[float]]:
    """REPEATS rounds of every turn's mean CPU ms, one turn after another in each round.

    Interleaved, so that a change of the machine's load falls on every side alike; each
    ratio is then the median of the rounds' ratios (``_paired``), not a ratio of medians taken
    minutes apart.
    """
    rounds: dict[str, list[float]] = {name: [] for name in turns}
    for _ in range(REPEATS):
        for name, turn in turns.items():
            rounds[name].append(await _mean_ms(turn))
    return rounds


def _paired(rounds: dict[str, list[float]], side: str, base: str) -> float:
    """The median over the rounds of ``side``'s CPU time ÷ ``base``'s in the same round."""
    return statistics.median(s / b for s, b in zip(rounds[side], rounds[base], strict=True))


def _bare(
    api: str, base_url: str, stream: bool, manager: ToolManager
) -> tuple[Callable[[Any], Awaitable[None]], Any]:
    """The bare client's call for ``api`` of the messages it is given (and the client, to
    close), offering the manager's tools as the API's export gives them (what the adapter
    sends)."""
    root = base_url.removesuffix("/v1")
    if api == "chat":
        openai_client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)

        async def chat(messages: Any) -> None:
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

        async def responses(asked: Any) -> None:
            tools: Any = manager.get_responses_tools()
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

        async def messages(asked: Any) -> None:
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

    async def gemini(asked: Any) -> None:
        models = gemini_client.aio.models
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


Turns = dict[str, Callable[[], Awaitable[None]]]


def _sides(
    agent: SAgent,
    manager: ToolManager,
    call: Callable[[Any], Awaitable[None]],
    asked: dict[str, Any],
) -> tuple[
    Callable[[], Awaitable[None]],
    Callable[[], Awaitable[None]],
    Callable[[str], Callable[[], Awaitable[None]]],
]:
    """The bare client's text turn, its tool turn's two requests (``asked``: the same requests
    SAgent sends), and SAgent's streamed turn of a user text."""

    async def bare() -> None:
        await call(asked["text"])

    async def bare_two_calls() -> None:  # the tool turn's two requests
        await call(asked["task"])
        await call(asked["answered"])

    def streamed(text: str) -> Callable[[], Awaitable[None]]:
        messages = [{"role": "user", "content": text}]

        async def run() -> None:
            async with aclosing(agent.run_stream(messages, tool_manager=manager)) as events:
                async for _event in events:
                    pass

        return run

    return bare, bare_two_calls, streamed


async def _turns(api: str, stream: bool, server: ScriptedModel) -> tuple[Turns, Any]:
    """The bare client's turns and SAgent's (``run_stream`` and ``run``), and the client."""
    agent = SAgent(model=server.chat_model(stream=stream), run_script=False)
    manager = ToolManager()
    manager.register_tool(_tool())
    call, client = _bare(api, server.base_url, stream, manager)
    bare, bare_two_calls, streamed = _sides(agent, manager, call, _ASKED[api])

    def whole(text: str) -> Callable[[], Awaitable[None]]:
        messages = [{"role": "user", "content": text}]

        async def run() -> None:
            await agent.run(messages, tool_manager=manager)

        return run

    turns = {
        "bare": bare,
        "text": streamed("hello"),
        "run text": whole("hello"),
        "2 bare": bare_two_calls,
        "tool": streamed("use the tool"),
        "run tool": whole("use the tool"),
    }
    for turn in turns.values():  # warm up every path
        await turn()
    return turns, client


async def _close(client: Any) -> None:
    await client.aclose() if hasattr(client, "aclose") else await client.close()


async def _measure(api: str, stream: bool) -> dict[str, list[float]]:
    async with ScriptedModel(_script, api=api) as server:  # type: ignore[arg-type]
        turns, client = await _turns(api, stream, server)
        rounds = await _interleaved(turns)
        await _close(client)
    return rounds


_PAIRS = (("bare", ("text", "run text")), ("2 bare", ("tool", "run tool")))


def _row(
    api: str,
    stream: bool,
    figures: dict[str, float],
    fmt: str,
    ratio: Callable[[str, str], float] | None = None,
) -> str:
    """One table row: each baseline, then each side and its ratio to that baseline
    (``ratio(side, base)`` when given, else the quotient of the two figures)."""
    mode = "stream" if stream else "whole"
    cells = []
    for base, sides in _PAIRS:
        cells.append(f"{figures[base]:{fmt}}")
        for side in sides:
            quotient = ratio(side, base) if ratio else figures[side] / figures[base]
            cells.append(f"{figures[side]:{fmt}} {quotient:5.2f}x")
    return f"{api:<10} {mode:<7} " + " ".join(cells)


_HEADER = (
    f"{'API':<10} {'mode':<7} {'bare':>7} {'run_stream, ratio':>18} {'run, ratio':>15} "
    f"{'2 bare':>7} {'tool, ratio':>15} {'tool run, ratio':>15}"
)


def _apis() -> tuple[str, ...]:
    """The APIs to measure: ``--api NAME`` (repeatable) chooses some, else all."""
    chosen = tuple(sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == "--api")
    unknown = [api for api in chosen if api not in APIS]
    if unknown:
        raise SystemExit(f"unknown --api {unknown[0]!r}: one of {', '.join(APIS)}")
    return chosen or APIS


async def main() -> None:
    print(_HEADER + "   (CPU ms per turn; ratios against the bare client)")
    for api in _apis():
        for stream in (True, False):
            rounds = await _measure(api, stream)
            medians = {name: statistics.median(ms) for name, ms in rounds.items()}

            def ratio(side: str, base: str, rounds: dict[str, list[float]] = rounds) -> float:
                return _paired(rounds, side, base)

            print(_row(api, stream, medians, "7.2f", ratio), flush=True)


class _CountingSelector(selectors.DefaultSelector):
    waits = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        _CountingSelector.waits += 1
        return super().select(timeout)


_Ts = TypeVarTuple("_Ts")


class _CountingLoop(asyncio.SelectorEventLoop):
    """An asyncio loop counting the callbacks scheduled on it (task steps, wake-ups)."""

    callbacks = 0

    def call_soon(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        _CountingLoop.callbacks += 1
        return super().call_soon(callback, *args, context=context)


async def _counted(turn: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    callbacks, waits = _CountingLoop.callbacks, _CountingSelector.waits
    for _ in range(TURNS):
        await turn()
    return (
        (_CountingLoop.callbacks - callbacks) / TURNS,
        (_CountingSelector.waits - waits) / TURNS,
    )


async def count() -> None:
    print(_HEADER + "   (event-loop callbacks per turn; each second row: loop iterations)")
    for api in _apis():
        for stream in (True, False):
            async with ScriptedModel(_script, api=api) as server:  # type: ignore[arg-type]
                turns, client = await _turns(api, stream, server)
                counted = {name: await _counted(turn) for name, turn in turns.items()}
                await _close(client)
            print(_row(api, stream, {k: c for k, (c, _w) in counted.items()}, "7.0f"))
            print(_row("", stream, {k: w for k, (_c, w) in counted.items()}, "7.0f"), flush=True)


async def calls() -> None:
    print(_HEADER + "   (Python calls per turn, cProfile, server included)")
    for api in _apis():
        for stream in (True, False):
            async with ScriptedModel(_script, api=api) as server:  # type: ignore[arg-type]
                turns, client = await _turns(api, stream, server)
                counted = {}
                for name, turn in turns.items():
                    profile = cProfile.Profile()
                    profile.enable()
                    for _ in range(TURNS):
                        await turn()
                    profile.disable()
                    stats: Any = pstats.Stats(profile)  # total_calls: not in typeshed
                    counted[name] = stats.total_calls / TURNS
                await _close(client)
            print(_row(api, stream, counted, "7.0f"), flush=True)


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
    manager.register_tool(_tool())
    call, client = _bare("chat", base_url, stream, manager)
    bare, bare_two_calls, agent_turn = _sides(agent, manager, call, _ASKED["chat"])
    await bare()
    await agent_turn("use the tool")()
    rounds = await _interleaved(
        {
            "bare text": bare,
            "text": agent_turn("hello"),
            "bare tool": bare_two_calls,
            "tool": agent_turn("use the tool"),
        }
    )
    results = {name: statistics.median(ms) for name, ms in rounds.items()}
    results["text ÷ bare"] = _paired(rounds, "text", "bare text")
    results["tool ÷ bare"] = _paired(rounds, "tool", "bare tool")
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
                + f" {mine / min(peer_ms):14.2f}x {ours[mode][f'{turn} ÷ bare']:7.2f}x"
            )


if __name__ == "__main__":
    if "--serve" in sys.argv:
        anyio.run(_serve)
    elif "--peers" in sys.argv:
        anyio.run(peers)
    elif "--calls" in sys.argv:
        anyio.run(calls)
    elif "--count" in sys.argv:
        anyio.run(
            count, backend_options={"loop_factory": lambda: _CountingLoop(_CountingSelector())}
        )
    else:
        anyio.run(main)
