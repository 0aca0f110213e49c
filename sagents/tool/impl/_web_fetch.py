"""``web_fetch``: fetch a URL on the host, behind the address guard, and return its text as
markdown, plain text or HTML (docs/builtin_tools.md).

The fetch runs in the host process (the sandbox has no network); the sandbox only receives what
the call saves with ``save_to``. Every hop of a redirect chain is checked again (scheme, domain
lists, addresses) with a bounded count; credentials of the first URL never leave its origin;
bodies are read as raw bytes and decompressed here with a bounded output, so a small
compressed body cannot expand past ``max_bytes`` in memory (a decompression bomb).
"""

from __future__ import annotations

import base64
import posixpath
import re
import ssl
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom

from sagents.core._result import TextContent, ToolResult
from sagents.errors import NotAllowedError, UrlNotAllowedError, WebFetchError
from sagents.sandbox import Sandbox
from sagents.tool._context import SessionContext
from sagents.tool._conversation import conversation_of, urls_given
from sagents.tool.impl._netguard import (
    AddressGuard,
    PinnedTransport,
    Resolver,
    domain_matches,
    system_resolver,
)

__all__ = [
    "FetchedPage",
    "WebFetchSettings",
    "WebFetcher",
    "check_seen",
    "html_to_markdown",
    "html_to_text",
]

