"""sagents.testing: test an agent without a real model.

:class:`ScriptedModel` is a real OpenAI-compatible Chat Completions server on 127.0.0.1 that
plays back a script of replies (streamed as server-sent events, or whole; a :class:`WireReply`
plays a recorded answer back byte for byte) and records every request it received, so an agent
built on :class:`sagents.agent.OpenAIChatModel` (or any other OpenAI client) runs unchanged
against it. See ``docs/agent.md``, "Testing an agent". Floor 6
of ``docs/architecture.md`` ("Layers"), beside the CLI.
"""

from sagents.testing._scripted import (
    ReplyFunction,
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    http_error,
    load_wire,
    reply,
    tool_call,
)

__all__ = [
    "ReplyFunction",
    "ScriptedModel",
    "ScriptedReply",
    "ScriptedToolCall",
    "WireReply",
    "http_error",
    "load_wire",
    "reply",
    "tool_call",
]
