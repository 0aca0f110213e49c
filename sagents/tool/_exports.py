"""A registry's exported names and its tools' exports to the model APIs (docs/tool-schema.md).

Each registered name has one exported name (``^[a-zA-Z0-9_-]{1,64}$``,
:func:`~sagents.tool.naming.to_exported_name`) that no other tool of the registry may take, so
that a model's call by either name finds one tool. Each tool's export for each API and mode is
built once, as JSON text, and kept until the tool is registered again or removed: every
``get_*_tools`` call parses fresh objects the caller may change, in registered-name order (a
stable prefix for prompt caching).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sagents.core._spec import ToolSpec
from sagents.errors import SagentsError, ToolNameConflictError
from sagents.tool.naming import to_exported_name

if TYPE_CHECKING:
    from sagents.tool._api_export import ModelApi

__all__ = ["ToolExports"]

# the registry's log (operators filter on its name)
logger = logging.getLogger("sagents.tool.tool_manager")


class ToolExports:
    """The exported names of one registry's tools, and their exports, cached per tool."""

    def __init__(self) -> None:
        self.exported: dict[str, str] = {}
        """Registered name -> exported name."""
        self.registered: dict[str, str] = {}
        """Exported name -> registered name."""
        self._openai: dict[tuple[str, bool], str | None] = {}  # (name, strict) -> JSON text
        self._api: dict[tuple[str, str, bool], str | None] = {}  # (api, name, strict)

    def claim(self, name: str) -> None:
        """Give ``name`` its exported name (again: its cached exports are dropped).

        Raises:
            ToolNameConflictError: another tool is exported under the same name.
        """
        exported = to_exported_name(name)
        holder = self.registered.get(exported, name)
        if holder != name:
            raise ToolNameConflictError(
                f"tools {holder!r} and {name!r} would both be exported as {exported!r}",
                hint="Rename one of them.",
                details={"names": [holder, name], "exported": exported},
            )
        self.exported[name] = exported
        self.registered[exported] = name
        self._forget(name)

    def release(self, name: str) -> None:
        """Forget ``name``'s exported name and exports (the tool was removed)."""
        del self.registered[self.exported.pop(name)]
        self._forget(name)

    def openai_tools(self, specs: Mapping[str, ToolSpec], strict: bool) -> list[dict[str, Any]]:
        """``specs`` as OpenAI Chat Completions tools (``ToolManager.get_openai_tools``)."""
        tools = []
        for name in sorted(specs):
            key = (name, strict)
            if key not in self._openai:
                self._openai[key] = self._export(specs[name], strict=strict)
            text = self._openai[key]
            if text is not None:
                tools.append(json.loads(text))
        return tools

    def api_tools(
        self, api: ModelApi, specs: Mapping[str, ToolSpec], strict: bool
    ) -> list[dict[str, Any]]:
        """``specs`` as ``api``'s tools (``ToolManager.get_responses_tools`` and the others)."""
        # Imported here: the other APIs' exporters cost nothing to a caller that never asks.
        from sagents.tool._api_export import export_tool_json, unique_names

        tools = []
        for name, exported in sorted(unique_names(api, specs).items()):
            key = (api, name, strict)
            if key not in self._api:
                self._api[key] = export_tool_json(api, specs[name], strict=strict, name=exported)
            text = self._api[key]
            if text is not None:
                tools.append(json.loads(text))
        return tools

    def _export(self, spec: ToolSpec, *, strict: bool) -> str | None:
        # Imported on first export: the exporters load ``jsonschema``, which a manager that
        # only runs tools does not need.
        from sagents.tool.openai_export import to_openai_tool

        for mode in (True, False) if strict else (False,):
            try:
                tool = to_openai_tool(spec, strict=mode, name=self.exported[spec.name])
            except SagentsError as error:  # SchemaExportError: this tool only
                logger.warning(
                    "tool %r cannot be exported%s: %s",
                    spec.name,
                    " in strict mode" if mode else "",
                    error.message,
                )
                continue
            return json.dumps(tool, ensure_ascii=False)
        return None

    def _forget(self, name: str) -> None:
        self._openai.pop((name, False), None)
        self._openai.pop((name, True), None)
        for key in [k for k in self._api if k[1] == name]:
            del self._api[key]
