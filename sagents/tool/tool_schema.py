"""STAND-IN for the ``toolschema`` branch: the seed design's path for the spec types."""

from sagents.core.spec import ToolSource, ToolSpec

__all__ = ["ToolSource", "ToolSpec"]
