"""sagents.script (see DESIGN.md, "Layers")."""

__all__: list[str] = []
