"""A call waiting for the web console (``sagents serve --approvals console``) survives a restart
of the gateway (SIGKILL), on the embedded store and on PostgreSQL: the console shows its card
again; answered there, a 2026-07-28 client's call runs once when the client sends it again (a
denied one never runs), and a second answer or a replay is refused or asked again; a
handshake-era client's call cannot run (its connection died with the process), and the console
says so (docs/console.md, "Approvals")."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.store._embedded import call_digest
from tests.gateway.console.test_console_http import csrf_of, login
from tests.gateway.replicas import TOKEN, Replica, client, replica
from tests.gateway.test_approval_restart import SCRIPT, _lease_ran_out

pytestmark = pytest.mark.anyio

CONSOLE = ("--approvals", "console")
ARGUMENTS = {"text": "after the restart"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


def legacy_client(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


async def waiting_ids(
    http: httpx2.AsyncClient, base: str, until: Callable[[list[str]], bool]
) -> list[str]:
    """The ids of what waits in the console, read from its event stream once ``until`` holds
    (the caller bounds the wait)."""
    async with http.stream("GET", f"{base}/console/events") as events:
        async for line in events.aiter_lines():
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                if event.get("type") == "approvals.state" and until(event["ids"]):
                    return list(event["ids"])
    raise AssertionError("the console's event stream ended")


async def answer(http: httpx2.AsyncClient, base: str, approval_id: str, decision: str) -> Any:
    page = await http.get(f"{base}/console/approvals")
    return await http.post(
        f"{base}/console/approvals/{approval_id}",
        data={"decision": decision, "csrf": csrf_of(page.text)},
    )


def base_of(gateway: Replica) -> str:
    return gateway.url.removesuffix("/mcp")


async def ask_then_kill(
    tmp_path: Path,
    store: str,
    make_client: Callable[[str], Client],
    tool: str = "fault__echo",
    arguments: dict[str, Any] = ARGUMENTS,
) -> str:
    """Call ``tool`` (``fault__echo`` is a write tool) so that it waits in the console, then
    SIGKILL the gateway; the card's id."""
    async with replica(tmp_path, "a", store, *CONSOLE) as first:
        base = base_of(first)
        async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as tg:
            assert (await login(http, base, TOKEN)).status_code == 303

            async def call() -> None:
                try:
                    async with make_client(first.url) as mcp:
                        await mcp.session.call_tool(tool, arguments)
                except Exception:  # noqa: BLE001 - the gateway is killed under the call
                    return
                raise AssertionError("the call was answered before the gateway was killed")

            tg.start_soon(call)
            (asked,) = await waiting_ids(http, base, bool)
            first.process.send_signal(signal.SIGKILL)
            await first.process.wait()
    return asked


@dataclass
class Restarted:
    """The gateway started again on the data directory of the killed one, and a console
    login of the client's principal."""

    gateway: Replica
    http: httpx2.AsyncClient
    base: str
    page: str
    """The approvals page as first shown after the restart."""


@asynccontextmanager
async def restarted(
    tmp_path: Path, store: str, asked: str, name: str = "a"
) -> AsyncIterator[Restarted]:
    """Start the gateway again (on a shared store, another replica: ``name``); its console must
    show the card ``asked`` again."""
    async with (
        replica(tmp_path, name, store, *CONSOLE) as second,
        httpx2.AsyncClient(timeout=60) as http,
    ):
        base = base_of(second)
        assert (await login(http, base, TOKEN)).status_code == 303
        page = await http.get(f"{base}/console/approvals")
        assert asked in page.text, "the card is not shown again after the restart"
        yield Restarted(gateway=second, http=http, base=base, page=page.text)


async def until_sent_again(http: httpx2.AsyncClient, base: str) -> str:
    """The approvals page once the call sent again waits on the restored card (the card is
    no longer marked as asked before the restart); the caller bounds the wait."""
    async with http.stream("GET", f"{base}/console/events") as events:
        async for line in events.aiter_lines():  # a frame at first and at each change
            if line.startswith("data:"):
                page = (await http.get(f"{base}/console/approvals")).text
                if "before the gateway restarted" not in page:
                    return page
    raise AssertionError("the console's event stream ended")


class SentAgain:
    """The client's ``fault__echo`` call with :data:`ARGUMENTS`, sent again in ``tg``."""

    def __init__(self, tg: anyio.abc.TaskGroup, mcp: Client) -> None:
        self._answered = anyio.Event()
        self._results: list[object] = []
        tg.start_soon(self._send, mcp)

    async def _send(self, mcp: Client) -> None:
        self._results.append(await mcp.session.call_tool("fault__echo", ARGUMENTS))
        self._answered.set()

    async def result(self) -> object:
        """Its result, once answered (the caller bounds the wait)."""
        await self._answered.wait()
        return self._results[0]


def text_of(result: object) -> list[str]:
    assert isinstance(result, mt.CallToolResult), result
    return [c.text for c in result.content if isinstance(c, mt.TextContent)]


async def test_a_console_approval_of_a_2026_client_survives_a_restart_and_its_call_runs_once(
    tmp_path: Path, store: str
) -> None:
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, store, client)
        await _lease_ran_out(store)  # PostgreSQL: the killed replica is known to be gone
        async with (
            restarted(tmp_path, store, asked) as restart,
            anyio.create_task_group() as tg,
        ):
            second, http, base, page = restart.gateway, restart.http, restart.base, restart.page
            allowed = await answer(http, base, asked, "allow_once")
            again = await answer(http, base, asked, "deny")
            async with client(second.url) as mcp:
                ran = await mcp.session.call_tool("fault__echo", ARGUMENTS)
                replayed: list[object] = []
                replay_answered = anyio.Event()

                async def replay() -> None:
                    replayed.append(await mcp.session.call_tool("fault__echo", ARGUMENTS))
                    replay_answered.set()

                tg.start_soon(replay)
                (new,) = await waiting_ids(http, base, bool)
                denied = await answer(http, base, new, "deny")
                await replay_answered.wait()
            shown_after = await http.get(f"{base}/console/approvals")
    assert "before the gateway restarted" in page
    assert allowed.status_code == 303
    assert again.status_code == 404  # a second answer is refused
    assert "answered already" in again.text
    assert text_of(ran) == ["after the restart"]  # the console's answer released it, once
    assert new != asked  # the replay was asked again, not run on the spent answer
    assert denied.status_code == 303
    assert text_of(replayed[0]) != ["after the restart"]
    assert asked not in shown_after.text


