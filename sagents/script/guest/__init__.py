"""sagents.script.guest (see DESIGN.md, "Layers")."""

__all__: list[str] = []
