"""The gateway's Prometheus metrics (docs/observability.md).

Each :class:`~sagents.gateway.Gateway` has its own :class:`GatewayMetrics` and its own
``CollectorRegistry`` (never the process-wide default one): two gateways in one process count
apart. Counters move where a ``tools/call`` result is known (:meth:`GatewayMetrics.counting`);
gauges are read from the gateway's state when scraped, so they cannot drift from it.

``/metrics`` answers in the Prometheus text format (``prometheus-client``'s own encoder) to the
operator's bearer token, or to anyone with ``--metrics-public`` (:func:`metrics_app`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import mcp_types as mt
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from sagents.errors import StoreError, StoreSchemaError, StoreUnavailableError, UnknownToolError
from sagents.gateway._convert import ERROR_META_KEY
from sagents.gateway._web_auth import WebAuth
from sagents.mcp._status import ServerState, ServerStatus

__all__ = ["METRICS_PATH", "GatewayMetrics", "MetricsApp", "outcome_of"]

METRICS_PATH = "/metrics"
UNKNOWN_TOOL = "(unknown)"
"""The ``tool`` label of calls to a name the session is not offered: a client chooses the
names it sends, and each label value is a series Prometheus keeps."""
_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_SERVER_STATES: tuple[ServerState, ...] = ("connecting", "ready", "failed", "restarting", "closed")

_TASK_STATUSES = ("running", "ok", "error", "cancelled")
_STORE_CODES = frozenset((StoreError.code, StoreUnavailableError.code, StoreSchemaError.code))
AUDIT_NOT_WRITTEN = "audit_not_written"
"""The ``code`` of ``sagents_store_errors_total`` for a run answered without its audit row."""
SCRIPT_TOOL = "run_script"

_Result = TypeVar("_Result")


def outcome_of(result: mt.CallToolResult) -> str:
    """``ok``, or the error code of a failed call (``sagents/error`` in ``_meta``; ``error``
    when the tool reported ``isError`` without one)."""
    if not result.is_error:
        return "ok"
    error = (result.meta or {}).get(ERROR_META_KEY)
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code else "error"


class GatewayMetrics:
    """The counters of one gateway and the gauges read from its state.

    The gauges are read from the gateway's parts at each scrape; each is given here, by
    whoever built the part, or left out when the gateway has no such part.

    Args:
        sessions_open: How many client sessions are open.
        approvals_pending: How many approvals wait for an answer.
        approvals_answered: How many approvals ended with each answer; None: none counted.
        background_tasks: The statuses of the background calls the gateway knows (running
            and lately ended); None: none.
        sandboxes: How many sessions' sandboxes are alive; None: no run_script host.
        upstream: The upstream servers' statuses
            (:meth:`sagents.mcp.MCPSupervisor.statuses`); None: no supervisor.

    Attributes:
        registry: This gateway's registry (scraped by :class:`MetricsApp`).
    """

    def __init__(
        self,
        *,
        sessions_open: Callable[[], int],
        approvals_pending: Callable[[], int],
        approvals_answered: Callable[[], Mapping[str, int]] | None = None,
        background_tasks: Callable[[], Iterable[str]] | None = None,
        sandboxes: Callable[[], int] | None = None,
        upstream: Callable[[], Sequence[ServerStatus]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.upstream = upstream
        self.tool_calls = Counter(
            "sagents_tool_calls",
            "tools/call requests answered, by tool and outcome (ok or the error code).",
            ("tool", "outcome"),
            registry=self.registry,
        )
        self.call_seconds = Histogram(
            "sagents_tool_call_duration_seconds",
            "Time to answer a tools/call, by upstream server (empty: the gateway's own tools).",
            ("server",),
            buckets=_LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.script_runs = Counter(
            "sagents_script_runs",
            "run_script runs answered, by outcome (ok or the error code).",
            ("outcome",),
            registry=self.registry,
        )
        self.script_calls = Counter(
            "sagents_script_calls",
            "Tool calls made by the scripts of answered run_script runs.",
            registry=self.registry,
        )
        self.store_errors = Counter(
            "sagents_store_errors",
            "Store failures met while answering tools/call, by code (store_unavailable, "
            "store_error, store_schema_mismatch; audit_not_written: a run_script run answered "
            "without its audit row).",
            ("code",),
            registry=self.registry,
        )
        self.config_reloads = Counter(
            "sagents_config_reloads",
            "Config file reloads (SIGHUP, --watch), by outcome: applied or refused.",
            ("outcome",),
            registry=self.registry,
        )
        self.approvals_answered = approvals_answered
        self.sandboxes = sandboxes
        self.background_tasks = background_tasks
        self.registry.register(_StateCollector(self, sessions_open, approvals_pending))

    async def counting(
        self,
        call: Awaitable[_Result],
        *,
        tool: str,
        server: Callable[[], str | None],
    ) -> _Result:
        """Await ``call`` (a ``tools/call`` handler's answer) and count it (:meth:`count`)."""
        started = time.perf_counter()
        result = await call
        self.count(result, tool=tool, server=server, seconds=time.perf_counter() - started)
        return result

    def count(
        self,
        result: object,
        *,
        tool: str,
        server: Callable[[], str | None],
        seconds: float,
    ) -> None:
        """Count the answer of one ``tools/call``.

        Args:
            result: The handler's answer; a ``CallToolResult`` is counted, anything else (an
                ``InputRequiredResult``: the call goes on in a later request) is not.
            tool: The name the client called (counted as ``(unknown)`` when the answer is
                ``unknown_tool``).
            server: Its upstream server's name, read after the call (None: one of the
                gateway's own tools, or not offered).
            seconds: How long the answer took.
        """
        if isinstance(result, mt.CallToolResult):
            self.call_seconds.labels(server() or "").observe(seconds)
            outcome = outcome_of(result)
            name = UNKNOWN_TOOL if outcome == UnknownToolError.code else tool
            self.tool_calls.labels(name, outcome).inc()
            if outcome in _STORE_CODES:
                self.store_errors.labels(outcome).inc()
            if name == SCRIPT_TOOL:
                self._count_script(result, outcome)

    def _count_script(self, result: mt.CallToolResult, outcome: str) -> None:
        """A run_script answer: its run, and the calls its summary (``structuredContent``,
        docs/run_script.md) says the script made. A run handed off to the background is
        counted when it is answered here."""
        self.script_runs.labels(outcome).inc()
        summary = result.structured_content
        if not isinstance(summary, dict):
            return
        calls = summary.get("calls")
        if isinstance(calls, int) and calls > 0:
            self.script_calls.inc(calls)
        if summary.get("audit") == "missing":  # docs/run_script.md, "Records and audit"
            self.store_errors.labels(AUDIT_NOT_WRITTEN).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class _StateCollector(Collector):
    """Gauges read from the gateway when scraped."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        sessions_open: Callable[[], int],
        approvals_pending: Callable[[], int],
    ) -> None:
        self._metrics = metrics
        self._sessions_open = sessions_open
        self._approvals_pending = approvals_pending

    def describe(self) -> Iterable[Metric]:
        return []  # read at each scrape; nothing to check at registration

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "sagents_sessions_open", "Client sessions open.", value=self._sessions_open()
        )
        yield GaugeMetricFamily(
            "sagents_approvals_pending",
            "Approvals waiting for an answer (the web console's queue).",
            value=self._approvals_pending(),
        )
        answered = CounterMetricFamily(
            "sagents_approvals_answered",
            "Approvals asked in the web console that ended, by answer (allow_once, "
            "allow_session, deny; timeout: nobody answered in time).",
            labels=("answer",),
        )
        counts = self._metrics.approvals_answered() if self._metrics.approvals_answered else {}
        for answer, count in sorted(counts.items()):
            answered.add_metric((answer,), count)
        yield answered
        statuses = self._metrics.upstream() if self._metrics.upstream is not None else ()
        states = GaugeMetricFamily(
            "sagents_upstream_servers",
            "Upstream MCP servers by state.",
            labels=("state",),
        )
        for state in _SERVER_STATES:
            states.add_metric((state,), sum(1 for s in statuses if s.state == state))
        yield states
        yield GaugeMetricFamily(
            "sagents_sandboxes",
            "Sessions' sandboxes alive (run_script and the built-in tools run in them).",
            value=self._metrics.sandboxes() if self._metrics.sandboxes is not None else 0,
        )
        tasks = GaugeMetricFamily(
            "sagents_background_tasks",
            "Background calls by status (running, and those that ended lately: ok, error, "
            "cancelled).",
            labels=("status",),
        )
        found = list(self._metrics.background_tasks()) if self._metrics.background_tasks else []
        for task_status in _TASK_STATUSES:
            tasks.add_metric((task_status,), found.count(task_status))
        yield tasks
        restarts = CounterMetricFamily(
            "sagents_upstream_restarts",
            "Times each upstream MCP server was restarted after its first start.",
            labels=("server",),
        )
        for status in statuses:
            restarts.add_metric((status.name,), status.restarts)
        yield restarts


class MetricsApp:
    """``GET /metrics``: the gateway's metrics for the operator's bearer token (the operator
    secret or ``SAGENTS_GATEWAY_TOKEN``), or for anyone when ``public``.

    Behind :class:`~sagents.gateway._http_security.GatewaySecurityMiddleware`, which checks
    ``Host``/``Origin`` and verifies a given token; this app decides who may read.
    """

    def __init__(self, metrics: GatewayMetrics, web: WebAuth, *, public: bool = False) -> None:
        self._metrics = metrics
        self._web = web
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response: Response
        if request.method not in ("GET", "HEAD"):
            response = PlainTextResponse("use GET", status_code=405, headers={"Allow": "GET"})
        elif not self._public and not _is_operator(self._web, request):
            response = PlainTextResponse(
                "metrics need 'Authorization: Bearer <token>' with the operator secret or "
                "SAGENTS_GATEWAY_TOKEN (docs/observability.md)",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            response = Response(self._metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
        await response(scope, receive, send)


def _is_operator(web: WebAuth, request: Request) -> bool:
    principal = web.bearer(request)
    return principal is not None and principal.operator
