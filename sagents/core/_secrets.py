"""Secrets that never leak: a :class:`Redactor` replaces each known secret value by
``[redacted:NAME]`` (docs/gateway.md, "Secrets").

A secret is found as it is, and in the forms a leak commonly takes: base64 (standard and
URL-safe alphabet, at any of the three byte alignments inside a longer base64 text, so an
``Authorization: Basic`` header's ``user:password`` is found too), URL-encoding (``quote``
with and without ``/`` kept, ``quote_plus``; hex digits in either case) and a JSON string's
escaping. Values shorter than :data:`MIN_SECRET_CHARS` are not redacted: they would redact
ordinary text (``1``, ``true``, a short path).

Redaction is for what a tool, a server or a log line says, never for what a user or model
typed into a call's arguments: callers redact results, output and log text, not arguments.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import math
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import re2

from sagents.core._result import EmbeddedResource, TextContent, ToolResult

__all__ = ["MIN_SECRET_CHARS", "RedactingFilter", "Redactor", "redaction_mark"]

MIN_SECRET_CHARS = 8
"""Characters a value needs to be redacted (shorter ones would redact ordinary text)."""

PATTERN_MAX_MEM = 64 << 20  # bytes RE2 may use for the secrets' one pattern (its default: 8 MiB)

logger = logging.getLogger(__name__)


class _BytesPattern(Protocol):
    """What is used of a compiled RE2 pattern over bytes."""

    def search(self, text: bytes) -> object | None: ...
    def sub(self, repl: Callable[[Any], bytes], text: bytes) -> bytes: ...


def redaction_mark(name: str) -> str:
    """What a secret named ``name`` is replaced by."""
    return f"[redacted:{name}]"


def _base64_forms(value: bytes) -> set[str]:
    """The base64 text of ``value`` wherever it starts in a longer base64 text: for each of
    the three byte alignments, the characters that depend on ``value``'s bytes only."""
    forms: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + value).decode()
        start = math.ceil(8 * shift / 6)
        end = (8 * (shift + len(value))) // 6
        fragment = encoded[start:end]
        forms.add(fragment)
        forms.add(fragment.translate(str.maketrans("+/", "-_")))
    return forms


def _lowercase_hex(encoded: str) -> str:
    """``encoded`` with its percent-encodings' hex digits in lowercase (RFC 3986, section
    2.1: both cases are the same octet; several encoders write lowercase)."""
    return re2.sub(r"%[0-9A-F]{2}", lambda escape: escape.group(0).lower(), encoded)


def _forms(value: str) -> set[str]:
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    encoded = {
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote(value),
        urllib.parse.quote_plus(value),
    }
    forms |= encoded | {_lowercase_hex(form) for form in encoded}
    forms |= _base64_forms(value.encode())
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


