"""Export tools as OpenAI function-calling tools (Chat Completions shape).

Two modes, both working on ANY JSON Schema dict (local tools' schemas and MCP upstream schemas)
and both computed on a deep copy, so the input is never changed, not even by a rewrite that fails
half-way:

* **Faithful** (:func:`faithful_schema`, the default): accepts exactly the inputs the original
  accepts. The root is ``type: object`` (a root ``$ref`` is inlined); every ``$ref`` must resolve
  inside the exported document (``$defs``/``definitions`` are kept where they are); an external
  or dangling ``$ref`` fails with :class:`~sagents.errors.SchemaExportError` rather than being
  guessed. An array without ``items`` gets ``items: {}`` (same meaning; some providers reject the
  bare form).
* **Strict** (:func:`strict_schema`): OpenAI's strict subset ("Structured Outputs", section
  "Supported schemas", https://platform.openai.com/docs/guides/structured-outputs). Every
  property is required; a property that was optional is made nullable and remembered, so that
  :func:`strict_nulls_to_absent` turns the ``null`` a model sends back into "absent" before
  validation and the call (recursively, in nested objects, arrays, ``anyOf`` branches and
  ``$defs``). Every object gets ``additionalProperties: false``. Keywords outside the subset
  (``default``, ``minLength``, ``uniqueItems``, ``not``, ...) are removed and folded into the
  ``description``; ``oneOf`` becomes ``anyOf``; tuples
  (``prefixItems``) become arrays of the union of their item types with fixed length. ``$ref``
  and ``$defs`` are kept (the subset allows them, recursion included), and ``$defs`` are
  rewritten once each, so recursive schemas never recurse forever. ``allOf`` members and a
  ``$ref`` beside other keywords are merged into one schema with the same meaning
  (:mod:`sagents.tool._schema_merge`), or refused. Nothing may stand beside a ``$ref`` in strict
  mode (the ``openai`` SDK's own helper inlines such refs): a described ``$ref`` to a small
  definition (at most 64 nodes, counting what its refs point to) is inlined; any other becomes
  a one-member ``anyOf`` that carries the description, so output stays linear in the input,
  and an export writing more than
  :data:`MAX_STRICT_NODES` nodes is refused. An object node without ``type`` gets
  ``type: "object"`` (a documented narrowing: JSON Schema lets it accept non-objects).

  A strict schema may accept more than the original (dropped keywords, closed objects aside):
  arguments must still be validated against the original schema after
  :func:`strict_nulls_to_absent` (``ToolManager.run_tool`` does). Inputs the original accepts
  are accepted by the strict schema in their strict form (absent optional properties sent as
  ``null``), except unknown keys of objects without ``additionalProperties`` and non-objects
  where an untyped object node stands. What strict mode cannot express fails with
  :class:`~sagents.errors.SchemaExportError`: a value of any type (``{}``, ``true``), an open
  map (``dict[str, int]``, or ``additionalProperties: true`` or a schema beside
  ``properties``), a conjunction that cannot be merged; export such a tool with
  ``strict=False``. One case is lossy by design: an optional property whose own schema accepts
  ``null`` cannot be sent as an explicit ``null`` in strict mode, it becomes absent.
  Details and examples: ``docs/tool-schema.md``.
"""

from __future__ import annotations

from typing import Any

from sagents.core._spec import ToolSpec
from sagents.tool._examples import description_with_examples
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._export_strict import (
    MAX_STRICT_NODES,
    STRICT_FORMATS,
    STRICT_KEYWORDS,
    StrictSchema,
    strict_absent_to_nulls,
    strict_nulls_to_absent,
    strict_schema,
)
from sagents.tool.naming import to_exported_name

__all__ = [
    "MAX_STRICT_NODES",
    "STRICT_FORMATS",
    "STRICT_KEYWORDS",
    "StrictSchema",
    "faithful_schema",
    "strict_absent_to_nulls",
    "strict_nulls_to_absent",
    "strict_schema",
    "to_openai_tool",
]


def to_openai_tool(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Chat Completions tool ``{"type": "function", "function": {...}}`` for ``spec``.

    Args:
        spec: The tool (its input schema already excludes what the host injects).
        strict: Export OpenAI's strict subset and add ``"strict": true``.
        name: The exported name; :func:`~sagents.tool.naming.to_exported_name` of
            ``spec.name`` by default (pass a :class:`~sagents.tool.naming.NameMap`'s name to
            have collisions checked).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"[, "strict"]}}``.

    Raises:
        SchemaExportError: when the schema cannot be exported in the asked mode.
    """
    function: dict[str, Any] = {
        "name": name if name is not None else to_exported_name(spec.name),
        "description": description_with_examples(spec),
    }
    if strict:
        function["parameters"] = strict_schema(spec.input_schema).schema
        function["strict"] = True
    else:
        function["parameters"] = faithful_schema(spec.input_schema)
    return {"type": "function", "function": function}
