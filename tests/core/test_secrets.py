"""The Redactor: a secret is replaced as it is and in the encodings a leak takes."""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.core._result import EmbeddedResource, ErrorInfo, TextContent, ToolResult
from sagents.core._secrets import MIN_SECRET_CHARS, RedactingFilter, Redactor

SECRET = "s3cr3t/Token+Value=42"
MARK = "[redacted:API_TOKEN]"


def test_a_secret_is_replaced_as_it_is_url_encoded_json_escaped_and_in_base64() -> None:
    redactor = Redactor({"API_TOKEN": SECRET})
    basic = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    texts = [
        f"token={SECRET}",
        f"url=https://x/?t={urllib.parse.quote(SECRET, safe='')}",
        f"form={urllib.parse.quote_plus(SECRET)}",
        json.dumps({"t": SECRET + '"'}),
        f"Authorization: Basic {basic}",
        base64.urlsafe_b64encode(b"xy" + SECRET.encode()).decode(),
    ]
    redacted = [redactor.redact(text) for text in texts]
    for text in redacted:
        assert MARK in text, text
        assert SECRET not in text
    assert redacted[0] == f"token={MARK}"


def test_a_secret_url_encoded_with_lowercase_hex_is_replaced_too() -> None:
    # RFC 3986 section 2.1: the hex digits of a percent-encoding may be upper- or lowercase
    # (Python and JavaScript write uppercase; Go's and several HTTP clients' encoders lowercase)
    redactor = Redactor({"API_TOKEN": SECRET})
    lowered = urllib.parse.quote(SECRET, safe="").replace("%2F", "%2f").replace("%2B", "%2b")
    lowered = lowered.replace("%3D", "%3d")
    assert lowered != urllib.parse.quote(SECRET, safe="")
    assert redactor.redact(f"url=https://x/?t={lowered}") == f"url=https://x/?t={MARK}"


@given(prefix=st.binary(max_size=7), suffix=st.binary(max_size=7), secret=st.text(min_size=8))
def test_a_secret_inside_any_base64_text_is_found(
    prefix: bytes, suffix: bytes, secret: str
) -> None:
    redactor = Redactor({"S": secret})
    encoded = base64.b64encode(prefix + secret.encode() + suffix).decode()
    assert "[redacted:S]" in redactor.redact(encoded)


def test_short_values_are_not_redacted_and_other_text_is_the_same_object() -> None:
    redactor = Redactor({"DEBUG": "1", "HOME": "/root", "API_TOKEN": SECRET})
    text = "1 /root nothing secret here"
    assert redactor.names == ("API_TOKEN",)
    assert redactor.redact(text) is text
    assert len("/root") < MIN_SECRET_CHARS


def test_a_result_is_redacted_in_its_text_structured_content_and_error() -> None:
    redactor = Redactor([("API_TOKEN", SECRET)])
    result = ToolResult(
        content=(TextContent(text=f"env: {SECRET}"),),
        structured={"env": {"TOKEN": SECRET}, "list": [SECRET, 1]},
        is_error=True,
        error=ErrorInfo(code="execution_error", message=f"bad {SECRET}", hint=SECRET),
    )
    clean = ToolResult(content=(TextContent(text="fine"),), structured={"a": "b"})
    redacted = redactor.result(result)
    assert SECRET not in repr(redacted)
    assert redacted.structured == {"env": {"TOKEN": MARK}, "list": [MARK, 1]}
    assert redacted.error is not None
    assert (redacted.error.message, redacted.error.hint) == (f"bad {MARK}", MARK)
    assert redactor.result(clean) is clean


def test_the_log_filter_redacts_messages_arguments_and_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler_filter = RedactingFilter(Redactor({"API_TOKEN": SECRET}))
    logger = logging.getLogger("tests.secrets")
    caplog.handler.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="tests.secrets"):
            logger.info("header was %s", SECRET)
            try:
                raise ValueError(SECRET)
            except ValueError:
                logger.exception("failed")
    finally:
        caplog.handler.removeFilter(handler_filter)
    assert SECRET not in caplog.text
    assert caplog.text.count(MARK) == 2


def test_an_embedded_blob_is_redacted_in_its_bytes_and_stays_base64() -> None:
    # A server returning its environment as a text/plain blob: what a client decodes and shows
    # the model must not hold the secret, and the blob must still decode.
    redactor = Redactor({"API_TOKEN": SECRET})
    blob = base64.b64encode(f"TOKEN={SECRET}\n".encode()).decode()
    other = base64.b64encode(b"\x89PNG no secret here").decode()
    result = ToolResult(
        content=(
            EmbeddedResource(uri="file:///env", mime_type="text/plain", blob=blob),
            EmbeddedResource(uri="file:///logo", mime_type="image/png", blob=other),
        )
    )
    redacted = redactor.result(result)
    first, second = redacted.content
    assert isinstance(first, EmbeddedResource)
    assert first.blob is not None
    assert base64.b64decode(first.blob, validate=True) == f"TOKEN={MARK}\n".encode()
    assert second is result.content[1]  # nothing in it: the same block
