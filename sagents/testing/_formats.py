"""A scripted reply in the wire format of each API ``ScriptedModel`` speaks besides Chat
Completions: OpenAI Responses ("Streaming API responses", the ``response.*`` events), Anthropic
Messages ("Streaming Messages", named SSE events) and Gemini (``GenerateContentResponse`` chunks
of ``streamGenerateContent?alt=sse``), each whole or streamed, and each API's error body.

Every function returns either a JSON document (a whole answer, an error) or the body's pieces,
each one SSE event, in the order the API sends them.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sagents.testing._scripted import ScriptedReply

__all__ = ["API", "error_body", "pieces", "whole"]

API = Literal["chat", "responses", "anthropic", "gemini"]

MODEL_NAME = "scripted-model"
_CHUNK_CHARS = 8  # characters of text per streamed piece
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _texts(text: str) -> list[str]:
    return [text[i : i + _CHUNK_CHARS] for i in range(0, len(text), _CHUNK_CHARS)]


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [text[:half], text[half:]]


def _sse(data: dict[str, Any], *, named: bool) -> str:
    head = f"event: {data['type']}\n" if named else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


def error_body(api: API, scripted: ScriptedReply) -> dict[str, Any]:
    """The body of an error answer, as the API writes it."""
    status = scripted.status
    if api == "anthropic":
        kind = scripted.error_code or _ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": scripted.error_message}}
    if api == "gemini":
        google = _GOOGLE_STATUS.get(status, "UNKNOWN")
        return {"error": {"code": status, "message": scripted.error_message, "status": google}}
    error: dict[str, Any] = {"message": scripted.error_message, "type": "scripted_error"}
    if scripted.error_code is not None:
        error["code"] = scripted.error_code
    return {"error": error}


# -- Responses ----------------------------------------------------------------------------------


def _responses_output(scripted: ScriptedReply, ids: list[str]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if scripted.content:
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:16]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": scripted.content, "annotations": []}],
            }
        )
    for call_id, call in zip(ids, scripted.tool_calls, strict=True):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:16]}",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.arguments_text(),
                "status": "completed",
            }
        )
    return output


def _response(scripted: ScriptedReply, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": f"resp_{uuid.uuid4().hex[:16]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": MODEL_NAME,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": scripted.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": scripted.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
        },
    }


def _responses_pieces(scripted: ScriptedReply, ids: list[str]) -> list[str]:
    output = _responses_output(scripted, ids)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(scripted, [], "in_progress")}
    ]
    for index, item in enumerate(output):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            events.extend(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
                for piece in _texts(text)
            )
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            events.extend(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "delta": piece,
                }
                for piece in _halves(item["arguments"])
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append(
        {"type": "response.completed", "response": _response(scripted, output, "completed")}
    )
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return [_sse(event, named=True) for event in events]


# -- Anthropic ----------------------------------------------------------------------------------


def _anthropic_content(scripted: ScriptedReply, ids: list[str]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if scripted.content:
        content.append({"type": "text", "text": scripted.content})
    for call_id, call in zip(ids, scripted.tool_calls, strict=True):
        arguments = json.loads(call.arguments_text() or "{}")
        content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": arguments})
    return content


def _anthropic_message(scripted: ScriptedReply, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:16]}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": MODEL_NAME,
        "stop_reason": "tool_use" if scripted.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": scripted.prompt_tokens,
            "output_tokens": scripted.completion_tokens,
        },
    }


def _anthropic_pieces(scripted: ScriptedReply, ids: list[str]) -> list[str]:
    message = _anthropic_message(scripted, [])
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**message, "stop_reason": None, "usage": {**message["usage"]}},
        }
    ]
    events[0]["message"]["usage"]["output_tokens"] = 1
    for index, block in enumerate(_anthropic_content(scripted, ids)):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
                for piece in _texts(block["text"])
            )
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
                for piece in _halves(json.dumps(block["input"], ensure_ascii=False))
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": scripted.completion_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return [_sse(event, named=True) for event in events]


# -- Gemini -------------------------------------------------------------------------------------


def _gemini_chunk(
    parts: list[dict[str, Any]], *, finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL_NAME}
    if usage is not None:
        chunk["usageMetadata"] = usage
    return chunk


def _gemini_usage(scripted: ScriptedReply) -> dict[str, int]:
    return {
        "promptTokenCount": scripted.prompt_tokens,
        "candidatesTokenCount": scripted.completion_tokens,
        "totalTokenCount": scripted.prompt_tokens + scripted.completion_tokens,
    }


def _gemini_calls(scripted: ScriptedReply, ids: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "functionCall": {
                "id": call_id,
                "name": call.name,
                "args": json.loads(call.arguments_text() or "{}"),
            }
        }
        for call_id, call in zip(ids, scripted.tool_calls, strict=True)
    ]


def _gemini_pieces(scripted: ScriptedReply, ids: list[str]) -> list[str]:
    chunks = [_gemini_chunk([{"text": piece}]) for piece in _texts(scripted.content or "")]
    # Gemini sends a call whole, in the last chunk with the finish reason and the usage.
    chunks.append(
        _gemini_chunk(
            _gemini_calls(scripted, ids) or [{"text": ""}],
            finish="STOP",
            usage=_gemini_usage(scripted),
        )
    )
    return [f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n" for chunk in chunks]


def whole(api: API, scripted: ScriptedReply, ids: list[str]) -> dict[str, Any]:
    """A whole (non-streamed) answer of ``api`` (not ``chat``: ``ScriptedModel`` writes it)."""
    if api == "responses":
        return _response(scripted, _responses_output(scripted, ids), "completed")
    if api == "anthropic":
        return _anthropic_message(scripted, _anthropic_content(scripted, ids))
    parts = ([{"text": scripted.content}] if scripted.content else []) + _gemini_calls(
        scripted, ids
    )
    return _gemini_chunk(parts, finish="STOP", usage=_gemini_usage(scripted))


def pieces(api: API, scripted: ScriptedReply, ids: list[str]) -> list[str]:
    """The streamed answer of ``api`` (not ``chat``), one SSE event a piece."""
    if api == "responses":
        return _responses_pieces(scripted, ids)
    if api == "anthropic":
        return _anthropic_pieces(scripted, ids)
    return _gemini_pieces(scripted, ids)
