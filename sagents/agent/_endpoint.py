"""The endpoint an adapter is pointed at and its key, checked when it is built (docs/agent.md,
"The model seam"): a base URL that no HTTP client can use, or a key that no HTTP header can
carry, is a configuration error naming where it came from, not a traceback, an
``internal_error`` or a "connection error" at the first call."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from sagents.errors import ModelConfigError

__all__ = ["configured_api_key", "configured_base_url"]


def configured_base_url(given: str | None, variable: str) -> str | None:
    """``given``, else the environment's ``variable``, else None; checked.

    Raises:
        ModelConfigError: the URL is not ``http://`` or ``https://`` with a host, or its port
            is not a number of 0-65535 (the message names ``base_url=`` or ``variable``).
    """
    url = given or os.environ.get(variable) or None
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is no number of 0-65535
    except ValueError as error:
        problem = str(error)
    else:
        if parts.scheme not in ("http", "https"):
            problem = "it does not start with http:// or https://"
        elif not parts.hostname:
            problem = "it names no host"
        else:
            return url
    source = "base_url=" if given else variable
    raise ModelConfigError(
        f"the model endpoint {url!r} ({source}) cannot be used: {problem}",
        hint=f"set {variable} (or base_url=, `--base-url` on the command line) to the "
        "endpoint's http:// or https:// URL",
    )


def configured_api_key(given: str | None, *variables: str) -> str | None:
    """``given``, else the first of the environment's ``variables`` that is set, else None;
    checked to be printable ASCII (what an HTTP header carries: a pasted newline or a curly
    quote is not part of any key).

    Raises:
        ModelConfigError: the key holds another character (the message names ``api_key=`` or
            the variable and the character's position, never the key).
    """
    source, key = "api_key=", given
    for variable in variables:
        if key:
            break
        source, key = variable, os.environ.get(variable)
    if not key:
        return None
    for position, character in enumerate(key):
        if not " " <= character <= "~":
            raise ModelConfigError(
                f"the API key ({source}) holds a character an HTTP header cannot carry "
                f"('{character.encode('unicode_escape').decode('ascii')}' at position {position})",
                hint=f"set {source.removesuffix('=')} to the key alone, without a newline, "
                "quotes or other pasted characters",
            )
    return key
