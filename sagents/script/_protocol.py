"""The run_script wire format on fds 3 and 4 (docs/run_script.md, "How it runs"). STDLIB ONLY.

This module is imported by the host (:mod:`sagents.script._dispatcher`) and, as a copy written to
``<data dir>/script-runtime/``, by the guest helper ``agent_tools`` inside the sandbox, where
``sagents`` is not importable. It must therefore import nothing but the standard library.

The script writes requests to fd 3 and reads replies from fd 4; both carry one JSON object per
line (UTF-8, ``\\n``-terminated). Requests::

    {"id": 7, "op": "call", "tool": "fleet__get_device_status", "args": {"sn": "SN0001"}}
    {"id": 8, "op": "tools"}
    {"id": 9, "op": "describe", "tool": "fleet__get_device_status"}
    {"id": 10, "op": "stubs", "module": "fleet"}
    {"op": "progress", "done": 10, "total": 500, "message": "querying"}

``progress`` is a notification: without an ``id`` it gets no reply. Every other request carries an
``id`` (an int, or a string of at most :data:`MAX_ID_CHARS` characters; never a bool) and gets
exactly one reply::

    {"id": 7, "ok": true, "result": {"text": "...", "structured": {...}, "is_error": false,
                                     "error": null}}
    {"id": 7, "ok": false, "error": {"code": "not_allowed", "message": "..."}}

``ok: false`` means the request was refused or could not be served (policy, limits, a bad
request); a tool that ran and reported an error is ``ok: true`` with ``result.is_error`` set.
A line that cannot be attributed to a request (invalid JSON, an overlong line, a duplicate id)
is answered with ``"id": null``; the guest ignores those.

``call_many`` is not an operation of its own: the guest sends one ``call`` per argument set, in
batches of :data:`CALL_MANY_BATCH` lines written at once, keeping at most two batches
outstanding. Per-call requests let the host count, police, record and reply to each call on its
own, and let the guest see the first failure at once.

Parsing is strict: a line longer than :data:`MAX_REQUEST_BYTES`, invalid UTF-8, ``NaN`` /
``Infinity``, duplicate keys, a non-object, or a missing/ill-typed field each raise
:class:`ProtocolError` with a stable ``code``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, NamedTuple

__all__ = [
    "CALL_MANY_BATCH",
    "ERROR_BAD_REQUEST",
    "ERROR_CANCELLED",
    "ERROR_DISCONNECTED",
    "ERROR_DUPLICATE_ID",
    "ERROR_INVALID_JSON",
    "ERROR_LIMIT",
    "ERROR_LINE_TOO_LONG",
    "ERROR_NOT_ALLOWED",
    "ERROR_RESULT_TOO_LARGE",
    "ERROR_UNKNOWN_MODULE",
    "ERROR_UNKNOWN_OP",
    "ERROR_UNKNOWN_TOOL",
    "FDS_ENV",
    "MAX_ID_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_TOOL_NAME_CHARS",
    "CallRequest",
    "DescribeRequest",
    "ProgressNotice",
    "ProtocolError",
    "Request",
    "RequestId",
    "StubsRequest",
    "ToolsRequest",
    "decode_line",
    "encode_error_reply",
    "encode_line",
    "encode_ok_reply",
    "parse_reply",
    "parse_request",
]

# Tunables. Changing one changes the protocol for both ends; they ship together.
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # one request line, newline excluded: 4 MiB
MAX_REPLY_BYTES = 64 * 1024 * 1024  # one reply line (a tool result): 64 MiB
MAX_ID_CHARS = 64  # a string request id
MAX_MESSAGE_CHARS = 2000  # a progress message; longer ones are cut, not refused
MAX_TOOL_NAME_CHARS = 128  # a tool name: the MCP spec's limit (2025-11-25, "Tool names")
CALL_MANY_BATCH = 50  # call requests written at once by call_many
FDS_ENV = "SAGENTS_SCRIPT_FDS"  # "<request fd>,<reply fd>" as the script sees them

# Error codes carried in ``error.code`` of a reply (tool-layer codes pass through unchanged).
ERROR_INVALID_JSON = "invalid_json"
ERROR_LINE_TOO_LONG = "line_too_long"
ERROR_BAD_REQUEST = "bad_request"
ERROR_UNKNOWN_OP = "unknown_op"
ERROR_DUPLICATE_ID = "duplicate_id"
ERROR_LIMIT = "limit_exceeded"
ERROR_NOT_ALLOWED = "not_allowed"
ERROR_UNKNOWN_TOOL = "unknown_tool"
ERROR_UNKNOWN_MODULE = "unknown_module"  # no stubs module of that name
ERROR_CANCELLED = "cancelled"
ERROR_RESULT_TOO_LARGE = "result_too_large"
ERROR_DISCONNECTED = "disconnected"

RequestId = int | str


class ProtocolError(ValueError):
    """A line or message breaks the protocol.

    Attributes:
        code: One of the ``ERROR_*`` codes.
        message: What was wrong, in English.
        request_id: The request's id when it could be read, else None.
    """

    def __init__(self, code: str, message: str, *, request_id: RequestId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


class CallRequest(NamedTuple):
    """``call``: run ``tool`` with ``args`` (a JSON object)."""

    id: RequestId
    tool: str
    args: dict[str, Any]
    op: Literal["call"] = "call"


class ToolsRequest(NamedTuple):
    """``tools``: list the tools this script may call."""

    id: RequestId
    op: Literal["tools"] = "tools"


class DescribeRequest(NamedTuple):
    """``describe``: one callable tool's description and input schema."""

    id: RequestId
    tool: str
    op: Literal["describe"] = "describe"


