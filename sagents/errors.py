"""The one exception tree of sagents.

Every error that sagents raises is a :class:`SagentsError`. Each class carries a stable ``code``
(a short snake_case string) so that an error can cross a wire (a tool result, the run_script fd 3/4
protocol, an MCP error, the CLI's ``--json`` output) and be rebuilt on the other side with
:meth:`SagentsError.from_dict`. Codes never change once released; new errors get new codes.

::

    SagentsError                        internal_error
    ├── ConfigError                     config_error         (file, key)
    ├── ToolDefinitionError             invalid_tool_definition
    │   ├── ToolNameConflictError       name_conflict
    │   └── SchemaExportError           unexportable_schema  (path)
    ├── ToolCallError                   tool_error
    │   ├── UnknownToolError            unknown_tool
    │   ├── InvalidArgumentsError       invalid_arguments    (problems)
    │   ├── NotAllowedError             not_allowed
    │   ├── ToolTimeoutError            timeout
    │   ├── ToolCancelledError          cancelled
    │   ├── ToolExecutionError          execution_error
    │   ├── ResultSerializationError    unserializable_result
    │   ├── ToolManagerClosedError      manager_closed
    │   └── FileToolError               file_error           (path)
    │       ├── FileMissingError        file_not_found
    │       ├── BinaryFileError         binary_file
    │       ├── FileTooLargeError       file_too_large
    │       ├── EditNotFoundError       edit_not_found       (edit)
    │       ├── EditAmbiguousError      edit_ambiguous       (edit, matches)
    │       └── InvalidImageError       invalid_image        (path)
    │   ├── WebFetchError               fetch_error          (url)
    │   │   └── UrlNotAllowedError      url_not_allowed      (url, address)
    │   └── QuotaExceededError          quota_exceeded       (limit)
    ├── UpstreamError                   upstream_error       (server)
    │   ├── UpstreamUnavailableError    upstream_unavailable
    │   ├── NeedsLoginError             needs_login          (server, login)
    │   ├── UpstreamProtocolError       upstream_protocol_error
    │   └── UpstreamSchemaError         invalid_upstream_schema
    ├── SandboxError                    sandbox_error
    │   ├── SandboxUnavailableError     sandbox_unavailable
    │   ├── PathNotAllowedError         path_not_allowed     (path)
    │   ├── SandboxLimitError           limit_exceeded
    │   ├── TaskNotFoundError           task_not_found
    │   └── TooManyTasksError           too_many_tasks       (limit)
    ├── SkillError                      skill_error
    │   ├── SkillNotFoundError          skill_not_found
    │   ├── SkillFormatError            invalid_skill        (file, field)
    │   ├── SkillRootError              skill_root_unavailable
    │   └── SkillResourceNotFoundError  skill_resource_not_found
    ├── ProgressError                   progress_error
    │   ├── EventFormatError            invalid_event        (type, problems)
    │   └── ConsumerLaggedError         consumer_lagged
    ├── StoreError                      store_error          (store)
    │   ├── StoreUnavailableError       store_unavailable
    │   └── StoreSchemaError            store_schema_mismatch (found, expected)
    ├── RunStateError                   run_state_refused    (reason)
    ├── RunInProgressError              run_in_progress      (session_id)
    ├── ScriptError                     script_error
    │   ├── ScriptRejectedError         rejected
    │   │   └── PreflightError          preflight_failed     (findings)
    │   └── ApprovalDeniedError         approval_denied
    └── ModelError                      model_error          (status)
        ├── ModelConfigError            model_not_configured
        ├── ModelAuthError              model_auth_failed
        ├── ModelNotFoundError          model_not_found
        ├── ContextLengthError          context_length_exceeded
        ├── ModelUnavailableError       model_unavailable
        ├── ModelQuotaError             model_quota_exhausted
        ├── ModelTimeoutError           model_timeout
        ├── ModelStreamError            model_stream_broken
        └── OutputValidationError       output_invalid       (errors)

Catch the narrowest class you can act on; ``code`` is what crosses process boundaries.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ApprovalDeniedError",
    "BinaryFileError",
    "ConfigError",
    "ConsumerLaggedError",
    "ContextLengthError",
    "EditAmbiguousError",
    "EditNotFoundError",
    "EventFormatError",
    "FileMissingError",
    "FileTooLargeError",
    "FileToolError",
    "InvalidArgumentsError",
    "InvalidImageError",
    "ModelAuthError",
    "ModelConfigError",
    "ModelError",
    "ModelNotFoundError",
    "ModelQuotaError",
    "ModelStreamError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "NeedsLoginError",
    "NotAllowedError",
    "OutputValidationError",
    "PathNotAllowedError",
    "PreflightError",
    "ProgressError",
    "QuotaExceededError",
    "ResultSerializationError",
    "RunInProgressError",
    "RunStateError",
    "SagentsError",
    "SandboxError",
    "SandboxLimitError",
    "SandboxUnavailableError",
    "SchemaExportError",
    "ScriptError",
    "ScriptRejectedError",
    "SkillError",
    "SkillFormatError",
    "SkillNotFoundError",
    "SkillResourceNotFoundError",
    "SkillRootError",
    "StoreError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "TaskNotFoundError",
    "TooManyTasksError",
    "ToolCallError",
    "ToolCancelledError",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolManagerClosedError",
    "ToolNameConflictError",
    "ToolTimeoutError",
    "UnknownToolError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamSchemaError",
    "UpstreamUnavailableError",
    "UrlNotAllowedError",
    "WebFetchError",
    "error_class_for_code",
]

_BY_CODE: dict[str, type[SagentsError]] = {}


class SagentsError(Exception):
    """Base of every sagents error.

    Attributes:
        code: The stable code of the error's class (see the module docstring).
        message: What went wrong, in English, naming the object concerned with ``!r``.
        hint: Optional advice the caller (often a model) can act on.
        details: JSON-serialisable extra fields (file, key, tool, problems, ...).
    """

    code: ClassVar[str] = "internal_error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return
        if code in _BY_CODE:
            raise TypeError(f"error code {code!r} is already used by {_BY_CODE[code].__name__}")
        _BY_CODE[code] = cls

    def __init__(
        self, message: str, *, hint: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """Serialise to ``{"code", "message", "hint", "details"}`` (JSON-safe if details are)."""
        return {
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
            "details": dict(self.details),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> SagentsError:
        """Rebuild an error serialised by :meth:`to_dict`.

        An unknown code gives a plain :class:`SagentsError` that keeps the code in
        ``details["code"]`` so that nothing is lost.
        """
        code = str(data.get("code", SagentsError.code))
        cls = _BY_CODE.get(code, SagentsError)
        details = dict(data.get("details") or {})
        if cls is SagentsError and code != SagentsError.code:
            details.setdefault("code", code)
        error = cls.__new__(cls)
        SagentsError.__init__(
            error, str(data.get("message", "")), hint=data.get("hint"), details=details
        )
        return error


_BY_CODE[SagentsError.code] = SagentsError


def error_class_for_code(code: str) -> type[SagentsError] | None:
    """Return the error class registered for ``code``, or None."""
    return _BY_CODE.get(code)


class ConfigError(SagentsError):
    """A configuration file or value is invalid. ``details`` holds ``file`` and ``key``."""

    code = "config_error"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ", ".join(
            p for p in (f"file {file!r}" if file else "", f"key {key!r}" if key else "") if p
        )
        super().__init__(
            f"{message} ({where})" if where else message,
            hint=hint,
            details={"file": file, "key": key},
        )


class ToolDefinitionError(SagentsError):
    """A tool cannot be defined: bad signature (``*args``), unresolvable annotation, bad name."""

    code = "invalid_tool_definition"


class ToolNameConflictError(ToolDefinitionError):
    """A tool name is already registered and replacing was not asked for."""

    code = "name_conflict"


class SchemaExportError(ToolDefinitionError):
    """A JSON Schema cannot be exported as asked (an external ``$ref``; strict mode and a value
    of any type or an open map). ``details["path"]`` is the JSON Pointer of the offending node."""

    code = "unexportable_schema"


class ToolCallError(SagentsError):
    """A tool call failed. The ``code`` of each subclass becomes ``ToolResult.error.code``."""

    code = "tool_error"


class UnknownToolError(ToolCallError):
    """No tool with that name is registered (or visible to this session)."""

    code = "unknown_tool"


class InvalidArgumentsError(ToolCallError):
    """Arguments do not match the tool's input schema. ``details["problems"]`` lists each one."""

    code = "invalid_arguments"


