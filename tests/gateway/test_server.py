"""The gateway façade driven in memory with the SDK's own client (both protocol eras)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSpec
from sagents.gateway import Gateway, Profile
from sagents.gateway._convert import ERROR_META_KEY
from sagents.tool._approval import DenyAllApprover
from tests.gateway.fakes import FakeProvider, FakeScriptProgress, FakeToolProgress

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]  # the initialize handshake; the 2026-07-28 per-request protocol


@asynccontextmanager
async def running(provider: FakeProvider, **kwargs: Any) -> AsyncIterator[Gateway]:
    async with Gateway(provider, progress=provider.progress, **kwargs) as gateway:
        yield gateway


def answering(decision: str | None, asked: list[str] | None = None) -> Any:
    async def callback(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestFormParams)
        if asked is not None:
            asked.append(params.message)
        if decision is None:
            return mt.ElicitResult(action="decline")
        return mt.ElicitResult(action="accept", content={"decision": decision})

    return callback


def error_code(result: mt.CallToolResult) -> str | None:
    meta = result.meta or {}
    error = meta.get(ERROR_META_KEY)
    return error["code"] if isinstance(error, dict) else None


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("era", ERAS)
async def test_ask_mode_lists_every_tool_but_the_disabled_one(era: str) -> None:
    async with running(FakeProvider()) as gateway, Client(gateway.server, mode=era) as client:
        names = await tool_names(client)
    assert names == {
        "fleet__status",
        "fleet__configure",
        "fleet__reboot",
        "fleet__slow",
        "fleet__progress",
        "other__ping",
        "local_echo",
    }


async def test_read_only_mode_lists_only_read_only_tools() -> None:
    async with (
        running(FakeProvider(), mode="read_only") as gateway,
        Client(gateway.server) as client,
    ):
        names = await tool_names(client)
    assert names == {"fleet__status", "fleet__slow", "fleet__progress", "other__ping"}


async def test_listed_tools_keep_schema_and_annotations() -> None:
    async with running(FakeProvider()) as gateway, Client(gateway.server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    status = tools["fleet__status"]
    assert status.input_schema == {"type": "object", "properties": {"sn": {"type": "string"}}}
    assert status.annotations is not None
    assert status.annotations.read_only_hint is True
    assert status.description == "The fleet__status tool."


async def test_profile_narrows_tools_to_its_servers_and_sets_its_mode() -> None:
    profile = Profile(name="ops", servers=frozenset({"other"}), mode="auto")
    provider = FakeProvider()
    async with running(provider, profile=profile) as gateway, Client(gateway.server) as client:
        names = await tool_names(client)
        await client.call_tool("local_echo", {"x": 1})  # write, auto mode: runs unasked
    assert names == {"other__ping", "local_echo"}
    assert provider.calls[0][2] is not None
    assert provider.calls[0][2].permission_mode == "auto"


@pytest.mark.parametrize("era", ERAS)
async def test_read_only_call_runs_and_returns_structured_content(era: str) -> None:
    provider = FakeProvider()
    async with running(provider) as gateway, Client(gateway.server, mode=era) as client:
        result = await client.call_tool("fleet__status", {"sn": "A1"})
    assert result.is_error is False
    assert result.structured_content == {"tool": "fleet__status", "arguments": {"sn": "A1"}}
    assert provider.calls[0][0] == "fleet__status"


async def test_unknown_and_disabled_tools_give_an_unknown_tool_error_result() -> None:
    provider = FakeProvider()
    async with running(provider) as gateway, Client(gateway.server) as client:
        unknown = await client.call_tool("nope", {})
        disabled = await client.call_tool("fleet__hidden", {})
    assert unknown.is_error
    assert error_code(unknown) == "unknown_tool"
    assert disabled.is_error
    assert error_code(disabled) == "unknown_tool"
    assert provider.calls == []


async def test_read_only_mode_refuses_a_write_call() -> None:
    provider = FakeProvider()
    async with (
        running(provider, mode="read_only") as gateway,
        Client(gateway.server) as client,
    ):
        result = await client.call_tool("fleet__configure", {})
    assert result.is_error
    assert error_code(result) == "unknown_tool"
    assert provider.calls == []


@pytest.mark.parametrize("era", ERAS)
async def test_progress_values_increase_and_nothing_arrives_after_the_result(era: str) -> None:
    provider = FakeProvider(
        script_events=[
            FakeScriptProgress(calls=1, done=1, total=4, message="first"),
            FakeToolProgress(tool_call_id="ignored", text="a line of output"),
            FakeScriptProgress(calls=2, done=1, total=4),  # done did not advance
            FakeScriptProgress(calls=3, done=3, total=4, message="third"),
            FakeToolProgress(tool_call_id="ignored", text="", closed=True),
        ]
    )
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running(provider) as gateway, Client(gateway.server, mode=era) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("fleet__progress", {}, progress_callback=on_progress)
            count_at_result = len(seen)
            await client.list_tools()  # a full round trip after the result
    assert result.structured_content == {"ok": True}
    values = [value for value, _, _ in seen]
    assert len(seen) == 4  # the empty "closed" event sends nothing
    assert all(b > a for a, b in itertools.pairwise(values))
    assert seen[0] == (1.0, 4.0, "1 call, 0 failed: first")
    assert seen[1][2] == "a line of output"
    assert seen[3] == (3.0, 4.0, "3 calls, 0 failed: third")
    assert len(seen) == count_at_result


async def test_tool_progress_without_a_token_goes_out_as_log_messages() -> None:
    provider = FakeProvider(
        script_events=[FakeToolProgress(tool_call_id="x", text="oops", stream="stderr")]
    )
    logs: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with (
        running(provider) as gateway,
        Client(gateway.server, mode="legacy", logging_callback=on_log) as client,
    ):
        with anyio.fail_after(10):
            # a forwarded tool's progress is followed for a client that reads log messages
            with pytest.warns(MCPDeprecationWarning):  # deprecated from 2026-07-28
                await client.session.set_logging_level("info")
            await client.call_tool("fleet__progress", {})
            await client.list_tools()
    assert [(log.level, log.data, log.logger) for log in logs] == [
        ("warning", "oops", "tool_progress")
    ]


async def test_log_messages_below_the_level_set_by_the_client_are_not_sent() -> None:
    provider = FakeProvider(
        script_events=[FakeToolProgress(tool_call_id="x", text="oops", stream="stderr")]
    )
    logs: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with (
        running(provider) as gateway,
        Client(gateway.server, mode="legacy", logging_callback=on_log) as client,
    ):
        with anyio.fail_after(10):
            with pytest.warns(MCPDeprecationWarning):  # deprecated from 2026-07-28
                await client.session.set_logging_level("error")
            await client.call_tool("fleet__progress", {})
            await client.list_tools()
    assert logs == []  # the text is a "warning", below "error"


@pytest.mark.parametrize("era", ERAS)
async def test_client_cancellation_cancels_the_providers_call(era: str) -> None:
    provider = FakeProvider()
    async with running(provider) as gateway, Client(gateway.server, mode=era) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "fleet__slow", {})
                await provider.started.wait()
                tg.cancel_scope.cancel()
            await provider.cancelled.wait()
            # The connection still serves other calls.
            after = await client.call_tool("fleet__status", {})
    assert provider.cancelled.is_set()
    assert after.is_error is False


@pytest.mark.parametrize("era", ERAS)
async def test_write_call_runs_when_the_user_allows_it_through_elicitation(era: str) -> None:
    provider = FakeProvider()
    asked: list[str] = []
    async with (
        running(provider) as gateway,
        Client(
            gateway.server, mode=era, elicitation_callback=answering("allow_once", asked)
        ) as client,
    ):
        result = await client.call_tool("fleet__configure", {"sn": "A1"})
    assert result.is_error is False
    assert len(asked) == 1
    assert "'fleet__configure'" in asked[0]
    assert '"sn": "A1"' in asked[0]
    assert [call[0] for call in provider.calls] == ["fleet__configure"]


@pytest.mark.parametrize("era", ERAS)
async def test_denied_call_does_not_run_and_says_so(era: str) -> None:
    provider = FakeProvider()
    async with (
        running(provider) as gateway,
        Client(gateway.server, mode=era, elicitation_callback=answering("deny")) as client,
    ):
        result = await client.call_tool("fleet__configure", {})
    assert result.is_error
    assert error_code(result) == "approval_denied"
    assert provider.calls == []


async def test_declined_elicitation_counts_as_deny() -> None:
    provider = FakeProvider()
    async with (
        running(provider) as gateway,
        Client(gateway.server, mode="legacy", elicitation_callback=answering(None)) as client,
    ):
        result = await client.call_tool("fleet__reboot", {})
    assert error_code(result) == "approval_denied"
    assert provider.calls == []


@pytest.mark.parametrize("era", ERAS)
async def test_client_without_elicitation_gets_a_refusal_that_says_how_to_allow(era: str) -> None:
    provider = FakeProvider()
    async with running(provider) as gateway, Client(gateway.server, mode=era) as client:
        write = await client.call_tool("fleet__configure", {})
        destructive = await client.call_tool("fleet__reboot", {})
    assert error_code(write) == "not_allowed"
    assert isinstance(write.content[0], mt.TextContent)
    assert "--mode auto" in write.content[0].text
    assert "elicitation" in write.content[0].text
    assert error_code(destructive) == "not_allowed"
    assert provider.calls == []


async def test_allow_for_session_is_remembered_but_destructive_is_asked_every_time() -> None:
    provider = FakeProvider()
    asked: list[str] = []
    async with (
        running(provider) as gateway,
        Client(
            gateway.server, mode="legacy", elicitation_callback=answering("allow_session", asked)
        ) as client,
    ):
        await client.call_tool("fleet__configure", {})
        await client.call_tool("fleet__configure", {})
        reboot = await client.call_tool("fleet__reboot", {})
    # The write tool was asked once; "allow for this session" is not offered for a destructive
    # tool, so that answer counts as a denial there.
    assert len(asked) == 2
    assert error_code(reboot) == "approval_denied"
    assert [call[0] for call in provider.calls] == ["fleet__configure", "fleet__configure"]


async def test_auto_mode_runs_writes_without_asking_but_asks_for_destructive() -> None:
    provider = FakeProvider()
    asked: list[str] = []
    async with (
        running(provider, mode="auto") as gateway,
        Client(
            gateway.server, mode="legacy", elicitation_callback=answering("allow_once", asked)
        ) as client,
    ):
        await client.call_tool("fleet__configure", {})
        await client.call_tool("fleet__reboot", {})
    assert len(asked) == 1
    assert "destructive" in asked[0]
    assert [call[0] for call in provider.calls] == ["fleet__configure", "fleet__reboot"]


async def test_a_configured_approver_answers_instead_of_the_client() -> None:
    provider = FakeProvider()
    async with (
        running(provider, approver=DenyAllApprover()) as gateway,
        Client(gateway.server, elicitation_callback=answering("allow_once")) as client,
    ):
        result = await client.call_tool("fleet__configure", {})
    assert error_code(result) == "approval_denied"


async def test_two_client_sessions_keep_their_grants_apart() -> None:
    provider = FakeProvider()
    first_asked: list[str] = []
    second_asked: list[str] = []
    async with (
        running(provider) as gateway,
        Client(
            gateway.server,
            mode="legacy",
            elicitation_callback=answering("allow_session", first_asked),
        ) as first,
        Client(
            gateway.server,
            mode="legacy",
            elicitation_callback=answering("deny", second_asked),
        ) as second,
    ):
        await first.call_tool("fleet__configure", {})
        denied = await second.call_tool("fleet__configure", {})
        await first.call_tool("fleet__configure", {})
    assert len(first_asked) == 1
    assert len(second_asked) == 1
    assert error_code(denied) == "approval_denied"
    sessions = {call[2].session_id for call in provider.calls if call[2] is not None}
    assert len(sessions) == 1  # only the first session's calls ran


async def test_each_session_gets_its_own_session_id_in_the_context() -> None:
    provider = FakeProvider()
    async with (
        running(provider) as gateway,
        Client(gateway.server, mode="legacy") as first,
        Client(gateway.server, mode="legacy") as second,
    ):
        await first.call_tool("fleet__status", {})
        await second.call_tool("fleet__status", {})
        await first.call_tool("fleet__status", {})
    ids = [call[2].session_id for call in provider.calls if call[2] is not None]
    assert ids[0] == ids[2] != ids[1]


def mode_of(provider: FakeProvider) -> PermissionMode | None:
    context = provider.calls[-1][2]
    return context.permission_mode if context else None


async def test_per_request_clients_are_not_offered_allow_for_this_session() -> None:
    provider = FakeProvider()
    asked: list[str] = []
    async with (
        running(provider) as gateway,
        Client(
            gateway.server, mode="auto", elicitation_callback=answering("allow_session", asked)
        ) as client,
    ):
        result = await client.call_tool("fleet__configure", {})
    assert error_code(result) == "approval_denied"
    assert len(asked) == 1
    assert provider.calls == []


async def test_one_tool_with_a_bad_schema_is_withheld_and_the_others_stay() -> None:
    class BadSchemaProvider(FakeProvider):
        def list_specs(self) -> list[ToolSpec]:
            bad = ToolSpec(name="bad__tool", permission="read_only", input_schema={"type": "array"})
            return [*super().list_specs(), bad]

    provider = BadSchemaProvider()
    async with running(provider) as gateway, Client(gateway.server) as client:
        names = await tool_names(client)
        called = await client.call_tool("bad__tool", {})
    assert "bad__tool" not in names
    assert "fleet__status" in names
    assert error_code(called) == "invalid_upstream_schema"
    assert provider.calls == []
