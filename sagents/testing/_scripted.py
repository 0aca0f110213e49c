"""``ScriptedModel``: a model server on 127.0.0.1 that plays back a script, in the wire format of
Chat Completions (the default), OpenAI Responses, Anthropic Messages or Gemini (``api=``; the
other three are written by :mod:`sagents.testing._formats`).

For Chat Completions the server speaks its wire format (OpenAI API reference, "Create chat
completion" and "The chat completion chunk object"): ``POST /v1/chat/completions`` answers with
one ``chat.completion`` object, or with ``chat.completion.chunk`` objects as server-sent events
ending in ``data: [DONE]`` when the request has ``"stream": true`` (a usage chunk first when
``stream_options.include_usage`` is set). Each request takes the next reply of the script; the
request bodies are kept in :attr:`ScriptedModel.requests`.

::

    async with ScriptedModel([tool_call("get_weather", {"city": "Paris"}), reply("Sunny.")]) as m:
        agent = SAgent(model=m.chat_model())
        ...
        assert m.requests[1]["messages"][-1]["role"] == "tool"
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sagents.core._lifespan import Lifespan
from sagents.testing import _formats
from sagents.testing._formats import API

if TYPE_CHECKING:
    from sagents.agent import ChatModel

__all__ = [
    "ReplyFunction",
    "ScriptedModel",
    "ScriptedReply",
    "ScriptedToolCall",
    "WireReply",
    "http_error",
    "load_wire",
    "reply",
    "tool_call",
]

MODEL_NAME = "scripted-model"
_CHUNK_CHARS = 8  # characters of text per streamed chunk
_SHUTDOWN_S = 5.0  # seconds uvicorn may take to stop
_KEEPALIVE_EVERY_S = 0.05  # the pace of a keep-alive trickle (what the server does, not a wait)


@dataclass(frozen=True, kw_only=True)
class ScriptedToolCall:
    """One tool call in a scripted reply.

    Attributes:
        name: The function name the model calls.
        arguments: The arguments: a JSON-ready dict, or a raw string (to send invalid JSON).
        id: The ``tool_call_id``; a fresh ``call_...`` id when None.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        """The ``arguments`` string as the wire carries it."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)


@dataclass(frozen=True, kw_only=True)
class ScriptedReply:
    """One answer of the scripted model.

    Attributes:
        content: The assistant's text (None for a reply with only tool calls).
        tool_calls: The tool calls, in order.
        status: The HTTP status; anything but 200 is an error reply with ``error_message``.
        error_message: The error's message.
        error_code: The error's ``code`` (``context_length_exceeded``, ...), if any.
        headers: Extra response headers (``Retry-After``).
        prompt_tokens: The reported ``usage.prompt_tokens``.
        completion_tokens: The reported ``usage.completion_tokens``.
        hang_after_chunks: When streaming, stop after this many chunks and wait until the client
            goes away or the server closes (to test cancellation mid-stream); when not
            streaming, answer nothing until the server closes (then HTTP 503).
        break_after_chunks: When streaming, break the connection after this many chunks.
        delay: Seconds the server waits before it answers.
    """

    content: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    status: int = 200
    error_message: str = ""
    error_code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    hang_after_chunks: int | None = None
    break_after_chunks: int | None = None
    delay: float = 0.0


WireEnd = Literal["close", "reset", "hang", "keepalive"]


_WIRE_KEYS = frozenset({"status", "headers", "body", "events", "done", "end"})


@dataclass(frozen=True, kw_only=True)
class WireReply:
    """A recorded HTTP answer, played back as it was: the status, the headers and the body's
    pieces, each written (and flushed) on its own, then an end.

    Attributes:
        status: The HTTP status.
        headers: The response headers (``content-type`` is ``text/event-stream`` unless given).
        body: The body's pieces in order, sent verbatim (``data: {...}`` events, SSE
            comments, a JSON document, or nothing at all).
        end: After the body: ``close`` ends the response cleanly; ``reset`` breaks the
            connection (no end of the chunked body); ``hang`` sends nothing more until the
            client goes away; ``keepalive`` trickles SSE comments (``: keep-alive``) until the
            client goes away.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: tuple[str, ...] = ()
    end: WireEnd = "close"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WireReply:
        """A reply from its JSON form: ``{"status", "headers", "body": [piece, ...], "events":
        [event, ...], "done", "end"}``; a piece is a string sent verbatim or an object sent as
        one SSE event (``data: <its JSON>``); an event is an object sent as one named SSE event
        (``event: <its type>`` then ``data: <its JSON>``, the form of Anthropic's Messages
        stream), after the pieces; ``"done": true`` adds ``data: [DONE]`` last.

        Raises:
            ValueError: the form is not that (the message names the field).
        """
        unknown = sorted(str(key) for key in data if key not in _WIRE_KEYS)
        if unknown:
            raise ValueError(
                f"unknown key {unknown[0]!r} in a wire reply (its keys: "
                f"{', '.join(sorted(_WIRE_KEYS))})"
            )
        for key in ("body", "events"):
            if not isinstance(data.get(key) or [], list):
                raise ValueError(f"{key} is a list, not {data[key]!r}")
        status = data.get("status", 200)
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"status is an HTTP status (100-599), not {status!r}")
        pieces: list[str] = []
        for piece in data.get("body") or ():
            if isinstance(piece, str):
                pieces.append(piece)
            elif isinstance(piece, dict):
                pieces.append(f"data: {json.dumps(piece, ensure_ascii=False)}\n\n")
            else:
                raise ValueError(f"a body piece is a string or an object, not {piece!r}")
        for event in data.get("events") or ():
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                raise ValueError(f"an event is an object with a string type, not {event!r}")
            pieces.append(
                f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
            )
        if data.get("done"):
            pieces.append("data: [DONE]\n\n")
        end = data.get("end", "close")
        if end not in ("close", "reset", "hang", "keepalive"):
            raise ValueError(f"end is close, reset, hang or keepalive, not {end!r}")
        headers = data.get("headers") or {}
        if not isinstance(headers, dict):
            raise ValueError(f"headers is an object, not {headers!r}")
        return cls(
            status=status,
            headers={str(k): str(v) for k, v in headers.items()},
            body=tuple(pieces),
            end=end,
        )