class NotAllowedError(ToolCallError):
    """The session's policy does not allow this call (whitelist, permission class, mode)."""

    code = "not_allowed"


class ToolTimeoutError(ToolCallError):
    """The call did not finish within its timeout."""

    code = "timeout"


class ToolCancelledError(ToolCallError):
    """The call was cancelled (by the caller, the client or a shutdown)."""

    code = "cancelled"


class ToolExecutionError(ToolCallError):
    """The tool itself raised; the message is the exception's, without a traceback."""

    code = "execution_error"


class ResultSerializationError(ToolCallError):
    """The tool returned a value that cannot be turned into JSON or content blocks."""

    code = "unserializable_result"


class ToolManagerClosedError(ToolCallError):
    """The ``ToolManager`` was closed (``aclose``); it takes no more registrations or calls."""

    code = "manager_closed"


class FileToolError(ToolCallError):
    """A built-in file tool cannot do what was asked. ``details["path"]`` names the file."""

    code = "file_error"


class FileMissingError(FileToolError):
    """The file or directory a built-in file tool was given does not exist."""

    code = "file_not_found"


class BinaryFileError(FileToolError):
    """A text tool (``file_read``, ``file_update``) was given a binary file."""

    code = "binary_file"


class FileTooLargeError(FileToolError):
    """The file is larger than the tool's size cap."""

    code = "file_too_large"


