"""Structured output: ``SAgent(output_type=...)`` (docs/agent.md, "Structured output").

:class:`OutputType` turns a pydantic model, a ``TypedDict`` or a dataclass into the seam's
:class:`~sagents.agent.OutputSchema` (its JSON Schema, as pydantic writes it) and validates the
model's final answer into a value of that type. The adapters ask for the schema their provider's
native way, with the helpers below:

* Chat Completions and Responses: a ``json_schema`` response format (OpenAI "Structured
  Outputs"), ``strict`` when OpenAI's strict subset expresses the schema without loss (every
  property required: strict mode has no optional properties), else the faithful schema
  without ``strict``;
* Anthropic Messages: ``output_config.format`` (Anthropic "Structured outputs") with the schema
  in Anthropic's strict subset; a schema that subset cannot express is asked for in the
  system prompt instead;
* Gemini: ``response_mime_type: application/json`` with ``response_json_schema``, every
  ``$ref`` inlined (Gemini's rules for it); a recursive schema is asked for in the system
  instruction.

Whatever the provider did, the loop validates the answer's text with pydantic; an answer that
does not fit goes back to the model with pydantic's errors, a bounded number of times.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from sagents.agent._chat_model import OutputSchema
from sagents.agent._messages import Message, TextPart
from sagents.errors import OutputValidationError, SchemaExportError
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._export_strict import strict_schema
from sagents.tool.export_anthropic import anthropic_strict_schema
from sagents.tool.export_inline import inline_schema

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OutputType",
    "anthropic_output_config",
    "gemini_response_schema",
    "openai_json_schema",
    "prompted_output",
]

DEFAULT_OUTPUT_RETRIES = 1
"""Times an answer that does not fit ``output_type`` is sent back to the model."""

_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_FENCE = re.compile(r"\A\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*\Z", re.DOTALL)
_SHOWN_ERRORS = 10  # pydantic errors of one answer told to the model
_SHOWN_ANSWER_CHARS = 300  # characters of a failed answer in the run's error
_CUT = "was cut by the output limit (max_tokens) before it was complete, so it does not fit"


class OutputType:
    """``output_type`` as a schema to ask for and a validator of the answer.

    Raises:
        ValueError: the type has no JSON Schema (pydantic cannot build one), or its schema is
            not an object (a pydantic model, a ``TypedDict`` or a dataclass is).
    """

    def __init__(self, output_type: Any) -> None:
        self.type = output_type
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as error:  # pydantic's PydanticSchemaGenerationError, UserError, ...
            raise ValueError(
                f"output_type {output_type!r} has no JSON Schema: {error}; use a pydantic "
                "model, a TypedDict or a dataclass"
            ) from error
        schema = _root_inlined(schema)
        if schema.get("type") != "object":
            raise ValueError(
                f"output_type {output_type!r} is not an object type (its schema's type is "
                f"{schema.get('type')!r}); use a pydantic model, a TypedDict or a dataclass"
            )
        name = _NAME.sub("_", str(getattr(output_type, "__name__", "") or ""))[:64]
        self.schema = OutputSchema(
            name=name or "final_answer",
            schema=schema,
            description=str(schema.get("description") or ""),
        )

    def validate(self, text: str) -> Any:
        """The answer's text (JSON, a Markdown code fence around it allowed) as a value of the
        type.

        Raises:
            ValidationError: the text is not JSON of the type.
        """
        fenced = _FENCE.match(text)
        return self.adapter.validate_json(fenced.group(1) if fenced else text)

    def retry_message(self, error: ValidationError, *, cut: bool = False) -> Message:
        """The user message that sends pydantic's errors back to the model; ``cut``: the
        output limit cut the answer (``finish_reason: length``), which the model is told, as
        the same answer would be cut again."""
        why = _CUT if cut else "does not fit the required output schema"
        text = (
            f"Your final answer {why} {self.schema.name!r}:\n{_errors_text(error)}\n"
            + ("Answer again, shorter: " if cut else "Answer again ")
            + "with only the JSON object, fitting the schema."
        )
        return Message(role="user", parts=(TextPart(text=text),))

    def failure(
        self, error: ValidationError, text: str, *, retries: int, cut: bool = False
    ) -> OutputValidationError:
        """The run's error once the retries are spent (``cut``: the output limit cut the last
        answer)."""
        why = _CUT if cut else "did not fit output_type"
        return OutputValidationError(
            f"the model's final answer {why} {self.schema.name!r} after {retries} retries: "
            f"{_errors_text(error)}",
            hint=(
                "raise the answer's max_tokens (ModelSettings), or simplify the type"
                if cut
                else "raise output_retries, simplify the type, or use a model with native "
                "structured output (docs/agent.md, 'Structured output')"
            ),
            details={
                "errors": _errors(error),
                "answer": text[:_SHOWN_ANSWER_CHARS],
            },
        )


def _root_inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with a root ``$ref`` into its ``$defs`` (pydantic's schema of a recursive
    model) replaced by the definition it names, the ``$defs`` kept for the recursion: the APIs
    want an object at the root (OpenAI "Structured Outputs", "Supported schemas")."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or not isinstance(defs, dict):
        return schema
    target = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(target, dict):
        return schema
    rest = {key: value for key, value in schema.items() if key not in ("$ref", "$defs")}
    return {**target, **rest, "$defs": defs}


def _errors(error: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in error.errors(include_url=False, include_input=False)[:_SHOWN_ERRORS]
    ]


def _errors_text(error: ValidationError) -> str:
    lines = []
    for e in _errors(error):
        where = ".".join(e["loc"]) or "(the answer)"
        lines.append(f"- {where}: {e['msg']}")
    return "\n".join(lines)


def openai_json_schema(output: OutputSchema) -> dict[str, Any]:
    """OpenAI's ``json_schema`` format body (``name``, ``schema``, ``strict``, and
    ``description`` when there is one): strict when the strict subset keeps the schema's
    meaning (no optional property became a nullable required one), else faithful."""
    body: dict[str, Any] = {"name": output.name}
    if output.description:
        body["description"] = output.description
    try:
        strict = strict_schema(output.schema)
    except SchemaExportError:
        strict = None
    if strict is not None and not any(strict.optional.values()):
        body["schema"] = dict(strict.schema)
        body["strict"] = True
    else:
        body["schema"] = faithful_schema(output.schema)
        body["strict"] = False
    return body


def anthropic_output_config(output: OutputSchema) -> dict[str, Any] | None:
    """Anthropic's ``output_config`` asking for ``output``, or None when its strict subset
    cannot express the schema (then ask in the prompt: :func:`prompted_output`)."""
    try:
        schema = anthropic_strict_schema(output.schema)
    except SchemaExportError:
        return None
    return {"format": {"type": "json_schema", "schema": schema}}


def gemini_response_schema(output: OutputSchema) -> dict[str, Any] | None:
    """Gemini's ``response_json_schema`` asking for ``output``: the faithful schema with every
    ``$ref`` inlined, or None for a recursive one (then ask in the prompt:
    :func:`prompted_output`). Gemini API reference, ``GenerationConfig.responseJsonSchema``: "If
    $ref is set on a sub-schema, no other properties, except for those starting as a $, may be
    set" (pydantic writes a described model field so), and "Cyclic references ... may only be
    used within non-required properties"."""
    try:
        return inline_schema(faithful_schema(output.schema), target="Gemini structured output")
    except SchemaExportError:
        return None


def prompted_output(output: OutputSchema) -> str:
    """The system prompt's paragraph asking for ``output`` where no native way serves."""
    return (
        "When you give your final answer (an answer without tool calls), answer with only a "
        "JSON object that fits this JSON Schema, and no other text:\n"
        + json.dumps(faithful_schema(output.schema), ensure_ascii=False)
    )
