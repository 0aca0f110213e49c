"""web_fetch reads a page's text the way browsers do (the WHATWG Encoding Standard): labels
map as the standard says, a byte order mark wins, then the header, then ``<meta>``."""

from __future__ import annotations

import pytest

from sagents.tool.impl._web_fetch import page_encoding
from tests.tool.impl.test_web_fetch import LOOPBACK_OK, Server, _fetch, _send, server

pytestmark = pytest.mark.anyio

__all__ = ["server"]  # the fixture, used by name

# Curly quotes, the euro sign and dashes: windows-1252 bytes 0x80-0x9f, C1 controls in Latin-1.
WESTERN = "\u201cquoted\u201d costs \u20ac5 \u2013 or \u2014 more"
# 镕 and 喆 are in GBK but not in GB 2312: a page labelled gb2312 that is really GBK.
CHINESE = "\u9555\u5586 \u6c49\u5b57"


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/html; charset=iso-8859-1", WESTERN.encode("cp1252"), WESTERN),
        ("text/plain; charset=ascii", WESTERN.encode("cp1252"), WESTERN),
        ("text/plain; charset=latin1", WESTERN.encode("cp1252"), WESTERN),
        ("text/html; charset=gb2312", CHINESE.encode("gbk"), CHINESE),
        ("text/html; charset=GB_2312-80", CHINESE.encode("gbk"), CHINESE),
        ("text/html; charset=x-sjis", "\u65e5\u672c\u8a9e".encode("cp932"), "\u65e5\u672c\u8a9e"),
        ("text/html; charset=euc-kr", "\ud55c\uad6d\uc5b4".encode("cp949"), "\ud55c\uad6d\uc5b4"),
    ],
)
async def test_a_pages_charset_label_means_what_it_means_to_a_browser(
    server: Server, content_type: str, body: bytes, expected: str
) -> None:
    server.routes["/p"] = lambda h: _send(h, body, content_type)
    data, _, is_error, _ = await _fetch(
        LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/p", format="text"
    )
    assert not is_error
    content = str(data["content"])
    assert expected in content
    assert not any("\x80" <= ch <= "\x9f" for ch in content)  # no C1 control characters
    assert "\ufffd" not in content


async def test_a_meta_charset_is_read_when_the_header_has_none(server: Server) -> None:
    page = b'<html><head><meta charset="gb2312"><title>t</title></head><body><p>'
    page += CHINESE.encode("gbk") + b"</p></body></html>"
    server.routes["/p"] = lambda h: _send(h, page, "text/html")
    data, _, is_error, _ = await _fetch(
        LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/p", format="text"
    )
    assert not is_error
    assert CHINESE in str(data["content"])


def test_a_byte_order_mark_wins_over_the_header_and_is_not_in_the_text() -> None:
    assert page_encoding("text/html; charset=iso-8859-1", b"\xef\xbb\xbfhi") == "utf-8"
    assert page_encoding("text/plain", "hi".encode("utf-16")) in ("utf-16-le", "utf-16")


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [("text/html; charset=no-such-label", "utf-8"), ("", "utf-8"), ("text/plain", "utf-8")],
)
def test_an_unknown_or_missing_label_falls_back_to_utf8(content_type: str, expected: str) -> None:
    assert page_encoding(content_type, b"plain") == expected


def test_a_meta_charset_of_a_plain_text_page_is_not_read() -> None:
    assert page_encoding("text/plain", b'<meta charset="gb2312">') == "utf-8"
