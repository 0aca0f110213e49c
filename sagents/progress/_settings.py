"""Settings of the progress channel, read from the environment (docs/progress.md, "Environment").

===================================== ======= ===================================================
variable                              default meaning
===================================== ======= ===================================================
``SAGE_TOOL_PROGRESS_ENABLED``        true    ``false`` silences ``tool_progress`` only
``SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS`` 50   coalescing window, milliseconds; 0 sends at once
``SAGE_TOOL_PROGRESS_FLUSH_BYTES``    16384   flush at once when this many UTF-8 bytes wait
===================================== ======= ===================================================

Values are read when a :class:`~sagents.progress.ProgressHub` is created. An invalid value is
logged as a warning naming the variable and the value, and the default is used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_FLUSH_BYTES",
    "DEFAULT_FLUSH_INTERVAL_S",
    "DEFAULT_MAX_BUFFERED",
    "ENV_ENABLED",
    "ENV_FLUSH_BYTES",
    "ENV_FLUSH_INTERVAL_MS",
    "ProgressSettings",
]

_log = logging.getLogger(__name__)

ENV_ENABLED: Final = "SAGE_TOOL_PROGRESS_ENABLED"
ENV_FLUSH_INTERVAL_MS: Final = "SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS"
ENV_FLUSH_BYTES: Final = "SAGE_TOOL_PROGRESS_FLUSH_BYTES"

# Default coalescing window: 50 ms (docs/progress.md, "Environment").
DEFAULT_FLUSH_INTERVAL_S: Final = 0.05
# Immediate flush once 16 KiB of UTF-8 wait in one stream's buffer.
DEFAULT_FLUSH_BYTES: Final = 16 * 1024
# Droppable events one consumer may have waiting before progress is coalesced or dropped.
DEFAULT_MAX_BUFFERED: Final = 256

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, kw_only=True)
class ProgressSettings:
    """Tunables of one hub.

    Attributes:
        enabled: False silences ``tool_progress`` (approvals and other events still flow).
        flush_interval_s: Coalescing window per (tool_call_id, stream), seconds; 0 disables it.
        flush_bytes: UTF-8 bytes of waiting text that trigger an immediate flush (>= 1).
        max_buffered: Droppable events a consumer's queue holds before the overflow policy
            applies (>= 1).

    Raises:
        ValueError: A value is out of range.
    """

    enabled: bool = True
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    flush_bytes: int = DEFAULT_FLUSH_BYTES
    max_buffered: int = DEFAULT_MAX_BUFFERED

    def __post_init__(self) -> None:
        if not self.flush_interval_s >= 0:
            raise ValueError(f"flush_interval_s must be >= 0, not {self.flush_interval_s!r}")
        if self.flush_bytes < 1:
            raise ValueError(f"flush_bytes must be >= 1, not {self.flush_bytes!r}")
        if self.max_buffered < 1:
            raise ValueError(f"max_buffered must be >= 1, not {self.max_buffered!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProgressSettings:
        """Read the ``SAGE_TOOL_PROGRESS_*`` variables (see the module docstring).

        Args:
            environ: The environment to read; :data:`os.environ` when None.

        Returns:
            The settings; each invalid or missing value replaced by its default (invalid ones
            with a logged warning).
        """
        env = os.environ if environ is None else environ
        return cls(
            enabled=_parse_bool(env, ENV_ENABLED, default=True),
            flush_interval_s=_parse_number(
                env, ENV_FLUSH_INTERVAL_MS, DEFAULT_FLUSH_INTERVAL_S * 1000, minimum=0
            )
            / 1000,
            flush_bytes=int(
                _parse_number(env, ENV_FLUSH_BYTES, DEFAULT_FLUSH_BYTES, minimum=1, integer=True)
            ),
        )


def _parse_bool(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    _log.warning("%s=%r is not a boolean (true/false); using %r", name, raw, default)
    return default


def _parse_number(
    env: Mapping[str, str], name: str, default: float, *, minimum: float, integer: bool = False
) -> float:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip()) if integer else float(raw.strip())
    except ValueError:
        value = None
    if value is None or not value >= minimum or value == float("inf"):
        kind = "an integer" if integer else "a number"
        _log.warning("%s=%r is not %s >= %s; using %s", name, raw, kind, minimum, default)
        return default
    return value
