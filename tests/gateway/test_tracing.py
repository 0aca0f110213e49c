"""The SDK's tracing middleware runs only when a span is recorded or a trace goes on
(``sagents.gateway._tracing``); end to end, a client's trace context still reaches the upstream
(``tests/gateway/test_forwarded_call.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span

from sagents.gateway import Gateway
from sagents.gateway._tracing import TracingWhenUsed, server_span, tracer_configured
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class RecordingMiddleware:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        self.calls += 1
        result: HandlerResult = await call_next(ctx)
        return result


def _ctx(meta: dict[str, Any] | None) -> Any:
    return SimpleNamespace(meta=meta)


async def _handler(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
    return {"ok": True}


@pytest.mark.parametrize("meta", [None, {}, {"progressToken": 1}])
async def test_without_a_tracer_or_a_trace_context_the_sdks_span_is_skipped(
    meta: dict[str, Any] | None,
) -> None:
    inner = RecordingMiddleware()
    guard = TracingWhenUsed(inner, configured=lambda: False)
    assert await guard(_ctx(meta), _handler) == {"ok": True}
    assert inner.calls == 0


@pytest.mark.parametrize("key", ["traceparent", "tracestate", "baggage"])
async def test_a_request_carrying_a_trace_context_goes_through_the_sdks_span(key: str) -> None:
    inner = RecordingMiddleware()
    guard = TracingWhenUsed(inner, configured=lambda: False)
    assert await guard(_ctx({key: TRACEPARENT}), _handler) == {"ok": True}
    assert inner.calls == 1


async def test_with_a_tracer_provider_every_request_goes_through_the_sdks_span() -> None:
    inner = RecordingMiddleware()
    guard = TracingWhenUsed(inner, configured=lambda: True)
    assert await guard(_ctx(None), _handler) == {"ok": True}
    assert inner.calls == 1


def test_no_tracer_provider_is_configured_in_the_test_process() -> None:
    assert tracer_configured() is False


def test_the_gateway_wraps_the_sdks_tracing_middleware_and_keeps_the_others() -> None:
    gateway = Gateway(FakeProvider())
    kinds = [type(item).__name__ for item in gateway.server.middleware]
    assert kinds == ["TracingWhenUsed", "RequestStateBoundary"]
    wrapped = gateway.server.middleware[0]
    assert isinstance(wrapped, TracingWhenUsed)
    assert type(wrapped.inner).__name__ == "OpenTelemetryMiddleware"


class SpanMiddleware:
    """Opens a recorded span around the handler, as the SDK's tracing middleware does (with a
    provider of its own: the test process configures none)."""

    def __init__(self) -> None:
        self.tracer = TracerProvider().get_tracer("test")
        self.opened: list[Span] = []

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        with self.tracer.start_as_current_span("tools/call echo") as span:
            self.opened.append(span)
            result: HandlerResult = await call_next(ctx)
            return result


async def test_the_handler_finds_the_sdks_recorded_span_to_add_its_attributes_to() -> None:
    inner = SpanMiddleware()
    seen: list[Span | None] = []

    async def handler(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        seen.append(server_span())
        return {"ok": True}

    assert await TracingWhenUsed(inner, configured=lambda: True)(_ctx(None), handler) == {
        "ok": True
    }
    assert seen == inner.opened
    assert server_span() is None  # outside the request


async def test_without_a_tracer_provider_the_handler_finds_no_span_even_with_a_trace_context() -> (
    None
):
    seen: list[tuple[Span | None, str]] = []

    async def handler(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        carried = trace.get_current_span().get_span_context().trace_id
        seen.append((server_span(), format(carried, "032x")))
        return {"ok": True}

    # the SDK's own tracing middleware (a server's default): with no provider configured
    # its span is not recorded
    (sdk_tracing,) = Server("traced").middleware
    guard = TracingWhenUsed(sdk_tracing, configured=tracer_configured)
    sent = {"traceparent": TRACEPARENT}
    await guard(_request(sent), handler)  # the span only carries the client's trace on
    await guard(_request(None), handler)  # no span at all
    assert seen == [(None, TRACEPARENT.split("-")[1]), (None, "0" * 32)]


def _request(meta: dict[str, Any] | None) -> Any:
    """What the SDK's tracing middleware reads of a ``tools/call`` request."""
    return SimpleNamespace(
        meta=meta,
        params={"name": "echo"},
        method="tools/call",
        protocol_version="2025-11-25",
        request_id=1,
    )
