import pytest

from sagents import progress
from sagents.progress import ManualClock, ProgressHub, ProgressSettings, bind_tool_call
from sagents.tool import tool_progress
from sagents.tool.tool_progress import emit_tool_progress, emit_tool_progress_closed


def test_the_seed_entry_point_re_exports_the_progress_functions() -> None:
    assert tool_progress.emit_tool_progress is progress.emit_tool_progress
    assert tool_progress.emit_tool_progress_closed is progress.emit_tool_progress_closed


@pytest.mark.anyio
async def test_a_tool_written_against_the_seed_path_reports_progress() -> None:
    async def my_long_tool() -> dict[str, str]:
        for chunk in ("step 1\n", "step 2\n"):
            await emit_tool_progress(chunk, stream="stdout")
        await emit_tool_progress_closed()
        return {"content": "final structured result"}

    assert await my_long_tool() == {"content": "final structured result"}  # unbound: no-op
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=0), clock=ManualClock())
    async with hub.subscribe("s") as events:
        async with bind_tool_call(hub, "s", "call_abc"):
            result = await my_long_tool()
        received = [events.receive_nowait() for _ in range(len(events))]
    assert result == {"content": "final structured result"}  # progress never enters the result
    assert [e.to_dict()["text"] for e in received] == ["step 1\n", "step 2\n", ""]
    assert {e.to_dict()["tool_call_id"] for e in received} == {"call_abc"}