class StubsRequest(NamedTuple):
    """``stubs``: the source of one typed stubs module (``agent_tools.stubs.<module>``), as
    ``{"source": "..."}``."""

    id: RequestId
    module: str
    op: Literal["stubs"] = "stubs"


class ProgressNotice(NamedTuple):
    """``progress``: the script's own progress. Replied to only when it carries an id."""

    done: float | None
    total: float | None
    message: str | None
    id: RequestId | None = None
    op: Literal["progress"] = "progress"


Request = CallRequest | ToolsRequest | DescribeRequest | StubsRequest | ProgressNotice
"""A parsed request. Immutable named tuples, not dataclasses: ``dataclasses`` (with ``inspect``
and ``ast``) would cost every script tens of milliseconds at start-up, since the guest imports
this module too."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # The dict is built in C; only an object that lost a key to a duplicate is looked at again
    # (to name the first key repeated), so the common case costs one call and one comparison.
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


# Built once: ``json.loads``/``json.dumps`` with options build a new decoder/encoder per call.
_DECODE = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_object).decode
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_ENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode


def decode_line(line: bytes, *, max_bytes: int) -> Any:
    """Decode one line (its trailing newline optional) strictly into a JSON value.

    Raises:
        ProtocolError: ``line_too_long`` past ``max_bytes``; ``invalid_json`` for invalid
            UTF-8, NaN/Infinity, duplicate keys, nesting too deep or any other JSON error.
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    if len(line) > max_bytes:
        raise ProtocolError(ERROR_LINE_TOO_LONG, f"line of {len(line)} bytes over {max_bytes}")
    try:
        text = line.decode("utf-8")
        if text.startswith("\ufeff"):  # what json.loads says; the decoder alone does not check
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _DECODE(text)
    except UnicodeDecodeError as error:
        raise ProtocolError(ERROR_INVALID_JSON, f"invalid UTF-8: {error.reason}") from None
    except RecursionError:
        raise ProtocolError(ERROR_INVALID_JSON, "JSON nested too deeply") from None
    except ValueError as error:
        raise ProtocolError(ERROR_INVALID_JSON, f"invalid JSON: {error}") from None


def encode_line(message: Any) -> bytes:
    """Encode one message as a UTF-8 JSON line ending in ``\\n``.

    Lone surrogates (which JSON allows as escapes) fall back to ASCII escapes.

    Raises:
        ValueError: for NaN/Infinity or a value JSON cannot hold.
        TypeError: for a value that is not JSON-serialisable.
    """
    text = _ENCODE(message)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_ENCODE_ASCII(message) + "\n").encode("ascii")


def encode_ok_reply(request_id: RequestId | None, result: Any) -> bytes:
    """``{"id", "ok": true, "result"}`` as a line (see :func:`encode_line` for errors raised)."""
    return encode_line({"id": request_id, "ok": True, "result": result})


def encode_error_reply(request_id: RequestId | None, code: str, message: str) -> bytes:
    """``{"id", "ok": false, "error": {"code", "message"}}`` as a line."""
    return encode_line({"id": request_id, "ok": False, "error": {"code": code, "message": message}})


