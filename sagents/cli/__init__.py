"""The ``sagents`` command (floor 6 of ``docs/architecture.md``, "Layers")."""

from sagents.cli.main import app, main

__all__ = ["app", "main"]
