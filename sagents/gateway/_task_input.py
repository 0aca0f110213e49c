"""An upstream task's own questions, asked of the gateway's client (docs/gateway.md, "Upstream
servers").

When an upstream server runs a forwarded call as a task (the Tasks extension, SEP-2663) and
the task asks for input (``input_required`` with ``inputRequests``), the gateway polling it
(:mod:`sagents.mcp._tasks_client`) hands the requests to the :class:`ForwardedTaskInput` bound
for the call, which asks the client whose call it is, as that client's era allows:

- a handshake-era client that declared elicitation gets an ``elicitation/create`` request
  during its call (:class:`~sagents.gateway._approval.ClientAsker`);
- a 2026-07-28 client that negotiated Tasks gets the request in its own task's
  ``inputRequests`` (``tasks/get`` shows ``input_required``; ``tasks/update`` answers), the
  call becoming a task at once if it was not one yet
  (:class:`~sagents.gateway._ext_tasks.TaskAsker`);
- any other client cannot be asked: the upstream task is cancelled and the call fails with
  ``not_allowed`` saying so.

Only form elicitations are forwarded (an upstream's sampling, roots or URL-mode elicitation is
refused the same way), and the form's message names the server that asks, so the user knows
whose question it is. The answer goes back upstream with ``tasks/update``; an answer nobody
gives within 600 s (``APPROVAL_TIMEOUT_S``) is a ``cancel``.
"""

from __future__ import annotations

from collections.abc import Mapping

import mcp_types as mt
from mcp.shared.exceptions import NoBackChannelError

from sagents.gateway._approval import ClientAsker

__all__ = ["ForwardedTaskInput"]


class ForwardedTaskInput:
    """A :class:`~sagents.mcp._tasks_client.TaskInput` that asks the gateway's client.

    Args:
        asker: How the call's client is asked.
        server: The upstream server whose task asks (named in the form's message).
    """

    def __init__(self, asker: ClientAsker, server: str) -> None:
        self._asker = asker
        self._server = server

    async def answer(
        self, task_id: str, requests: Mapping[str, mt.InputRequest]
    ) -> mt.InputResponses | str:
        """Ask each form elicitation in turn; a text instead when one cannot be asked."""
        for request in requests.values():
            if not isinstance(request, mt.ElicitRequest) or not isinstance(
                request.params, mt.ElicitRequestFormParams
            ):
                kind: str = request.method
                if isinstance(request, mt.ElicitRequest):
                    kind = f"{kind} (mode {request.params.mode!r})"
                return f"the gateway forwards only form elicitations, not {kind}"
        if not self._asker.can_ask:
            return (
                "this client cannot be asked (it did not declare elicitation, or its "
                "connection cannot carry a question during a call: on 2026-07-28 use the Tasks "
                "extension)"
            )
        responses: mt.InputResponses = {}
        for key, request in requests.items():
            assert isinstance(request, mt.ElicitRequest)
            assert isinstance(request.params, mt.ElicitRequestFormParams)
            message = f"MCP server {self._server!r} asks: {request.params.message}"
            try:
                responses[key] = await self._asker.choose(message, request.params.requested_schema)
            except NoBackChannelError:
                return "this client's connection cannot carry a question during a call"
        return responses
