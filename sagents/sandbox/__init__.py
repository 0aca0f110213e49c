"""The sandbox layer: the ``Sandbox`` protocol and its providers (floor 1 of
``docs/architecture.md``, "Layers").

``create_sandbox("local" | "passthrough" | "memory", workspace=...)`` builds a provider; see
docs/sandbox.md for the security model.
"""

from sagents.sandbox._factory import create_sandbox
from sagents.sandbox._hostfs import HostFiles, open_dir_fd, safe_open_in
from sagents.sandbox._local import LocalSandbox
from sagents.sandbox._memory import MemorySandbox
from sagents.sandbox._network import ANY_PUBLIC_HOST, NetworkPolicy
from sagents.sandbox._protocol import Sandbox, SandboxProcess
from sagents.sandbox._types import (
    DEFAULT_CPU_CORES,
    DEFAULT_ENV_ALLOWLIST,
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_SANDBOX_UID,
    CompletedRun,
    DirEntry,
    FileStat,
    IsolationLevel,
    KillReason,
    ReadOnlyBind,
    ReadWriteBind,
    SandboxInfo,
    SandboxKind,
    SandboxLimits,
    SandboxMode,
    SandboxParams,
    SharedQuota,
    TaskState,
    TaskStatus,
)
from sagents.sandbox._utf8 import decode_utf8_window

__all__ = [
    "ANY_PUBLIC_HOST",
    "DEFAULT_CPU_CORES",
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_SANDBOX_UID",
    "CompletedRun",
    "DirEntry",
    "FileStat",
    "HostFiles",
    "IsolationLevel",
    "KillReason",
    "LocalSandbox",
    "MemorySandbox",
    "NetworkPolicy",
    "ReadOnlyBind",
    "ReadWriteBind",
    "Sandbox",
    "SandboxInfo",
    "SandboxKind",
    "SandboxLimits",
    "SandboxMode",
    "SandboxParams",
    "SandboxProcess",
    "SharedQuota",
    "TaskState",
    "TaskStatus",
    "create_sandbox",
    "decode_utf8_window",
    "open_dir_fd",
    "safe_open_in",
]
