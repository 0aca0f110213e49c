"""The ``mcp`` SDK's tracing middleware, run only when it can do something (docs/gateway.md,
"Forwarded results and tracing").

The SDK's low-level server wraps every request in an OpenTelemetry span
(``Server.middleware`` holds its ``OpenTelemetryMiddleware`` by default, "a no-op until an
OTel exporter is installed"; the SDK documents dropping it to opt out). A no-op that still costs
a span, a context extraction and a context switch on every request: :class:`TracingWhenUsed`
wraps it and calls it only when

- a tracer provider is configured (``opentelemetry.trace.set_tracer_provider``, or the
  ``OTEL_PYTHON_TRACER_PROVIDER`` variable): its spans are recorded, as before; or
- the request's ``_meta`` carries a field of the configured propagator (W3C ``traceparent``,
  ``tracestate``, ``baggage`` by default; MCP's SEP-414 puts them there): without a provider,
  the SDK's span then makes the client's trace current, so the requests the call sends upstream
  carry the client's trace on (OpenTelemetry's API propagates even without an SDK).

Otherwise the span the SDK would open is a non-recording one that nothing reads, and the request
goes straight on.

The SDK's server span of a ``tools/call`` is also the gateway's span of the call (it already
carries the GenAI conventions' ``gen_ai.operation.name=execute_tool`` and ``gen_ai.tool.name``):
the handler adds its own attributes to it (:func:`server_span`, :func:`end_call_span`) rather
than opening a second span per call (docs/observability.md, "The spans"). The handler finds it
as OpenTelemetry's current span (``opentelemetry.trace.get_current_span``), which the SDK's
middleware made it for the request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from opentelemetry import propagate, trace
from opentelemetry.trace import Span

from sagents.core._tracing import capture_content, content_text

__all__ = [
    "TracingWhenUsed",
    "end_call_span",
    "server_span",
    "trace_only_when_used",
    "tracer_configured",
]

_SDK_TRACING = "OpenTelemetryMiddleware"
"""The class name of the SDK's tracing middleware in ``Server.middleware``."""


def server_span(arguments: Mapping[str, Any] | None = None) -> Span | None:
    """The MCP SDK's server span of the request being handled (``tools/call {tool}``: the
    current span inside its handler) when it is recorded, else None (no tracer provider: the
    SDK's span, if any, only carries the client's trace on); with content capture,
    ``arguments`` (the call's) go on it."""
    current = trace.get_current_span()
    if not current.is_recording():
        return None
    if arguments is not None and capture_content():
        current.set_attribute("gen_ai.tool.call.arguments", content_text(arguments))
    return current


def end_call_span(current: Span, server: str, result: mt.CallToolResult) -> None:
    """Add the gateway's attributes to a ``tools/call`` server span: ``sagents.server``,
    ``sagents.outcome`` (``ok`` or the error code), and with content capture the result as the
    client receives it. ``error.type`` and the status of a failed call are the SDK's
    (``tool_error`` for an ``isError`` result)."""
    from sagents.gateway._metrics import outcome_of  # prometheus-client: only when traced

    current.set_attributes({"sagents.server": server, "sagents.outcome": outcome_of(result)})
    if capture_content():
        content = result.structured_content or [
            item.model_dump(mode="json", by_alias=True, exclude_none=True)
            for item in result.content
        ]
        current.set_attribute("gen_ai.tool.call.result", content_text(content))


def tracer_configured() -> bool:
    """Whether spans would be recorded: a tracer provider other than the API's default proxy."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _carries_trace(meta: Mapping[str, Any] | None) -> bool:
    if not meta:
        return False
    return any(key in meta for key in propagate.get_global_textmap().fields)


class TracingWhenUsed:
    """A server middleware that calls ``inner`` (the SDK's tracing) only when it is used.

    Args:
        inner: The SDK's ``OpenTelemetryMiddleware``.
        configured: Whether a tracer provider is configured (asked on every request, so that a
            provider set after the server was built is used from then on).
    """

    def __init__(
        self,
        inner: ServerMiddleware[Any],
        *,
        configured: Callable[[], bool] = tracer_configured,
    ) -> None:
        self.inner = inner
        self._configured = configured

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # with a provider, a recorded span (the handler adds its attributes to it); without
        # one, a span that only carries the client's trace on
        if self._configured() or _carries_trace(ctx.meta):
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def trace_only_when_used(middleware: list[ServerMiddleware[Any]]) -> None:
    """Wrap the SDK's tracing middleware of a server's ``middleware`` list in place."""
    for index, item in enumerate(middleware):
        if type(item).__name__ == _SDK_TRACING:
            middleware[index] = TracingWhenUsed(item)
