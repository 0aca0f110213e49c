"""The MCP server façade of ``sagents serve`` (issue 7, §1), on the ``mcp`` SDK's low-level server.

One :class:`Gateway` serves one shared :class:`~sagents.gateway.seams.ToolProvider` to any number of
client sessions, each with its own state (tools allowed for the session, background tasks):

- ``tools/list``: the provider's tools that the session's mode and profile offer
  (:mod:`sagents.gateway.policy`), plus ``script_status`` / ``script_cancel`` when background
  calls are on;
- ``tools/call``: policy, approval (MCP elicitation; on 2026-07-28 connections through
  ``InputRequiredResult``; otherwise a refusal that says how to allow the call), then the
  provider's ``run_tool``, with the call's progress forwarded as ``notifications/progress``
  (values strictly increasing, nothing after the result) and cancellation from the client
  cancelling the provider's call;
- ``resources/list`` / ``resources/read``: the session's background tasks
  (``sagents://tasks/<id>``), so that finished results can be listed and read.

Session identity: a handshake-era connection (stdio; HTTP with ``Mcp-Session-Id``) is one session.
A 2026-07-28 connection is one request and carries no client identity, so those requests share
one session per (bearer token, profile): "allow for this session" is not offered to them (a grant
must not leak to another client), and their background tasks are shared by every client that
holds the same token (over stdio there is only one client).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import uuid
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, cast

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents import __version__
from sagents.core.permissions import PermissionMode
from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.errors import (
    ApprovalDeniedError,
    NotAllowedError,
    SagentsError,
    TaskNotFoundError,
    UnknownToolError,
    UpstreamSchemaError,
)
from sagents.gateway.approval import (
    CLIENT_ASKER,
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    ClientAsker,
    ElicitationApprover,
    answer_from_elicitation,
    approval_form,
    refusal_text,
)
from sagents.gateway.background import (
    CANCEL_TOOL,
    STATUS_TOOL,
    TASK_URI_PREFIX,
    BackgroundTasks,
    TaskInfo,
    handed_off_result,
    task_json,
    task_tools,
)
from sagents.gateway.convert import spec_to_mcp_tool, to_call_tool_result, to_mcp_content
from sagents.gateway.policy import Profile, call_requirement, is_offered
from sagents.gateway.progress import ProgressForwarder
from sagents.gateway.seams import ProgressSource, ResourceSource, ToolProvider
from sagents.tool.context import SessionContext

__all__ = ["APPROVAL_INPUT_KEY", "Gateway"]

logger = logging.getLogger(__name__)

APPROVAL_INPUT_KEY = "sagents_approval"
"""Key of the approval elicitation in an ``InputRequiredResult`` (2026-07-28 connections)."""
_STATE_KEY = "sagents.gateway.session"
_RESOURCE_NOT_FOUND = -32002  # MCP spec 2025-11-25, "Resources", "Error Handling"


@dataclass(kw_only=True)
class _ClientSession:
    """Per-client-session state, kept apart from every other session."""

    session_id: str
    profile: Profile | None
    mode: PermissionMode
    granted: set[str] = field(default_factory=set)
    log_level: mt.LoggingLevel = "debug"


class Gateway:
    """The MCP server façade over one tool provider; an async context manager.

    Args:
        provider: The tools served (shaped like ``ToolProxy``).
        mode: Default permission mode of sessions (a profile's mode wins).
        profile: Profile of sessions that carry no bearer token bound to another one.
        token_profiles: Over HTTP, the profile bound to each bearer token.
        progress: Where the progress events of each call come from; None forwards none.
        resources: Resources served beside the background tasks (skill files), filtered by the
            session profile's skills; None serves only the tasks.
        approver: Decides approvals instead of asking the client (tests, a terminal); None asks
            the client through MCP elicitation, and refuses when it cannot.
        background_after_s: Seconds after which a call becomes a background call; None never.
        workspace: Passed on in each call's ``SessionContext``.
        name: Server name announced to clients.

    Use::

        async with Gateway(provider) as gateway:
            await gateway.run_stdio()
    """

    def __init__(
        self,
        provider: ToolProvider,
        *,
        mode: PermissionMode = "ask",
        profile: Profile | None = None,
        token_profiles: Mapping[str, Profile] | None = None,
        progress: ProgressSource | None = None,
        resources: ResourceSource | None = None,
        approver: Approver | None = None,
        background_after_s: float | None = None,
        workspace: str | None = None,
        name: str = "sagents",
    ) -> None:
        self.provider = provider
        self.mode: PermissionMode = mode
        self.profile = profile
        self.token_profiles: dict[str, Profile] = dict(token_profiles or {})
        self.progress = progress
        self.resources = resources
        self.approver = approver
        self.background_after_s = background_after_s
        self.workspace = workspace
        self._shared_sessions: dict[str, _ClientSession] = {}
        self._tasks = BackgroundTasks()
        self._running = False
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        with warnings.catch_warnings():
            # logging/setLevel is deprecated from protocol 2026-07-28 (SEP-2577), but clients of
            # the handshake era (2025-06-18, 2025-11-25) still use it to filter log messages.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[Any] = Server(
                name,
                version=__version__,
                instructions=(
                    "sagents gateway: the tools of the configured MCP servers, run_script and "
                    "skills, with permissions and live progress."
                ),
                on_list_tools=self._on_list_tools,
                on_call_tool=self._on_call_tool,
                on_list_resources=self._on_list_resources,
                on_read_resource=self._on_read_resource,
                on_set_logging_level=self._on_set_logging_level,
            )

    async def __aenter__(self) -> Self:
        await self._tasks.__aenter__()
        self._running = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._running = False
        return await self._tasks.__aexit__(exc_type, exc, tb)

    def initialization_options(self) -> InitializationOptions:
        """The server's initialization options (it announces both list-changed kinds)."""
        return self.server.create_initialization_options(
            NotificationOptions(resources_changed=True, tools_changed=True)
        )

    async def notify_tools_changed(self) -> int:
        """Send ``notifications/tools/list_changed`` to every connected handshake-era client.

        Called when the provider's tools change (an upstream server's list changed). Clients
        on 2026-07-28 connections have no standing channel and see the change on their next
        ``tools/list``.

        Returns:
            How many clients were notified.
        """
        sent = 0
        for connection in list(self._connections):
            try:
                await connection.send_tool_list_changed()
                sent += 1
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not notify a client of changed tools: %s", error)
                self._connections.discard(connection)
        return sent

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        from sagents.gateway.stdin_lines import BoundedLines

        stdin = cast("anyio.AsyncFile[str]", BoundedLines(sys.stdin.buffer))  # one line is capped
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.initialization_options())

    # Sessions -------------------------------------------------------------------------------

    def _profile_for(self, ctx: ServerRequestContext[Any, Any]) -> Profile | None:
        token = _bearer_token(ctx)
        if token and token in self.token_profiles:
            return self.token_profiles[token]
        return self.profile

    def _session_for(self, ctx: ServerRequestContext[Any, Any]) -> _ClientSession:
        profile = self._profile_for(ctx)
        mode = profile.mode if profile is not None and profile.mode is not None else self.mode
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            digest = hashlib.sha256(_bearer_token(ctx).encode()).hexdigest()[:16]
            key = f"shared:{digest}:{profile.name if profile else ''}"
            session = self._shared_sessions.get(key)
            if session is None:
                session = _ClientSession(session_id=uuid.uuid4().hex, profile=profile, mode=mode)
                self._shared_sessions[key] = session
            return session
        # The SDK gives handlers no public handle on the per-connection state (ServerRequestContext
        # has none); Connection.state is the documented per-connection scratch space.
        self._connections.add(ctx.session._connection)
        state: dict[str, Any] = ctx.session._connection.state
        found = state.get(_STATE_KEY)
        if isinstance(found, _ClientSession):
            return found
        session = _ClientSession(session_id=uuid.uuid4().hex, profile=profile, mode=mode)
        state[_STATE_KEY] = session
        return session

    def _offered_specs(self, session: _ClientSession) -> dict[str, ToolSpec]:
        specs: dict[str, ToolSpec] = {}
        for spec in self.provider.list_specs():
            if spec.name in (STATUS_TOOL, CANCEL_TOOL) and self.background_after_s is not None:
                logger.warning(
                    "the provider's tool %r is hidden by the gateway's own tool of that name",
                    spec.name,
                )
                continue
            if is_offered(spec, session.mode, session.profile):
                specs[spec.name] = spec
        return specs

    async def _on_set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams
    ) -> mt.EmptyResult:
        """``logging/setLevel``: log messages of this session below ``level`` are not sent."""
        self._session_for(ctx).log_level = params.level
        return mt.EmptyResult()

    # tools/list --------------------------------------------------------------------------------

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        session = self._session_for(ctx)
        tools: list[mt.Tool] = []
        for spec in self._offered_specs(session).values():
            try:
                tools.append(spec_to_mcp_tool(spec))
            except UpstreamSchemaError as error:
                logger.warning("withholding tool %r: %s", spec.name, error)
        if self.background_after_s is not None:
            tools.extend(task_tools())
        return mt.ListToolsResult(tools=tools)

    # tools/call --------------------------------------------------------------------------------

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        session = self._session_for(ctx)
        arguments: dict[str, Any] = dict(params.arguments or {})
        if self.background_after_s is not None and params.name in (STATUS_TOOL, CANCEL_TOOL):
            return to_call_tool_result(await self._task_tool(session, params.name, arguments))
        spec = self._offered_specs(session).get(params.name)
        if spec is None:
            error = UnknownToolError(
                f"no tool {params.name!r} is offered to this session",
                hint="call tools/list for the tools this session may call",
                details={"tool": params.name},
            )
            return to_call_tool_result(ToolResult.from_exception(error))
        try:
            spec_to_mcp_tool(spec)  # a tool withheld from tools/list is not callable either
        except UpstreamSchemaError as schema_error:
            return to_call_tool_result(ToolResult.from_exception(schema_error))
        requirement = call_requirement(spec, session.mode, session.granted)
        if requirement != "run":
            request = ApprovalRequest(
                tool=spec.name,
                arguments=arguments,
                permission=spec.permission,
                session_id=session.session_id,
                rememberable=requirement == "approve"
                and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS,
            )
            answer = await self._approval(ctx, params, request)
            if isinstance(answer, mt.InputRequiredResult):
                return answer
            if answer is None:
                return to_call_tool_result(_refused(request))
            if answer == "deny":
                return to_call_tool_result(_denied(request))
            if answer == "allow_session":
                session.granted.add(spec.name)
        return to_call_tool_result(await self._run(ctx, session, spec.name, arguments))

    async def _approval(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        request: ApprovalRequest,
    ) -> ApprovalAnswer | mt.InputRequiredResult | None:
        """The answer; an ``InputRequiredResult`` to ask a 2026-07-28 client; None to refuse."""
        if self.approver is not None:
            return await self.approver.approve(request)
        can_elicit = ctx.session.check_client_capability(
            mt.ClientCapabilities(elicitation=mt.ElicitationCapability())
        )
        if not can_elicit:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            state = _request_state(request)
            response = (params.input_responses or {}).get(APPROVAL_INPUT_KEY)
            if isinstance(response, mt.ElicitResult) and params.request_state == state:
                return answer_from_elicitation(response, request)
            message, schema = approval_form(request)
            elicit = mt.ElicitRequest(
                params=mt.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            return mt.InputRequiredResult(
                input_requests={APPROVAL_INPUT_KEY: elicit}, request_state=state
            )
        try:
            return await ElicitationApprover(ClientAsker(ctx)).approve(request)
        except NoBackChannelError:
            return None  # this connection cannot carry a server-to-client request

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: _ClientSession,
        name: str,
        arguments: dict[str, Any],
    ) -> ToolResult:
        """Run the call with its progress forwarded; hand it off after ``background_after_s``."""
        tool_call_id = f"call_{uuid.uuid4().hex[:16]}"
        context = SessionContext(
            session_id=session.session_id,
            workspace=self.workspace,
            permission_mode=session.mode,
        )

        async def call() -> ToolResult:
            token = CLIENT_ASKER.set(ClientAsker(ctx))
            try:
                return await self.provider.run_tool(
                    name, arguments, context, tool_call_id=tool_call_id
                )
            except SagentsError as error:  # the provider should return it; never end the session
                return ToolResult.from_exception(error)
            finally:
                CLIENT_ASKER.reset(token)

        forwarder = ProgressForwarder(ctx, log_level=session.log_level)
        events: MemoryObjectReceiveStream[object] | None = None
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if self.progress is not None:
                    events = await tg.start(self._subscribe, session.session_id, tool_call_id, stop)
                    tg.start_soon(forwarder.forward, events)
                try:
                    if self.background_after_s is None:
                        result = await call()
                    else:
                        task_id = await self._tasks.start(session.session_id, name, call)
                        done = await self._tasks.wait(
                            task_id,
                            hand_off_after=self.background_after_s,
                            on_done=self._notifier(ctx),
                        )
                        result = done if done is not None else handed_off_result(name, task_id)
                finally:
                    # Ending the subscription ends the forwarder once it has sent what was
                    # emitted (cancelling it could lose an event it is in the middle of sending).
                    stop.set()
            if events is not None:
                await forwarder.drain(events)  # before the result: nothing is sent after it
        finally:
            if events is not None:
                events.close()
        return result

    async def _subscribe(
        self,
        session_id: str,
        tool_call_id: str,
        stop: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[MemoryObjectReceiveStream[object]],
    ) -> None:
        assert self.progress is not None
        async with self.progress.subscribe(session_id, tool_call_id) as events:
            task_status.started(events.clone())
            await stop.wait()

    def _notifier(self, ctx: ServerRequestContext[Any, Any]) -> Any:
        connection = ctx.session._connection  # see _session_for: the standalone channel

        async def on_done(info: TaskInfo) -> None:
            try:
                await connection.send_resource_list_changed()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await connection.log(
                        "info",
                        {
                            "event": "background.done",
                            "task_id": info.task_id,
                            "tool": info.tool,
                            "status": info.status,
                            "uri": TASK_URI_PREFIX + info.task_id,
                        },
                        logger="sagents.gateway",
                    )
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not notify the client of task %s: %s", info.task_id, error)

        return on_done

    # Background tasks: tools and resources --------------------------------------------------

    async def _task_tool(
        self, session: _ClientSession, name: str, arguments: dict[str, Any]
    ) -> ToolResult:
        task_id = arguments.get("id")
        if task_id is not None and not isinstance(task_id, str):
            return ToolResult.from_error("invalid_arguments", "'id' must be a string")
        try:
            if name == CANCEL_TOOL:
                if task_id is None:
                    return ToolResult.from_error("invalid_arguments", "'id' is required")
                info = await self._tasks.cancel(session.session_id, task_id)
                return ToolResult.from_structured(task_json(info))
            if task_id is None:
                listing = [task_json(i) for i in self._tasks.list(session.session_id)]
                return ToolResult.from_structured({"tasks": listing})
            return ToolResult.from_structured(
                task_json(self._tasks.get(session.session_id, task_id), full=True)
            )
        except TaskNotFoundError as error:
            return ToolResult.from_exception(error)

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        session = self._session_for(ctx)
        resources = [
            mt.Resource(
                uri=TASK_URI_PREFIX + info.task_id,
                name=f"task {info.task_id}",
                description=f"background call of {info.tool!r}: {info.status}",
                mime_type="application/json",
            )
            for info in self._tasks.list(session.session_id)
        ]
        if self.resources is not None:
            resources.extend(
                mt.Resource(
                    uri=link.uri,
                    name=link.name,
                    title=link.title,
                    description=link.description,
                    mime_type=link.mime_type,
                    size=link.size,
                )
                for link in self.resources.list_resources(_skills_of(session))
            )
        return mt.ListResourcesResult(resources=resources)

    async def _on_read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        session = self._session_for(ctx)
        uri = str(params.uri)
        try:
            if uri.startswith(TASK_URI_PREFIX):
                info = self._tasks.get(session.session_id, uri.removeprefix(TASK_URI_PREFIX))
                text = json.dumps(task_json(info, full=True), ensure_ascii=False)
                return mt.ReadResourceResult(
                    contents=[
                        mt.TextResourceContents(uri=uri, mime_type="application/json", text=text)
                    ]
                )
            if self.resources is None:
                raise MCPError(_RESOURCE_NOT_FOUND, f"unknown resource {uri!r}")
            found = await self.resources.read_resource(uri, _skills_of(session))
        except SagentsError as error:
            raise MCPError(_RESOURCE_NOT_FOUND, error.message) from error
        block = to_mcp_content(found)
        assert isinstance(block, mt.EmbeddedResource)
        return mt.ReadResourceResult(contents=[block.resource])


def _skills_of(session: _ClientSession) -> frozenset[str] | None:
    return session.profile.skills if session.profile is not None else None


def _denied(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        ApprovalDeniedError(
            f"the call of {request.tool!r} was not approved",
            hint=(
                "the user did not approve it (declined, cancelled or no answer in time); "
                "do not retry the same call without asking the user"
            ),
            details={"tool": request.tool},
        )
    )


def _refused(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        NotAllowedError(refusal_text(request), details={"tool": request.tool})
    )


def _bearer_token(ctx: ServerRequestContext[Any, Any]) -> str:
    """The request's bearer token over HTTP; empty otherwise."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return ""
    scheme, _, token = str(headers.get("authorization", "")).partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _request_state(request: ApprovalRequest) -> str:
    """Binds an approval answer to the call it was asked for (tool and arguments)."""
    payload = json.dumps([request.tool, dict(request.arguments)], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()
