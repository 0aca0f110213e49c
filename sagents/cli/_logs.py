"""Where the command line's logs go: stderr, never stdout, shown literally."""

from __future__ import annotations

import logging
import sys

from sagents.core._literal import LiteralFormatter

__all__ = ["setup_logging"]

_HANDLER_NAME = "sagents-cli"


def setup_logging(*, server_failures: bool = True) -> None:
    """Send sagents' logs (warnings and up) to stderr, never stdout; tool names, errors and
    other text from models and tools are shown literally (:mod:`sagents.core._literal`).

    Args:
        server_failures: False for a command whose output reports each failed MCP server
            itself (``sagents tools``): the log then leaves those failures out, so that each
            is told once.
    """
    root = logging.getLogger("sagents")
    handler = next((h for h in root.handlers if h.name == _HANDLER_NAME), None)
    if handler is None and not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.name = _HANDLER_NAME
        handler.setFormatter(LiteralFormatter("sagents: %(message)s"))
        root.addHandler(handler)
    if handler is not None:
        for old in list(handler.filters):
            handler.removeFilter(old)
        if not server_failures:
            handler.addFilter(_without_server_failures)
    root.setLevel(logging.WARNING)


def _without_server_failures(record: logging.LogRecord) -> bool:
    from sagents.mcp._connection import SERVER_FAILURE_LOG_KEY  # only the MCP commands ask

    return not hasattr(record, SERVER_FAILURE_LOG_KEY)