class EditNotFoundError(FileToolError):
    """``file_update``: an edit's old text does not occur in the file (``details["edit"]``)."""

    code = "edit_not_found"


class EditAmbiguousError(FileToolError):
    """``file_update``: an edit's old text occurs more than once and ``replace_all`` was not
    set. ``details["matches"]`` says how many times."""

    code = "edit_ambiguous"


class InvalidImageError(FileToolError):
    """``image_understanding``: the file is not an image it reads (PNG, JPEG, WebP, GIF), is
    corrupt, or is over the pixel cap."""

    code = "invalid_image"


class WebFetchError(ToolCallError):
    """``web_fetch`` could not fetch or read a URL. ``details["url"]`` names it."""

    code = "fetch_error"


class UrlNotAllowedError(WebFetchError):
    """The fetch policy refuses a URL: its scheme, its domain, or an address its host resolves
    to (loopback, private, link-local, ...). ``details["address"]`` names a refused address."""

    code = "url_not_allowed"


class QuotaExceededError(ToolCallError):
    """A store's limit (entries, bytes) or a workspace's disk quota would be passed.
    ``details["limit"]`` names the setting (``quotas.workspaceBytes``)."""

    code = "quota_exceeded"


class UpstreamError(SagentsError):
    """An upstream MCP server failed. ``details["server"]`` names it."""

    code = "upstream_error"


class UpstreamUnavailableError(UpstreamError):
    """The server is not running, died, or could not be reached."""

    code = "upstream_unavailable"


class NeedsLoginError(UpstreamError):
    """An upstream server needs an OAuth login the calling principal has not given (or that
    was refused since); ``hint`` says how to log in (docs/oauth.md)."""

    code = "needs_login"


class UpstreamProtocolError(UpstreamError):
    """The server answered with a JSON-RPC error or something that is not MCP."""

    code = "upstream_protocol_error"


class UpstreamSchemaError(UpstreamError):
    """One upstream tool's schema cannot be used; the tool is withheld, the others are not."""

    code = "invalid_upstream_schema"


class SandboxError(SagentsError):
    """The sandbox failed to start or to run something."""

    code = "sandbox_error"


class SandboxUnavailableError(SandboxError):
    """The requested isolation is not available here (for example, bubblewrap is missing)."""

    code = "sandbox_unavailable"


class PathNotAllowedError(SandboxError):
    """A path lies outside the sandbox's allowed roots (``..`` or a symlink out)."""

    code = "path_not_allowed"


class SandboxLimitError(SandboxError):
    """A resource limit of the sandbox was reached (time, memory, output, disk, processes)."""

    code = "limit_exceeded"


class TaskNotFoundError(SandboxError):
    """No background task with that id belongs to this session."""

    code = "task_not_found"


class TooManyTasksError(SandboxError):
    """As many background tasks as the sandbox allows are running already.
    ``details["limit"]`` names the setting (``quotas.backgroundTasksPerSession``)."""

    code = "too_many_tasks"


class SkillError(SagentsError):
    """A skill could not be found or loaded."""

    code = "skill_error"


class SkillNotFoundError(SkillError):
    """No skill with that name is available to this session."""

    code = "skill_not_found"


class SkillFormatError(SkillError):
    """A skill directory breaks the format. ``details`` holds ``file`` and ``field``."""

    code = "invalid_skill"


