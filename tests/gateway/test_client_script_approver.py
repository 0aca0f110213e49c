"""run_script's client approver says why it denied without a side channel.

``ClientScriptApprover`` asks the client of the gateway call running in this context (its asker
travels in the call's context, as its questioner). When the
connection cannot carry the question (no back channel), nobody was asked: the approver refuses
with that reason itself (a ``NotAllowedError``, which ``ScriptRunner`` records as the reason),
instead of answering ``deny`` and leaving a flag for a later ``denial_reason`` call to read
back from the context. A user who declines still gets "did not approve".
"""

from __future__ import annotations

import mcp_types as mt
import pytest
from mcp.shared.exceptions import NoBackChannelError

from sagents.errors import NotAllowedError
from sagents.gateway import ClientScriptApprover
from sagents.gateway._approval import answer_from_elicitation, approval_form
from sagents.tool import ApprovalAnswer, ApprovalRequest
from tests.gateway.fakes import in_a_call_asking

pytestmark = pytest.mark.anyio

_REQUEST = ApprovalRequest.for_script(
    ("fleet__configure",), "call('fleet__configure', {})", session_id="s1"
)


class _Asker:
    """A client asker of a connection that declared elicitation."""

    def __init__(self, *, back_channel: bool) -> None:
        self.back_channel = back_channel
        self.asked = 0

    @property
    def identity(self) -> str:
        return ""

    @property
    def can_ask(self) -> bool:
        return True

    async def choose(self, message: str, schema: mt.ElicitRequestedSchema) -> mt.ElicitResult:
        self.asked += 1
        if not self.back_channel:
            raise NoBackChannelError("elicitation/create")
        return mt.ElicitResult(action="decline")

    async def approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        message, schema = approval_form(request)
        return answer_from_elicitation(await self.choose(message, schema), request)


async def test_a_connection_without_a_back_channel_refuses_with_nobody_asked() -> None:
    asker = _Asker(back_channel=False)
    with (
        in_a_call_asking(asker),
        pytest.raises(NotAllowedError, match="nobody was asked to approve the write tools"),
    ):
        await ClientScriptApprover().approve(_REQUEST)
    assert asker.asked == 1


async def test_a_user_who_declines_is_said_to_have_not_approved() -> None:
    asker = _Asker(back_channel=True)
    approver = ClientScriptApprover()
    with in_a_call_asking(asker):
        assert await approver.approve(_REQUEST) == "deny"
        reason = approver.denial_reason(_REQUEST)
    assert reason.startswith("the user did not approve the write tools fleet__configure")
