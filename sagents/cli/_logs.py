"""Where the command line's logs go: stderr, never stdout, shown literally."""

from __future__ import annotations

import logging
import sys

from sagents.core._literal import LiteralFormatter

__all__ = ["setup_logging"]


def setup_logging() -> None:
    """Send sagents' logs (warnings and up) to stderr, never stdout; tool names, errors and
    other text from models and tools are shown literally (:mod:`sagents.core._literal`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LiteralFormatter("sagents: %(message)s"))
    root = logging.getLogger("sagents")
    if not root.handlers:
        root.addHandler(handler)
    root.setLevel(logging.WARNING)
