"""Wire shapes of two MCP extensions, shared by the gateway (server side) and upstream
connections (client side): Skills (``io.modelcontextprotocol/skills``) and Tasks
(``io.modelcontextprotocol/tasks``).

The installed ``mcp`` SDK types the 2026-07-28 core protocol but neither extension, so their
requests and results are declared here on its base models (``mcp_types.Request``, ``Result``,
``CacheableResult``), so that the SDK's dispatch validates and serialises them like core ones.

Sources (docs/gateway.md, "MCP extensions"):

- Skills: the Skills extension specification, ``specification/stable/skills.mdx`` of
  github.com/modelcontextprotocol/ext-skills ("Skill Entries", "Listing Skills", "Getting a
  Skill").
- Tasks: SEP-2663 and ``schema/draft/schema.ts`` of github.com/modelcontextprotocol/ext-tasks
  (``Task``, ``DetailedTask``, ``CreateTaskResult``, ``tasks/get``, ``tasks/update``,
  ``tasks/cancel``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

import mcp_types as mt
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "SKILLS_EXTENSION",
    "TASKS_EXTENSION",
    "CancelTaskRequest",
    "CreateTaskResult",
    "DetailedTaskResult",
    "GetSkillRequest",
    "GetSkillRequestParams",
    "GetSkillResult",
    "GetTaskRequest",
    "ListSkillsRequest",
    "ListSkillsResult",
    "ReadResourceDirectoryRequest",
    "ReadResourceDirectoryRequestParams",
    "ReadResourceDirectoryResult",
    "SkillEntry",
    "SkillFile",
    "TaskIdParams",
    "TaskState",
    "TaskStatusNotification",
    "TaskStatusNotificationParams",
    "UpdateTaskRequest",
    "UpdateTaskRequestParams",
    "WireTaskStatus",
]

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

DIRECTORY_MIME_TYPE: Final = "inode/directory"
"""``mimeType`` of a directory resource (the Skills extension's "Directory Resources")."""
MAX_SKILL_FILES: Final = 512
"""Files per skill every host accepts (the Skills extension's "Limits")."""
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
"""Total bytes per skill every host accepts (the Skills extension's "Limits")."""


class _WireModel(BaseModel):
    """camelCase on the wire, as the SDK's own models."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# Skills ----------------------------------------------------------------------------------------


class SkillFile(_WireModel):
    """One file of a skill (``SkillResource``): its URI, ``sha256:<hex>`` digest and size."""

    uri: str
    digest: str
    size: int = Field(ge=0)
    """Bytes of the file's raw content (what ``digest`` covers)."""


class SkillEntry(_WireModel):
    """The entry of one skill (``Skill``), the same in ``skills/list`` and ``skills/get``."""

    uri: str
    """URI of the skill's ``SKILL.md``."""
    frontmatter: dict[str, Any]
    """The ``SKILL.md`` front matter as written (``name`` and ``description`` always present)."""
    resources: list[SkillFile] | Literal["dynamic"]
    """Every file of the skill, ``SKILL.md`` included, or ``"dynamic"``."""


class ListSkillsRequest(mt.PaginatedRequest[Literal["skills/list"]]):
    """``skills/list``: the skills a server serves (paginated)."""

    method: Literal["skills/list"] = "skills/list"


class ListSkillsResult(mt.PaginatedResult, mt.CacheableResult):
    """The answer to ``skills/list``."""

    skills: list[SkillEntry]
    result_type: mt.ResultType = "complete"


class GetSkillRequestParams(mt.RequestParams):
    uri: str
    """URI of the skill's ``SKILL.md``."""


class GetSkillRequest(mt.Request[GetSkillRequestParams, Literal["skills/get"]]):
    """``skills/get``: one skill's entry by the URI of its ``SKILL.md``."""

    method: Literal["skills/get"] = "skills/get"
    params: GetSkillRequestParams


class GetSkillResult(mt.CacheableResult):
    """The answer to ``skills/get``."""

    skill: SkillEntry
    result_type: mt.ResultType = "complete"


class ReadResourceDirectoryRequestParams(mt.RequestParams):
    uri: str
    """URI of the directory resource (no trailing slash)."""
    cursor: str | None = None


class ReadResourceDirectoryRequest(
    mt.Request[ReadResourceDirectoryRequestParams, Literal["resources/directory/read"]]
):
    """``resources/directory/read``: a directory resource's direct children (the Skills
    extension's "Reading Directories"; served when ``directoryRead`` is declared)."""

    method: Literal["resources/directory/read"] = "resources/directory/read"
    params: ReadResourceDirectoryRequestParams


class ReadResourceDirectoryResult(mt.PaginatedResult):
    """The answer to ``resources/directory/read``: files with their ``Resource`` metadata,
    subdirectories with ``mimeType: "inode/directory"``."""

    resources: list[mt.Resource]
    result_type: mt.ResultType = "complete"


# Tasks -----------------------------------------------------------------------------------------

WireTaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""A task's status as the Tasks extension spells it (its ``TaskStatus``); ``completed``,
``failed`` and ``cancelled`` are terminal. Not the gateway's :data:`~sagents.gateway.
BackgroundStatus` nor :class:`sagents.sandbox.TaskStatus`."""


class TaskState(_WireModel):
    """The fields of a ``Task``."""

    task_id: str
    status: WireTaskStatus
    status_message: str | None = None
    created_at: str
    """ISO 8601."""
    last_updated_at: str
    """ISO 8601."""
    ttl_ms: int
    """Milliseconds from creation the server keeps the task (the extension also allows null
    for unlimited; this gateway always states a bound)."""
    poll_interval_ms: int | None = None


class CreateTaskResult(mt.Result, TaskState):
    """The answer to ``tools/call`` when the server runs the call as a task."""

    result_type: Literal["task"] = "task"


class DetailedTaskResult(mt.Result, TaskState):
    """The answer to ``tasks/get``: the task with the fields of its status inlined."""

    input_requests: mt.InputRequests | None = None
    """Outstanding requests to the client (``input_required``)."""
    result: dict[str, Any] | None = None
    """What the request would have returned (``completed``; for ``tools/call`` a
    ``CallToolResult``, ``isError`` included)."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error object (``failed``)."""
    result_type: mt.ResultType = "complete"


class TaskStatusNotificationParams(mt.NotificationParams, TaskState):
    """``notifications/tasks`` params: the task's whole ``DetailedTask``, as ``tasks/get``
    would answer it (SEP-2663, "Task Status Notifications")."""

    input_requests: mt.InputRequests | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskStatusNotification(
    mt.Notification[TaskStatusNotificationParams, Literal["notifications/tasks"]]
):
    """``notifications/tasks``: a task's status changed (sent on a ``subscriptions/listen``
    stream that named the task in ``taskIds``)."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: TaskStatusNotificationParams


class TaskIdParams(mt.RequestParams):
    task_id: str


class GetTaskRequest(mt.Request[TaskIdParams, Literal["tasks/get"]]):
    """``tasks/get``: poll a task."""

    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # mirrored into the Mcp-Name header over HTTP (SEP-2663)


class UpdateTaskRequestParams(TaskIdParams):
    input_responses: mt.InputResponses


class UpdateTaskRequest(mt.Request[UpdateTaskRequestParams, Literal["tasks/update"]]):
    """``tasks/update``: answer a task's outstanding input requests."""

    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskRequestParams
    name_param = "taskId"


class CancelTaskRequest(mt.Request[TaskIdParams, Literal["tasks/cancel"]]):
    """``tasks/cancel``: ask for a task to be cancelled (cooperative)."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"
