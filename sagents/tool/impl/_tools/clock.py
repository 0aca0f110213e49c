"""``datetime_now``: the current date and time, in UTC or a named time zone (off by default;
docs/builtin_tools.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sagents.tool.impl._unit import BuiltinTool

__all__ = ["TOOLS", "datetime_now"]


def datetime_now(timezone: str | None = None) -> str:
    """The current date and time (ISO 8601, with the weekday and the UTC offset).

    Args:
        timezone: An IANA time zone name such as Europe/Paris (default: UTC).
    """
    try:
        zone = UTC if timezone is None else ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError) as error:  # OSError: a directory name
        raise ValueError(
            f"unknown time zone {timezone!r}: use an IANA name such as Europe/Paris or UTC"
        ) from error
    now = datetime.now(zone)
    return f"{now.isoformat(timespec='seconds')} ({now:%A}, {timezone or 'UTC'})"


TOOLS: tuple[BuiltinTool, ...] = (BuiltinTool.from_function(datetime_now, needs_sandbox=False),)