def load_wire(path: str | Path) -> list[WireReply]:
    """The replies of a recorded exchange: a JSON file whose ``replies`` are
    :meth:`WireReply.from_json` forms (its other keys, such as ``server`` and ``sources``,
    describe the recording)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [WireReply.from_json(reply) for reply in data["replies"]]


ReplyFunction = Callable[[dict[str, Any]], "ScriptedReply | WireReply"]
"""Builds the reply to a request from its JSON body (a ``FunctionModel``-style script step)."""


def reply(text: str, **options: Any) -> ScriptedReply:
    """A text-only reply (``options`` as :class:`ScriptedReply`)."""
    return ScriptedReply(content=text, **options)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,
    content: str | None = None,
    **options: Any,
) -> ScriptedReply:
    """A reply with one tool call (give ``tool_calls=`` to :class:`ScriptedReply` for more)."""
    call = ScriptedToolCall(name=name, arguments=arguments or {}, id=id)
    return ScriptedReply(content=content, tool_calls=(call,), **options)


def http_error(
    status: int,
    message: str = "scripted error",
    *,
    retry_after: float | None = None,
    code: str | None = None,
) -> ScriptedReply:
    """An HTTP error reply (429 with ``Retry-After``, 401, 404, 500, ...)."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return ScriptedReply(status=status, error_message=message, error_code=code, headers=headers)


