"""Tool-call ids as a server that limits their form takes them (docs/agent.md, "Servers'
quirks").

Mistral's API (and any server that checks ids with ``mistral_common``, such as omlx serving a
Mistral model, even for the ids it gave its own calls) refuses a request holding a tool-call id
that is not exactly 9 characters of ``[a-zA-Z0-9]``: "Tool call id was toolu_01... but must be
a-z, A-Z, 0-9, with a length of 9." OpenAI's API refuses one longer than 40 characters.
A history made on another provider holds such ids (Anthropic's ``toolu_...``, OpenAI's
``call_...``, Kimi's ``functions.get_weather:0``, an empty one given as a dict). The history
keeps its ids; only the request sent to such a server carries them in that form.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["NINE_CHAR_ID", "refuses_call_ids", "within_nine_char_rule"]

NINE_CHAR_ID: Final = re.compile(r"[a-zA-Z0-9]{9}")
_ALPHABET: Final = string.digits + string.ascii_letters
_REFUSAL: Final = ("Tool call id was", "with a length of 9")
_ID_FIELD: Final = re.compile(r"tool_calls\[\d+\]\.id|tool_call_id")


def refuses_call_ids(message: str) -> bool:
    """Whether an error's text is a server's refusal of a tool-call id by its form: Mistral's
    9-character rule, or OpenAI's 40 characters at most ("Invalid
    'messages[2].tool_calls[0].id': string too long"), which the rule satisfies too."""
    if all(words in message for words in _REFUSAL):
        return True
    return "string too long" in message and _ID_FIELD.search(message) is not None


def _nine_chars(call_id: str, attempt: int) -> str:
    """9 characters of ``[a-zA-Z0-9]`` from a hash of ``call_id`` (and ``attempt``, for an id
    whose first ones are taken): the same id gives the same characters in every request."""
    digest = hashlib.sha256(f"{attempt}:{call_id}".encode()).digest()
    number = int.from_bytes(digest[:8], "big")  # 2**64 > 62**9: every character is drawn
    characters = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALPHABET))
        characters.append(_ALPHABET[digit])
    return "".join(characters)


def _id_of(value: Any) -> str:
    return "" if value is None else str(value)


def within_nine_char_rule(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Chat Completions messages of a request with every tool-call id outside the rule
    (9 characters ``[a-zA-Z0-9]``) in it.

    An id within the rule is kept as it is. Any other id, the empty one included, becomes 9
    characters drawn from a hash of it, the same for each call and each result that carries
    it (an id a history repeats stays one id, as it was), and distinct from every other id of
    the request. Messages that change are copies: ``messages`` is left as it was.
    """
    ids: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping):
                ids.append(_id_of(call.get("id")))
        if message.get("role") == "tool":
            ids.append(_id_of(message.get("tool_call_id")))
    taken = {i for i in ids if NINE_CHAR_ID.fullmatch(i)}
    mapped: dict[str, str] = {}
    for call_id in ids:
        if call_id in taken or call_id in mapped:
            continue
        attempt = 0
        while (nine := _nine_chars(call_id, attempt)) in taken:
            attempt += 1
        mapped[call_id] = nine
        taken.add(nine)
    if not mapped:
        return [dict(m) for m in messages]
    sent: list[dict[str, Any]] = []
    for message in messages:
        copy = dict(message)
        calls = message.get("tool_calls")
        if calls:
            copy["tool_calls"] = [
                {**call, "id": mapped.get(_id_of(call.get("id")), call.get("id"))}
                if isinstance(call, Mapping)
                else call
                for call in calls
            ]
        if message.get("role") == "tool":
            result_id = _id_of(message.get("tool_call_id"))
            copy["tool_call_id"] = mapped.get(result_id, result_id)
        sent.append(copy)
    return sent
