"""``emit_tool_progress``: coalesced tool output bound to the running tool call (docs/progress.md).

The ToolManager wraps each tool call in :func:`bind_tool_call`; inside it,
:func:`emit_tool_progress` and :func:`emit_tool_progress_closed` find the session and the
``tool_call_id`` through a context variable. Outside a bound context (the CLI, unit tests, old
callers) both are silent no-ops. Tool signatures and results do not change, and progress never
enters a tool result.

Coalescing, per (tool_call_id, stream), with the hub's settings:

* Text on a stream that has not sent for ``flush_interval_s`` goes out at once (leading edge);
  further text within the window waits in a buffer and goes out as one event when the window
  ends (a helper task of :func:`bind_tool_call` wakes at that deadline; it is started by the
  first text that has to wait, so a call that never coalesces never starts it).
* Once ``flush_bytes`` UTF-8 bytes wait, the buffer is flushed at once (bytes, not characters).
* ``flush_interval_s == 0`` sends every piece at once.
* Relative order across streams is kept: text for another stream of the same call first
  flushes whatever waits for the previous one, so at most one stream of a call has text
  waiting. (Rapidly alternating stdout/stderr therefore coalesces less.)
* :func:`emit_tool_progress_closed` (or leaving :func:`bind_tool_call`, even by an exception or
  a cancellation) flushes the call's text, then sends one ``closed: true`` event (``text`` empty,
  ``stream`` ``info``); later emits of that call are ignored.
* Unregistering a consumer flushes every bound call of the session first (see
  :meth:`~sagents.progress.ProgressHub.unregister_progress_queue`).

Bound lazily: a call that starts while nobody listens to its session (no queue registered,
:meth:`~sagents.progress.ProgressHub.listening`) gets :func:`bind_quiet_tool_call` instead, which
costs a context variable and nothing else (no helper task, no hub tracking). Should a consumer
register while such a call runs, the call's text still reaches it, uncoalesced (each emit is one
event), and its ``closed`` event too; with nobody listening, ``closed`` is not even built. The
ToolManager binds a :class:`LazyToolCall` instead; a call of no session and no id outside any
bound call gets nothing bound (docs/progress.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Final, get_args

import anyio
import anyio.from_thread

from sagents.core.events import ProgressStream, ToolProgressEvent
from sagents.progress._hub import ProgressHub
from sagents.progress._scope import run_beside

__all__ = [
    "BoundToolCall",
    "LazyToolCall",
    "QuietToolCall",
    "ToolCallBinding",
    "bind_quiet_tool_call",
    "bind_tool_call",
    "current_tool_call",
    "emit_tool_progress",
    "emit_tool_progress_closed",
    "emit_tool_progress_from_thread",
    "listened_tool_call",
    "on_asyncio",
    "raw_tool_call",
]

_get_ident = threading.get_ident
_STREAMS: Final[frozenset[str]] = frozenset(get_args(ProgressStream))

_current: contextvars.ContextVar[ToolCallBinding | LazyToolCall | None] = contextvars.ContextVar(
    "sagents_tool_call_binding", default=None
)
raw_tool_call: Callable[[], ToolCallBinding | LazyToolCall | None] = _current.get
"""What the context variable holds: the running call's binding (built or lazy), or None outside
any bound call. Unlike :func:`current_tool_call`, builds nothing (the C method, no frame)."""


class ToolCallBinding:
    """The progress state of one running tool call: its coalescing buffer.

    Created by :func:`bind_tool_call`; tools use the module functions instead.

    Args:
        hub: The hub that routes the events.
        session_id: The session the call belongs to.
        tool_call_id: The call's id (the events' ``tool_call_id``).
        coalesce: Coalesce text as the hub's settings say (needs :meth:`run_flusher` running
            beside the call); False sends each emit at once as its own event, and sends the
            ``closed`` event only when someone listens to the session.
        session_context: The call's context as its binder knows it (the ToolManager: the
            call's ``SessionContext``); None: that of the call this one runs inside, if any (a
            call of no session made inside another runs as part of it). Progress never reads
            it: it is how code running inside the call finds the call
            (``sagents.tool._context.running_context``).
    """

    def __init__(
        self,
        hub: ProgressHub,
        session_id: str,
        tool_call_id: str,
        *,
        coalesce: bool = True,
        session_context: object = None,
    ) -> None:
        self.hub = hub
        self.session_id = session_id
        self.tool_call_id = tool_call_id
        self.session_context = _or_outer(session_context)
        settings = hub.settings
        self._enabled = settings.enabled
        self._coalesce = coalesce
        self._interval = settings.flush_interval_s if coalesce else 0.0
        self._flush_bytes = settings.flush_bytes
        self._clock = hub.clock
        self._pending: list[str] = []
        self._pending_bytes = 0
        self._pending_stream: ProgressStream | None = None
        self._last_sent: dict[str, float] = {}
        self._closed = False
        self._wake: anyio.Event | None = None  # created by the flusher, when there is one
        self._start_flusher: Callable[[], object] | None = None  # see bind_tool_call
        self._sleep: tuple[float, anyio.CancelScope] | None = None  # the flusher's deadline
        self._loop_thread = threading.get_ident()

    @property
    def loop_thread(self) -> int:
        """The ident of the event loop thread the binding was created in."""
        return self._loop_thread

    @property
    def closed(self) -> bool:
        """True once the ``closed`` event was sent."""
        return self._closed

    @property
    def coalescing(self) -> bool:
        """Whether text can wait for its window (then a flusher sends it when it ends)."""
        return self._enabled and bool(self._interval)

    @property
    def pending_bytes(self) -> int:
        """UTF-8 bytes waiting in the coalescing buffer."""
        return self._pending_bytes

    def emit(self, text: str, stream: ProgressStream = "stdout") -> None:
        """Add text under the coalescing rules (see the module docstring); never blocks."""
        if not self._enabled or self._closed or not text:
            return
        if self._pending_stream is not None and self._pending_stream != stream:
            self.flush()
        now = self._clock.monotonic()
        if self._pending_stream is None and (
            now - self._last_sent.get(stream, -math.inf) >= self._interval
        ):
            self._send(text, stream, now)
            return
        self._pending.append(text)
        self._pending_bytes += len(text.encode())
        self._pending_stream = stream
        if self._pending_bytes >= self._flush_bytes:
            self.flush()
            return
        if self._wake is not None:
            self._wake.set()
        elif self._start_flusher is not None:  # the first text that waits: start the flusher
            start, self._start_flusher = self._start_flusher, None
            start()
        due = self.next_deadline()
        if self._sleep is not None and due is not None and due < self._sleep[0]:
            self._sleep[1].cancel()  # another stream's window ends sooner: re-plan the wait

    def flush(self) -> None:
        """Send the waiting text now, as one event."""
        stream = self._pending_stream
        if stream is None:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        self._pending_stream = None
        self._send(text, stream, self._clock.monotonic())

    def close(self) -> None:
        """Flush, then send the ``closed`` event once: only for a call that said something
        (a call without progress has no stream to close, so no event at all), and never when
        progress is disabled."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        if not self._last_sent:
            return
        if self._enabled and (self._coalesce or self.hub.listening(self.session_id)):
            self.hub.publish(
                self.session_id,
                ToolProgressEvent(
                    tool_call_id=self.tool_call_id,
                    text="",
                    stream="info",
                    closed=True,
                    ts=self._clock.time(),
                ),
            )

    def next_deadline(self) -> float | None:
        """When the waiting text is due (monotonic seconds), or None if nothing waits."""
        if self._pending_stream is None:
            return None
        return self._last_sent.get(self._pending_stream, -math.inf) + self._interval

    async def run_flusher(self) -> None:
        """Flush waiting text when its window ends; runs beside the tool call until cancelled."""
        if self._wake is None:
            self._wake = anyio.Event()
            if self._pending_stream is not None:
                self._wake.set()  # text arrived before the flusher started
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while (deadline := self.next_deadline()) is not None:
                with anyio.CancelScope() as scope:
                    self._sleep = (deadline, scope)
                    await self._clock.sleep_until(deadline)
                self._sleep = None
                due = self.next_deadline()
                if due is not None and self._clock.monotonic() >= due:
                    self.flush()

    def _send(self, text: str, stream: ProgressStream, now: float) -> None:
        self._last_sent[stream] = now
        if not self._coalesce and not self.hub.listening(self.session_id):
            return  # nobody to build the event for
        self.hub.publish(
            self.session_id,
            ToolProgressEvent(
                tool_call_id=self.tool_call_id, text=text, stream=stream, ts=self._clock.time()
            ),
        )