class ScriptedModel(Lifespan):
    """A Chat Completions server on 127.0.0.1 that answers from a script.

    Args:
        script: The replies in order, each a :class:`ScriptedReply`, a :class:`WireReply` (a
            recorded answer played back as it was), a string (a text reply) or a
            :data:`ReplyFunction`; or one :data:`ReplyFunction` that answers every request.
            A request after the end of the script gets an HTTP 500 naming the problem.
        port: The port on 127.0.0.1 (0, the default: a free one).
        api: The wire format scripted replies are written in: ``chat`` (Chat Completions,
            ``/v1/chat/completions``), ``responses`` (``/v1/responses``), ``anthropic``
            (``/v1/messages``) or ``gemini`` (``/v1/models/MODEL:generateContent`` and
            ``:streamGenerateContent``, also under ``/v1beta``). Every route answers; a
            :class:`WireReply` plays back as it was on any of them.

    Use as an async context manager; :attr:`base_url` is valid inside it.
    """

    def __init__(
        self,
        script: Sequence[ScriptedReply | WireReply | str | ReplyFunction] | ReplyFunction,
        *,
        port: int = 0,
        api: API = "chat",
    ) -> None:
        if api not in ("chat", "responses", "anthropic", "gemini"):
            raise ValueError(f"api is chat, responses, anthropic or gemini, not {api!r}")
        self.api: API = api
        self._wanted_port = port
        self._script: Sequence[ScriptedReply | WireReply | str | ReplyFunction] | ReplyFunction = (
            script
        )
        self._next = 0
        self.requests: list[dict[str, Any]] = []
        """The JSON body of every request received, in order."""
        self._port: int | None = None
        self._stopped = anyio.Event()
        self._closing = anyio.Event()  # set on exit: hanging replies end then
        self._clients: list[ChatModel] = []  # closed on exit

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``.

        Raises:
            RuntimeError: the server is not running.
        """
        if self._port is None:
            raise RuntimeError("enter the ScriptedModel (async with) before using its base_url")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def remaining(self) -> int:
        """Replies of a list script not played yet (0 for a function script)."""
        if callable(self._script):
            return 0
        return len(self._script) - self._next

    def chat_model(self, **options: Any) -> Any:
        """The adapter of this server's ``api`` pointed at it (``OpenAIChatModel``,
        ``OpenAIResponsesModel``, ``AnthropicModel`` or ``GeminiModel``; ``options`` are passed
        on: ``stream=False``, ``max_retries``, ...). Closed when the server stops."""
        # the agent layer sits above this helper: imported here, each only when asked for
        options.setdefault("model", MODEL_NAME)
        options.setdefault("api_key", "scripted-key")
        root = self.base_url.removesuffix("/v1")
        model: ChatModel
        if self.api == "responses":
            from sagents.agent import OpenAIResponsesModel

            model = OpenAIResponsesModel(base_url=self.base_url, **options)
        elif self.api == "anthropic":
            from sagents.agent import AnthropicModel

            model = AnthropicModel(base_url=root, **options)
        elif self.api == "gemini":
            from sagents.agent import GeminiModel

            model = GeminiModel(base_url=root, **options)
        else:
            from sagents.agent import OpenAIChatModel

            model = OpenAIChatModel(base_url=self.base_url, **options)
        self._clients.append(model)
        return model

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        """Serve on the socket in a task; on leaving, close the clients handed out, then stop
        the server (forced after ``_SHUTDOWN_S``)."""
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/responses", self._completions, methods=["POST"]),
                Route("/v1/messages", self._completions, methods=["POST"]),
                Route("/v1beta/models/{target}", self._completions, methods=["POST"]),
                Route("/v1/models/{target}", self._completions, methods=["POST"]),
            ]
        )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections: without it, Nagle's algorithm against the client's
        # delayed ACK adds ~40 ms to every whole (non-streamed) answer on loopback.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", self._wanted_port))
        sock.listen(128)
        sock.setblocking(False)
        self._port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app, log_level="critical", lifespan="off", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)

        async def run() -> None:
            try:
                with anyio.CancelScope(shield=True):
                    await server.serve(sockets=[sock])
            finally:
                self._stopped.set()
                sock.close()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                try:
                    yield
                finally:
                    self._closing.set()
                    with anyio.CancelScope(shield=True):
                        for client in self._clients:
                            await client.aclose()
                    server.should_exit = True
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_SHUTDOWN_S):
                        await self._stopped.wait()
                    if not self._stopped.is_set():
                        server.force_exit = True
        finally:
            self._port = None

    # -- the endpoint ---------------------------------------------------------------------------

    def _take(self, body: dict[str, Any]) -> ScriptedReply | WireReply:
        if callable(self._script):
            return self._script(body)
        if self._next >= len(self._script):
            return http_error(
                500,
                f"the scripted model's script is exhausted: request {self._next + 1} arrived "
                f"after its {len(self._script)} replies",
            )
        step = self._script[self._next]
        self._next += 1
        if isinstance(step, str):
            return reply(step)
        if isinstance(step, ScriptedReply | WireReply):
            return step
        return step(body)

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        scripted = self._take(body)
        if isinstance(scripted, ScriptedReply) and scripted.delay > 0:
            await anyio.sleep(scripted.delay)  # the server's pace, as scripted
        if isinstance(scripted, WireReply):
            headers = {"content-type": "text/event-stream", **scripted.headers}
            return StreamingResponse(
                _played(scripted, self._closing), status_code=scripted.status, headers=headers
            )
        if scripted.status != 200:
            return JSONResponse(
                _formats.error_body(self.api, scripted),
                status_code=scripted.status,
                headers=dict(scripted.headers),
            )
        ids = [call.id or f"call_{uuid.uuid4().hex[:12]}" for call in scripted.tool_calls]
        streamed = bool(body.get("stream")) or request.url.path.endswith(":streamGenerateContent")
        if not streamed:
            if scripted.hang_after_chunks is not None:
                await self._closing.wait()
                return JSONResponse({"error": {"message": "the scripted model is closing"}}, 503)
            answer = (
                _completion(scripted, ids)
                if self.api == "chat"
                else _formats.whole(self.api, scripted, ids)
            )
            return JSONResponse(answer, headers=dict(scripted.headers))
        if self.api == "chat":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            pieces = _chat_pieces(scripted, ids, include_usage=include_usage)
        else:
            pieces = _formats.pieces(self.api, scripted, ids)
        return StreamingResponse(
            _paced(pieces, scripted, self._closing),
            media_type="text/event-stream",
            headers=dict(scripted.headers),
        )


def _finish_reason(scripted: ScriptedReply) -> str:
    return "tool_calls" if scripted.tool_calls else "stop"


def _usage(scripted: ScriptedReply) -> dict[str, int]:
    return {
        "prompt_tokens": scripted.prompt_tokens,
        "completion_tokens": scripted.completion_tokens,
        "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
    }


def _completion(scripted: ScriptedReply, ids: list[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": scripted.content}
    if scripted.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for call_id, call in zip(ids, scripted.tool_calls, strict=True)
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(scripted)}],
        "usage": _usage(scripted),
    }


def _deltas(scripted: ScriptedReply, ids: list[str]) -> list[dict[str, Any]]:
    """The ``delta`` objects of a streamed reply: the text in pieces, then each tool call with
    its arguments split in two (as real servers do), then the finish."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = scripted.content or ""
    deltas += [{"content": text[i : i + _CHUNK_CHARS]} for i in range(0, len(text), _CHUNK_CHARS)]
    for index, (call_id, call) in enumerate(zip(ids, scripted.tool_calls, strict=True)):
        arguments = call.arguments_text()
        half = len(arguments) // 2
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments[:half]},
                    }
                ]
            }
        )
        deltas.append(
            {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}
        )
    return deltas


