"""Export tools as OpenAI Responses function tools, and read ``function_call`` items back.

The Responses API takes the flat shape ``{"type": "function", "name", "description",
"parameters", "strict"}`` (OpenAI API reference, "Responses" -> ``tools``, and the function
calling guide, https://platform.openai.com/docs/guides/function-calling). Its ``strict`` field
is sent explicitly in both modes, since the Responses API's own default is strict. The
parameters are exactly those of the Chat Completions export (:mod:`sagents.tool.openai_export`:
faithful, or OpenAI's strict subset), and so are the names (``^[a-zA-Z0-9_-]{1,64}$``,
:mod:`sagents.tool.naming`).

The model's call is a ``function_call`` output item (``call_id``, ``name``, ``arguments`` as
JSON text); the answer is a ``function_call_output`` input item with the same ``call_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sagents.core._result import ImageContent, ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool._examples import description_with_examples
from sagents.tool._export_calls import ModelToolCall, call_arguments, field_of, resolve_call_name
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._export_strict import strict_schema
from sagents.tool._provider import ToolProvider
from sagents.tool.naming import to_exported_name

__all__ = [
    "parse_responses_function_call",
    "parse_responses_function_calls",
    "responses_function_call_output",
    "to_responses_tool",
]


def to_responses_tool(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Responses function tool for ``spec``.

    Args:
        spec: The tool.
        strict: Export OpenAI's strict subset with ``"strict": true``; otherwise the faithful
            schema with ``"strict": false``.
        name: The exported name; :func:`~sagents.tool.naming.to_exported_name` by default.

    Returns:
        ``{"type": "function", "name", "description", "parameters", "strict"}``.

    Raises:
        SchemaExportError: when the schema cannot be exported in the asked mode.
    """
    parameters = (
        dict(strict_schema(spec.input_schema).schema)
        if strict
        else (faithful_schema(spec.input_schema))
    )
    return {
        "type": "function",
        "name": name if name is not None else to_exported_name(spec.name),
        "description": description_with_examples(spec),
        "parameters": parameters,
        "strict": strict,
    }


def parse_responses_function_call(item: Any, provider: ToolProvider | None = None) -> ModelToolCall:
    """A Responses ``function_call`` item as a call to pass to ``run_tool``.

    Args:
        item: The output item: a JSON dict or an ``openai`` SDK ``ResponseFunctionToolCall``.
        provider: Maps the exported name back to the registered name.

    Raises:
        ValueError: when ``item`` is not a ``function_call`` item with a name and a call id.
    """
    kind, name, call_id = (field_of(item, key) for key in ("type", "name", "call_id"))
    if kind != "function_call" or not isinstance(name, str) or not isinstance(call_id, str):
        raise ValueError(
            f"expected a Responses function_call item with name and call_id, got type {kind!r}"
        )
    arguments = field_of(item, "arguments")
    return ModelToolCall(
        name=resolve_call_name(name, provider, to_exported_name),
        arguments=call_arguments(arguments),
        tool_call_id=call_id,
        sent_name=name,
    )


def parse_responses_function_calls(
    output: Iterable[Any], provider: ToolProvider | None = None
) -> list[ModelToolCall]:
    """Every ``function_call`` item of a response's ``output``, in order (others skipped)."""
    return [
        parse_responses_function_call(item, provider)
        for item in output
        if field_of(item, "type") == "function_call"
    ]


def responses_function_call_output(
    call: ModelToolCall, result: ToolResult, *, max_tokens: int | None = None
) -> dict[str, Any]:
    """The ``function_call_output`` item that answers ``call`` with ``result``.

    The output is the model-facing text of the result
    (:meth:`~sagents.core._result.ToolResult.to_tool_message`); a result with images also
    carries them, as ``input_image`` parts with data URLs after an ``input_text`` part.

    Raises:
        ValueError: when ``call`` has no ``tool_call_id`` (the API needs the ``call_id``).
    """
    if not call.tool_call_id:
        raise ValueError("a function_call_output needs the call's call_id")
    text = result.to_tool_message(max_tokens)
    images = [b for b in result.content if isinstance(b, ImageContent)]
    output: str | list[dict[str, Any]] = text
    if images:
        output = [{"type": "input_text", "text": text}]
        output += [
            {"type": "input_image", "image_url": f"data:{b.mime_type};base64,{b.data}"}
            for b in images
        ]
    return {"type": "function_call_output", "call_id": call.tool_call_id, "output": output}
