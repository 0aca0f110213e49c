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

A key a form has not (a misspelt ``"text"`` for ``"content"``) is an error naming the reply,
never ignored.
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
_MAX_PORT = 65535


def script_from_json(data: Any) -> list[ScriptedReply | WireReply]:
    """The replies of a script's JSON form (see the module docstring).

    Raises:
        ValueError: the form is not that; the message names the reply and what is wrong.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("replies"), list):
        raise ValueError('a script is an object {"replies": [...]}')
    return [_reply(number, item) for number, item in enumerate(data["replies"], start=1)]


_ANSWER_KEYS = frozenset({"content", "tool_calls", "prompt_tokens", "completion_tokens", "delay"})
_ERROR_KEYS = frozenset({"error", "delay"})
_ERROR_FIELDS = frozenset({"status", "message", "code", "retry_after"})
_CALL_KEYS = frozenset({"name", "arguments", "id"})


def _reply(number: int, item: Any) -> ScriptedReply | WireReply:
    where = f"reply {number}"
    if isinstance(item, str):
        return ScriptedReply(content=item)
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} is a string or an object, not {item!r}")
    try:
        if "wire" in item:
            _known_keys(item, frozenset({"wire"}), "a wire reply")
            if not isinstance(item["wire"], Mapping):
                raise ValueError(f"wire is an object, not {item['wire']!r}")
            return WireReply.from_json(item["wire"])
        delay = _delay(item.get("delay", 0))
        if "error" in item:
            _known_keys(item, _ERROR_KEYS, "an error reply")
            error = item["error"]
            if not isinstance(error, Mapping):
                raise ValueError(f"error is an object, not {error!r}")
            _known_keys(error, _ERROR_FIELDS, "an error")
            retry_after = error.get("retry_after")
            headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
            status = error.get("status", 500)
            if not _whole(status) or not 400 <= status <= 599:
                raise ValueError(f"an error's status is 400-599, not {status!r}")
            code = error.get("code")
            if code is not None and not isinstance(code, str):
                raise ValueError(f"an error's code is a string, not {code!r}")
            return ScriptedReply(
                status=status,
                error_message=str(error.get("message", "scripted error")),
                error_code=code,
                headers=headers,
                delay=delay,
            )
        _known_keys(item, _ANSWER_KEYS, "an answer")
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
            prompt_tokens=_tokens(item, "prompt_tokens", 10),
            completion_tokens=_tokens(item, "completion_tokens", 5),
            delay=delay,
        )
    except (TypeError, ValueError, AttributeError, KeyError) as error:
        raise ValueError(f"{where}: {error}") from None


def _known_keys(item: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    """Refuse a key the form has not (a misspelt one was ignored: the reply served as
    something else than meant)."""
    unknown = sorted(str(key) for key in item if key not in known)
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r} in {what} (its keys: {', '.join(sorted(known))})"
        )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tokens(item: Mapping[str, Any], key: str, default: int) -> int:
    value = item.get(key, default)
    if not _whole(value) or value < 0:
        raise ValueError(f"{key} is a whole number of 0 or more, not {value!r}")
    return int(value)


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
    _known_keys(call, _CALL_KEYS, "a tool call")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str | Mapping):
        raise ValueError(f"a tool call's arguments are an object or a string, not {arguments!r}")
    id_ = call.get("id")
    if id_ is not None and not isinstance(id_, str):
        raise ValueError(f"a tool call's id is a string, not {id_!r}")
    return ScriptedToolCall(name=str(call["name"]), arguments=arguments, id=id_)


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
    if not 0 <= args.port <= _MAX_PORT:
        parser.error(f"--port is 0-{_MAX_PORT} (0: a free one), not {args.port}")
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
