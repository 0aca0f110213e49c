"""``ScriptLimits``: the limits of one run_script run, as the runtime uses them.

The config file's ``scripts`` block (``sagents.config._models.ScriptsParams``, docs/run_script.md)
is validated at the config boundary and turned into this one value.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScriptLimits"]


@dataclass(frozen=True, kw_only=True)
class ScriptLimits:
    """Limits of one run.

    Attributes:
        max_calls: Tool calls per script; later calls are refused (``limit_exceeded``).
        max_concurrency: Tool calls in flight at once.
        timeout_s: Wall-clock seconds before the whole process tree is killed.
        max_output_bytes: Total stdout+stderr bytes before the run ends (``output_limit``).
        max_model_chars: Printed characters shown to the model before head+tail cutting.
        drain_grace_s: Seconds to keep reading output after the script exits (a leftover
            child may hold the pipes open) before its tree is killed.
        preflight: Check each script's statically visible tool calls against the run's plan
            before anything runs (``scripts.preflight``; docs/run_script.md, "Pre-flight
            check").
    """

    max_calls: int = 2000
    max_concurrency: int = 4
    timeout_s: float = 1800.0
    max_output_bytes: int = 32 * 1024 * 1024
    max_model_chars: int = 20_000
    drain_grace_s: float = 2.0
    preflight: bool = True

    def __post_init__(self) -> None:
        if self.max_calls < 1 or self.max_concurrency < 1:
            raise ValueError("max_calls and max_concurrency must be >= 1")
        if self.timeout_s <= 0 or self.max_output_bytes <= 0 or self.max_model_chars <= 0:
            raise ValueError("timeout_s, max_output_bytes and max_model_chars must be positive")