def _chat_pieces(scripted: ScriptedReply, ids: list[str], *, include_usage: bool) -> list[str]:
    common = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_NAME,
    }
    chunks = [
        {**common, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in _deltas(scripted, ids)
    ]
    final = {"index": 0, "delta": {}, "finish_reason": _finish_reason(scripted)}
    chunks.append({**common, "choices": [final]})
    if include_usage:
        chunks.append({**common, "choices": [], "usage": _usage(scripted)})
    return [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


async def _paced(
    pieces: list[str], scripted: ScriptedReply, closing: anyio.Event
) -> AsyncIterator[str]:
    """The pieces of a streamed answer, hanging or breaking where the reply says."""
    for sent, piece in enumerate(pieces):
        if scripted.hang_after_chunks is not None and sent >= scripted.hang_after_chunks:
            await closing.wait()  # until the client goes away (Starlette cancels) or we close
            return
        if scripted.break_after_chunks is not None and sent >= scripted.break_after_chunks:
            raise ConnectionAbortedError("the scripted model breaks the stream here")
        yield piece


async def _played(wire: WireReply, closing: anyio.Event) -> AsyncIterator[str]:
    for piece in wire.body:
        yield piece
    if wire.end == "reset":
        raise ConnectionAbortedError("the recorded answer breaks the connection here")
    if wire.end == "hang":
        await closing.wait()  # until the client goes away (Starlette cancels) or we close
    while wire.end == "keepalive" and not closing.is_set():
        yield ": keep-alive\n\n"
        with anyio.move_on_after(_KEEPALIVE_EVERY_S):
            await closing.wait()
