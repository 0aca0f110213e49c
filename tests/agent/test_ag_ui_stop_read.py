"""The AG-UI route's Stop (the client aborts its stream, then sends
``forwardedProps.sagents.cancel``: docs/ag-ui.md) while the run reads the model's answer: the
run ends, nothing of the cut answer is kept, and the thread goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, ScriptedReply, reply
from tests.agent.ag_ui_helpers import (
    TOKEN,
    WAIT_S,
    post_run,
    route_tools,
    run_input,
    serve_route,
)
from tests.agent.helpers import assert_settled_once
from tests.agent.test_ag_ui import user

pytestmark = pytest.mark.anyio


async def test_stop_while_the_run_reads_the_answer_ends_it_and_the_thread_goes_on(
    tmp_path: Path,
) -> None:
    stalling = ScriptedReply(content="a long answer " * 20, hang_after_chunks=3)
    async with ScriptedModel([stalling, reply("fresh start")]) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            first: list[dict[str, Any]] = []
            body = run_input("ts", [user("u1", "tell me")])
            headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"}
            with anyio.fail_after(WAIT_S):
                async with c.stream("POST", url, json=body, headers=headers) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            first.append(json.loads(line[6:]))
                            if first[-1]["type"] == "TEXT_MESSAGE_CONTENT":
                                break  # the run awaits the rest of the answer: Stop
            stop = run_input(
                "ts", [user("u1", "tell me")], run_id="r2",
                forwarded={"sagents": {"cancel": True}},
            )  # fmt: skip
            stopped = await post_run(c, url, stop)
            assert stopped[-1].type.value == "RUN_FINISHED"
            assert stopped[-1].outcome is not None
            assert stopped[-1].outcome.type == "cancelled"
            assert "RUN_FINISHED" not in [e["type"] for e in first]
            history = agent.session("ts").messages  # type: ignore[union-attr]
            assert_settled_once(history)
            assert all("a long answer" not in str(m.get("content")) for m in history)
            after = await post_run(c, url, run_input("ts", [user("u2", "again")], run_id="r3"))
            assert after[-1].type.value == "RUN_FINISHED"
        assert model.requests[-1]["messages"][-1]["content"] == "again"