@asynccontextmanager
async def bind_tool_call(
    hub: ProgressHub, session_id: str, tool_call_id: str, *, session_context: object = None
) -> AsyncIterator[ToolCallBinding]:
    """Bind :func:`emit_tool_progress` to a tool call for the duration of the block.

    The ToolManager calls this around each tool call. On exit (normal, exception or
    cancellation) pending text is flushed and the ``closed`` event sent; the body's exception
    propagates unchanged.

    Args:
        hub: The hub that routes the session's events.
        session_id: The session the call belongs to.
        tool_call_id: The assistant tool call's id.
        session_context: The call's context (:attr:`ToolCallBinding.session_context`).

    Yields:
        The call's :class:`ToolCallBinding`.
    """
    bound = BoundToolCall(hub, session_id, tool_call_id, session_context=session_context)
    bound.bind()
    binding = bound.binding
    try:
        if binding._start_flusher is None and binding.coalescing:
            # trio: a task group beside the call (a task cannot be started without one)
            async with run_beside() as helpers:
                binding._start_flusher = functools.partial(helpers.start_soon, binding.run_flusher)
                yield binding
        else:
            yield binding
    finally:
        await bound.unbind()


class BoundToolCall:
    """A call's coalescing binding, bound with :meth:`bind` and unbound with :meth:`unbind`:
    :func:`bind_tool_call` without a context manager's own calls, for a caller that binds
    every call it makes (``ToolManager.run_tool``, in each call of a tool an agent's run
    listens to: bench/bench_agent_loop.py).

    On asyncio, the flusher is started by the first text that has to wait for its window: a
    call that sends nothing, or only text that goes out at once, never starts a task, nor
    enters a task group (whose exit alone is a trip through the event loop). On another
    event loop (trio) a coalescing binding needs a task group beside the call: :meth:`bind`
    leaves ``binding._start_flusher`` unset, and :func:`bind_tool_call` enters one.

    Args:
        hub: The hub that routes the session's events.
        session_id: The session the call belongs to.
        tool_call_id: The call's id.
        session_context: The call's context (:attr:`ToolCallBinding.session_context`).
    """

    __slots__ = ("_flusher", "_token", "binding")
    _token: contextvars.Token[ToolCallBinding | LazyToolCall | None]

    def __init__(
        self, hub: ProgressHub, session_id: str, tool_call_id: str, session_context: object = None
    ) -> None:
        self.binding = ToolCallBinding(
            hub, session_id, tool_call_id, session_context=session_context
        )
        self._flusher: _Flusher | None = None

    def bind(self) -> None:
        """Make the binding the running call's (until :meth:`unbind`)."""
        binding = self.binding
        binding.hub.attach(binding)
        self._token = _current.set(binding)
        if binding.coalescing and on_asyncio():
            flusher = self._flusher = _Flusher(binding)
            binding._start_flusher = flusher.start

    async def unbind(self) -> None:
        """Stop the flusher if it started, undo :meth:`bind`, flush and send the ``closed``
        event (:meth:`ToolCallBinding.close`)."""
        binding = self.binding
        try:
            if self._flusher is not None:
                await self._flusher.stop()
        finally:
            _current.reset(self._token)
            binding.close()
            binding.hub.detach(binding)


