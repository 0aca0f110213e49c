"""The progress values a client sees: readable numbers, strictly increasing (MCP spec
2025-11-25, "Progress")."""

from __future__ import annotations

import itertools

import anyio
import pytest
from mcp import Client

from sagents.gateway import Gateway
from tests.gateway.fakes import FakeProvider, FakeScriptProgress, FakeToolProgress

pytestmark = pytest.mark.anyio


async def _values(provider: FakeProvider) -> list[float]:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with (
        Gateway(provider, progress=provider.progress) as gateway,
        Client(gateway.server) as client,
    ):
        with anyio.fail_after(10):
            await client.call_tool("fleet__progress", {}, progress_callback=on_progress)
    return seen


async def test_the_first_progress_value_is_the_scripts_own_count_not_a_denormal() -> None:
    provider = FakeProvider(
        script_events=[
            FakeScriptProgress(calls=0),
            FakeScriptProgress(calls=0),
            FakeScriptProgress(calls=0),
            FakeScriptProgress(calls=1),
        ]
    )
    values = await _values(provider)
    assert values == [0.0, 0.5, 0.75, 1.0]


async def test_repeated_values_stay_below_the_next_whole_count() -> None:
    events: list[object] = [FakeScriptProgress(calls=2, done=2, total=10)]
    events += [FakeScriptProgress(calls=2, done=2, total=10) for _ in range(40)]
    events += [FakeToolProgress(tool_call_id="x", text="line"), FakeScriptProgress(calls=9)]
    values = await _values(FakeProvider(script_events=events))
    assert values[0] == 2.0
    assert all(b > a for a, b in itertools.pairwise(values))
    assert all(2.0 < v < 3.0 for v in values[1:41])
    assert values[-1] == 9.0


async def test_the_progress_message_says_1_call_not_1_calls() -> None:
    messages: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    provider = FakeProvider(
        script_events=[FakeScriptProgress(calls=1), FakeScriptProgress(calls=2)]
    )
    async with (
        Gateway(provider, progress=provider.progress) as gateway,
        Client(gateway.server) as client,
    ):
        with anyio.fail_after(10):
            await client.call_tool("fleet__progress", {}, progress_callback=on_progress)
    assert messages == ["1 call, 0 failed", "2 calls, 0 failed"]
