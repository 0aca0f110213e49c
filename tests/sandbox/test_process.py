"""The write-budget watchdog's pacing (sagents.sandbox._process)."""

from __future__ import annotations

import pytest

from sagents.sandbox._process import (
    WATCHDOG_MAX_INTERVAL_SECONDS,
    WATCHDOG_POLL_SECONDS,
    watchdog_interval,
)


def test_a_quick_scan_is_repeated_at_the_poll_interval() -> None:
    assert watchdog_interval(0.001) == WATCHDOG_POLL_SECONDS


def test_a_slower_scan_waits_ten_times_its_duration() -> None:
    assert watchdog_interval(0.1) == pytest.approx(1.0)


def test_a_tree_that_slows_the_scan_down_cannot_stretch_the_interval() -> None:
    # Creating a few hundred thousand empty files makes each scan take seconds; with a
    # proportional wait alone the tree could then write for minutes unmeasured.
    assert watchdog_interval(6.0) == WATCHDOG_MAX_INTERVAL_SECONDS


def test_a_negative_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="scan_seconds"):
        watchdog_interval(-1.0)
