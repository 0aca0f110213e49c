"""One tool exported for one model API, with the fallback rule every export shares.

``ToolManager.get_responses_tools``, ``get_anthropic_tools`` and ``get_gemini_tools`` (and
``ToolProxy``'s) go through :func:`export_tool_json`: in strict mode a tool that the API's strict
form cannot express is exported in the faithful form; a tool that cannot be exported at all is
left out. Both are logged as warnings naming the tool, so that one schema never takes the
other tools down.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal

from sagents.core._spec import ToolSpec
from sagents.errors import SagentsError
from sagents.tool.export_anthropic import to_anthropic_tool
from sagents.tool.export_gemini import gemini_function_name, to_gemini_function_declaration
from sagents.tool.export_responses import to_responses_tool
from sagents.tool.naming import to_exported_name

__all__ = ["ModelApi", "api_tool_name", "export_tool_json", "unique_names"]

ModelApi = Literal["responses", "anthropic", "gemini"]
"""The model APIs with a tool export beside Chat Completions (``get_openai_tools``)."""

logger = logging.getLogger(__name__)

_BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "responses": to_responses_tool,
    "anthropic": to_anthropic_tool,
    "gemini": to_gemini_function_declaration,
}
_LABELS = {"responses": "OpenAI Responses", "anthropic": "Anthropic", "gemini": "Gemini"}


def api_tool_name(api: ModelApi, registered: str) -> str:
    """The name the API's model sees for the registered tool ``registered``."""
    return gemini_function_name(registered) if api == "gemini" else to_exported_name(registered)


def export_tool_json(api: ModelApi, spec: ToolSpec, *, strict: bool, name: str) -> str | None:
    """The tool as JSON text for ``api`` (strict, else faithful), or None with a warning."""
    for mode in (True, False) if strict else (False,):
        try:
            tool = _BUILDERS[api](spec, strict=mode, name=name)
        except SagentsError as error:  # SchemaExportError: this tool only
            logger.warning(
                "tool %r cannot be exported for %s%s: %s",
                spec.name,
                _LABELS[api],
                " in strict mode" if mode else "",
                error.message,
            )
            continue
        return json.dumps(tool, ensure_ascii=False)
    return None


def unique_names(api: ModelApi, names: Iterable[str]) -> dict[str, str]:
    """Registered name -> API name, leaving out (with a warning) a tool whose API name is
    already taken. A name the API takes unchanged wins over a name mapped onto it."""
    ordered = sorted(names)
    mapped = {n: api_tool_name(api, n) for n in ordered}
    taken: dict[str, str] = {}
    for first_pass in (True, False):
        for registered in ordered:
            exported = mapped[registered]
            if (exported == to_exported_name(registered)) != first_pass:
                continue
            holder = taken.get(exported)
            if holder is not None:
                logger.warning(
                    "tool %r is left out of the %s tools: its name %r is taken by %r",
                    registered,
                    _LABELS[api],
                    exported,
                    holder,
                )
                continue
            taken[exported] = registered
    return {registered: exported for exported, registered in taken.items()}
