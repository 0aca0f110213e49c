"""run_script's limits, and the ``scripts`` settings block that sets them (docs/run_script.md).

``scripts`` in the settings file (camelCase, like the rest of the ``mcpServers`` file)::

    "scripts": {"maxCalls": 2000, "maxConcurrency": 4, "timeoutSec": 1800,
                "maxOutputBytes": 33554432}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagents.config.loader import SagentsConfig
from sagents.errors import ConfigError

__all__ = ["ScriptLimits", "ScriptsParams", "script_limits"]


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
    """

    max_calls: int = 2000
    max_concurrency: int = 4
    timeout_s: float = 1800.0
    max_output_bytes: int = 32 * 1024 * 1024
    max_model_chars: int = 20_000
    drain_grace_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_calls < 0 or self.max_concurrency < 1:
            raise ValueError("max_calls must be >= 0 and max_concurrency >= 1")
        if self.timeout_s <= 0 or self.max_output_bytes <= 0 or self.max_model_chars <= 0:
            raise ValueError("timeout_s, max_output_bytes and max_model_chars must be positive")


class ScriptsParams(BaseModel):
    """The ``scripts`` settings block, validated (unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    max_calls: int = Field(2000, alias="maxCalls", ge=0)
    max_concurrency: int = Field(4, alias="maxConcurrency", ge=1, le=64)
    timeout_sec: float = Field(1800.0, alias="timeoutSec", gt=0)
    max_output_bytes: int = Field(32 * 1024 * 1024, alias="maxOutputBytes", gt=0)

    def to_limits(self) -> ScriptLimits:
        """The limits these settings give."""
        return ScriptLimits(
            max_calls=self.max_calls,
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_sec,
            max_output_bytes=self.max_output_bytes,
        )

    @classmethod
    def parse(cls, raw: Mapping[str, Any], *, file: str | None = None) -> ScriptsParams:
        """Validate a ``scripts`` block.

        Raises:
            ConfigError: naming the file and the ``scripts.<key>`` that is wrong.
        """
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(str(part) for part in ("scripts", *first["loc"]))
            raise ConfigError(first["msg"], file=file, key=key) from None


def script_limits(config: SagentsConfig) -> ScriptLimits:
    """The run limits of a loaded config's ``scripts`` section."""
    scripts = config.scripts
    return ScriptLimits(
        max_calls=scripts.max_calls,
        max_concurrency=scripts.max_parallel,
        timeout_s=scripts.timeout_sec,
        max_output_bytes=scripts.max_output_bytes,
    )