class SkillRootError(SkillError):
    """A skill root directory is missing, not a directory, or unreadable."""

    code = "skill_root_unavailable"


class SkillResourceNotFoundError(SkillError):
    """A skill exists but the file asked for is not one it ships."""

    code = "skill_resource_not_found"


class ProgressError(SagentsError):
    """The live progress channel failed (see :mod:`sagents.progress`)."""

    code = "progress_error"


class EventFormatError(ProgressError):
    """An NDJSON object is not a valid event. ``details`` holds ``type`` and ``problems``."""

    code = "invalid_event"


class ConsumerLaggedError(ProgressError):
    """A consumer fell so far behind that an event that is never dropped could not be queued.

    The consumer's queue is closed instead of growing without bound; it should re-subscribe.
    """

    code = "consumer_lagged"


class ScriptError(SagentsError):
    """A run_script run could not start or was refused."""

    code = "script_error"


class ScriptRejectedError(ScriptError):
    """The run was rejected by policy before it started (for example, a destructive tool)."""

    code = "rejected"


class PreflightError(ScriptRejectedError):
    """The pre-flight check found mistakes in a script before it ran (docs/run_script.md,
    "Pre-flight check"). ``details["findings"]`` lists each as ``{"line", "tool", "problem"}``."""

    code = "preflight_failed"


class ApprovalDeniedError(ScriptError):
    """The user denied the approval that the run or call needed."""

    code = "approval_denied"


class StoreError(SagentsError):
    """The store (audit, background tasks, approvals; SQLite or PostgreSQL) failed: every
    backend raises this tree, never its driver's errors (``sqlite3.Error``, ``OSError``,
    ``psycopg.Error``), so a caller catches one type. ``details`` holds ``store``: the store's
    file or address without its password. This class itself: the store is broken (a file that
    is not a database); its subclasses say when it is only out of reach or of another
    version."""

    code = "store_error"


class StoreUnavailableError(StoreError):
    """The store cannot be reached or written now (connection refused or lost, authentication
    failed, timeout, a full disk, a lock another process holds): trying again later may work."""

    code = "store_unavailable"


class StoreSchemaError(StoreError):
    """The store's schema is of another version than this sagents understands.
    ``details`` holds ``found`` and ``expected``."""

    code = "store_schema_mismatch"


class RunInProgressError(SagentsError):
    """A run was started on an agent session that has a run in progress: one session runs
    one run at a time (its history is one conversation). ``details["session_id"]`` names it."""

    code = "run_in_progress"


class RunStateError(SagentsError):
    """A paused run's :class:`~sagents.agent.RunState` was refused: edited (its signature does
    not match), of an unknown version, of another session or agent, already resumed, or with an
    item left undecided. ``details["reason"]`` says which (``format``, ``signature``,
    ``version``, ``session``, ``agent``, ``tools``, ``claimed``, ``undecided``, ``item``)."""

    code = "run_state_refused"


class ModelError(SagentsError):
    """The model endpoint of an agent failed (``details["status"]``: the HTTP status, if any)."""

    code = "model_error"


class ModelConfigError(ModelError):
    """No model endpoint or model name is configured; the message names what to set."""

    code = "model_not_configured"


class ModelAuthError(ModelError):
    """The endpoint refused the API key (HTTP 401 or 403)."""

    code = "model_auth_failed"


class ModelNotFoundError(ModelError):
    """The endpoint or the model does not exist there (HTTP 404)."""

    code = "model_not_found"


class ContextLengthError(ModelError):
    """The request is longer than the model's context window."""

    code = "context_length_exceeded"


class ModelUnavailableError(ModelError):
    """The endpoint kept failing (429, 5xx, connection errors) after every retry."""

    code = "model_unavailable"


class ModelQuotaError(ModelError):
    """The account behind the key has no quota or credit left (HTTP 429 ``insufficient_quota``
    and the like): waiting does not help, so it is never retried."""

    code = "model_quota_exhausted"


class ModelTimeoutError(ModelError):
    """A model call sent nothing for its idle timeout (keep-alive comments do not count), or
    passed its overall deadline (``details["limit"]``: which, ``details["seconds"]``)."""

    code = "model_timeout"


class ModelStreamError(ModelError):
    """The model's streamed answer broke off before it was complete."""

    code = "model_stream_broken"


class OutputValidationError(ModelError):
    """The model's final answer did not fit ``SAgent(output_type=...)`` after every retry
    (``details["errors"]``: pydantic's, of the last answer)."""

    code = "output_invalid"
