"""The built-in tools, one :class:`~sagents.tool.impl._unit.BuiltinTool` each, grouped in
modules by what they share (docs/architecture.md, "Adding a built-in tool")."""
