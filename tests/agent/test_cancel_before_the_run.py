"""``SAgent.cancel()`` cancels every run in progress (docs/agent.md, "Cancellation"), also one
still being set up (its session loaded from the store, its sandbox or skills opened): such a
run ends cancelled without asking the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.agent import SAgent
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, reply
from sagents.tool import SessionContext, ToolManager
from tests.agent.helpers import RUN_TIMEOUT_S, collect, done_of

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]


class SlowToLoad:
    """A store whose session load waits until ``go``: the run is being set up meanwhile."""

    def __init__(self, inner: SqliteAgentStore) -> None:
        self._inner = inner
        self.loading = anyio.Event()
        self.go = anyio.Event()

    async def load_session(self, session_id: str) -> str | None:
        self.loading.set()
        await self.go.wait()
        return await self._inner.load_session(session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_cancel_while_the_run_is_set_up_ends_it_cancelled_without_a_model_call(
    tmp_path: Path,
) -> None:
    store = SlowToLoad(SqliteAgentStore(path=tmp_path / "agents.sqlite3"))
    async with ScriptedModel([reply("never asked")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False, store=store)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:

                async def cancel() -> None:
                    await store.loading.wait()
                    agent.cancel()
                    store.go.set()

                tg.start_soon(cancel)
                events = await collect(
                    agent,
                    USER,
                    tool_manager=ToolManager(),
                    session_context=SessionContext(session_id="s"),
                )
        assert model.requests == []
    done = done_of(events)
    assert done.reason == "cancelled"
