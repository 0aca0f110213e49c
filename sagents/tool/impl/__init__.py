"""sagents.tool.impl (see DESIGN.md, "Layers")."""

__all__: list[str] = []
