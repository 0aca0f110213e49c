"""The fd 3/4 wire format: strict parsing, round trips (property-tested)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.script import _protocol as p

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=60)
@given(args=st.dictionaries(st.text(), json_values, max_size=5), request_id=st.integers())
def test_a_call_request_round_trips(args: dict[str, Any], request_id: int) -> None:
    line = p.encode_line({"id": request_id, "op": "call", "tool": "t", "args": args})
    request = p.parse_request(line)
    assert request == p.CallRequest(id=request_id, tool="t", args=args)


@settings(max_examples=60)
@given(value=json_values)
def test_an_ok_reply_round_trips(value: Any) -> None:
    assert p.parse_reply(p.encode_ok_reply(3, value)) == (3, True, value)


@settings(max_examples=60)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_parse_or_raise_protocol_error(data: bytes) -> None:
    try:
        p.parse_request(data)
        code = "parsed"
    except p.ProtocolError as error:
        code = error.code
    assert code in {"parsed", "invalid_json", "bad_request", "unknown_op"}


def test_lone_surrogates_are_encoded_as_valid_json() -> None:
    line = p.encode_ok_reply(1, {"text": "\ud800"})
    assert line.isascii()
    assert p.parse_reply(line) == (1, True, {"text": "\ud800"})


def test_nan_in_a_reply_is_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="JSON"):
        p.encode_ok_reply(1, math.nan)


def test_error_replies_carry_code_and_message() -> None:
    line = p.encode_error_reply(None, "not_allowed", "no")
    assert p.parse_reply(line) == (None, False, {"code": "not_allowed", "message": "no"})


def test_progress_messages_are_cut_and_ids_optional() -> None:
    notice = p.parse_request(p.encode_line({"op": "progress", "done": 1, "message": "m" * 5000}))
    assert isinstance(notice, p.ProgressNotice)
    assert notice.id is None
    assert len(notice.message or "") == p.MAX_MESSAGE_CHARS


@pytest.mark.parametrize("bad_id", ["", "x" * 65, 1.5, None, [1]])
def test_ill_typed_ids_are_refused(bad_id: Any) -> None:
    with pytest.raises(p.ProtocolError, match="'id'"):
        p.parse_request(p.encode_line({"id": bad_id, "op": "tools"}))


def test_a_reply_without_ok_is_refused() -> None:
    with pytest.raises(p.ProtocolError):
        p.parse_reply(b'{"id": 1}\n')


def test_the_protocol_module_imports_only_the_standard_library() -> None:
    import ast
    import sys
    from pathlib import Path

    tree = ast.parse(Path(p.__file__).read_text())
    imported = {
        (node.module or "").split(".")[0]
        if isinstance(node, ast.ImportFrom)
        else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def _reference_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The strict hook as first written: one key at a time."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reference_decode(line: bytes) -> Any:
    try:
        return json.loads(
            line.decode("utf-8"),
            parse_constant=p._refuse_constant,
            object_pairs_hook=_reference_object,
        )
    except ValueError as error:
        return ("invalid_json", f"invalid JSON: {error}")


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": 1, "op": "call", "id": 2}',
        b'{"id": 1, "op": "call", "tool": "t", "args": {"sn": "a", "sn": "b"}}',
        b'{"id": 1, "op": "call", "tool": "t", "args": {"rows": [1, {"k": 1, "k": 1}]}}',
        b'{"id": 1, "op": "call", "tool": "t", "args": {"a": 1, "\\u0061": 2}}',
        b'{"id": 1, "op"  :  "call", "tool": "t", "args": {"x" :1, "x":2}}',
    ],
)
def test_duplicate_keys_anywhere_are_refused_naming_the_key(line: bytes) -> None:
    with pytest.raises(p.ProtocolError) as caught:
        p.parse_request(line)
    assert caught.value.code == "invalid_json"
    assert caught.value.message == _reference_decode(line)[1]
    assert "duplicate key" in caught.value.message


KEYS = st.sampled_from(["a", "b", "id", "\u00e9", "\\u0061"])
HOSTILE_OBJECTS = st.recursive(
    st.sampled_from(["1", "null", '"a"', "[]", "{}"]),
    lambda inner: (
        st.lists(st.tuples(KEYS, inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f'"{k}" : {v}' for k, v in pairs) + "}"
        )
        | st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
    ),
    max_leaves=12,
)


@given(HOSTILE_OBJECTS)
def test_strict_decoding_agrees_with_the_key_by_key_hook(text: str) -> None:
    line = text.encode()
    expected = _reference_decode(line)
    try:
        decoded: Any = p.decode_line(line, max_bytes=p.MAX_REQUEST_BYTES)
    except p.ProtocolError as error:
        decoded = (error.code, error.message)
    assert decoded == expected


@given(json_values)
def test_a_line_is_encoded_as_json_dumps_encodes_it(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert p.encode_line(value) == expected.encode() + b"\n"


@pytest.mark.parametrize(
    "line",
    [b"\xef\xbb\xbf{}", b"", b"{} x", b'{"a": NaN}', b'{"a": 1,}', b"[1", b'"\\ud800"x'],
)
def test_strict_decoding_reports_errors_in_the_words_of_json_loads(line: bytes) -> None:
    with pytest.raises(p.ProtocolError) as caught:
        p.decode_line(line, max_bytes=p.MAX_REQUEST_BYTES)
    assert caught.value.message == _reference_decode(line)[1]
