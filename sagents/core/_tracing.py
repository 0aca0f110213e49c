"""OpenTelemetry spans of sagents (docs/observability.md, "Traces").

Spans go through the OpenTelemetry API (``opentelemetry-api``, a dependency of the MCP SDK); the
SDK and an exporter are the operator's choice (``sagents[otel]``). Until a tracer provider is
configured (``opentelemetry.trace.set_tracer_provider``, or ``opentelemetry-instrument``), every
helper here is a single check and no span is opened: no context is attached, nothing is
allocated per call.

Names and attributes follow the OpenTelemetry semantic conventions for generative AI (agent
runs, model calls, tool executions: ``gen_ai.*``) and for MCP (``mcp.*``, written by the MCP
SDK's own client and server spans, which also carry ``traceparent`` in ``params._meta``). Our
own attributes are under ``sagents.``. Tool arguments and results, and model messages, are
recorded only when content capture is switched on with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the variable OpenTelemetry's GenAI
instrumentations read).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "attached",
    "capture_content",
    "content_text",
    "end_span",
    "end_tool_span",
    "record_error",
    "span",
    "start_span",
    "tool_span",
    "tracing",
    "unsampled",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to record tool arguments and results on the spans."""

_tracer = trace.get_tracer("sagents")


def tracing() -> bool:
    """Whether spans are recorded: a tracer provider other than the API's default proxy is
    set."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def capture_content() -> bool:
    """Whether tool arguments and results go on the spans (:data:`CAPTURE_CONTENT_ENV`)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("true", "1")


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> AbstractContextManager[Span | None]:
    """A current span named ``name`` while the block runs, or None (no span at all) when no
    tracer provider is configured. An exception leaving the block is recorded on the span
    (``error.type`` its class name, status ``ERROR``) and raised on."""
    if not tracing():
        return nullcontext()
    return _recording(name, dict(attributes or {}), kind)


def start_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Span | None:
    """A span named ``name``, started but not made current (:func:`attached` makes it so for
    a block; end it with :func:`end_span`), or None when no tracer provider is configured.

    For work that is not one block: an async generator must not keep a span current across a
    ``yield`` (the consumer's code would run inside it)."""
    if not tracing():
        return None
    return _tracer.start_span(
        name,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    )


def attached(current: Span | None) -> AbstractContextManager[None]:
    """``current`` (from :func:`start_span`) the current span while the block runs; an exception
    leaving the block is recorded on it as :func:`span` records one. Nothing when None (a
    ``nullcontext``: entered for every read of a streamed answer, bench/bench_agent_loop.py)."""
    if current is None:
        return _NOTHING
    return _attached(current)


_NOTHING: AbstractContextManager[None] = nullcontext()


@contextmanager
def _attached(current: Span) -> Iterator[None]:
    with trace.use_span(
        current, end_on_exit=False, record_exception=False, set_status_on_exception=False
    ):
        try:
            yield
        except Exception as error:
            record_error(current, error)
            raise


def unsampled() -> AbstractContextManager[object]:
    """The block runs in the current trace marked not sampled: spans opened in it under a
    parent-based sampler (the SDK's default, and ``parentbased_*`` of ``OTEL_TRACES_SAMPLER``)
    are not recorded, such as the MCP SDK's client span of an upstream request, and the request
    carries the trace on with its sampled flag cleared (W3C Trace Context), so that an upstream
    that samples by its parent records nothing of it either. Nothing when the current trace is
    not sampled (or there is none)."""
    current = trace.get_current_span().get_span_context()
    if not current.trace_flags.sampled:
        return _NOTHING
    muted = SpanContext(
        current.trace_id,
        current.span_id,
        is_remote=False,
        trace_flags=TraceFlags(current.trace_flags & ~TraceFlags.SAMPLED),  # the rest kept
        trace_state=current.trace_state,
    )
    return trace.use_span(NonRecordingSpan(muted), end_on_exit=False)


def end_span(current: Span | None) -> None:
    """End a span of :func:`start_span` (nothing when None)."""
    if current is not None:
        current.end()


def record_error(current: Span | None, error: Exception) -> None:
    """Record ``error`` on a span as :func:`span` does (nothing when None)."""
    if current is None:
        return
    current.set_attribute("error.type", type(error).__qualname__)
    current.set_status(StatusCode.ERROR, str(error))


@contextmanager
def _recording(name: str, attributes: dict[str, Any], kind: SpanKind) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as error:
            record_error(current, error)
            raise


def tool_span(
    tool: str,
    *,
    call_id: str | None = None,
    arguments: Any = None,
    attributes: Mapping[str, Any] | None = None,
) -> AbstractContextManager[Span | None]:
    """An ``execute_tool {tool}`` span (GenAI conventions) with ``gen_ai.tool.name``, the call
    id when there is one, the arguments when content is captured, and ``attributes`` (those
    whose value is None are left out)."""
    if not tracing():
        return nullcontext()  # no span: the check above is the only cost
    values: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if call_id:
        values["gen_ai.tool.call.id"] = call_id
    values.update((key, value) for key, value in (attributes or {}).items() if value is not None)
    if arguments is not None and capture_content():
        values["gen_ai.tool.call.arguments"] = content_text(arguments)  # a JSON text as it is
    return span(f"execute_tool {tool}", values)


def end_tool_span(current: Span | None, outcome: str, result: Any = None) -> None:
    """Mark a tool span with its outcome: ``sagents.outcome`` (``ok`` or the error code), and
    for a failure ``error.type`` and status ``ERROR``; the result when content is captured."""
    if current is None:
        return
    current.set_attribute("sagents.outcome", outcome)
    if outcome != "ok":
        current.set_attribute("error.type", outcome)
        current.set_status(StatusCode.ERROR)
    if result is not None and capture_content():
        current.set_attribute("gen_ai.tool.call.result", content_text(result))


def content_text(value: Any) -> str:
    """A captured argument or result as a span attribute: a text as it is, anything else as
    JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
