"""What a client session holds is released when it ends (docs/gateway.md, "Sessions and
workspaces"): against a real ``sagents serve --transport http`` and the MCP SDK's client, and
the owner's rules (running background calls, idle sessions) on the gateway itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.audit._tasks import SqliteTaskStore
from sagents.config import load_config
from sagents.core._result import ToolResult
from sagents.gateway._lifetime import SessionLifetimes
from sagents.gateway._server import Gateway
from sagents.gateway._tasks import STATUS_PAGE_SIZE, GatewayTasks
from tests.gateway.fakes import FakeProvider
from tests.gateway.serve_probe import http_serve, sandbox_pids, short_session

pytestmark = pytest.mark.anyio

SESSIONS = 20
TREE_RSS_BOUND = 40 * 1024 * 1024  # a leak of one sandbox per session is 12 MiB each


async def test_sequential_http_sessions_leave_the_serve_tree_as_the_first_one_left_it(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(900):
        async with http_serve(tmp_path) as serve:
            await short_session(serve.url)  # warm-up: the upstream, the runtime, caches
            before = await serve.settled_usage()
            for _ in range(SESSIONS):
                await short_session(serve.url)
            after = await serve.settled_like(before)
            log = list(serve.log)
    assert after.processes == before.processes
    assert after.cgroups == before.cgroups == 0
    assert after.fds == before.fds
    assert after.tree_rss_bytes - before.tree_rss_bytes < TREE_RSS_BOUND
    assert not [line for line in log if "Traceback" in line]


async def test_sessions_that_drop_their_connection_are_released_once_idle(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(900):
        # Long enough that a loaded machine's pause between one session's own requests is not
        # taken for idleness (a 1 s timeout expired a live session mid-way under load).
        async with http_serve(tmp_path, {"sessionIdleTimeout": 10}) as serve:
            await short_session(serve.url)
            before = await serve.settled_usage()
            for _ in range(3):
                await short_session(serve.url, delete=False)  # a client that went away
            assert sandbox_pids(serve.pid)  # their spares wait for a next run
            after = await serve.settled_like(before)  # the idle timeout ends them
    assert (after.processes, after.cgroups, after.fds) == (
        before.processes,
        before.cgroups,
        before.fds,
    )


async def test_removing_the_workspace_of_a_live_session_does_not_end_the_gateway(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(600):
        async with http_serve(tmp_path) as serve:
            await short_session(serve.url, delete=False)  # its spare sandbox keeps watching
            sessions = tmp_path / "data" / "workspaces" / "sessions"
            for workspace in sessions.iterdir():
                shutil.rmtree(workspace)  # an operator cleans up
            await short_session(serve.url)  # another session runs on
            await short_session(serve.url)
            assert serve.process.returncode is None
            log = list(serve.log)
    assert not [line for line in log if "Traceback" in line]


class _Host:
    """A run_script host that records releases (what GatewayScripts does is tested above)."""

    def __init__(self) -> None:
        self.released: list[str] = []
        self.release_seen = anyio.Event()

    async def release(self, session_id: str, *, only_if: Any = None) -> None:
        if only_if is not None and not only_if():
            return
        self.released.append(session_id)
        self.release_seen.set()


async def test_an_ended_session_is_released_only_once_its_background_call_finished() -> None:
    host = _Host()
    answered = anyio.Event()

    async def waits_for_approval() -> ToolResult:
        await answered.wait()  # as a call waiting for a person's approval does
        return ToolResult.from_text("approved and done")

    async with (
        GatewayTasks() as tasks,
        SessionLifetimes(tasks, scripts=host, relay=None, idle_timeout_s=None) as lifetimes,
    ):
        task_id = await tasks.start("s1", "run_script", waits_for_approval)
        assert await tasks.wait(task_id, hand_off_after=0) is None  # in the background
        lifetimes.ended("s1")
        lifetimes.ended("s2")  # a session without a background call: released at once
        with anyio.fail_after(10):
            await host.release_seen.wait()
        assert host.released == ["s2"]
        answered.set()
        with anyio.fail_after(10):
            await tasks.live.wait_session("s1")
            while "s1" not in host.released:
                host.release_seen = anyio.Event()
                await host.release_seen.wait()


async def test_idle_expiry_never_takes_a_session_whose_call_waits_for_an_approval() -> None:
    host = _Host()
    answered = anyio.Event()

    async def waits_for_approval() -> ToolResult:
        await answered.wait()
        return ToolResult.from_text("done")

    async with (
        GatewayTasks() as tasks,
        SessionLifetimes(tasks, scripts=host, relay=None, idle_timeout_s=0.01) as lifetimes,
    ):
        with lifetimes.in_use("s1", connectionless=True):
            task_id = await tasks.start("s1", "run_script", waits_for_approval)
            assert await tasks.wait(task_id, hand_off_after=0) is None
        later = anyio.current_time() + 3600
        assert not lifetimes.idle("s1", later)  # its background call holds it
        answered.set()
        await tasks.live.wait_session("s1")
        assert lifetimes.idle("s1", later)
        with anyio.fail_after(10):
            await host.release_seen.wait()  # the sweep released it
        assert host.released == ["s1"]
        assert not lifetimes.idle("s1", later)  # released once, not at every sweep
        with lifetimes.in_use("s1", connectionless=True):
            assert not lifetimes.idle("s1", later)  # a call in flight


def test_the_session_idle_timeout_is_read_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "sessionIdleTimeout": 90}))
    assert load_config(path).session_idle_timeout_s == 90
    path.write_text(json.dumps({"mcpServers": {}}))
    assert load_config(path).session_idle_timeout_s is None  # the gateway's default


async def test_finished_background_calls_are_kept_in_the_store_and_listed_in_pages(
    tmp_path: Path,
) -> None:
    provider = FakeProvider()
    done: list[str] = []
    all_done = anyio.Event()
    calls = 25

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            done.append(message.params.data["task_id"])
            if len(done) == calls:
                all_done.set()

    store = SqliteTaskStore(tmp_path / "background.sqlite3")
    async with (
        Gateway(provider, background_after_s=0, task_store=store) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(30):
            ids = []
            for _ in range(calls):
                handed = await client.call_tool("fleet__slow", {})
                assert handed.structured_content is not None
                ids.append(handed.structured_content["task_id"])
            provider.release.set()  # every call ends
            await all_done.wait()
            in_memory = gateway.tasks.live.list_all()
            operator_view = gateway.tasks.operator_view()
            listed: list[dict[str, Any]] = []
            pages = 0
            cursor: str | None = None
            while True:
                page = await client.call_tool("script_status", {"cursor": cursor} if cursor else {})
                assert page.structured_content is not None
                listed.extend(page.structured_content["tasks"])
                pages += 1
                cursor = page.structured_content.get("next_cursor")
                if cursor is None:
                    break
            one = await client.call_tool("script_status", {"id": ids[0]})
            bad = await client.call_tool("script_status", {"cursor": "not-a-cursor"})
    assert in_memory == []  # the results are in the store, not in memory
    assert [info.task_id for info in operator_view] == ids  # the console's recent ones
    assert {info.status for info in operator_view} == {"ok"}
    assert [task["id"] for task in listed] == ids
    assert {task["status"] for task in listed} == {"ok"}
    assert pages == -(-calls // STATUS_PAGE_SIZE)
    assert one.structured_content is not None
    assert one.structured_content["result"] == "slow done"
    assert bad.is_error
    assert "cursor" in str(bad.content[0])


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), float("nan")])
def test_a_gateway_refuses_a_session_idle_timeout_that_is_not_positive(value: float) -> None:
    with pytest.raises(ValueError, match="session_idle_timeout_s must be a positive number"):
        Gateway(FakeProvider(), session_idle_timeout_s=value)
