"""A tool call read from a model API's response, ready for ``run_tool``.

The parsers of each API (:mod:`sagents.tool.export_responses`, :mod:`sagents.tool.export_anthropic`,
:mod:`sagents.tool.export_gemini`) give a :class:`ModelToolCall`; run it with
``await provider.run_tool(call.name, call.arguments, tool_call_id=call.tool_call_id,
strict=...)`` (``strict`` as the tools were exported), and answer it with that API's result
builder. Every call gets exactly one answer, failures included: ``run_tool`` turns every
failure into an error result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sagents.tool._provider import ToolProvider

__all__ = ["ModelToolCall", "call_arguments", "field_of", "resolve_call_name"]


@dataclass(frozen=True, kw_only=True)
class ModelToolCall:
    """One tool call a model asked for.

    Attributes:
        name: The registered name when a provider resolved it, else the name as sent.
        arguments: The arguments: a JSON object, or the JSON text the API sent (``run_tool``
            parses it and reports bad JSON as ``invalid_arguments``).
        tool_call_id: The API's id of the call (Anthropic ``tool_use.id``, Responses
            ``call_id``, Gemini ``functionCall.id``), or None when the API gave none.
        sent_name: The name exactly as the model sent it (the answer repeats it where the API
            asks for a name).
    """

    name: str
    arguments: Mapping[str, Any] | str
    tool_call_id: str | None
    sent_name: str


def field_of(value: Any, *names: str) -> Any:
    """The first of ``names`` present in a JSON dict, or as an attribute of an SDK object."""
    for name in names:
        if isinstance(value, Mapping):
            if name in value:
                return value[name]
        elif getattr(value, name, None) is not None:
            return getattr(value, name)
    return None


def call_arguments(value: Any) -> Mapping[str, Any] | str:
    """The arguments as sent: an object as a dict, JSON text as it is, absent as ``{}``.

    Anything else (a list, a number) is passed on as its JSON text, so that ``run_tool``
    answers ``invalid_arguments`` instead of running the tool with no arguments.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, default=repr)


def resolve_call_name(
    name: str, provider: ToolProvider | None, exported_name: Callable[[str], str]
) -> str:
    """The registered name behind ``name``, an API's exported name of a tool of ``provider``.

    Without a provider, or when no visible tool has that name, ``name`` is returned unchanged
    (``run_tool`` then answers ``unknown_tool`` or ``not_allowed``).
    """
    if provider is None:
        return name
    if provider.has_tool(name):
        return provider.resolve_exported_name(name)
    for registered in provider.list_all_tools_name():
        if exported_name(registered) == name:
            return registered
    return name
