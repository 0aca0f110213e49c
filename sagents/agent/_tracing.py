"""The agent loop's spans (docs/observability.md, "Traces"): one ``invoke_agent`` span per run,
one ``chat {model}`` span per model call and one ``execute_tool {tool}`` span per tool call,
named and described as the OpenTelemetry semantic conventions for generative AI say. Without a
configured tracer provider none of them is opened (:func:`sagents.core._tracing.span`).
"""

from __future__ import annotations

from opentelemetry.trace import Span, SpanKind

from sagents.agent._chat_model import ChatModel, ModelResponse
from sagents.core._tracing import start_span, tracing

__all__ = ["agent_span", "end_model_span", "model_span", "provider_name"]

_PROVIDERS = {
    "OpenAIChatModel": "openai",
    "OpenAIResponsesModel": "openai",
    "AnthropicModel": "anthropic",
    "GeminiModel": "gcp.gemini",
}
"""``gen_ai.provider.name`` of the bundled adapters (the conventions' well-known values)."""


def provider_name(model: ChatModel) -> str | None:
    """The provider a bundled adapter calls, None for a model of the user's own."""
    return _PROVIDERS.get(type(model).__name__)


def agent_span(model: ChatModel, session_id: str) -> Span | None:
    """The span of one agent run (``invoke_agent``), started, not current
    (:func:`~sagents.core._tracing.start_span`: the run is an async generator); None (and no
    attributes made) when no tracer provider is configured."""
    if not tracing():
        return None
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": session_id,
        "gen_ai.request.model": model.model,
        "gen_ai.provider.name": provider_name(model),
    }
    return start_span("invoke_agent", {k: v for k, v in attributes.items() if v is not None})


def model_span(model: ChatModel) -> Span | None:
    """The span of one model call (``chat {model}``, kind ``CLIENT``), started, not current."""
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model.model}
    provider = provider_name(model)
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    return start_span(f"chat {model.model}", attributes, kind=SpanKind.CLIENT)


def end_model_span(current: Span | None, response: ModelResponse) -> None:
    """A model call's answer on its span: finish reason and token usage."""
    if current is None:
        return
    current.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    if response.usage is not None:
        current.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
        current.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)
