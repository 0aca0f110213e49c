"""STAND-IN for the ``toolschema`` branch: the OpenAI function-calling export.

Minimal version (faithful export only; ``strict`` merely sets the flag and
``additionalProperties: false`` on the root) so that the tool manager can be built and tested
before that branch is merged; the lead replaces this file with the real one.
"""

from __future__ import annotations

import copy
from typing import Any

from sagents.core.spec import ToolSpec
from sagents.tool.naming import to_exported_name

__all__ = ["to_openai_tool"]


def to_openai_tool(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """``{"type": "function", "function": {"name", "description", "parameters"}}``."""
    parameters = copy.deepcopy(dict(spec.input_schema))
    function: dict[str, Any] = {
        "name": name if name is not None else to_exported_name(spec.name),
        "description": spec.description,
        "parameters": parameters,
    }
    if strict:
        parameters["additionalProperties"] = False
        function["strict"] = True
    return {"type": "function", "function": function}