async def test_a_call_denied_in_the_console_after_a_restart_never_runs(tmp_path: Path) -> None:
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, "", client)
        async with restarted(tmp_path, "", asked) as restart:
            second, http, base = restart.gateway, restart.http, restart.base
            denied = await answer(http, base, asked, "deny")
            async with client(second.url) as mcp:
                refused = await mcp.session.call_tool("fault__echo", ARGUMENTS)
    assert denied.status_code == 303
    assert isinstance(refused, mt.CallToolResult)
    assert refused.is_error is True
    assert "was not approved" in " ".join(text_of(refused))


async def test_a_handshake_era_call_waiting_at_a_restart_is_shown_as_gone_and_never_runs(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, "", legacy_client)
        async with (
            restarted(tmp_path, "", asked) as restart,
            anyio.create_task_group() as tg,
        ):
            second, http, base, page = restart.gateway, restart.http, restart.base, restart.page
            allowed = await answer(http, base, asked, "allow_once")
            results: list[object] = []

            async def call_again() -> None:
                async with legacy_client(second.url) as mcp:
                    results.append(await mcp.session.call_tool("fault__echo", ARGUMENTS))

            tg.start_soon(call_again)
            (new,) = await waiting_ids(http, base, bool)
            await answer(http, base, new, "deny")
    card = page[page.index(asked) :]
    assert re.search(r"client is gone", card), card[:2000]
    assert allowed.status_code == 303
    assert new != asked  # the answer did not carry over to a new connection: asked again
    assert text_of(results[0]) != ["after the restart"]


async def test_a_2026_call_sent_again_after_a_restart_waits_on_its_card_and_runs_once(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, "", client)
        async with restarted(tmp_path, "", asked) as restart:
            second, http, base = restart.gateway, restart.http, restart.base
            async with client(second.url) as mcp, anyio.create_task_group() as tg:
                sent = SentAgain(tg, mcp)
                page = await until_sent_again(http, base)
                allowed = await answer(http, base, asked, "allow_once")
                result = await sent.result()
    assert asked in page  # the same card: the call sent again did not ask twice
    assert allowed.status_code == 303
    assert text_of(result) == ["after the restart"]


async def test_a_2026_call_sent_again_to_another_replica_runs_once_answered_in_a_third_ones_console(
    tmp_path: Path, postgres_url: str
) -> None:
    """Replica A dies while a 2026-07-28 client's call waits for the console; the client sends
    the call again to replica C, where it waits on the restored card; the answer given in
    replica B's console is recorded in the store, which tells C: the call runs there, once."""
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, postgres_url, client)
        await _lease_ran_out(postgres_url)
        async with (
            restarted(tmp_path, postgres_url, asked, "b") as on_b,
            restarted(tmp_path, postgres_url, asked, "c") as on_c,
            client(on_c.gateway.url) as mcp,
            anyio.create_task_group() as tg,
        ):
            sent = SentAgain(tg, mcp)
            await until_sent_again(on_c.http, on_c.base)
            allowed = await answer(on_b.http, on_b.base, asked, "allow_once")
            result = await sent.result()
            shown_on_c = await on_c.http.get(f"{on_c.base}/console/approvals")
    assert allowed.status_code == 303
    assert text_of(result) == ["after the restart"]
    assert asked not in shown_on_c.text


async def test_a_run_script_waiting_in_the_console_at_a_restart_never_runs(
    tmp_path: Path,
) -> None:
    arguments = {"code": SCRIPT, "tools": ["fault__echo"], "description": "echo once"}
    with anyio.fail_after(300):
        asked = await ask_then_kill(tmp_path, "", client, "run_script", arguments)
        async with restarted(tmp_path, "", asked) as restart:
            http, base, page = restart.http, restart.base, restart.page
            allowed = await answer(http, base, asked, "allow_once")
            after = await http.get(f"{base}/console/approvals")
    card = page[page.index(asked) :]
    assert "a run is never resumed" in card, card[:2000]
    assert allowed.status_code == 303
    assert asked not in after.text
    assert not list((tmp_path / "shared-workspaces").glob("**/run.json"))  # nothing ran


async def test_the_held_row_of_a_secret_argument_neither_shows_nor_confirms_it(
    tmp_path: Path,
) -> None:
    """A secret the gateway knows (its token), sent in an argument the card shows: the row on
    disk holds the card redacted, and its call digest does not let whoever reads the file test
    a guess of the secret (the digest is keyed with the gateway's key, not a bare SHA-256)."""
    arguments = {"text": f"log in with {TOKEN}"}
    with anyio.fail_after(300):
        await ask_then_kill(tmp_path, "", client, arguments=arguments)
    path = tmp_path / "data-a" / "approvals.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        ((card, call),) = db.execute("SELECT card, call FROM held_approvals").fetchall()
    assert TOKEN not in card
    assert "[redacted:" in card
    guessed = {call_digest(tool, arguments) for tool in ("fault__echo", "echo")}
    assert call not in guessed  # a guess of the secret cannot be checked against the row
