"""sagents.agent: the agent loop (``SAgent.run_stream``) on any model behind the model seam
(``ChatModel`` over provider-neutral ``Message`` values; adapters: ``OpenAIChatModel`` for
OpenAI-compatible Chat Completions endpoints, ``OpenAIResponsesModel`` for the Responses API,
``AnthropicModel`` and ``GeminiModel``).

``from sagents.agent import SAgent, OpenAIChatModel`` is the public path. The loop sits beside
the gateway on floor 5 of ``docs/architecture.md`` ("Layers"): both consume the tool layer's
one call path, and nothing below imports it. See ``docs/agent.md``.
"""

from sagents.agent._anthropic import AnthropicModel
from sagents.agent._chat_model import (
    ChatModel,
    Finish,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from sagents.agent._compress import CompressionSettings
from sagents.agent._events import (
    AgentEvent,
    DoneEvent,
    DoneReason,
    HistoryCompressedEvent,
    HistoryCompressEvent,
    MessageDeltaEvent,
    MessageEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
    ReasoningDeltaEvent,
    UsageEvent,
    WorkflowSelectedEvent,
)
from sagents.agent._gemini import GeminiModel
from sagents.agent._loop import DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_MAX_TURNS, SAgent
from sagents.agent._messages import (
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.agent._model import (
    ModelTurn,
    OpenAIChatModel,
    ReasoningDelta,
    TextDelta,
    Usage,
    model_from_string,
)
from sagents.agent._responses import OpenAIResponsesModel
from sagents.agent._selectors import (
    EmbeddingsToolSelector,
    LLMToolSelector,
    choose_workflow_with_model,
)
from sagents.agent._session import (
    AGENT_SESSION_KEY,
    AgentSession,
    AuditStatus,
    current_agent_session,
)
from sagents.agent._state import (
    Approvals,
    Interruption,
    InterruptionKind,
    RunResult,
    RunState,
)
from sagents.agent._suggest import (
    OfflineToolSelector,
    ToolSelector,
    Workflow,
    WorkflowChoice,
    choose_workflow,
    select_workflow,
    suggest_tools,
)
from sagents.core._spec import ToolSpec

__all__ = [
    "AGENT_SESSION_KEY",
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_MAX_TURNS",
    "AgentEvent",
    "AgentSession",
    "AnthropicModel",
    "Approvals",
    "AuditStatus",
    "ChatModel",
    "CompressionSettings",
    "DoneEvent",
    "DoneReason",
    "EmbeddingsToolSelector",
    "Finish",
    "GeminiModel",
    "HistoryCompressEvent",
    "HistoryCompressedEvent",
    "Interruption",
    "InterruptionKind",
    "LLMToolSelector",
    "Message",
    "MessageDeltaEvent",
    "MessageEvent",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelTurn",
    "OfflineToolSelector",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "OutputSchema",
    "Part",
    "QuestionnaireRequestEvent",
    "QuestionnaireResultEvent",
    "ReasoningDelta",
    "ReasoningDeltaEvent",
    "ReasoningPart",
    "Role",
    "RunResult",
    "RunState",
    "SAgent",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolResultPart",
    "ToolSelector",
    "ToolSpec",
    "Usage",
    "UsageEvent",
    "Workflow",
    "WorkflowChoice",
    "WorkflowSelectedEvent",
    "choose_workflow",
    "choose_workflow_with_model",
    "current_agent_session",
    "model_from_string",
    "select_workflow",
    "suggest_tools",
]
