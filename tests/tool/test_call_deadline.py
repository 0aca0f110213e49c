"""The per-call timeout of async local tools, armed only once the tool waits
(:mod:`sagents.tool._deadline`): the timeout still ends every call that waits too long, on
asyncio and trio, whatever the tool entered before it first waited; a call that never waits
arms no timer; cancellation and the tool's own exceptions pass as before."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool import SessionContext, ToolCall, ToolManager
from sagents.tool._deadline import await_within

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def work_then_hang(steps: int) -> str:
    """Compute first, then wait forever."""
    total = sum(range(steps))
    await anyio.sleep_forever()
    return str(total)


async def hang_in_own_scopes() -> str:
    """Enter a task group and a cancel scope before the first wait, then wait forever."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep_forever)
        with anyio.CancelScope():
            await anyio.sleep_forever()
    return "never"


async def wait_then_answer(delay: float) -> dict[str, Any]:
    """Wait a little (several suspensions), then answer."""
    for _ in range(3):
        await anyio.sleep(delay)
    event = anyio.Event()
    event.set()
    await event.wait()
    return {"waited": True}


async def own_timeout() -> str:
    """Raise a TimeoutError of its own after waiting."""
    await anyio.lowlevel.checkpoint()
    raise TimeoutError("the device did not answer")


def _manager() -> ToolManager:
    manager = ToolManager()
    for function in (add, work_then_hang, hang_in_own_scopes, wait_then_answer, own_timeout):
        manager.register_tool(function)
    return manager


async def test_a_tool_that_waits_after_working_still_times_out() -> None:
    with anyio.fail_after(10):
        result = await _manager().run_tool("work_then_hang", {"steps": 1000}, timeout=0.05)
    assert result.error is not None
    assert result.error.code == "timeout"
    assert result.error.message == "tool 'work_then_hang' did not finish within 0.05 seconds"


async def test_the_timeout_ends_a_tool_inside_the_scopes_it_entered_before_waiting() -> None:
    with anyio.fail_after(10):
        result = await _manager().run_tool("hang_in_own_scopes", {}, timeout=0.05)
    assert result.error is not None
    assert result.error.code == "timeout"


async def test_a_tool_that_waits_several_times_returns_its_value() -> None:
    with anyio.fail_after(10):
        result = await _manager().run_tool("wait_then_answer", {"delay": 0.001}, timeout=5)
    assert result.structured == {"waited": True}
    assert not result.is_error


async def test_a_tools_own_timeout_error_is_an_execution_error_not_a_timeout() -> None:
    with anyio.fail_after(10):
        result = await _manager().run_tool("own_timeout", {}, timeout=5)
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "TimeoutError: the device did not answer" in result.error.message


async def test_cancelling_the_caller_while_the_tool_waits_propagates() -> None:
    manager = _manager()
    with anyio.fail_after(10), anyio.move_on_after(0.05) as scope:
        await manager.run_tool("work_then_hang", {"steps": 10})
    assert scope.cancelled_caught