class Redactor:
    """Replaces known secret values by ``[redacted:NAME]`` in text, JSON values and results.

    Args:
        secrets: ``(name, value)`` pairs (or a mapping); a value shorter than
            :data:`MIN_SECRET_CHARS` is left out (logged at ``INFO``, naming it). When two
            names share a value, the first one names it.
    """

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._names: dict[str, str] = {}  # form -> name
        self._marks: dict[bytes, bytes] = {}  # form, UTF-8 -> its mark, UTF-8
        self.names: tuple[str, ...] = ()
        """The names of the secrets redacted, in the order given."""
        self._forms: tuple[str, ...] = ()
        self._pattern: _BytesPattern | None = None
        self.add(secrets)

    def add(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """Redact these secrets too, from now on (a gateway adds the operator secret it
        creates once it serves HTTP); everyone holding this redactor sees them."""
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        names = list(self.names)
        for name, value in pairs:
            if len(value) < MIN_SECRET_CHARS:
                if value:
                    logger.info(
                        "secret %r is shorter than %d characters: it is not redacted",
                        name,
                        MIN_SECRET_CHARS,
                    )
                continue
            if name not in names:
                names.append(name)
            for form in _forms(value):
                if form not in self._names:
                    self._names[form] = name
                    self._marks[form.encode()] = redaction_mark(name).encode()
        # Longest first: a form that contains another is replaced whole. RE2 matches the one
        # alternation in time linear in the text (bench/bench_redaction.py), on UTF-8 bytes:
        # its str interface is several times slower on large texts.
        forms = tuple(sorted(self._names, key=len, reverse=True))
        alternation = b"|".join(re2.escape(form.encode()) for form in forms)
        options = re2.Options()
        options.log_errors = False
        options.max_mem = PATTERN_MAX_MEM
        self._pattern = re2.compile(alternation, options) if forms else None
        self._forms = forms
        self.names = tuple(names)

    @property
    def forms(self) -> tuple[str, ...]:
        """Every text replaced: each secret in each of its forms, longest first."""
        return self._forms

    def __bool__(self) -> bool:
        return bool(self._forms)

    def redact(self, text: str) -> str:
        """``text`` with every form of every secret replaced by its mark; the same object
        when no secret occurs in it."""
        pattern = self._pattern
        if pattern is None:
            return text
        data = text.encode("utf-8", "surrogatepass")  # lone surrogates survive the round trip
        if pattern.search(data) is None:
            return text
        redacted = pattern.sub(lambda match: self._marks[match.group(0)], data)
        return redacted.decode("utf-8", "surrogatepass")

    def redact_base64(self, blob: str) -> str:
        """A base64 ``blob`` (an embedded resource's) with every secret redacted from the
        bytes it decodes to, encoded again; the same object when none occurs. A blob that does
        not decode is redacted as text."""
        pattern = self._pattern
        if pattern is None:
            return blob
        try:
            data = base64.b64decode(blob, validate=True)
        except ValueError:
            return self.redact(blob)
        if pattern.search(data) is None:
            return self.redact(blob)  # a secret's base64 form may still be in the text
        redacted = pattern.sub(lambda match: self._marks[match.group(0)], data)
        return base64.b64encode(redacted).decode()

    def redact_json(self, value: Any) -> Any:
        """A JSON value with every string in it (keys included) redacted; the same object when
        nothing was."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            pairs = [(self.redact_json(k), self.redact_json(v)) for k, v in value.items()]
            if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True)):
                return value
            return dict(pairs)
        if isinstance(value, list | tuple):
            items = [self.redact_json(item) for item in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return type(value)(items)
        return value

    def result(self, result: ToolResult) -> ToolResult:
        """``result`` with its text, embedded resources (a blob in the bytes it decodes to),
        structured content and error message redacted; the same object when nothing was."""
        if not self._forms:
            return result
        content = tuple(_redact_block(self, block) for block in result.content)
        structured = self.redact_json(result.structured)
        error = result.error
        if error is not None:
            message, hint = self.redact(error.message), self.redact(error.hint or "") or None
            if message != error.message or hint != error.hint:
                error = dataclasses.replace(error, message=message, hint=hint)
        if (
            structured is result.structured
            and error is result.error
            and all(a is b for a, b in zip(content, result.content, strict=True))
        ):
            return result
        return dataclasses.replace(result, content=content, structured=structured, error=error)


def _redact_block(redactor: Redactor, block: Any) -> Any:
    if isinstance(block, TextContent):
        text = redactor.redact(block.text)
        return block if text is block.text else dataclasses.replace(block, text=text)
    if isinstance(block, EmbeddedResource) and block.text is not None:
        text = redactor.redact(block.text)
        return block if text is block.text else dataclasses.replace(block, text=text)
    if isinstance(block, EmbeddedResource) and block.blob is not None:
        blob = redactor.redact_base64(block.blob)
        return block if blob is block.blob else dataclasses.replace(block, blob=blob)
    return block


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (its arguments merged in) and
    exception text; put it on a handler, so that every logger's records pass it.

    Args:
        redactor: The secrets to redact.
    """

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redactor.redact(message)
        if redacted is not message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.redact(record.exc_text)
        return True
