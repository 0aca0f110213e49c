"""sagents.script.guest (the stdlib-only guest side; see docs/architecture.md, "One run_script")."""

__all__: list[str] = []
