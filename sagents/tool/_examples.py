"""Tool-use examples: sample arguments objects of a tool (docs/tools.md, "Examples").

A tool's examples live in its ``ToolSpec.meta`` under :data:`EXAMPLES_META_KEY`: ``@tool``'s
``examples=`` puts them there, and an MCP tool's ``_meta`` (the upstream's) becomes its
``meta`` as it is, so an upstream that provides them under that key is read the same way; the
gateway lists a tool's ``meta`` as its ``_meta``, so they travel on to its clients. The
Anthropic export sends them as ``input_examples``; the other exports append them to the
description.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from sagents.core._spec import ToolSpec

__all__ = [
    "EXAMPLES_META_KEY",
    "MAX_EXAMPLES",
    "MAX_EXAMPLE_CHARS",
    "description_with_examples",
    "invalid_examples",
    "tool_examples",
]

EXAMPLES_META_KEY = "sagents/inputExamples"
"""The ``meta`` (MCP ``_meta``) key of a tool's examples: a list of arguments objects."""

MAX_EXAMPLES = 10
"""Examples exported per tool at most (the first ones)."""

logger = logging.getLogger(__name__)


MAX_EXAMPLE_CHARS = 4000
"""An example's size at most, as compact JSON: a larger one (an upstream's) is left out."""


def invalid_examples(examples: Any, input_schema: Mapping[str, Any]) -> list[str]:
    """Why ``examples`` is not a list of arguments objects valid against ``input_schema``:
    one line per problem, empty when they all are."""
    return _checked(examples, input_schema)[1]


def _checked(
    examples: Any, input_schema: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``(valid examples, one line per problem)``. Never raises: an input schema that cannot
    check them (an upstream's ``"type": 5``, a ``$ref`` to nowhere) is a problem too."""
    if not isinstance(examples, list):
        return [], [f"examples must be a list of arguments objects, not {type(examples).__name__}"]
    from sagents.tool._arguments import linear_validator  # jsonschema: only for examples

    valid: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        validator = linear_validator(input_schema)
        for index, example in enumerate(examples):
            if not isinstance(example, dict):
                problems.append(f"example {index} is not an object: {example!r:.80}")
                continue
            size = len(json.dumps(example, ensure_ascii=False, separators=(",", ":"), default=str))
            if size > MAX_EXAMPLE_CHARS:
                problems.append(
                    f"example {index} is {size:,} characters (over {MAX_EXAMPLE_CHARS:,})"
                )
                continue
            error = next(iter(validator.iter_errors(example)), None)
            if error is not None:
                problems.append(
                    f"example {index} does not match the input schema: {error.message:.200}"
                )
                continue
            valid.append(example)
    except Exception as error:  # noqa: BLE001 - an upstream schema makes the validator raise anything
        return [], [f"the input schema cannot check them: {type(error).__name__}: {error!s:.200}"]
    return valid, problems


def tool_examples(spec: ToolSpec) -> list[dict[str, Any]]:
    """The examples of ``spec`` to export: those of its ``meta`` that are arguments objects
    valid against its input schema and at most :data:`MAX_EXAMPLE_CHARS` (an invalid one would
    make a provider refuse the whole request; each is logged and left out), at most
    :data:`MAX_EXAMPLES`."""
    raw = spec.meta.get(EXAMPLES_META_KEY) if spec.meta else None
    if raw is None:
        return []
    valid, problems = _checked(raw, spec.input_schema)
    if problems:
        logger.warning("tool %r: examples left out: %s", spec.name, "; ".join(problems))
    return valid[:MAX_EXAMPLES]


def description_with_examples(spec: ToolSpec) -> str:
    """``spec``'s description, followed by its examples (one JSON object a line) when it has
    any: how the exports without an examples field carry them."""
    examples = tool_examples(spec)
    if not examples:
        return spec.description
    lines = [json.dumps(example, ensure_ascii=False, sort_keys=True) for example in examples]
    head = spec.description.rstrip()
    return (head + "\n\n" if head else "") + "Examples of arguments:\n" + "\n".join(lines)