def on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Flusher:
    """A binding's flusher on asyncio: a task of its own once started (:meth:`start`), which
    :meth:`stop` cancels and awaits before the call's binding ends."""

    __slots__ = ("_binding", "_task")

    def __init__(self, binding: ToolCallBinding) -> None:
        self._binding = binding
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._binding.run_flusher())

    async def stop(self) -> None:
        """Cancel the flusher and wait for its end.

        Raises:
            Exception: what the flusher raised (a bug: it waits and flushes, nothing else).
        """
        task = self._task
        if task is None:  # never started
            return
        task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
        if not task.cancelled() and (failure := task.exception()) is not None:
            raise failure


class QuietToolCall:
    """The context manager of :func:`bind_quiet_tool_call` (sync and async forms)."""

    __slots__ = ("_binding", "_token")

    def __init__(self, binding: ToolCallBinding) -> None:
        self._binding = binding
        self._token: contextvars.Token[ToolCallBinding | LazyToolCall | None] | None = None

    def __enter__(self) -> ToolCallBinding:
        self._token = _current.set(self._binding)
        return self._binding

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        self._binding.close()

    async def __aenter__(self) -> ToolCallBinding:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def bind_quiet_tool_call(
    hub: ProgressHub, session_id: str, tool_call_id: str, *, session_context: object = None
) -> QuietToolCall:
    """:func:`bind_tool_call` for a call that starts while nobody listens to the session.

    Binds :func:`emit_tool_progress` to the call through the context variable only: no helper
    task and no hub tracking. Text emitted while nobody listens is discarded by the hub, as it
    would be anyway; if a consumer registers during the call, each emit reaches it at once (not
    coalesced), and on exit it gets the ``closed`` event. Use as ``with`` or ``async with``.

    Args:
        hub: The hub that routes the session's events.
        session_id: The session the call belongs to.
        tool_call_id: The assistant tool call's id.
        session_context: The call's context (:attr:`ToolCallBinding.session_context`).

    Returns:
        The context manager; entering it gives the call's :class:`ToolCallBinding`.
    """
    return QuietToolCall(
        ToolCallBinding(
            hub, session_id, tool_call_id, coalesce=False, session_context=session_context
        )
    )


