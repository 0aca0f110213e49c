"""Tool arguments: parse, leniently coerce, and validate against a JSON Schema.

Models make a few mistakes often enough that rejecting them wastes a turn: numbers and booleans
sent as strings (``"5"``, ``"2.5"``, ``"true"``), an object or array sent as a JSON string, and
``null`` for an optional parameter. :class:`ArgumentValidator` fixes exactly those, guided by the
schema (never where the schema accepts the value as it came), then validates with ``jsonschema``
and reports every remaining problem at once.

Speed: valid arguments are the common case, so each call is first checked by a compiled
validator (``jsonschema-rs``, built once per schema, about a microsecond); only arguments it
refuses take the coercion and reporting path on the ``jsonschema`` package, whose errors are the
ones described here. ``jsonschema`` itself is imported on the first refusal or schema check.

It works on any JSON Schema document (local tools' and MCP tools' alike), following local
``$ref`` pointers (``#/$defs/...``) through the validator's own resolver.

Patterns: a schema's ``pattern`` and ``patternProperties`` come from whoever wrote the tool (an
upstream server) and are matched against what the model wrote, so both validators match them
in linear time: ``jsonschema-rs`` with its ``regex``-crate engine (not the backtracking
``fancy-regex``), the ``jsonschema`` package with RE2 for ``pattern``, ``patternProperties`` and
``additionalProperties``. A pattern RE2 cannot evaluate (lookaround, backreferences), or whose
program is over :data:`MAX_SCHEMA_PATTERN_PROGRAM` instructions, is not enforced here: the server
that wrote it checks it in its own process (docs/tools.md, "One call").

Linear in the text is not linear in the pattern: when their automata give up, both engines
simulate every state of the program for every character (~15 ns a state a character), so a
207-instruction pattern holds the thread for 10 s over 4 MiB. A call whose patterns would cost
more than :data:`ON_LOOP_PATTERN_WORK` (instructions times characters) is therefore validated in
a worker thread (:meth:`ArgumentValidator.costly`), by the ``jsonschema`` package and RE2 only:
RE2 lets go of the interpreter while it matches, ``jsonschema-rs`` would hold it.

Rules (docs/tools.md, "One call", step 3):

- ``"5"`` -> ``5`` where the schema wants an integer (and not a string); ``"2.5"`` -> ``2.5``
  for a number; ``"true"``/``"false"`` (any case) -> bool for a boolean;
- a JSON string -> object or array where the schema wants one (and not a string), read as
  :func:`parse_arguments` reads the arguments (raw control characters inside strings kept);
- ``null`` for a property that is optional (not in ``required``) is removed ("absent") when the
  call came through the strict export (``strict=True``), or when the property's schema does not
  accept ``null`` anyway; any other explicit ``null`` is kept;
- inside ``anyOf``/``oneOf`` the first branch that the coerced value satisfies wins.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from sagents.core._spec import MAX_SCHEMA_NESTING, schema_nesting
from sagents.errors import InvalidArgumentsError, ToolDefinitionError
from sagents.tool._json_schema import json_type

if TYPE_CHECKING:
    import jsonschema.exceptions
    from jsonschema.protocols import Validator

    from sagents.sandbox._patterns import LinearRegex

__all__ = [
    "MAX_ARGUMENTS_BYTES",
    "MAX_REPORTED_PROBLEMS",
    "MAX_SCHEMA_PATTERN_PROGRAM",
    "ON_LOOP_PATTERN_WORK",
    "ArgumentProblem",
    "ArgumentValidator",
    "ScalarParameters",
    "parse_arguments",
]

MAX_ARGUMENTS_BYTES = 4 * 1024 * 1024
"""Largest accepted arguments document, in bytes of UTF-8 JSON (4 MiB). Larger ones are refused
with ``invalid_arguments`` before they are parsed or validated, so that a runaway model output
fails fast instead of stalling the call path."""

MAX_REPORTED_PROBLEMS = 20
"""At most this many problems are listed in one error (the count of the rest is given)."""

MAX_SCHEMA_PATTERN_PROGRAM = 2_000
"""Largest schema pattern checked here, in RE2 program instructions (``^[a-z0-9-]{1,63}$`` is
about 200). A larger one is left to the server that wrote it: its worst case over 4 MiB of
arguments would hold a worker thread for minutes."""

ON_LOOP_PATTERN_WORK = 2_000_000
"""Most pattern work a call is validated with on the event loop: the schema's pattern program
instructions times the characters of the arguments' strings and keys (at ~15 ns each in the
engines' worst case, 30 ms). A call over it is validated in a worker thread."""

