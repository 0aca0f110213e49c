"""``python -m sagents.testing.serve --api chat|responses|anthropic|gemini [--port N]
SCRIPT.json``: a scripted model server without code (docs/agent.md, "Testing an agent").

It serves the script on 127.0.0.1 in the API's wire format, prints the base URL its clients
take as the one line of stdout (``http://127.0.0.1:PORT/v1`` for ``chat`` and ``responses``,
``http://127.0.0.1:PORT`` for ``anthropic`` and ``gemini``, whose SDKs add the version), and
answers until it is interrupted (Ctrl-C, SIGTERM). The script is a JSON
object ``{"replies": [...]}``; each reply is one of:

- a string: a text answer;
- ``{"content": "...", "tool_calls": [{"name": ..., "arguments": {...} or "raw text",
  "id": ...}], "prompt_tokens": N, "completion_tokens": N, "delay": seconds}``: an answer
  (every key optional);
- ``{"error": {"status": 429, "message": "...", "code": "...", "retry_after": seconds},
  "delay": seconds}``: an error answer;
- ``{"wire": {...}}``: a recorded answer played back as it was (the form of
  :meth:`~sagents.testing.WireReply.from_json`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from sagents.testing._formats import API
from sagents.testing._scripted import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
)

__all__ = ["main", "script_from_json"]

_APIS = ("chat", "responses", "anthropic", "gemini")


def script_from_json(data: Any) -> list[ScriptedReply | WireReply]:
    """The replies of a script's JSON form (see the module docstring).

    Raises:
        ValueError: the form is not that; the message names the reply and what is wrong.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("replies"), list):
        raise ValueError('a script is an object {"replies": [...]}')
    return [_reply(number, item) for number, item in enumerate(data["replies"], start=1)]


def _reply(number: int, item: Any) -> ScriptedReply | WireReply:
    where = f"reply {number}"
    if isinstance(item, str):
        return ScriptedReply(content=item)
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} is a string or an object, not {item!r}")
    try:
        if "wire" in item:
            return WireReply.from_json(item["wire"])
        delay = _delay(item.get("delay", 0))
        if "error" in item:
            error = item["error"]
            if not isinstance(error, Mapping):
                raise ValueError(f"error is an object, not {error!r}")
            retry_after = error.get("retry_after")
            headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
            status = int(error.get("status", 500))
            if not 400 <= status <= 599:
                raise ValueError(f"an error's status is 400-599, not {status}")
            return ScriptedReply(
                status=status,
                error_message=str(error.get("message", "scripted error")),
                error_code=error.get("code"),
                headers=headers,
                delay=delay,
            )
        listed = item.get("tool_calls") or []
        if not isinstance(listed, list):
            raise ValueError(f"tool_calls is a list of calls, not {listed!r}")
        calls = tuple(_call(call) for call in listed)
        content = item.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"content is a string, not {content!r}")
        return ScriptedReply(
            content=content,
            tool_calls=calls,
            prompt_tokens=int(item.get("prompt_tokens", 10)),
            completion_tokens=int(item.get("completion_tokens", 5)),
            delay=delay,
        )
    except (TypeError, ValueError, AttributeError, KeyError) as error:
        raise ValueError(f"{where}: {error}") from None


def _delay(value: Any) -> float:
    delay = float(value)
    if not 0 <= delay < math.inf:  # NaN fails this too
        raise ValueError(f"delay is a number of seconds, 0 or more, not {value!r}")
    return delay


def _call(call: Any) -> ScriptedToolCall:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise ValueError(
            f'a tool call needs a name: {{"name": "...", "arguments": ...}}, not {call!r}'
        )
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str | Mapping):
        raise ValueError(f"a tool call's arguments are an object or a string, not {arguments!r}")
    return ScriptedToolCall(name=str(call["name"]), arguments=arguments, id=call.get("id"))


async def _serve(script: Sequence[ScriptedReply | WireReply], port: int, api: API) -> None:
    async with ScriptedModel(script, port=port, api=api) as model:
        with_version = api in ("chat", "responses")
        print(model.base_url if with_version else model.base_url.removesuffix("/v1"), flush=True)
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server; the exit code (2 for bad arguments or a bad script)."""
    parser = argparse.ArgumentParser(
        prog="python -m sagents.testing.serve",
        description="Serve a scripted model on 127.0.0.1 and print its base URL.",
    )
    parser.add_argument("--api", choices=_APIS, default="chat", help="the wire format")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("script", type=Path, help="the script (JSON)")
    args = parser.parse_args(argv)
    try:
        script = script_from_json(json.loads(args.script.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        print(f"error: the script {str(args.script)!r} cannot be used: {error}", file=sys.stderr)
        return 2
    try:
        anyio.run(_serve, script, args.port, args.api)
    except KeyboardInterrupt:
        return 0
    except OSError as error:
        print(f"error: cannot serve on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
