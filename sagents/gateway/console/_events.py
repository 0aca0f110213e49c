"""The console's live updates (docs/console.md): one Server-Sent-Events stream per open page,
fed by :class:`~sagents.gateway.console._live.LiveRuns` and filtered for the page's principal
and what the page shows, with the ids of the approvals waiting (``approvals.state``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from sagents.gateway._pending import PendingApproval
from sagents.gateway._web_auth import Principal
from sagents.gateway.console._auth import COOKIE_NAME
from sagents.gateway.console._live import (
    MAX_STREAMS_PER_PRINCIPAL,
    LiveUpdate,
    TooManyStreams,
    sse_frame,
)
from sagents.gateway.console._records import valid_run_id

if TYPE_CHECKING:
    from sagents.gateway.console._app import Console, ConsoleData

__all__ = ["COALESCE_S", "HEARTBEAT_S", "LiveEvents", "ids_of", "page_frames"]

HEARTBEAT_S: Final = 15.0  # seconds between SSE comments that keep a quiet stream open
# Seconds a page's stream waits after an event for the ones behind it, which then go out in
# the same write: with many pages open, one write per event and page is what costs
# (bench/bench_console_watchers.py --serve); a person watching does not see 50 ms.
COALESCE_S: Final = 0.05


class LiveEvents:
    """The ``/console/events`` stream of a console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def data(self) -> ConsoleData:
        """What the console serves."""
        return self.console.data

    async def events(self, request: Request) -> Response:
        bearer = self.console.web.bearer(request)
        session = None if bearer else self.console.auth.session(request.cookies.get(COOKIE_NAME))
        principal = bearer or (session.principal if session and not session.closed else None)
        if principal is None:
            return PlainTextResponse("log in first", status_code=401)
        live = self.data.live
        if live is not None and live.streams_of(principal.identity) >= MAX_STREAMS_PER_PRINCIPAL:
            return PlainTextResponse(
                f"{MAX_STREAMS_PER_PRINCIPAL} console pages with live updates are open already: "
                "close one",
                status_code=429,
            )
        run_id = request.query_params.get("run", "")
        run = live.run_of(run_id) if live is not None and valid_run_id(run_id) else None

        def alive() -> bool:
            """Re-checked at every event and heartbeat: a logout or an eviction ends the
            stream even if an event was already buffered for it."""
            return session is None or not session.closed

        async def stream() -> AsyncIterator[bytes]:
            if live is None:
                yield b": no gateway\n\n"
                return
            try:
                subscription = live.subscribe(
                    key=session.sid if session else "",
                    principal=principal.identity,
                    output_of=run.tool_call_id if run is not None else None,
                )
                async with subscription as updates:
                    if self.data.pending is not None:
                        # What waits now, as of the subscription: the approvals page rendered
                        # just before a request arrived reloads (no event can fall between
                        # render and here), and every page's navigation shows the count.
                        yield self.approvals_state(principal)
                    if run is not None and self.console.visible(principal, run.session_id):
                        snapshot = {"type": "snapshot", "streams": live.text_of(run.tool_call_id),
                                    "progress": run.progress}  # fmt: skip
                        yield sse_frame(snapshot)
                    tool_call_id = run.tool_call_id if run else None
                    while True:
                        batch: list[LiveUpdate] = []
                        with anyio.move_on_after(HEARTBEAT_S):
                            batch.append(await updates.receive())
                            await anyio.sleep(COALESCE_S)  # a burst goes out as one write
                            batch.extend(_waiting(updates))
                        if not alive():
                            return
                        if not batch:
                            yield b": keep-alive\n\n"
                            continue
                        frames = page_frames(
                            batch,
                            lambda u: (
                                self.console.visible(principal, u.session_id)
                                and _wanted(u.event, run_id, tool_call_id)
                            ),
                        )
                        if self.data.pending is not None and any(
                            u.event.get("type") == "approvals.changed" for u in batch
                        ):  # the count in every page's navigation, as this principal sees it
                            frames += self.approvals_state(principal)
                        if frames:
                            yield frames
            except (TooManyStreams, anyio.EndOfStream):
                return  # too many opened meanwhile; or the session's streams were closed

        response = StreamingResponse(
            stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )
        return response

    def approvals_state(self, principal: Principal) -> bytes:
        """The ``approvals.state`` frame: the ids of what waits for ``principal`` (the operator:
        everything), in :func:`ids_of`'s order."""
        assert self.data.pending is not None
        owner = None if principal.operator else principal.identity
        ids = ids_of(self.data.pending.pending(owner=owner))
        return sse_frame({"type": "approvals.state", "ids": ids})


def ids_of(items: list[PendingApproval]) -> list[str]:
    """The ids of what waits, in the one order both the approvals page (its ``data-pending``)
    and the event stream's ``approvals.state`` use: the page reloads while the two differ."""
    return sorted(item.approval_id for item in items)


def _wanted(event: dict[str, Any], run_id: str, tool_call_id: str | None) -> bool:
    """Whether a page receives ``event``: a run's page its own progress and output; the lists
    everything but output."""
    kind = event.get("type")
    if not run_id:
        return kind != "tool_progress"
    if kind == "tool_progress":
        return tool_call_id is not None and event.get("tool_call_id") == tool_call_id
    if kind == "script.progress":
        return event.get("script_id") == run_id
    return False


def page_frames(batch: list[LiveUpdate], keep: Callable[[LiveUpdate], bool]) -> bytes:
    """The frames of the updates in ``batch`` that a page ``keep``s, as one write (each
    serialised once for every page: :attr:`LiveUpdate.frame`)."""
    return b"".join(update.frame for update in batch if keep(update))


def _waiting(updates: MemoryObjectReceiveStream[LiveUpdate]) -> list[LiveUpdate]:
    """The updates already buffered for a page (taken without waiting)."""
    found: list[LiveUpdate] = []
    while True:
        try:
            found.append(updates.receive_nowait())
        except anyio.WouldBlock:
            return found
