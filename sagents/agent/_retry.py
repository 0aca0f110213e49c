"""Time and retries of one model call, the same for every adapter (docs/agent.md, "The model
seam").

Each adapter decides *which* failures are retryable (its API's error codes); this module owns
*how* a call waits: ``timeout`` bounds the connection and each wait for the next piece of the
answer (an SSE keep-alive comment or a ``ping`` the SDK skips is not a piece), ``deadline``
the whole call, retries and their waits included, and a retry waits what the server asks
(``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date, RFC 9110 section
10.2.3) or else an exponential backoff with jitter. A server asking for a longer wait than
``max_retry_wait`` ends the call at once with a clear error rather than a retry that comes
too early.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import NoReturn, Protocol, TypeVar

import anyio

from sagents.errors import ModelError, ModelStreamError, ModelTimeoutError, ModelUnavailableError

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT_S",
    "DEFAULT_MODEL_DEADLINE_S",
    "DEFAULT_MODEL_TIMEOUT_S",
    "CallBudget",
    "CallLimits",
    "Limited",
    "broken_answer",
    "not_an_answer",
    "retry_delay",
    "says_context_length",
]

DEFAULT_MODEL_TIMEOUT_S = 120.0
"""Seconds one model request may wait for the connection, or for the next piece of the answer
(SSE keep-alive comments do not count)."""

DEFAULT_MODEL_DEADLINE_S = 600.0
"""Seconds one model call may take in all, retries and their waits included."""

DEFAULT_MAX_RETRIES = 4
"""Retries of a model request that failed with a retryable error."""

DEFAULT_MAX_RETRY_WAIT_S = 60.0
"""The longest wait before a retry that the call accepts (a server's ``Retry-After`` included)."""

# What servers say when a request is longer than the model's context, whichever API carries it
# (a proxy such as LiteLLM passes one provider's words through another's API), lower-cased.
# Each is a recorded refusal in tests/agent/wire/ (docs/agent.md, "Servers' quirks").
_CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",  # OpenAI's code, and the servers that copy it
    "context length",  # OpenAI, vLLM, DeepSeek, LM Studio: "maximum context length is N tokens"
    "maximum context",  # Mistral: "... too large for model with 32768 maximum context length"
    "context size",  # llama.cpp server: "exceeds the available context size"
    "maximum model length",  # vLLM V1: "Prompt length of N is longer than the maximum model length"
    "context window",  # Anthropic, and LiteLLM's ContextWindowExceededError
    "contextwindowexceeded",
    "context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "prompt is too long",  # Anthropic
    "input token count",  # Gemini: "The input token count (N) exceeds the maximum number of tokens"
    "exceeds the maximum number of tokens",
)

