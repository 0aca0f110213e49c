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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from opentelemetry import propagate, trace

__all__ = ["TracingWhenUsed", "trace_only_when_used", "tracer_configured"]

_SDK_TRACING = "OpenTelemetryMiddleware"
"""The class name of the SDK's tracing middleware in ``Server.middleware``."""


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
        if self._configured() or _carries_trace(ctx.meta):
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def trace_only_when_used(middleware: list[ServerMiddleware[Any]]) -> None:
    """Wrap the SDK's tracing middleware of a server's ``middleware`` list in place."""
    for index, item in enumerate(middleware):
        if type(item).__name__ == _SDK_TRACING:
            middleware[index] = TracingWhenUsed(item)
