"""Turn what a local tool returned into a :class:`~sagents.core._result.ToolResult`.

Rules (docs/tools.md, "What the model receives"):

- a ``ToolResult`` passes through; a content block (or a list of only content blocks) becomes
  the result's content;
- ``None`` -> an empty text result; ``str`` -> one text block;
- ``bytes``: an image the header identifies (PNG, JPEG, GIF, WebP) -> an image block; UTF-8
  text -> a text block; anything else -> an embedded resource with a base64 ``blob``
  (``application/octet-stream``), rendered to the model as a short placeholder;
- ``dict``/``list``/numbers/bools, and values pydantic can serialise (dataclasses, pydantic
  models, ``TypedDict``s, paths, datetimes, UUIDs, decimals, enums, sets, tuples) -> structured
  content plus its JSON text (nested ``bytes`` become base64 strings); a value that serialises
  to a bare string becomes text;
- a tool whose output schema wraps its return value (``-> int``, ``-> list[str]``, ...) gets
  ``{"result": value}`` as its structured content (MCP: ``structuredContent`` is an object that
  matches ``outputSchema``); its text is the bare value;
- anything else (and NaN/infinite floats) -> :class:`~sagents.errors.ResultSerializationError`
  naming the type.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

import pydantic_core

from sagents.core._result import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.errors import ResultSerializationError

__all__ = ["to_tool_result"]

# One encoder for every result (json.dumps with options builds a new encoder per call).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

_PLAIN_NUMBERS = frozenset({int, float, bool})  # exact types; see _scalar_text

_BLOCK_TYPES = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)

_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def to_tool_result(value: Any, *, tool_name: str, wrap_result: bool = False) -> ToolResult:
    """Convert a tool's return value (see the module docstring).

    Args:
        value: What the tool returned.
        tool_name: For the error message.
        wrap_result: The tool's output schema wraps its return value as ``{"result": value}``
            (:attr:`~sagents.tool._signature.ResolvedSignature.output_wrapped`): the structured
            content is then ``{"result": <JSON of value>}`` (``None`` and strings included), so
            that it matches the schema as MCP requires; the text blocks stay the bare value.
            A ``ToolResult``, content blocks and ``bytes`` are not wrapped.

    Returns:
        The result; never an error result.

    Raises:
        ResultSerializationError: for a value that has no JSON form, naming its type.
    """
    kind = type(value)  # the most common results first, as the rules below convert them
    if kind is str:
        return _text_result(value, {"result": value} if wrap_result else None)
    if kind is int:
        # str of an exact int is its repr (and json's text), without int.__repr__'s lookup
        return _text_result(str(value), {"result": value} if wrap_result else value)
    if isinstance(value, ToolResult):
        return value
    if kind not in _PLAIN_NUMBERS:  # numbers are none of these: skip the checks
        if value is None:
            return _text_result("", _wrap(None, wrap_result))
        if isinstance(value, str):
            return _text_result(value, _wrap(value, wrap_result))
        if isinstance(value, _BLOCK_TYPES):
            return ToolResult(content=(value,))
        if isinstance(value, bytes | bytearray | memoryview):
            return ToolResult(content=(_bytes_block(bytes(value)),))
        if _is_block_list(value):
            return ToolResult(content=tuple(value))
    try:
        text = _scalar_text(value)
        if text is not None:
            jsonable = value
        else:
            jsonable = pydantic_core.to_jsonable_python(
                value, bytes_mode="base64", fallback=_fallback
            )
            text = _ENCODE(jsonable)
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as error:
        kind_name = f"{kind.__module__}.{kind.__qualname__}"
        raise ResultSerializationError(
            f"tool {tool_name!r} returned a value of type {kind_name!r} that cannot be converted "
            f"to JSON: {error}",
            hint="Return str, dict, list, a dataclass or a pydantic model.",
            details={"type": kind_name},
        ) from None
    if isinstance(jsonable, str):
        return _text_result(jsonable, _wrap(jsonable, wrap_result))
    # The JSON text block, as ToolResult.from_structured makes it (serialised once here).
    return _text_result(text, {"result": jsonable} if wrap_result else jsonable)


_new = object.__new__


def _text_result(text: str, structured: Any) -> ToolResult:
    """``ToolResult(content=(TextContent(text=text),), structured=structured)``, built faster.

    The frozen dataclasses' generated ``__init__`` sets each field through
    ``object.__setattr__``, which is most of a trivial call's result cost; filling the
    instances' ``__dict__`` item by item (no keyword dict to build and merge) gives equal
    objects (tests compare the two).
    """
    block = _new(TextContent)
    fields = block.__dict__
    fields["type"] = "text"
    fields["text"] = text
    result = _new(ToolResult)
    fields = result.__dict__
    fields["content"] = (block,)
    fields["structured"] = structured
    fields["is_error"] = False
    fields["error"] = None
    fields["meta"] = {}
    return result


def _scalar_text(value: Any) -> str | None:
    """The JSON text of an exact ``int``, ``bool`` or ``float`` (as ``json`` writes it), or None.

    Raises:
        ValueError: for a NaN or infinite float (not JSON), as the encoder would.
    """
    kind = type(value)  # exact types: subclasses (enums) go through pydantic
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        return float.__repr__(value) if math.isfinite(value) else _ENCODE(value)  # raises
    return None


def _wrap(value: Any, wrap_result: bool) -> dict[str, Any] | None:
    """``{"result": value}`` for a wrapped output schema; None (no structured content) else."""
    return {"result": value} if wrap_result else None


def _fallback(value: Any) -> Any:
    if isinstance(value, PurePath):  # pydantic serialises Path but not the pure classes
        return str(value)
    raise TypeError(f"no JSON form for {type(value).__name__!r}")


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) > 0
        and all(isinstance(item, _BLOCK_TYPES) for item in value)
    )


def _bytes_block(data: bytes) -> ContentBlock:
    mime = _image_mime(data)
    if mime is not None:
        return ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=mime)
    try:
        return TextContent(text=data.decode("utf-8"))
    except UnicodeDecodeError:
        return EmbeddedResource(
            uri="data:application/octet-stream",
            mime_type="application/octet-stream",
            blob=base64.b64encode(data).decode("ascii"),
        )


def _image_mime(data: bytes) -> str | None:
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