Format = Literal["markdown", "text", "html"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")
_CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")
_PARSER = "lxml"  # BeautifulSoup's libxml2 parser: several times faster than html.parser
_SNIFF_BYTES = 1024  # the HTML meta prescan looks this far (WHATWG HTML, "prescan a byte stream")


@dataclass(frozen=True, kw_only=True)
class WebFetchSettings:
    """Policy and caps of ``web_fetch``.

    Attributes:
        allow_networks: CIDR networks allowed although refused by default (loopback, private...).
        allow_hosts: Host names allowed whatever they resolve to.
        allow_domains: When not empty, only these domains (and their subdomains) are fetched.
        deny_domains: Never fetched (subdomains too); wins over ``allow_domains``.
        max_redirects: Redirect hops followed at most.
        max_bytes: Body bytes kept at most, after decompression; the rest is not read.
        timeout_seconds: The whole fetch, redirects included.
        connect_timeout_seconds: One connection.
        default_max_chars / max_chars_limit: Characters returned when the call does not say,
            and the most a call may ask for.
        user_agent: The ``User-Agent`` header.
        resolver: ``(host, port) -> addresses`` (the system's; tests pass their own).
        ssl_context: Verifies servers' certificates (default: the certifi bundle); an intranet
            with its own CA, or a test, passes its own.
        seen_urls_only: Fetch only URLs that already appeared in the conversation, in a user
            message or a tool result (never only in the model's own text or arguments); off
            by default. Needs a host that shows the tool its conversation (the agent loop).
    """

    allow_networks: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    max_redirects: int = 5
    max_bytes: int = 5 * 1024 * 1024
    timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    default_max_chars: int = 20_000
    max_chars_limit: int = 200_000
    user_agent: str = "sagents-web-fetch/1 (+https://github.com/sagents)"
    resolver: Resolver = field(default=system_resolver, compare=False)
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    seen_urls_only: bool = False

    def __post_init__(self) -> None:
        for name in ("max_bytes", "timeout_seconds", "connect_timeout_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"web_fetch setting {name!r} must be positive")
        if self.max_redirects < 0:
            raise ValueError("web_fetch setting 'max_redirects' must be 0 or more")
        AddressGuard(allow_networks=self.allow_networks)  # fails early on a bad CIDR


@dataclass(frozen=True, kw_only=True)
class FetchedPage:
    """What one fetch brought back (before conversion).

    Attributes:
        url: The URL asked for. final_url: the one that answered (after redirects).
        status: HTTP status of the final response. content_type: its media type, lower case.
        body: The body, decompressed, at most ``max_bytes``. body_truncated: more was sent.
        charset: The Python codec of the text, chosen as browsers choose it
            (:func:`page_encoding`).
        redirects: The URLs followed, in order.
        address: The address the final response came from.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes
    body_truncated: bool
    charset: str
    redirects: tuple[str, ...]
    address: str | None


def html_to_markdown(html: str) -> tuple[str | None, str]:
    """``(title, markdown)`` of an HTML document (scripts, styles and the head dropped)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, _PARSER)
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    markdown = MarkdownConverter(heading_style="ATX", strip=["img"]).convert_soup(soup)
    return title or None, re.sub(r"\n{3,}", "\n\n", markdown).strip()


def html_to_text(html: str) -> tuple[str | None, str]:
    """``(title, text)`` of an HTML document."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, _PARSER)
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    text = soup.get_text("\n")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return title or None, re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _same_url(url: str) -> str | None:
    """``url`` in the form two spellings of one URL share (no fragment, ``/`` for an empty
    path, lower-case scheme and host, no default port), or None when it is not a URL."""
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL:
        return None
    if not parsed.path:
        parsed = parsed.copy_with(path="/")
    return str(parsed.copy_with(fragment=None))


def check_seen(url: str, context: SessionContext) -> None:
    """Refuse ``url`` unless its first appearance in the call's conversation is in a user
    message or a tool result (never one the assistant wrote first: :func:`urls_given`). The
    refusal does not quote the URL, so that it cannot make the URL appear in a tool result.

    Raises:
        UrlNotAllowedError: the URL was not given so, or the host shows no conversation.
    """
    conversation = conversation_of(context)
    if conversation is None:
        raise UrlNotAllowedError(
            "web_fetch fetches only URLs that appeared in the conversation, and this host "
            "shows it no conversation",
            hint="the operator can turn off webFetch.seenUrlsOnly",
        )
    wanted = _same_url(url)
    if wanted is None or wanted not in urls_given(conversation.messages, same=_same_url):
        raise UrlNotAllowedError(
            "this URL has not appeared in the conversation as the user or a tool result gave "
            "it: web_fetch fetches only URLs whose first appearance is in a user message or a "
            "tool result, never one the assistant wrote first",
            hint="fetch a URL exactly as the user or a tool result wrote it, or ask the user "
            "for it",
        )


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


class _BoundedDecoder:
    """Decompresses a ``Content-Encoding`` body chunk by chunk, never producing more than the
    bytes still wanted (zlib's ``max_length``), so output memory is bounded by the cap."""

    def __init__(self, encoding: str, url: str) -> None:
        encoding = encoding.strip().lower()
        self._raw_fallback = encoding == "deflate"  # some servers send raw deflate (RFC 1951)
        if encoding in ("", "identity"):
            self._zlib = None
        elif encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise WebFetchError(
                f"{url!r} answered with Content-Encoding {encoding!r}, which web_fetch does not "
                "decode",
                details={"url": url},
            )

    def feed(self, chunk: bytes, wanted: int) -> bytes:
        if self._zlib is None:
            return chunk[:wanted]
        try:
            out = self._zlib.decompress(chunk, wanted)
        except zlib.error as error:
            if not self._raw_fallback:
                raise WebFetchError(f"corrupt compressed body: {error}") from error
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            self._raw_fallback = False
            return self.feed(chunk, wanted)
        self._raw_fallback = False
        return out


class WebFetcher:
    """Fetches URLs under one :class:`WebFetchSettings`.

    Per-session narrowing: a session's ``SessionContext.trusted`` may hold
    ``web_fetch_allow_domains`` and ``web_fetch_deny_domains`` (lists of domains); they apply
    on top of the settings (a session can only narrow what the operator allowed).
    """

    def __init__(self, settings: WebFetchSettings | None = None) -> None:
        self.settings = settings or WebFetchSettings()

    def _check_url(self, url: httpx2.URL, context: SessionContext | None) -> None:
        """Refuse a URL of another scheme, without a host, or of a domain the settings or the
        session exclude; the refusal names the part at fault, never the whole URL (its text
        must not make the URL appear in a tool result: :func:`check_seen`)."""
        text = str(url)
        if url.scheme not in ("http", "https"):
            raise UrlNotAllowedError(
                f"only http and https URLs are fetched, not {url.scheme!r}",
                details={"url": text},
            )
        host = url.host
        if not host:
            raise UrlNotAllowedError("the URL has no host", details={"url": text})
        allow: list[Sequence[str]] = [self.settings.allow_domains]
        deny: list[str] = list(self.settings.deny_domains)
        if context is not None:
            allow.append(tuple(context.trusted.get("web_fetch_allow_domains", ()) or ()))
            deny.extend(context.trusted.get("web_fetch_deny_domains", ()) or ())
        if domain_matches(host, deny):
            raise UrlNotAllowedError(
                f"the domain {host!r} is denied for this session",
                details={"url": text, "host": host},
            )
        for allowed in allow:
            if allowed and not domain_matches(host, allowed):
                raise UrlNotAllowedError(
                    f"the domain {host!r} is not in this session's allowed domains "
                    f"({', '.join(allowed)})",
                    details={"url": text, "host": host},
                )

    async def fetch(self, url: str, context: SessionContext | None = None) -> FetchedPage:
        """Fetch ``url`` (GET), following checked redirects.

        Raises:
            UrlNotAllowedError: the URL, a redirect target or an address is refused.
            WebFetchError: too many redirects, an unreadable body, a network failure.
            ToolTimeoutError: via the caller's timeout; the fetch's own cap raises
                ``WebFetchError``.
        """
        settings = self.settings
        try:
            current = httpx2.URL(url)
        except httpx2.InvalidURL as error:
            raise WebFetchError(f"the URL is not valid: {error}", details={"url": url}) from error
        guard = AddressGuard(
            allow_networks=settings.allow_networks,
            allow_hosts=settings.allow_hosts,
            resolver=settings.resolver,
        )
        transport = PinnedTransport(
            guard, settings.ssl_context or httpx2.create_ssl_context(trust_env=False)
        )
        timeout = httpx2.Timeout(settings.timeout_seconds, connect=settings.connect_timeout_seconds)
        first_origin = None
        redirects: list[str] = []
        try:
            with anyio.fail_after(settings.timeout_seconds):
                async with httpx2.AsyncClient(
                    transport=transport, timeout=timeout, trust_env=False, follow_redirects=False
                ) as client:
                    headers: dict[str, str] = {
                        "User-Agent": settings.user_agent,
                        "Accept-Encoding": "gzip, deflate",
                        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
                    }
                    if current.userinfo:
                        pair = f"{current.username}:{current.password}".encode()
                        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
                        current = current.copy_with(username=None, password=None)
                    first_origin = _origin(current)
                    while True:
                        self._check_url(current, context)
                        hop_headers = dict(headers)
                        if _origin(current) != first_origin:
                            for name in list(hop_headers):
                                if name.lower() in _CREDENTIAL_HEADERS:
                                    del hop_headers[name]
                        request = client.build_request("GET", current, headers=hop_headers)
                        response = await client.send(request, stream=True)
                        try:
                            location = response.headers.get("location")
                            if response.status_code in _REDIRECTS and location:
                                target = current.join(location)
                                if len(redirects) >= settings.max_redirects:
                                    raise WebFetchError(
                                        f"{url!r} redirected more than "
                                        f"{settings.max_redirects} times",
                                        details={"url": url, "redirects": redirects},
                                    )
                                if target.userinfo:
                                    target = target.copy_with(username=None, password=None)
                                redirects.append(str(target))
                                current = target
                                continue
                            return await self._read(url, response, redirects, guard)
                        finally:
                            await response.aclose()
        except TimeoutError as error:
            raise WebFetchError(
                f"fetching {url!r} took longer than {settings.timeout_seconds:g} s",
                hint="try again later, or a smaller page",
                details={"url": url},
            ) from error
        except httpx2.TimeoutException as error:
            raise WebFetchError(
                f"fetching {url!r} timed out ({type(error).__name__})", details={"url": url}
            ) from error
        except httpx2.HTTPError as error:
            raise WebFetchError(
                f"fetching {url!r} failed: {error}", details={"url": url}
            ) from error

    async def _read(
        self,
        url: str,
        response: httpx2.Response,
        redirects: list[str],
        guard: AddressGuard,
    ) -> FetchedPage:
        cap = self.settings.max_bytes
        decoder = _BoundedDecoder(response.headers.get("content-encoding", ""), url)
        parts: list[bytes] = []
        size = 0
        truncated = False
        async for chunk in response.aiter_raw():
            out = decoder.feed(chunk, cap + 1 - size)
            parts.append(out)
            size += len(out)
            if size > cap:
                truncated = True
                break
        body = b"".join(parts)[:cap]
        content_type = response.headers.get("content-type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        charset = page_encoding(content_type, body)
        last = guard.connections[-1][2] if guard.connections else None
        return FetchedPage(
            url=url,
            final_url=str(response.url),
            status=response.status_code,
            content_type=media,
            body=body,
            body_truncated=truncated,
            charset=charset,
            redirects=tuple(redirects),
            address=last,
        )

    async def run(
        self,
        *,
        url: str,
        format: Format,
        max_chars: int | None,
        save_to: str | None,
        context: SessionContext,
        sandbox: Sandbox | None,
    ) -> ToolResult:
        """The ``web_fetch`` tool: fetch, convert, truncate, optionally save."""
        if self.settings.seen_urls_only:
            check_seen(url, context)
        if save_to is not None:
            if context.permission_mode == "read_only":
                raise NotAllowedError(
                    "save_to writes a workspace file, which a read_only session may not do",
                    hint="call web_fetch without save_to",
                )
            if sandbox is None:
                raise NotAllowedError("save_to needs a sandbox, and this host has none")
        page = await self.fetch(url, context)
        limit = min(max_chars or self.settings.default_max_chars, self.settings.max_chars_limit)
        title, content = await anyio.to_thread.run_sync(_convert, page, format)  # CPU-bound
        total = len(content)
        shown = content[:limit]
        saved_path = None
        if save_to is not None and sandbox is not None:
            parent = posixpath.dirname(save_to)
            if parent:
                await sandbox.mkdir(parent, parents=True)
            saved_path = await sandbox.write_file(save_to, page.body)
        notes = []
        if total > limit:
            notes.append(
                f"[... {total - limit:,} more characters not shown ({total:,} in all); "
                "pass a larger max_chars or save_to to keep the whole body ...]"
            )
        if page.body_truncated:
            notes.append(f"[... the body was cut at {self.settings.max_bytes:,} bytes ...]")
        header = [f"URL: {page.final_url}", f"Status: {page.status}"]
        if title:
            header.insert(0, f"Title: {title}")
        header.append(f"Content-Type: {page.content_type or 'unknown'}")
        if saved_path:
            header.append(f"Saved: {saved_path} ({len(page.body):,} bytes)")
        text = "\n".join(header) + "\n\n" + shown + ("\n" + "\n".join(notes) if notes else "")
        structured: Mapping[str, Any] = {
            "url": page.url,
            "final_url": page.final_url,
            "status": page.status,
            "title": title,
            "content_type": page.content_type,
            "format": format,
            "content": shown,
            "truncated": total > limit,
            "total_chars": total,
            "bytes": len(page.body),
            "body_truncated": page.body_truncated,
            "redirects": list(page.redirects),
            "saved_path": saved_path,
        }
        return ToolResult(
            content=(TextContent(text=text),),
            structured=dict(structured),
            is_error=page.status >= 400,
        )


def _is_text(media: str) -> bool:
    return media == "" or media.startswith(_TEXT_TYPES) or media.endswith(("+json", "+xml"))


def page_encoding(content_type: str, body: bytes) -> str:
    """The Python codec to decode a page with, as browsers choose it (the WHATWG Encoding
    Standard, "decode", and HTML's encoding sniffing): a byte order mark, else the
    ``Content-Type`` charset, else (HTML) a ``<meta>`` charset in the first 1,024 bytes, else
    UTF-8. Labels mean what they mean to a browser (``iso-8859-1`` and ``ascii`` are
    windows-1252, ``gb2312`` is GBK, read by its superset GB 18030); an unknown label is
    skipped. The label table is w3lib's (the Scrapy project's), kept to the standard.

    Args:
        content_type: The ``Content-Type`` header as sent ("" when there is none).
        body: The body (its first bytes are enough).
    """
    bom, _ = read_bom(body)
    if bom is not None:
        return bom
    declared = http_content_type_encoding(content_type or None)
    media = content_type.split(";", 1)[0].strip().lower()
    if declared is None and ("html" in media or not media):
        declared = html_body_declared_encoding(body[:_SNIFF_BYTES])  # resolved, or None
    return declared or "utf-8"


def _convert(page: FetchedPage, format: Format) -> tuple[str | None, str]:
    if not _is_text(page.content_type):
        return None, (
            f"[binary content of type {page.content_type!r}, {len(page.body):,} bytes; "
            "pass save_to to store it in the workspace]"
        )
    _, bom = read_bom(page.body)
    text = page.body[len(bom or b"") :].decode(page.charset, errors="replace")
    is_html = "html" in page.content_type or (
        page.content_type == "" and text.lstrip()[:15].lower().startswith(("<!doctype", "<html"))
    )
    if not is_html or format == "html":
        if is_html:
            from bs4 import BeautifulSoup

            soup = BeautifulSoup(text, _PARSER)
            title = soup.title.get_text(" ", strip=True) if soup.title else None
            return title or None, text
        return None, text
    if format == "text":
        return html_to_text(text)
    return html_to_markdown(text)
