"""``SpecProvider``: a :class:`~sagents.tool._provider.ToolProvider` from two methods.

The base of the small providers that wrap another one (a session's filter, the gateway's
offer, a provider with no tools), in the manner of pydantic-ai's ``AbstractToolset``: a
subclass says which tools it has (:meth:`SpecProvider.list_specs`) and runs a call
(:meth:`SpecProvider.call`, given a :class:`~sagents.tool.ToolRequest`); names, specs, the
model exports and ``run_tool`` are derived, with the names and schemas ``ToolManager`` gives the
same tools (docs/tools.md). A subclass written before the call seam, which overrides
``run_tool`` instead of ``call``, still works: its ``run_tool`` is then the call.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SagentsError, UnknownToolError
from sagents.tool._call import CallsTools, ToolRequest
from sagents.tool.naming import to_exported_name

if TYPE_CHECKING:
    from sagents.tool._api_export import ModelApi

__all__ = ["SpecProvider"]

logger = logging.getLogger(__name__)


class SpecProvider(CallsTools, ABC):
    """A tool provider defined by :meth:`list_specs` and :meth:`call`."""

    @abstractmethod
    def list_specs(self) -> list[ToolSpec]:
        """The tools this provider holds, in its own order."""

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run one call; every failure is an error result, cancellation propagates.

        Override this. (A subclass that overrides ``run_tool`` instead, as before the call
        seam, has its ``run_tool`` called with the request's values.)
        """
        if type(self).run_tool is CallsTools.run_tool:
            raise NotImplementedError(f"{type(self).__name__} must override call(request)")
        return await self.run_tool(
            request.name,
            request.arguments,
            request.session_context,
            tool_call_id=request.tool_call_id,
            timeout=request.timeout,
            strict=request.strict,
        )

    def _by_name(self) -> dict[str, ToolSpec]:
        return {spec.name: spec for spec in self.list_specs()}

    def _registered(self, name: str) -> str | None:
        specs = self._by_name()
        if name in specs:
            return name
        return next((n for n in specs if to_exported_name(n) == name), None)

    def has_tool(self, name: str) -> bool:
        """True when ``name`` (registered or exported) is one of :meth:`list_specs`."""
        return self._registered(name) is not None

    def list_all_tools_name(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._by_name())

    def get_tool_spec(self, name: str) -> ToolSpec:
        """The spec of a tool, by registered or exported name.

        Raises:
            UnknownToolError: when there is no such tool.
        """
        return self._by_name()[self.resolve_exported_name(name)]

    def resolve_exported_name(self, name: str) -> str:
        """The registered name behind an exported (or registered) name.

        Raises:
            UnknownToolError: when no tool has that name.
        """
        registered = self._registered(name)
        if registered is None:
            raise UnknownToolError(
                f"no tool named {name!r}",
                hint="Call one of the tools you were given.",
                details={"name": name},
            )
        return registered

    def get_openai_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The tools as OpenAI function tools, sorted by registered name (see
        ``ToolManager.get_openai_tools``)."""
        from sagents.tool.openai_export import to_openai_tool  # the exporters load on first use

        tools = []
        for name, spec in sorted(self._by_name().items()):
            for mode in (True, False) if strict else (False,):
                try:
                    tools.append(to_openai_tool(spec, strict=mode, name=to_exported_name(name)))
                except SagentsError as error:  # SchemaExportError: this tool only
                    logger.warning("tool %r cannot be exported: %s", name, error.message)
                    continue
                break
        return tools

    def get_responses_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The tools as OpenAI Responses function tools, sorted by registered name."""
        return self._api_tools("responses", strict)

    def get_anthropic_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The tools as Anthropic Messages tools, sorted by registered name."""
        return self._api_tools("anthropic", strict)

    def get_gemini_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The tools as Gemini function declarations, sorted by registered name."""
        return self._api_tools("gemini", strict)

    def _api_tools(self, api: ModelApi, strict: bool) -> list[dict[str, Any]]:
        from sagents.tool._api_export import export_tool_json, unique_names

        specs = self._by_name()
        tools = []
        for name, exported in sorted(unique_names(api, specs).items()):
            text = export_tool_json(api, specs[name], strict=strict, name=exported)
            if text is not None:
                tools.append(json.loads(text))
        return tools
