"""``compress_history``: the model asks for its older turns to be summarised now
(docs/builtin_tools.md).

The work is the agent loop's (``sagents.agent``, which holds the history and the model): this
tool only reaches it through the call's :class:`~sagents.tool._conversation.Conversation`. A
host without a conversation (``sagents serve``: the MCP client keeps it) refuses the call.
"""

from __future__ import annotations

from typing import Any

from sagents.core._result import TextContent, ToolResult
from sagents.errors import NotAllowedError
from sagents.tool._conversation import conversation_of
from sagents.tool._handler import ToolCall

__all__ = ["compress_history_tool"]


async def compress_history_tool(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    """The ``compress_history`` tool.

    Raises:
        NotAllowedError: the call runs outside an agent loop.
    """
    conversation = conversation_of(call.session_context)
    if conversation is None:
        raise NotAllowedError(
            "compress_history works only inside the agent loop (SAgent), which holds the "
            "conversation; this host keeps none",
            hint="the client that keeps the conversation decides how to shorten it",
        )
    report = dict(await conversation.compress_history(focus=arguments.get("focus")))
    error = report.get("error")
    if error:
        text = f"The history was not compressed: {error}. It is unchanged."
    elif not report.get("compressed"):
        text = f"Nothing to compress: {report.get('reason', 'the history is short')}."
    else:
        text = (
            f"Compressed the history: {report['dropped']} older messages are now one summary "
            f"({report['tokens_before']:,} -> {report['tokens_after']:,} tokens). The todo list, "
            "loaded skills and expanded tools were kept."
        )
    return ToolResult(content=(TextContent(text=text),), structured=report, is_error=bool(error))
