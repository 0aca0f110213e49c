"""sagents.script._guest: the stdlib-only guest side (docs/architecture.md, "One run_script")."""

__all__: list[str] = []