SHOWN_ANSWER_CHARS = 300  # characters of a garbled answer shown in its error
_RETRY_BASE_S = 0.5  # first backoff, doubled at each retry
_BACKOFF_MAX_S = 30.0  # no backoff of our own is longer

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class CallLimits:
    """An adapter's limits of each model call.

    Attributes:
        timeout: Seconds for the connection and for each next piece of the answer.
        deadline: Seconds for the whole call, retries included; None: no limit.
        max_retries: Retries of a retryable failure.
        max_retry_wait: The longest wait before a retry the call accepts.

    Raises:
        ValueError: a limit that is not a positive number of seconds (``max_retries``: 0 or
            more), naming it and its value.
    """

    timeout: float = DEFAULT_MODEL_TIMEOUT_S
    deadline: float | None = DEFAULT_MODEL_DEADLINE_S
    max_retries: int = DEFAULT_MAX_RETRIES
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT_S

    def __post_init__(self) -> None:
        for label, value in (
            ("timeout", self.timeout),
            ("deadline", self.deadline),
            ("max_retry_wait", self.max_retry_wait),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{label} must be a positive number of seconds, not {value!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {self.max_retries!r}")


def retry_delay(attempt: int, headers: Mapping[str, str] | None) -> float:
    """Seconds to wait before retry ``attempt`` (1 for the first retry).

    What the server asks wins when it is a usable number: ``retry-after-ms``, then
    ``Retry-After`` in seconds or as an HTTP date (RFC 9110, section 10.2.3), not capped (the
    caller refuses a wait longer than it accepts). A value that is neither (``abc``, ``nan``,
    negative) is ignored. Otherwise exponential backoff from 0.5 s with full jitter, at most
    30 s.
    """
    asked = _server_wait(headers) if headers is not None else None
    if asked is not None:
        return asked
    backoff = min(_RETRY_BASE_S * 2 ** (attempt - 1), _BACKOFF_MAX_S)
    return random.uniform(backoff / 2, backoff)


def _server_wait(headers: Mapping[str, str]) -> float | None:
    candidates: list[tuple[str | None, float]] = [
        (headers.get("retry-after-ms"), 1000.0),
        (headers.get("retry-after"), 1.0),
    ]
    for value, per_second in candidates:
        if value is None:
            continue
        try:
            seconds = float(value) / per_second
        except ValueError:
            seconds = _http_date_wait(value) if per_second == 1.0 else math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _http_date_wait(value: str) -> float:
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return math.nan
    return max(parsed.timestamp() - time.time(), 0.0)


class Limited(Protocol):
    """An adapter's limits, as every adapter holds them."""

    base_url: str
    limits: CallLimits


class CallBudget:
    """The time and retries left to one model call (one per :meth:`ChatModel.stream` call).

    Args:
        timeout: Seconds for the connection and for each next piece of the answer.
        deadline: Seconds for the whole call, retries included; None: no limit.
        max_retries: Retries the call may make.
        max_retry_wait: The longest wait before a retry it accepts.
        endpoint: The endpoint, named in errors.
        adapter: The adapter's class name, named in the hints (``raise AnthropicModel(
            timeout=...)``).

    Raises:
        RuntimeError: not called on asyncio (the model adapters run on asyncio only).
    """

    def __init__(
        self,
        *,
        timeout: float,
        deadline: float | None,
        max_retries: int,
        max_retry_wait: float,
        endpoint: str,
        adapter: str,
    ) -> None:
        self.timeout = timeout
        self.deadline = deadline
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.endpoint = endpoint
        self.adapter = adapter
        # The event loop's clock, which next() reads (anyio.current_time() looks its backend
        # up first: bench/bench_agent_loop.py).
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # another event loop (trio): a clear error, not asyncio's
            raise RuntimeError(
                f"{adapter} and the other model adapters run on asyncio, not on another event "
                "loop (docs/architecture.md, 'Event loops'): run them with asyncio"
            ) from None
        self.ends = math.inf if deadline is None else now + deadline
        self.attempt = 0
        """Retries made so far."""
        self._idle = _IdleAlarm()

    @classmethod
    def of(cls, adapter: Limited) -> CallBudget:
        """The budget of one call of ``adapter``, starting now."""
        limits = adapter.limits
        return cls(
            timeout=limits.timeout,
            deadline=limits.deadline,
            max_retries=limits.max_retries,
            max_retry_wait=limits.max_retry_wait,
            endpoint=adapter.base_url,
            adapter=type(adapter).__name__,
        )

    @property
    def can_retry(self) -> bool:
        """Whether a retry is left."""
        return self.attempt < self.max_retries

    async def bounded(self, request: Awaitable[T]) -> T:
        """Await ``request`` (the connection and the answer's head: the HTTP client's own
        ``timeout`` bounds it), never past the deadline.

        Raises:
            ModelTimeoutError: the deadline passed.
        """
        try:  # asyncio's timeout, as in next()
            async with asyncio.timeout_at(None if self.deadline is None else self.ends) as bound:
                return await request
        except TimeoutError:
            if not bound.expired():
                raise  # the request's own TimeoutError, not the deadline's
        self.past_deadline()

    async def next(self, pieces: AsyncIterator[T]) -> T:
        """The next piece of a streamed answer, waiting at most ``timeout`` (keep-alive
        comments are not pieces) and never past the deadline.

        Raises:
            StopAsyncIteration: the answer ended.
            ModelTimeoutError: nothing came within ``timeout``, or the deadline passed.
        """
        # The event loop's clock, as asyncio's timers (and anyio.current_time()'s on asyncio),
        # read straight: anyio's looks its backend up first, on every streamed piece
        # (bench/bench_agent_loop.py, streamed turns). The model adapters run on asyncio.
        loop = asyncio.get_running_loop()
        now = loop.time()
        task = asyncio.current_task(loop)
        assert task is not None  # an adapter's stream is read in a task
        cancelling = task.cancelling()
        # This wait, for the idle timer; noted here, not in calls (``min()`` included): this
        # runs on every streamed piece (bench/bench_agent_loop.py, streamed turns).
        idle = self._idle
        idle.task = task
        until = now + self.timeout
        idle.until = until if until < self.ends else self.ends
        if idle.timer is None:
            idle.set_timer(loop)
        try:
            piece = await pieces.__anext__()
        except asyncio.CancelledError:
            if not idle.end(task, cancelling, cancelled=True):
                raise
        except BaseException:
            idle.end(task, cancelling, last=True)  # the answer ended, or broke
            raise
        else:
            idle.until = None
            if idle.rang:  # the timer's cancellation, which the read swallowed
                idle.end(task, cancelling)
            return piece
        if self.ends - now <= self.timeout:
            self.past_deadline()
        raise ModelTimeoutError(
            f"the model endpoint {self.endpoint!r} sent nothing of its answer for "
            f"{self.timeout:g} s (keep-alive comments do not count)",
            hint=f"raise {self.adapter}(timeout=...) for a slow server, or check the server",
            details={"limit": "timeout", "seconds": self.timeout},
        )

    async def retry(self, error: BaseException, headers: Mapping[str, str] | None = None) -> None:
        """Count one retry and wait before it: what ``headers`` ask (``Retry-After``), else
        the backoff. The caller checks :attr:`can_retry` first.

        Raises:
            ModelUnavailableError: the server asks for a longer wait than ``max_retry_wait``.
            ModelTimeoutError: the wait would pass the deadline.
        """
        self.attempt += 1
        seconds = retry_delay(self.attempt, headers)
        if seconds > self.max_retry_wait:
            raise ModelUnavailableError(
                f"the model endpoint {self.endpoint!r} asks to wait {seconds:g} s before "
                f"retrying, longer than the {self.max_retry_wait:g} s this call waits: {error}",
                hint=(
                    f"try again later, or raise {self.adapter}(max_retry_wait=...) to wait "
                    "that long"
                ),
                details={"retry_after": seconds},
            ) from error
        if anyio.current_time() + seconds > self.ends:
            self.past_deadline()
        await anyio.sleep(seconds)

    def past_deadline(self) -> NoReturn:
        """Raise the deadline's :class:`~sagents.errors.ModelTimeoutError`."""
        raise ModelTimeoutError(
            f"the model call to {self.endpoint!r} passed its deadline of {self.deadline:g} s",
            hint=f"raise {self.adapter}(deadline=...) for long answers, or check the server",
            details={"limit": "deadline", "seconds": self.deadline},
        )


class _IdleAlarm:
    """The idle timeout of a streamed answer: one timer for all its waits for a next piece.

    ``asyncio.timeout_at()`` around each wait makes, schedules and cancels a timer per piece,
    about 20 Python calls on every chunk of a streamed answer (bench/bench_agent_loop.py,
    streamed turns); a wait here only notes its end and its task. The timer rings at the end
    of the wait it was set for. When that wait is over it does nothing (the next wait sets
    it again); when a later wait is under way it is set again for that wait's end (the ends
    only grow: ``min(now + timeout, deadline)``); when the wait it was set for is still
    under way, that wait is overdue and the alarm cancels its task, telling its own
    cancellation from one from outside as ``asyncio.timeout()`` does (Task.cancelling at the
    start of the wait, Task.uncancel at its end). Between waits (the adapter's ``yield``:
    the consumer's code runs) nothing can be cancelled: there is no wait to be overdue. The
    answer's end stops the timer; an answer left mid-way leaves it to ring once, for nothing.
    """

    def __init__(self) -> None:
        self.until: float | None = None
        """The end of the wait under way (the loop's clock), None between waits."""
        self.task: asyncio.Task[object] | None = None
        """The task that waits."""
        self.timer: asyncio.TimerHandle | None = None
        self.rang = False
        """The timer cancelled the wait under way."""
        self._set_for = -math.inf  # the end of the wait the timer is set for

    def set_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Set the timer for the end of the wait under way."""
        assert self.until is not None
        self._set_for = self.until
        self.timer = loop.call_at(self.until, self._ring, loop)

    def end(
        self,
        task: asyncio.Task[object],
        cancelling: int,
        *,
        cancelled: bool = False,
        last: bool = False,
    ) -> bool:
        """The wait is over (``cancelled``: by a CancelledError; ``last``: no wait follows).
        True when the timer's cancellation ended it: the wait timed out."""
        self.until = None
        if last and self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.rang:
            return False
        self.rang = False
        # Only a CancelledError of the timer's own is a timeout: one from outside wins.
        return task.uncancel() <= cancelling and cancelled

    def _ring(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        if self.until is None or self.task is None:
            return  # no wait under way
        if self._set_for < self.until:  # set for a wait that is over: ring at this one's end
            self.set_timer(loop)
            return
        self.rang = True
        self.task.cancel()


def broken_answer(
    endpoint: str, error: BaseException, *, hint: str, attempts: int, unreachable: bool
) -> ModelUnavailableError | ModelStreamError:
    """The error of a model call whose connection or stream failed when it may not be retried
    (part of the answer was passed on, or no retry is left); every adapter raises this one.

    ``unreachable``: the failure is the connection's (refused, closed, timed out) and nothing
    of the answer was passed on: ``model_unavailable``, as for any retryable failure that
    outlasted the retries (docs/agent.md, "The model seam"). Otherwise the answer broke off:
    ``model_stream_broken``.
    """
    if unreachable:
        return ModelUnavailableError(
            f"the model endpoint {endpoint!r} cannot be reached: {error}",
            hint=hint,
            details={"attempts": attempts},
        )
    return ModelStreamError(
        f"the model endpoint {endpoint!r} failed mid-answer: {error!r}",
        hint=hint,
        details={"attempts": attempts},
    )


def not_an_answer(endpoint: str, answer: object, what: str, *, hint: str) -> ModelError:
    """The error of a whole answer that is not the API's (a web page such as a proxy's login,
    JSON of another shape), which an SDK hands back as it came; every adapter raises this one."""
    shown = answer if isinstance(answer, str) else repr(answer)
    return ModelError(
        f"the model endpoint {endpoint!r} answered something that is not {what}: "
        f"{shown[:SHOWN_ANSWER_CHARS]!r}",
        hint=hint,
    )


def says_context_length(text: str) -> bool:
    """Whether an error's text (its message, type and code) says the request is longer than
    the model's context: never worth sending again as it is, and what compression cures."""
    lowered = text.lower()
    return any(marker in lowered for marker in _CONTEXT_LENGTH_MARKERS)
