"""A profile's ``resources`` patterns, matched against normalised URIs (docs/gateway.md,
"Prompts, resources and completion"; docs/security.md).

An upstream server normalises the URI it is asked for (``file:///public/../private/x`` reads
``/private/x``), so a pattern matched on the raw text offers more than it names. Every URI is
therefore normalised before any policy match, the same way for what a client asks and what an
upstream lists, and what is forwarded is the normalised URI, so that the URI checked is the URI
read:

- percent-encodings of unreserved characters are decoded and the others' hex digits upper-cased,
  the scheme lower-cased (RFC 3986, section 6.2.2);
- a URI whose path, query or fragment then still holds a dot-segment (``.`` or ``..``, also
  written ``%2e``) or an encoded separator (``%2F``, ``%5C``, or a backslash) is refused: RFC
  3986's dot-segment removal (section 5.2.4), or an upstream that reads a query as part of a
  path, would make it name another resource than the one written;
- patterns are globs whose ``*`` and ``?`` never cross ``/`` and whose ``**`` does (matched by
  RE2, in linear time: :func:`sagents.sandbox._patterns.glob_regex`).
"""

from __future__ import annotations

import functools
import re

from sagents.sandbox._patterns import LinearRegex, glob_regex

__all__ = ["check_resource_patterns", "normalised_uri", "resource_offered"]

_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ENCODED_SEPARATORS = ("%2F", "%5C", "\\")
_SEGMENT_MARKS = re.compile(r"[/?#]")  # what ends a segment, in the path and after it


def _decoded_unreserved(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return character if character in _UNRESERVED else "%" + match.group(1).upper()


def normalised_uri(uri: str) -> str:
    """``uri`` in the normal form policies are matched against (see the module docstring).

    A gateway URI (``sagents://upstream/<server>/<upstream URI>``) is normalised as a whole:
    the upstream URI is part of its path, so its dot-segments and separators are checked too.

    Raises:
        ValueError: a URI with a dot-segment or an encoded separator in its path, saying which.
    """
    text = _PERCENT.sub(_decoded_unreserved, uri)
    scheme, colon, rest = text.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme):
        scheme, rest = "", text
    # The path with its query and fragment: a gateway URI's query is part of its upstream
    # URI, and an upstream may read either as a path ("file:///public/a?/../../private").
    path = rest
    if path.startswith("//"):  # an authority, then the path
        slash = path.find("/", 2)
        path = "" if slash < 0 else path[slash:]
    if any(segment in (".", "..") for segment in _SEGMENT_MARKS.split(path)):
        raise ValueError(f"the resource URI {uri!r} has a '.' or '..' segment in its path")
    for separator in _ENCODED_SEPARATORS:
        if separator in path:
            raise ValueError(
                f"the resource URI {uri!r} has an encoded path separator ({separator!r})"
            )
    return f"{scheme.lower()}:{rest}" if scheme else rest


@functools.lru_cache(maxsize=64)
def _compiled(patterns: frozenset[str]) -> tuple[LinearRegex, ...]:
    return tuple(glob_regex(p) for p in sorted(patterns))


def check_resource_patterns(patterns: frozenset[str]) -> None:
    """Compile a profile's ``resources`` patterns once, to refuse a bad one at start.

    Raises:
        ValueError: a pattern that cannot be compiled, saying why.
    """
    _compiled(patterns)


def resource_offered(patterns: frozenset[str] | None, uri: str) -> bool:
    """Whether ``uri``, normalised, matches one of ``patterns`` (None offers every URI that
    normalises); a URI that cannot be normalised is never offered."""
    try:
        normal = normalised_uri(uri)
    except ValueError:
        return False
    return patterns is None or any(regex.fullmatch(normal) for regex in _compiled(patterns))
