"""One request other than ``tools/call`` on a supervised upstream connection (``prompts/get``,
``resources/read``, ``completion/complete``, an extension's method...): the same limits as a
tool call (its concurrency slot, a wait for a restarting server, the connection's loss ending
it, a timeout), failures as typed errors, and the answer's secrets redacted (docs/gateway.md,
"Secrets"). ``MCPSupervisor``'s request methods send through :func:`request_on`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

import anyio
import httpx2
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import BaseModel, ValidationError

from sagents.core._secrets import Redactor
from sagents.errors import (
    ToolTimeoutError,
    UnknownToolError,
    UpstreamProtocolError,
    UpstreamUnavailableError,
)
from sagents.mcp._connection import ServerConnection

__all__ = ["TRANSPORT_ERRORS", "request_on"]

_T = TypeVar("_T")

TRANSPORT_ERRORS = (
    httpx2.HTTPError,
    OSError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)
"""What a broken transport raises into a request: the connection is then dead."""


async def request_on(
    connections: Mapping[str, ServerConnection],
    server: str,
    what: str,
    send: Callable[[ClientSession], Awaitable[_T]],
    timeout: float | None,  # noqa: ASYNC109 - the caller's bound
) -> _T:
    """One request of ``what`` on the session of ``server`` (one of ``connections``), with the
    call path's limits: its concurrency slot, a wait for a restarting server, the connection's
    loss ending it; the answer with the secrets redacted.

    Raises:
        UnknownToolError: no such server.
        UpstreamUnavailableError: the server is down, or died during the request.
        UpstreamProtocolError: it answered with a JSON-RPC error (code in
            ``details["jsonrpc_code"]``) or an invalid result.
        ToolTimeoutError: no answer within ``timeout`` (else its ``call_timeout``).
    """
    connection = connections.get(server)
    if connection is None:
        raise UnknownToolError(f"no MCP server {server!r}", details={"server": server})
    limit = timeout if timeout is not None else connection.settings.call_timeout
    details = {"server": server, "request": what}
    redact = connection.settings.redactor or Redactor()  # docs/gateway.md, "Secrets"
    with anyio.move_on_after(limit) as deadline:
        session = await connection.ready_session()
        async with connection.limiter:
            with connection.call_scope() as scope:
                try:
                    return _redacted_answer(await send(session), redact)
                except MCPError as error:
                    if error.code == CONNECTION_CLOSED or connection.closing:
                        connection.mark_dead(f"the connection closed during {what}")
                        raise UpstreamUnavailableError(
                            f"MCP server {server!r} is unavailable: it closed during {what}",
                            details=details,
                        ) from None
                    error_details: dict[str, Any] = {**details, "jsonrpc_code": error.code}
                    raise UpstreamProtocolError(
                        f"MCP server {server!r} answered {what} with error {error.code}: "
                        f"{redact.redact(error.message)}",
                        details=error_details,
                    ) from None
                except TRANSPORT_ERRORS as error:
                    connection.mark_dead(f"the transport failed during {what}: {error}")
                    raise UpstreamUnavailableError(
                        f"MCP server {server!r} is unavailable: the transport failed during {what}",
                        details=details,
                    ) from None
                except (RuntimeError, ValidationError) as error:
                    raise UpstreamProtocolError(
                        f"MCP server {server!r} answered {what} with an invalid result: "
                        f"{redact.redact(str(error))}",
                        details=details,
                    ) from None
            if scope.cancelled_caught:
                raise UpstreamUnavailableError(
                    f"MCP server {server!r} is unavailable: the connection ended during {what}",
                    details=details,
                )
    assert deadline.cancelled_caught
    connection.check_liveness()
    raise ToolTimeoutError(
        f"MCP server {server!r} did not answer {what} within {limit} s",
        details={**details, "timeout": limit},
    )


def _redacted_answer(answer: _T, redactor: Redactor) -> _T:
    """An upstream's answer to a request other than ``tools/call`` (``prompts/get``,
    ``resources/read``, completion...) with the secrets redacted from every string in it; the
    same object when none occurs."""
    if not redactor or not isinstance(answer, BaseModel):
        return answer
    dumped = answer.model_dump(mode="json", by_alias=True, exclude_unset=True)
    redacted = redactor.redact_json(dumped)
    return answer if redacted is dumped else cast(_T, type(answer).model_validate(redacted))