async def test_arguments_are_still_validated_and_coerced_on_the_direct_path() -> None:
    manager = _manager()
    with anyio.fail_after(10):
        coerced = await manager.run_tool("add", '{"a": "2", "b": 3}')
        refused = await manager.run_tool("add", {"a": True})
    assert coerced.structured == {"result": 5}
    assert refused.error is not None
    assert refused.error.code == "invalid_arguments"
    assert refused.error.message == (
        "invalid arguments for tool 'add' (1 problem): /a: expected integer, got true (boolean)"
    )


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays of every timer scheduled on the running asyncio loop (``call_at``)."""
    scheduled: list[float] = []
    original = asyncio.BaseEventLoop.call_at

    def spy(self: asyncio.BaseEventLoop, when: float, *args: Any, **kwargs: Any) -> Any:
        scheduled.append(when - self.time())
        return original(self, when, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "call_at", spy)
    return scheduled


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_call_that_never_waits_arms_no_timer(timers: list[float]) -> None:
    manager = _manager()
    result = await manager.run_tool("add", {"a": 1, "b": 2}, SessionContext(session_id="s"))
    assert result.structured == {"result": 3}
    assert timers == []
    # A call that waits arms exactly its own timeout (300 s by default).
    await manager.run_tool("wait_then_answer", {"delay": 0})
    assert any(299 < delay <= 300 for delay in timers)


async def test_await_within_takes_any_awaitable() -> None:
    class Ready:
        def __await__(self) -> Any:
            yield from anyio.lowlevel.checkpoint().__await__()
            return 7

    assert await await_within(Ready(), 5) == (True, 7)
    assert await await_within(anyio.sleep_forever(), 0.01) == (False, None)


async def test_the_timeout_counts_the_work_done_before_the_first_wait() -> None:
    past_first_wait: list[bool] = []

    async def work_past_the_timeout(seconds: float) -> str:
        """Compute for longer than the timeout, wait once, then wait forever."""
        start = anyio.current_time()
        while anyio.current_time() - start < seconds:  # CPU work, no await
            pass
        await anyio.lowlevel.checkpoint()
        past_first_wait.append(True)
        await anyio.sleep_forever()
        return "never"

    manager = ToolManager()
    manager.register_tool(work_past_the_timeout)
    with anyio.fail_after(10):
        result = await manager.run_tool("work_past_the_timeout", {"seconds": 0.2}, timeout=0.1)
    assert result.error is not None
    assert result.error.code == "timeout"
    assert past_first_wait == []  # the timeout had passed: ended at the first wait


async def test_a_tool_whose_first_step_raises_gives_an_execution_error() -> None:
    async def fail_at_once(reason: str) -> str:
        """Raise before ever waiting."""
        raise LookupError(reason)

    manager = ToolManager()
    manager.register_tool(fail_at_once)
    with anyio.fail_after(10):
        result = await manager.run_tool("fail_at_once", {"reason": "no such device"}, timeout=5)
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "LookupError: no such device" in result.error.message


class _Handler:
    """A registered handler (as MCP tools and built-ins are): answers at once, or after
    entering a cancel scope and a task group of its own and waiting forever."""

    def __init__(self, *, hang: bool) -> None:
        self.hang = hang

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        if self.hang:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep_forever)
                with anyio.CancelScope():
                    await anyio.sleep_forever()
        return ToolResult.from_text(f"{call.tool_name} in {call.timeout:g} s")


def _handler_manager() -> ToolManager:
    manager = ToolManager()
    schema = {"type": "object", "properties": {}}
    manager.register_tool((ToolSpec(name="answer", input_schema=schema), _Handler(hang=False)))
    manager.register_tool((ToolSpec(name="hang", input_schema=schema), _Handler(hang=True)))
    return manager


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_handler_call_that_never_waits_arms_no_timer(timers: list[float]) -> None:
    result = await _handler_manager().run_tool("answer", {}, timeout=7)
    assert result.content == ToolResult.from_text("answer in 7 s").content
    assert timers == []


async def test_the_timeout_ends_a_handler_inside_the_scopes_it_entered_before_waiting() -> None:
    with anyio.fail_after(10):
        result = await _handler_manager().run_tool("hang", {}, timeout=0.05)
    assert result.error is not None
    assert result.error.code == "timeout"
    assert result.error.message == "tool 'hang' did not finish within 0.05 seconds"


async def test_cancelling_the_caller_while_a_handler_waits_propagates() -> None:
    manager = _handler_manager()
    with anyio.fail_after(10), anyio.move_on_after(0.05) as scope:
        await manager.run_tool("hang", {})
    assert scope.cancelled_caught


class _Swallower:
    """A handler that catches the timeout's cancellation, then waits a little more and answers
    (a library that absorbs ``CancelledError`` in its cleanup)."""

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        with contextlib.suppress(BaseException):  # what the misbehaving handler does
            await anyio.sleep(10)
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.05)
        return ToolResult.from_text("late")


async def swallow_then_answer() -> str:
    """The same as a local tool."""
    with contextlib.suppress(BaseException):  # what the misbehaving tool does
        await anyio.sleep(10)
    with anyio.CancelScope(shield=True):
        await anyio.sleep(0.05)
    return "late"


async def test_a_call_that_swallows_the_timeouts_cancellation_is_still_a_timeout() -> None:
    """A late answer after the deadline is not a success: the call timed out."""
    manager = ToolManager()
    schema = {"type": "object", "properties": {}}
    manager.register_tool((ToolSpec(name="swallow", input_schema=schema), _Swallower()))
    manager.register_tool(swallow_then_answer)
    with anyio.fail_after(10):
        handler = await manager.run_tool("swallow", {}, timeout=0.05)
        local = await manager.run_tool("swallow_then_answer", {}, timeout=0.05)
    for result, name in ((handler, "swallow"), (local, "swallow_then_answer")):
        assert result.error is not None, result
        assert result.error.code == "timeout"
        assert result.error.message == f"tool {name!r} did not finish within 0.05 seconds"


_RELEASE = threading.Event()


def block_briefly(seconds: float) -> str:
    """Block the worker thread (a sync tool) until released, at most ``seconds``."""
    _RELEASE.wait(seconds)
    return "done"


async def test_a_sync_tool_still_times_out_and_still_answers() -> None:
    manager = ToolManager()
    manager.register_tool(block_briefly)
    _RELEASE.clear()
    try:
        with anyio.fail_after(10):
            slow = await manager.run_tool("block_briefly", {"seconds": 30}, timeout=0.05)
            quick = await manager.run_tool("block_briefly", {"seconds": 0}, timeout=5)
    finally:
        _RELEASE.set()  # the abandoned worker thread of the slow call ends now
    assert slow.error is not None
    assert slow.error.code == "timeout"
    assert quick.content == ToolResult.from_text("done").content