def _request_id(raw: Any) -> RequestId:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ProtocolError(ERROR_BAD_REQUEST, "'id' must be an integer or a string")
    if isinstance(raw, str) and not 0 < len(raw) <= MAX_ID_CHARS:
        raise ProtocolError(ERROR_BAD_REQUEST, f"a string 'id' must have 1 to {MAX_ID_CHARS} chars")
    return raw


def _tool_name(message: dict[str, Any], request_id: RequestId | None) -> str:
    tool = message.get("tool")
    if not isinstance(tool, str) or not tool:
        raise ProtocolError(
            ERROR_BAD_REQUEST, "'tool' must be a non-empty string", request_id=request_id
        )
    if len(tool) > MAX_TOOL_NAME_CHARS:  # no tool has such a name; never echo or record it
        raise ProtocolError(
            ERROR_BAD_REQUEST,
            f"a tool name of {len(tool)} characters is over the {MAX_TOOL_NAME_CHARS}-character "
            "limit of MCP tool names",
            request_id=request_id,
        )
    return tool


def _number(message: dict[str, Any], key: str, request_id: RequestId | None) -> float | None:
    value = message.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProtocolError(
            ERROR_BAD_REQUEST, f"{key!r} must be a finite number", request_id=request_id
        )
    return float(value)


def parse_request(line: bytes) -> Request:
    """Parse one request line from the script.

    Args:
        line: The raw bytes of one line (newline optional).

    Returns:
        A :class:`CallRequest`, :class:`ToolsRequest`, :class:`DescribeRequest`,
        :class:`StubsRequest` or :class:`ProgressNotice`.

    Raises:
        ProtocolError: with ``request_id`` set whenever the id could be read, so the host can
            answer the right caller.
    """
    message = decode_line(line, max_bytes=MAX_REQUEST_BYTES)
    if not isinstance(message, dict):
        raise ProtocolError(ERROR_BAD_REQUEST, "a request must be a JSON object")
    op = message.get("op")
    if op == "progress":
        raw_id = message.get("id")
        request_id = None if raw_id is None else _request_id(raw_id)
        text = message.get("message")
        if text is not None and not isinstance(text, str):
            raise ProtocolError(
                ERROR_BAD_REQUEST, "'message' must be a string", request_id=request_id
            )
        return ProgressNotice(
            id=request_id,
            done=_number(message, "done", request_id),
            total=_number(message, "total", request_id),
            message=text[:MAX_MESSAGE_CHARS] if text is not None else None,
        )
    request_id = _request_id(message.get("id"))
    if op == "call":
        args = message.get("args", {})
        if not isinstance(args, dict):
            raise ProtocolError(
                ERROR_BAD_REQUEST, "'args' must be a JSON object", request_id=request_id
            )
        return CallRequest(id=request_id, tool=_tool_name(message, request_id), args=args)
    if op == "tools":
        return ToolsRequest(id=request_id)
    if op == "describe":
        return DescribeRequest(id=request_id, tool=_tool_name(message, request_id))
    if op == "stubs":
        module = message.get("module")
        if not isinstance(module, str) or not module.isidentifier():
            raise ProtocolError(
                ERROR_BAD_REQUEST, "'module' must be an identifier", request_id=request_id
            )
        return StubsRequest(id=request_id, module=module)
    raise ProtocolError(
        ERROR_UNKNOWN_OP,
        f"unknown op {op!r}; use call, tools, describe, stubs or progress",
        request_id=request_id,
    )


def parse_reply(line: bytes) -> tuple[RequestId | None, bool, Any]:
    """Parse one reply line from the host into ``(id, ok, result or error dict)``.

    Raises:
        ProtocolError: when the line is not a well-formed reply.
    """
    message = decode_line(line, max_bytes=MAX_REPLY_BYTES)
    if not isinstance(message, dict) or not isinstance(message.get("ok"), bool):
        raise ProtocolError(ERROR_BAD_REQUEST, "a reply must be an object with a boolean 'ok'")
    raw_id = message.get("id")
    request_id = None if raw_id is None else _request_id(raw_id)
    if message["ok"]:
        return request_id, True, message.get("result")
    error = message.get("error")
    if not isinstance(error, dict):
        error = {"code": ERROR_BAD_REQUEST, "message": "reply without an error object"}
    return request_id, False, error