_INTEGER = re.compile(r"^\s*[-+]?\d+(\.0*)?\s*$")
# Unambiguous (each character has one way to match), so linear on model text: the earlier
# "\d+\.?\d*" split a run of digits every possible way, quadratic in its length.
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


@dataclass(frozen=True, kw_only=True)
class ArgumentProblem:
    """One reason the arguments were refused.

    Attributes:
        path: JSON Pointer of the offending value (``""`` is the whole arguments object).
        expected: What the schema wanted, in a few words.
        got: What came: a short repr and its JSON type (``"'abc' (string)"``), or ``"nothing"``.
    """

    path: str
    expected: str
    got: str

    def to_dict(self) -> dict[str, str]:
        """``{"path", "expected", "got"}``."""
        return {"path": self.path, "expected": self.expected, "got": self.got}

    def __str__(self) -> str:
        return f"{self.path or '/'}: expected {self.expected}, got {self.got}"


def parse_arguments(tool_name: str, args: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Turn what the model sent into an arguments object.

    Args:
        tool_name: For error messages.
        args: A mapping, a JSON text of an object, or None / ``""`` (no arguments).

    Returns:
        A new dict (the caller's mapping is not mutated).

    Raises:
        InvalidArgumentsError: for text that is not JSON (``NaN`` and ``Infinity`` included,
            which Python's parser would accept; a raw control character inside a string, such
            as a newline, is accepted and kept), JSON that is not an object, a
            document larger than :data:`MAX_ARGUMENTS_BYTES`, or one nested too deeply for
            Python's parser (about a thousand levels).
    """
    if type(args) is dict:  # the common case first (a Mapping ABC check costs more)
        return dict(args) if _surely_small(args) else _measured(tool_name, args)
    if args is None:
        return {}
    if isinstance(args, str):
        # len() counts characters; a character is 1 to 4 UTF-8 bytes, so check cheaply first.
        if len(args) > MAX_ARGUMENTS_BYTES or len(args.encode()) > MAX_ARGUMENTS_BYTES:
            raise _too_large(tool_name, len(args.encode()))
        if not args.strip():
            return {}
        try:
            # strict=False: a raw control character inside a string (a newline, a tab) is
            # kept as sent, the only leniency beyond RFC 8259 (docs/agent.md, "Quirks handled")
            parsed = json.loads(args, strict=False, parse_constant=_refuse_constant)
        except RecursionError:
            raise _too_deep(tool_name) from None
        except (json.JSONDecodeError, _NotJsonConstantError) as error:
            raise InvalidArgumentsError(
                f"arguments for tool {tool_name!r} are not valid JSON: {error}",
                hint="Send the arguments as one JSON object.",
                details={"problems": [{"path": "", "expected": "a JSON object", "got": "text"}]},
            ) from None
        if not isinstance(parsed, dict):
            raise _not_an_object(tool_name, parsed)
        return parsed
    if not isinstance(args, Mapping):
        raise _not_an_object(tool_name, args)
    return dict(args) if _surely_small(args) else _measured(tool_name, args)


def _measured(tool_name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``args`` after measuring its JSON size exactly (refused past the limit)."""
    try:
        size = _json_size(args)
    except RecursionError:
        raise _too_deep(tool_name) from None
    if size > MAX_ARGUMENTS_BYTES:
        raise _too_large(tool_name, size)
    return dict(args)


class ArgumentValidator:
    """Coerce and validate arguments for one input schema (compiled once, reused per call).

    Args:
        schema: The tool's input schema (root ``type: object``); local ``$ref``s are followed.
        check: Check ``schema`` against a metaschema first; skip it for schemas a trusted
            generator made (pydantic's). A schema without ``$schema`` is checked against the
            Draft 7 metaschema, which catches malformed keywords (``"type": 5``,
            ``"required": "x"``) in about 1 ms, where the 2020-12 metaschema takes over 10 ms
            (its ``$dynamicRef``s); a schema that names its draft is checked against that one.

    Raises:
        ToolDefinitionError: when ``check`` is true and ``schema`` is not a valid JSON Schema.
    """

    def __init__(self, schema: Mapping[str, Any], *, check: bool = True) -> None:
        if schema_nesting(schema) > MAX_SCHEMA_NESTING:
            raise ToolDefinitionError(
                f"the input schema nests objects and arrays more than {MAX_SCHEMA_NESTING} "
                "levels deep",
                hint="move nested object schemas to $defs and refer to them with $ref",
            )
        if check:
            import jsonschema.exceptions
            import jsonschema.validators

            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            checker = cls if "$schema" in schema else jsonschema.Draft7Validator
            try:
                checker.check_schema(dict(schema))
            except jsonschema.exceptions.SchemaError as error:
                raise ToolDefinitionError(f"invalid input schema: {error.message}") from None
            except RecursionError:  # below the nesting limit, but deep under a deep stack
                raise ToolDefinitionError("the input schema is nested too deeply") from None
        self._schema = schema

    @functools.cached_property
    def _fast(self) -> Callable[[Any], bool] | None:
        """The compiled check, built on first use (registering many tools stays cheap)."""
        if self._pattern_work is None:
            return None  # it would enforce a pattern left to the server, or fail to compile
        return _compiled(self._schema)

    @functools.cached_property
    def _pattern_work(self) -> int | None:
        """The schema's patterns' RE2 instructions together (0: none), or None when one of
        them is left to the server (RE2 cannot evaluate it, or it is too large)."""
        work = 0
        for pattern in _schema_patterns(self._schema):
            regex = _linear(pattern)
            if regex is None:
                return None
            work += regex.programsize
        return work

    def costly(self, arguments: Any) -> bool:
        """True when checking the schema's patterns against ``arguments`` may cost more than
        :data:`ON_LOOP_PATTERN_WORK`: validate them in a worker thread with
        ``validate(..., in_worker=True)``."""
        work = self._pattern_work
        if not work:
            return False
        return _text_chars(arguments, ON_LOOP_PATTERN_WORK // work + 1) * work > (
            ON_LOOP_PATTERN_WORK
        )

    @functools.cached_property
    def _validator(self) -> Validator:
        """The ``jsonschema`` validator: coercion, the reported errors, fallback checks."""
        return linear_validator(self._schema)

    def is_valid(self, arguments: Any, *, in_worker: bool = False) -> bool:
        """True when ``arguments`` satisfy the schema as they are (nothing coerced).

        Args:
            arguments: The arguments object.
            in_worker: Called in a worker thread (see :meth:`costly`): check with the
                ``jsonschema`` package only, which lets go of the interpreter while RE2 matches.
        """
        if self._fast is not None and not in_worker:
            try:
                return self._fast(arguments)
            except (ValueError, TypeError, OverflowError):
                pass  # a value that is not JSON (a tuple key, an object): the full validator
        return bool(self._validator.is_valid(arguments))

    def validate(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        strict: bool = False,
        owned: bool = False,
        in_worker: bool = False,
    ) -> dict[str, Any]:
        """Coerce ``arguments`` (see the module docstring) and validate them.

        Args:
            tool_name: For error messages.
            arguments: The parsed arguments object (not mutated).
            strict: True when the model saw the strict export: ``null`` for an optional
                property then means "absent".
            owned: ``arguments`` is a dict the caller made for this call (as
                :func:`parse_arguments` returns): valid arguments are returned as they are,
                not copied.
            in_worker: Called in a worker thread, as :meth:`costly` asks: the compiled
                validator, which holds the interpreter while it matches, is not used.

        Returns:
            The coerced arguments (a new dict).

        Raises:
            InvalidArgumentsError: listing every problem (``details["problems"]`` holds
                ``{"path", "expected", "got"}`` dicts).
        """
        copied = arguments if owned and type(arguments) is dict else dict(arguments)
        # Valid arguments are the common case: one validation pass, nothing coerced. Strict
        # calls always go through coercion (a valid null may still mean "absent" there).
        if not strict:
            fast = None if in_worker else self._fast
            if fast is None:
                if self._validator.is_valid(copied):
                    return copied
            else:
                try:
                    if fast(copied):
                        return copied
                except (ValueError, TypeError, OverflowError):
                    pass  # a value that is not JSON: coercion and the full validator decide
        coerced = self._coerce(self._schema, copied, strict=strict, depth=0)
        if isinstance(coerced, dict) and self.is_valid(coerced, in_worker=in_worker):
            return coerced  # the coercion fixed everything (the common strict or "5" case)
        problems = [p for e in self._validator.iter_errors(coerced) for p in _problems(e)]
        if problems:
            raise _invalid(tool_name, problems)
        assert isinstance(coerced, dict)  # a non-object would have been a problem above
        return coerced

    def _is_valid(self, schema: Any, value: Any) -> bool:
        return bool(self._validator.evolve(schema=schema).is_valid(value))

    def _resolve(self, schema: Any) -> Any:
        """Follow ``$ref`` chains (local pointers only) to the schema they name."""
        seen = 0
        while isinstance(schema, Mapping) and "$ref" in schema and seen < 32:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                return schema
            target: Any = self._schema
            for part in ref[1:].split("/")[1:] if ref != "#" else []:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return schema
                target = target[part]
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if isinstance(target, Mapping) else target
            seen += 1
        return schema

    def _coerce(self, schema: Any, value: Any, *, strict: bool, depth: int) -> Any:
        if depth > 64 or not isinstance(schema, Mapping):
            return value
        schema = self._resolve(schema)
        if not isinstance(schema, Mapping):
            return value
        for part in schema.get("allOf", ()):
            value = self._coerce(part, value, strict=strict, depth=depth + 1)
        branches = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
        if branches:
            return self._coerce_branches(schema, branches, value, strict=strict, depth=depth)
        types = _types(schema)
        value = _coerce_scalar(types, value)
        if isinstance(value, dict) and ("object" in types or "properties" in schema):
            return self._coerce_object(schema, value, strict=strict, depth=depth)
        if isinstance(value, list) and ("array" in types or "items" in schema):
            return self._coerce_array(schema, value, strict=strict, depth=depth)
        return value

    def _coerce_branches(
        self,
        schema: Mapping[str, Any],
        branches: list[Any],
        value: Any,
        *,
        strict: bool,
        depth: int,
    ) -> Any:
        valid = next((b for b in branches if self._is_valid(b, value)), None)
        if valid is not None:  # only a strict null may still change, inside that branch
            return self._coerce(valid, value, strict=strict, depth=depth + 1)
        for branch in branches:
            candidate = self._coerce(branch, value, strict=strict, depth=depth + 1)
            if self._is_valid(branch, candidate):
                return candidate
        return value

    def _coerce_object(
        self, schema: Mapping[str, Any], value: dict[str, Any], *, strict: bool, depth: int
    ) -> dict[str, Any]:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        extra = schema.get("additionalProperties")
        result: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, Mapping) else None)
            optional = key in properties and key not in required
            if item is None and optional and (strict or not self._is_valid(properties[key], None)):
                continue  # null for an optional parameter means "absent"
            result[key] = self._coerce(sub, item, strict=strict, depth=depth + 1)
        return result

    def _coerce_array(
        self, schema: Mapping[str, Any], value: list[Any], *, strict: bool, depth: int
    ) -> list[Any]:
        prefix = schema.get("prefixItems", ())
        items = schema.get("items")
        result = []
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else items
            result.append(self._coerce(sub, item, strict=strict, depth=depth + 1))
        return result


