"""The ``sagents`` command (floor 6)."""

from sagents.cli.main import app, main

__all__ = ["app", "main"]
