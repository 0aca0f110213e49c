"""What an unknown or misspelt key of the configuration file is called in its error.

A key the file's models do not know is named with the closest known key at that place, the
documented spelling of a key spelled otherwise (docs/configuration.md), and the keys known there;
a top-level key close to one of sagents' is a typo, any other is another client's and is ignored.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from sagents.config._models import (
    ConfigFileParams,
    ServerEntryParams,
    ServerSandboxParams,
    documented_key,
)

__all__ = ["SERVER_KEYS_ONLY", "json_type", "misspelt_top_level", "respelled", "unknown_key"]

# How close (difflib's ratio, case folded) an unknown top-level key must be to one of sagents'
# keys to be refused as a typo of it: other clients' own keys must stay far below it.
_TOP_LEVEL_TYPO_CUTOFF = 0.8
# sagents' top-level keys that another layer reads from the same file (the gateway's profiles).
_TOP_LEVEL_READ_ELSEWHERE = ("profiles",)

# sagents' own keys of a server entry (not the standard command/args/env/url... nor one that is
# a top-level key too): at the top level they are a mistake, not another client's key.
_STANDARD_SERVER_KEYS = {"command", "args", "env", "cwd", "url", "type", "transport", "headers",
                         "disabled"}  # fmt: skip
SERVER_KEYS_ONLY = frozenset(
    field.alias or name
    for name, field in ServerEntryParams.model_fields.items()
    if name not in _STANDARD_SERVER_KEYS and name not in ConfigFileParams.model_fields
)


def json_type(value: object) -> str:
    """The JSON name of ``value``'s type (``a string``, ``an array``...), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else type(value).__name__


def unknown_key(loc: Sequence[int | str]) -> tuple[str, str | None]:
    """The message and hint of an unknown key at ``loc``: the closest known key, if any."""
    name = str(loc[-1])
    target = _model_at(ConfigFileParams, loc[:-1])
    documented = documented_key(target, name) if target is not None else None
    if documented is not None:
        return respelled(name, documented)
    known = _known_keys(ConfigFileParams, loc[:-1])
    if not known:
        return f"unknown key {name!r}", None
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    message = f"unknown key {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
    if list(loc[:-1]) == ["sandbox"] and name in _known_keys(ServerSandboxParams, ()):
        return message, (
            "a server's own sandbox goes in its entry, mcpServers.<name>.sandbox (docs/mcp.md, "
            '"Sandboxed servers"); the top-level sandbox section knows: ' + ", ".join(known)
        )
    return message, "known keys here: " + ", ".join(known)


def misspelt_top_level(name: str) -> tuple[str, str] | None:
    """The message and hint of a top-level key that is not sagents' but close to one of its
    keys (``mcpServer`` for ``mcpServers``), as a nested unknown key gets; None for a key of
    sagents and for other clients' keys (``globalShortcut``, VS Code's ``inputs``), which are
    ignored."""
    known = [
        *(info.alias or field for field, info in ConfigFileParams.model_fields.items()),
        *_TOP_LEVEL_READ_ELSEWHERE,
    ]
    if name in known or name in ConfigFileParams.model_fields or name in SERVER_KEYS_ONLY:
        return None
    by_folded = {key.casefold(): key for key in known}
    close = difflib.get_close_matches(
        name.casefold(), list(by_folded), n=1, cutoff=_TOP_LEVEL_TYPO_CUTOFF
    )
    if not close:
        return None
    return (
        f"unknown key {name!r}; did you mean {by_folded[close[0]]!r}?",
        "known keys here: " + ", ".join(known),
    )


def respelled(name: str, documented: str) -> tuple[str, str]:
    """The message and hint of a key spelled otherwise than documented."""
    return (
        f"unknown key {name!r}: the configuration spells it {documented!r}",
        f"rename it to {documented!r}, the spelling docs/configuration.md shows",
    )


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model found at ``loc`` below ``model``, if any."""
    annotation: Any = model
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    return _model_in(annotation)


def _known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys (their JSON spelling) of the model found at ``loc`` below ``model``."""
    target = _model_at(model, loc)
    if target is None:
        return []
    return [info.alias or name for name, info in target.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _step(annotation: Any, part: int | str) -> Any:
    """The annotation one step down ``part`` (a field's key, or a dict key or list index)."""
    model = _model_in(annotation)
    if model is not None:
        for name, info in model.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    for arg in (annotation, *typing.get_args(annotation)):
        origin = typing.get_origin(arg)
        if origin in (dict, Mapping):
            return typing.get_args(arg)[1]
        if origin in (list, tuple, Sequence):
            return typing.get_args(arg)[0]
    return None