def linear_validator(schema: Mapping[str, Any]) -> Validator:
    """A ``jsonschema`` validator of ``schema`` (its draft, else 2020-12) that matches
    ``pattern``, ``patternProperties`` and ``additionalProperties`` with RE2, in linear time,
    and leaves a pattern RE2 cannot evaluate in bounded time to the server that wrote it."""
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    linear = jsonschema.validators.extend(  # type: ignore[no-untyped-call]  # untyped stub
        cls,
        validators={
            "pattern": _pattern_keyword,
            "patternProperties": _pattern_properties_keyword,
            "additionalProperties": _additional_properties_keyword,
        },
    )
    validator: Validator = linear(schema)
    return validator


def _compiled(schema: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A compiled ``is_valid`` for ``schema``, or None to use the ``jsonschema`` package only.

    None when ``jsonschema-rs`` cannot compile the schema, or when the schema refers to
    anything but itself (remote ``$ref``s are never fetched). Formats are annotations only,
    as in the ``jsonschema`` package's default.
    """
    if not _local_refs_only(schema, depth=0):
        return None
    try:
        validator = jsonschema_rs.validator_for(
            dict(schema),
            validate_formats=False,
            retriever=_refuse_retrieval,
            pattern_options=jsonschema_rs.RegexOptions(),  # linear time, never fancy-regex
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError, TypeError):
        return None
    is_valid: Callable[[Any], bool] = validator.is_valid
    return is_valid


def _local_refs_only(schema: Any, *, depth: int) -> bool:
    if depth > 64:
        return False
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef") and not (
                isinstance(value, str) and value.startswith("#")
            ):
                return False
            if key in ("$id", "$anchor", "$dynamicAnchor") and depth > 0:
                return False  # embedded resources: leave their resolution to ``jsonschema``
            if not _local_refs_only(value, depth=depth + 1):
                return False
    elif isinstance(schema, list):
        return all(_local_refs_only(item, depth=depth + 1) for item in schema)
    return True


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"not fetching {uri!r}: tool schemas resolve local references only")


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else list(schema.get("enum") or ())
        return {json_type(v) for v in values}
    return set()


def _coerce_scalar(types: set[str], value: Any) -> Any:
    """Fix a string that should have been a number, boolean, object or array."""
    if not isinstance(value, str) or not types or "string" in types:
        return value
    if "integer" in types and _INTEGER.match(value):
        return int(float(value)) if "." in value else int(value)
    if "number" in types and _NUMBER.match(value):
        number = float(value)
        if math.isfinite(number):
            return int(number) if number.is_integer() and "." not in value else number
    if "boolean" in types and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if types & {"object", "array"} and value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value, strict=False)  # as parse_arguments reads model text
        except json.JSONDecodeError:
            return value
        if ("object" in types and isinstance(parsed, dict)) or (
            "array" in types and isinstance(parsed, list)
        ):
            return parsed
    return value


def _problems(error: jsonschema.exceptions.ValidationError) -> list[ArgumentProblem]:
    path = "".join(f"/{p}" for p in error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if error.message.count("'") >= 2 else "?"
        return [
            ArgumentProblem(path=f"{path}/{missing}", expected="a value (required)", got="nothing")
        ]
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        # One problem per unexpected property, at its own path, naming what is declared.
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        declared = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        expected = (
            "no such property (declared: " + ", ".join(declared) + ")"
            if declared
            else "no properties"
        )
        extras = [
            key
            for key in error.instance
            if key not in declared and not any(_pattern_matches(p, key) for p in patterns)
        ]
        return [
            ArgumentProblem(
                path=f"{path}/{_pointer_part(key)}",
                expected=expected,
                got=_describe(error.instance[key]),
            )
            for key in extras
        ] or [ArgumentProblem(path=path, expected=expected, got=error.message)]
    return [ArgumentProblem(path=path, expected=_expected(error), got=_describe(error.instance))]


@functools.lru_cache(maxsize=1024)
def _linear(pattern: str) -> LinearRegex | None:
    """A schema's pattern compiled by RE2; None when RE2 cannot evaluate it or its program is
    over :data:`MAX_SCHEMA_PATTERN_PROGRAM` instructions (not enforced here)."""
    from sagents.sandbox._patterns import compile_regex  # schemas with patterns only: import cost

    try:
        regex = compile_regex(pattern)
    except ValueError:
        return None
    return regex if regex.programsize <= MAX_SCHEMA_PATTERN_PROGRAM else None


def _schema_patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` key of ``schema`` (a string under a key
    ``pattern`` elsewhere, in a ``default``, is counted too: counting more only costs more)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    yield value
                elif key == "patternProperties" and isinstance(value, Mapping):
                    yield from (each for each in value if isinstance(each, str))
                    stack.extend(value.values())
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def _text_chars(value: Any, enough: int) -> int:
    """The characters of the strings and keys in ``value``, counted until ``enough``."""
    total = 0
    stack = [value]
    while stack and total < enough:
        node = stack.pop()
        if isinstance(node, str):
            total += len(node)
        elif isinstance(node, Mapping):
            for key, item in node.items():
                total += len(key) if isinstance(key, str) else 0
                stack.append(item)
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return total


def _pattern_matches(pattern: Any, text: str) -> bool:
    """``re.search`` semantics in linear time; a pattern RE2 cannot evaluate matches."""
    regex = _linear(pattern) if isinstance(pattern, str) else None
    return regex is None or regex.search(text) is not None


def _pattern_keyword(
    validator: Validator, pattern: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.exceptions.ValidationError]:
    """``pattern``, as the ``jsonschema`` package checks it, in linear time."""
    import jsonschema.exceptions

    if validator.is_type(instance, "string") and not _pattern_matches(pattern, instance):
        yield jsonschema.exceptions.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties_keyword(
    validator: Any, patterns: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.exceptions.ValidationError]:
    """``patternProperties`` in linear time (a pattern RE2 cannot evaluate applies to none)."""
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _linear(pattern)
        for key, value in instance.items():
            if regex is not None and regex.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties_keyword(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.exceptions.ValidationError]:
    """``additionalProperties`` with ``patternProperties`` matched in linear time."""
    import jsonschema.exceptions

    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in declared and not any(_pattern_matches(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(each) for each in sorted(extras, key=str))
        yield jsonschema.exceptions.ValidationError(
            f"Additional properties are not allowed ({listed} unexpected)"
        )


def _pointer_part(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _expected(error: jsonschema.exceptions.ValidationError) -> str:
    keyword = str(error.validator)
    wanted = error.validator_value
    if keyword == "type":
        return " or ".join(wanted) if isinstance(wanted, list) else str(wanted)
    if keyword == "enum" and isinstance(wanted, list):
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in wanted)
    if keyword in ("anyOf", "oneOf"):
        return f"a value matching {keyword} of the schema"
    return f"{keyword} {json.dumps(wanted, ensure_ascii=False, default=str)[:80]}"


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({json_type(value)})"


# An upper bound of the JSON size of a scalar or short string, without serialising it: a
# character takes at most 6 bytes (an escape such as \u0001), plus the quotes.
_SMALL_SCALARS = frozenset({bool, type(None), float})
_SMALL_ENOUGH = 64 * 1024  # flat arguments below this bound skip the exact measurement


def _surely_small(args: Mapping[str, Any]) -> bool:
    """True when a flat arguments object is certainly far below :data:`MAX_ARGUMENTS_BYTES`.

    Only the common shape is bounded here (string keys, values that are numbers, booleans,
    null or strings); anything nested is measured exactly by :func:`_json_size`.
    """
    bound = 2
    for key, value in args.items():
        if type(key) is not str:
            return False
        kind = type(value)
        if kind is str:
            bound += 6 * len(value) + 2
        elif kind is int:
            if not -(2**63) < value < 2**63:
                return False
            bound += 20
        elif kind in _SMALL_SCALARS:
            bound += 25
        else:
            return False
        bound += 6 * len(key) + 4
        if bound > _SMALL_ENOUGH:
            return False
    return True


class ScalarParameters:
    """The parameters of a tool that takes only bare scalars, for a one-pass check of a call's
    arguments, then the compiled schema check.

    Made for a tool whose every parameter pydantic returns unchanged when it gets a value of
    exactly its type (``LocalTool.bind_valid``): for such a tool, :meth:`accepts` stands for
    :func:`parse_arguments` (the size bound), the copy, the validation and the binding together,
    so that a call costs one loop over the arguments and the compiled schema check. Anything it
    does not accept takes the general path, which gives every error message.

    Args:
        kinds: Parameter name -> the exact value types accepted as they are (scalars only).
        validator: The tool's validator, whose :meth:`ArgumentValidator.is_valid` has the last
            word; None to make only the one-pass check.
    """

    __slots__ = ("_bound", "_kinds", "_validator")

    def __init__(
        self, kinds: Mapping[str, frozenset[type]], validator: ArgumentValidator | None = None
    ) -> None:
        self._kinds = dict(kinds)
        # What _surely_small counts for everything but the strings' own characters: the braces,
        # each key (6 bytes a character at most, quotes, colon, comma) and a scalar value.
        self._bound = 2 + sum(6 * len(name) + 4 + 25 for name in kinds)
        self._validator = validator

    def accepts(self, arguments: dict[str, Any]) -> bool:
        """True when each argument names a parameter, each value is of exactly one of its
        parameter's types (an ``int`` within 64 bits), the whole is surely far below
        :data:`MAX_ARGUMENTS_BYTES`, and the validator (if any) finds them valid as they are."""
        kinds, bound = self._kinds, self._bound
        for key, value in arguments.items():
            kind = type(value)
            if kind not in kinds.get(key, ()):
                return False
            if kind is str:
                bound += 6 * len(value)
            elif kind is int and not -(2**63) < value < 2**63:
                return False
        if bound > _SMALL_ENOUGH:
            return False
        validator = self._validator
        return validator is None or (
            not validator.costly(arguments) and validator.is_valid(arguments)
        )


def _json_size(args: Mapping[str, Any]) -> int:
    try:
        return len(json.dumps(args, ensure_ascii=False, default=str).encode())
    except (TypeError, ValueError):
        return 0  # not JSON (a cycle, ...): validation reports it


def _invalid(tool_name: str, problems: list[ArgumentProblem]) -> InvalidArgumentsError:
    shown = problems[:MAX_REPORTED_PROBLEMS]
    more = len(problems) - len(shown)
    listing = "; ".join(str(p) for p in shown) + (f"; and {more} more" if more else "")
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    return InvalidArgumentsError(
        f"invalid arguments for tool {tool_name!r} ({count}): {listing}",
        hint="Fix the listed arguments to match the tool's parameters and call it again.",
        details={"problems": [p.to_dict() for p in shown]},
    )


def _not_an_object(tool_name: str, value: Any) -> InvalidArgumentsError:
    problem = ArgumentProblem(path="", expected="a JSON object", got=_describe(value))
    return _invalid(tool_name, [problem])


def _refuse_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON (RFC 8259); Python's parser accepts them by default."""
    raise _NotJsonConstantError(f"{name} is not a JSON value")


class _NotJsonConstantError(ValueError):
    """Raised by :func:`_refuse_constant` inside ``json.loads``."""


def _too_deep(tool_name: str) -> InvalidArgumentsError:
    return InvalidArgumentsError(
        f"arguments for tool {tool_name!r} are nested too deeply to be parsed",
        hint="Send flatter arguments, or pass deep data by reference (a file path or URL).",
        details={"problems": [{"path": "", "expected": "less nesting", "got": "too deep"}]},
    )


def _too_large(tool_name: str, size: int) -> InvalidArgumentsError:
    return InvalidArgumentsError(
        f"arguments for tool {tool_name!r} are too large: {size:,} bytes "
        f"(the limit is {MAX_ARGUMENTS_BYTES:,} bytes)",
        hint="Pass large data by reference (a file path or URL) instead of inline.",
        details={"problems": [{"path": "", "expected": "a smaller document", "got": f"{size}"}]},
    )