class LazyToolCall:
    """A quiet call's progress binding, built only when something needs it.

    What :meth:`~sagents.tool.ToolManager.run_tool` binds to a call that starts while nobody
    listens to its session: the hub, the session and the call's id (a fresh ``call_<hex>`` id
    drawn only if the binding is ever built). Emits while nobody listens are dropped without
    building anything; once a consumer listens, or :func:`current_tool_call` asks, the
    :class:`ToolCallBinding` of :func:`bind_quiet_tool_call` is built (uncoalesced) and used.
    :meth:`close` sends the ``closed`` event only when someone listens by then.

    Bind it with :meth:`bind` / :meth:`unbind` around the call (two context-variable
    operations: the cheapest binding a call can have), or use it as a (sync or async) context
    manager.

    Args:
        hub: The hub that routes the session's events.
        session_id: The session the call belongs to, or None for a call without a session
            (a fresh random id is drawn if it is ever needed; nobody can listen to it).
        tool_call_id: The call's id, or None to draw one if it is ever needed.
        session_context: The call's context (:attr:`ToolCallBinding.session_context`).
    """

    __slots__ = (
        "_binding",
        "_closed",
        "_session_id",
        "_token",
        "_tool_call_id",
        "hub",
        "loop_thread",
        "session_context",
    )
    _token: contextvars.Token[ToolCallBinding | LazyToolCall | None]

    def __init__(
        self,
        hub: ProgressHub,
        session_id: str | None,
        tool_call_id: str | None,
        session_context: object = None,
    ) -> None:
        self.hub = hub
        self._session_id = session_id
        self._tool_call_id = tool_call_id
        self.session_context = _or_outer(session_context)
        """The call's context (:attr:`ToolCallBinding.session_context`)."""
        self.loop_thread = _get_ident()
        self._binding: ToolCallBinding | None = None
        self._closed = False

    def binding(self) -> ToolCallBinding:
        """The call's :class:`ToolCallBinding`, built on the first request."""
        if self._binding is None:
            tool_call_id = self._tool_call_id or f"call_{os.urandom(16).hex()}"
            self._binding = ToolCallBinding(
                self.hub,
                self.session_id,
                tool_call_id,
                coalesce=False,
                session_context=self.session_context,
            )
            self._binding._loop_thread = self.loop_thread
            if self._closed:
                self._binding._closed = True
        return self._binding

    def emit(self, text: str, stream: ProgressStream = "stdout") -> None:
        """:meth:`ToolCallBinding.emit`; dropped at once while nobody listens."""
        if self._binding is None and (self._closed or not self._listened()):
            return
        self.binding().emit(text, stream)

    def close(self) -> None:
        """:meth:`ToolCallBinding.close`: the ``closed`` event when the call said something
        (then its binding exists) and someone listens by now."""
        self._closed = True
        if self._binding is not None:
            self._binding.close()

    @property
    def session_id(self) -> str:
        """The session the call belongs to (a fresh random id if none was given)."""
        if self._session_id is None:
            self._session_id = os.urandom(16).hex()
        return self._session_id

    def _listened(self) -> bool:
        # A session id drawn here was never given to anyone, so nobody can listen to it.
        return self._session_id is not None and self.hub.listening(self._session_id)

    def bind(self) -> contextvars.Token[ToolCallBinding | LazyToolCall | None]:
        """Make this the running call's binding; returns the token for :meth:`unbind`."""
        return _current.set(self)

    def unbind(self, token: contextvars.Token[ToolCallBinding | LazyToolCall | None]) -> None:
        """Undo :meth:`bind`, then :meth:`close`."""
        _current.reset(token)
        self.close()

    def __enter__(self) -> LazyToolCall:
        self._token = _current.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unbind(self._token)

    async def __aenter__(self) -> LazyToolCall:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _or_outer(session_context: object) -> object:
    """``session_context``, else that of the call running now (None outside any)."""
    if session_context is not None:
        return session_context
    outer = _current.get()
    return None if outer is None else outer.session_context


def listened_tool_call() -> ToolCallBinding | None:
    """The running call's binding when someone listens to its session now, else None.

    Unlike :func:`current_tool_call`, builds no binding for a quiet call nobody listens to.
    """
    binding = _current.get()
    if binding is None:
        return None
    if isinstance(binding, LazyToolCall):
        return binding.binding() if binding._listened() else None
    return binding if binding.hub.listening(binding.session_id) else None


def current_tool_call() -> ToolCallBinding | None:
    """The binding of the tool call running in this context, or None outside one.

    None, too, inside a call that nothing can listen to and that binds nothing: an async local
    tool run by the ToolManager with no session and no ``tool_call_id``, outside any other call
    (docs/progress.md).
    """
    binding = _current.get()
    return binding.binding() if isinstance(binding, LazyToolCall) else binding


async def emit_tool_progress(text: str, stream: ProgressStream = "stdout") -> None:
    """Send incremental output of the running tool to the live progress channel.

    A silent no-op outside :func:`bind_tool_call`, after the call's ``closed`` event, or when
    ``SAGE_TOOL_PROGRESS_ENABLED=false``. Never blocks on a slow consumer.

    Args:
        text: The new text (any length; coalesced, see the module docstring).
        stream: ``stdout``, ``stderr`` or ``info``.

    Raises:
        TypeError: ``text`` is not a str.
        ValueError: ``stream`` is not one of the three streams.
    """
    _check(text, stream)
    binding = _current.get()
    if binding is not None:
        binding.emit(text, stream)


async def emit_tool_progress_closed() -> None:
    """Flush the running tool's pending text and send ``closed: true`` (once).

    A silent no-op outside :func:`bind_tool_call`.
    """
    binding = _current.get()
    if binding is not None:
        binding.close()


def emit_tool_progress_from_thread(text: str, stream: ProgressStream = "stdout") -> None:
    """:func:`emit_tool_progress` for sync tools running in a worker thread.

    ``anyio.to_thread.run_sync`` copies the context into the worker, so the binding is found;
    the text is handed to the event loop with ``anyio.from_thread.run_sync`` (it waits only
    for the hand-over, never for a consumer). Called on the event loop thread itself, it emits
    directly. A silent no-op outside a bound context.

    Args:
        text: The new text.
        stream: ``stdout``, ``stderr`` or ``info``.

    Raises:
        TypeError: ``text`` is not a str.
        ValueError: ``stream`` is not one of the three streams.
    """
    _check(text, stream)
    binding = _current.get()
    if binding is None:
        return
    if threading.get_ident() == binding.loop_thread:
        binding.emit(text, stream)
    else:
        anyio.from_thread.run_sync(binding.emit, text, stream)


def _check(text: object, stream: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"progress text must be a str, not {type(text).__name__}")
    if stream not in _STREAMS:
        raise ValueError(f"unknown progress stream {stream!r}; use 'stdout', 'stderr' or 'info'")
