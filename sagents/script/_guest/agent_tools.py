"""``agent_tools``: call the session's tools from a run_script script (docs/run_script.md).
STDLIB ONLY.

Inside a script::

    from agent_tools import call, call_many, call_raw, progress, ToolError

    sns = [d["sn"] for d in call("fleet__list_devices", {})["devices"]]
    rows = call_many("fleet__get_device_status", [{"sn": sn} for sn in sns])
    progress(len(rows), len(sns), "done")

Requests go to the host on fd 3, replies come back on fd 4 (see the protocol module). The helper
is thread-safe: every request carries an id and one reader thread hands each reply to the thread
that waits for it. The host writes this file and the protocol module to
``<data dir>/script-runtime/`` and the bootstrap there loads both by exact path, so a workspace
file named ``agent_tools.py`` cannot shadow them.
"""

from __future__ import annotations

import _thread
import itertools
import os
import sys

# Start-up cost matters (every run imports this module): json, threading, difflib and the
# protocol module (json, typing) are imported on first use, so an empty script pays none of
# them. Names for annotations only come from typing under TYPE_CHECKING.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

_PROTOCOL_MODULE = "_sagents_script_protocol"


def _load_protocol() -> Any:
    """The protocol module: already loaded, the sibling copy (the runtime directory, loaded by
    exact path: a workspace module of that name never shadows it), or the package's."""
    loaded = sys.modules.get(_PROTOCOL_MODULE)
    if loaded is not None:
        return loaded
    sibling = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_tools_protocol.py")
    if os.path.isfile(sibling):  # run_script's runtime directory
        from _frozen_importlib import ModuleSpec  # loaded at start-up, unlike importlib
        from _frozen_importlib_external import SourceFileLoader

        loader = SourceFileLoader(_PROTOCOL_MODULE, sibling)
        module = type(sys)(_PROTOCOL_MODULE)
        module.__spec__ = ModuleSpec(_PROTOCOL_MODULE, loader, origin=sibling)
        module.__loader__ = loader
        module.__file__ = sibling
        sys.modules[_PROTOCOL_MODULE] = module
        try:
            loader.exec_module(module)
        except BaseException:
            del sys.modules[_PROTOCOL_MODULE]
            raise
        return module
    from sagents.script import _protocol as protocol  # imported from the installed package

    return protocol


class _LazyProtocol:
    """Stands for the protocol module until first use, then replaces itself with it."""

    def __getattr__(self, name: str) -> Any:
        module = _load_protocol()
        globals()["_protocol"] = module
        return getattr(module, name)


_protocol: Any = _LazyProtocol()


__all__ = ["ToolError", "call", "call_many", "call_raw", "describe", "progress", "tools"]

_OUTSIDE = (
    "agent_tools works only in a script started by run_script: the request and reply "
    "descriptors (fds 3 and 4) are not set up in this process"
)


class ToolError(Exception):
    """A tool call failed: the tool reported an error, or the call was refused.

    Attributes:
        tool: The tool's name.
        code: A stable code: ``tool_error`` when the tool itself reported an error; otherwise
            the layer's code (``not_allowed``, ``unknown_tool``, ``invalid_arguments``,
            ``limit_exceeded``, ``timeout``, ``cancelled``, ``disconnected``, ...).
        message: What went wrong.
    """

    def __init__(self, tool: str, code: str, message: str) -> None:
        super().__init__(f"{tool}: [{code}] {message}")
        self.tool = tool
        self.code = code
        self.message = message


class _Slot:
    """One outstanding request: filled by the reader thread, then ``done`` is called."""

    __slots__ = ("done", "ok", "value")

    def __init__(self, done: Callable[[_Slot], None]) -> None:
        self.done = done
        self.ok = False
        self.value: Any = None


class _Connection:
    def __init__(self, request_fd: int, reply_fd: int) -> None:
        import threading

        self._request_fd = request_fd
        self._reply = os.fdopen(reply_fd, "rb", buffering=1024 * 1024, closefd=False)
        self._write_lock = threading.Lock()
        self._slots_lock = threading.Lock()
        self._slots: dict[int, _Slot] = {}
        self._ids = itertools.count(1)
        self._closed_reason: str | None = None
        reader = threading.Thread(target=self._read_replies, name="agent_tools-reader", daemon=True)
        reader.start()

    def send(self, messages: Sequence[dict[str, Any]], slots: Sequence[_Slot | None]) -> None:
        """Register ``slots`` (None for notifications) and write ``messages`` in one go."""
        data = bytearray()
        with self._slots_lock:
            if self._closed_reason is not None:
                raise ToolError("agent_tools", _protocol.ERROR_DISCONNECTED, self._closed_reason)
            for message, slot in zip(messages, slots, strict=True):
                if slot is not None:
                    message["id"] = next(self._ids)
                    self._slots[message["id"]] = slot
                data += _protocol.encode_line(message)
        try:
            with self._write_lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._request_fd, view) :]
        except OSError as error:
            self._close(f"cannot send to the host: {error}")

    def _read_replies(self) -> None:
        reason = "the host closed the connection"
        try:
            for line in self._reply:
                try:
                    request_id, ok, value = _protocol.parse_reply(line)
                except _protocol.ProtocolError:
                    continue
                with self._slots_lock:
                    slot = (
                        self._slots.pop(request_id, None) if isinstance(request_id, int) else None
                    )
                if slot is not None:
                    slot.ok, slot.value = ok, value
                    slot.done(slot)
        except (OSError, ValueError) as error:
            reason = f"cannot read from the host: {error}"
        self._close(reason)

    def _close(self, reason: str) -> None:
        with self._slots_lock:
            if self._closed_reason is None:
                self._closed_reason = reason
            slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            slot.ok = False
            slot.value = {"code": _protocol.ERROR_DISCONNECTED, "message": reason}
            slot.done(slot)


_connection: _Connection | None = None
_connection_lock = _thread.allocate_lock()


def _connect() -> _Connection:
    global _connection
    with _connection_lock:
        if _connection is None:
            fds = os.environ.get(_protocol.FDS_ENV)
            if fds != "3,4":
                raise RuntimeError(_OUTSIDE)
            try:
                os.fstat(3)
                os.fstat(4)
            except OSError:
                raise RuntimeError(_OUTSIDE) from None
            _connection = _Connection(3, 4)
        return _connection


def _request(message: dict[str, Any]) -> tuple[bool, Any]:
    import threading

    event = threading.Event()
    slot = _Slot(lambda _slot: event.set())
    _connect().send([message], [slot])
    event.wait()
    return slot.ok, slot.value


def _error(tool: str, error: Any) -> ToolError:
    if isinstance(error, dict):
        return ToolError(tool, str(error.get("code", "tool_error")), str(error.get("message", "")))
    return ToolError(tool, "tool_error", str(error))


_callable_names: list[str] | None = None  # the script's callable tools, fetched once


def _hinted(error: ToolError) -> ToolError:
    """An ``unknown_tool`` error with the close names of callable tools, as a direct call's
    error has them ("Did you mean ...?"). Call only from the script's own thread."""
    global _callable_names
    if error.code != _protocol.ERROR_UNKNOWN_TOOL:
        return error
    if _callable_names is None:
        ok, value = _request({"op": "tools"})
        if not ok or not isinstance(value, list):
            return error
        _callable_names = [str(item.get("name", "")) for item in value if isinstance(item, dict)]
    import difflib

    close = difflib.get_close_matches(error.tool, _callable_names, n=3)
    if not close:
        return error
    suggestion = ", ".join(repr(name) for name in close)
    return ToolError(error.tool, error.code, f"{error.message}. Did you mean {suggestion}?")


def _check_args(tool: str, args: Any) -> dict[str, Any]:
    if not isinstance(tool, str) or not tool:
        raise TypeError(f"the tool name must be a non-empty string, got {tool!r}")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise TypeError(f"arguments of {tool!r} must be a dict, got {type(args).__name__}")
    return args


def _value(tool: str, ok: bool, value: Any) -> Any:
    """Turn a ``call`` reply into call()'s return value, or raise its ToolError."""
    if not ok:
        raise _error(tool, value)
    if value.get("is_error"):
        error = value.get("error") or {"code": "tool_error", "message": value.get("text", "")}
        raise _error(tool, error)
    if value.get("structured") is not None:
        return value["structured"]
    text = value.get("text", "")
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def call(tool: str, args: dict[str, Any] | None = None) -> Any:
    """Call one tool and return its result.

    Args:
        tool: The tool's name, as listed by :func:`tools` (MCP tools are ``<server>__<tool>``).
        args: The arguments object.

    Returns:
        The structured result (usually a dict) when the tool returns structured content;
        otherwise its text, parsed as JSON when it is JSON.

    Raises:
        ToolError: when the tool reports an error or the call is refused (policy, limits).
    """
    args = _check_args(tool, args)
    ok, value = _request({"op": "call", "tool": tool, "args": args})
    try:
        return _value(tool, ok, value)
    except ToolError as error:
        raise _hinted(error) from None


def call_raw(tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call one tool and return ``{"text", "structured", "is_error"}`` without raising on a tool
    error.

    Raises:
        ToolError: when the call is refused (policy, limits) or the host is gone.
    """
    args = _check_args(tool, args)
    ok, value = _request({"op": "call", "tool": tool, "args": args})
    if not ok:
        raise _hinted(_error(tool, value))
    return {
        "text": value.get("text", ""),
        "structured": value.get("structured"),
        "is_error": bool(value.get("is_error")),
    }


def call_many(
    tool: str, args_list: Sequence[dict[str, Any] | None], return_errors: bool = False
) -> list[Any]:
    """Call one tool once per argument set; results come back in input order.

    Calls are sent in batches of 50 and the next batch goes out while the previous one still
    runs; the host runs them up to its concurrency limit.

    Args:
        tool: The tool's name.
        args_list: One arguments dict per call.
        return_errors: When true, a failed call's slot holds its :class:`ToolError` and
            nothing raises. When false, nothing more is sent once a failure has been seen.

    Returns:
        A list as long as ``args_list``: each item as :func:`call` would return it.

    Raises:
        ToolError: the first failure (in input order), once the calls already sent have settled.
    """
    import threading

    checked = [_check_args(tool, args) for args in args_list]
    total = len(checked)
    results: list[Any] = [None] * total
    failures: dict[int, ToolError] = {}
    state = threading.Condition()
    outstanding = 0
    settled = 0
    connection = _connect() if total else None

    def settle(index: int) -> Callable[[_Slot], None]:
        def done(slot: _Slot) -> None:
            nonlocal outstanding, settled
            try:
                results[index] = _value(tool, slot.ok, slot.value)
            except ToolError as error:
                results[index] = error
                failures[index] = error
            with state:
                outstanding -= 1
                settled += 1
                # Wake the sender only when it can go on: a batch's room, a failure, or the
                # last reply (not on each reply, a thread switch each in a busy sandbox).
                if outstanding == batch or settled == sent or index in failures:
                    state.notify()

        return done

    sent = 0
    batch = _protocol.CALL_MANY_BATCH
    while sent < total:
        with state:
            while outstanding > batch and not (failures and not return_errors):
                state.wait()
            if failures and not return_errors:
                break
            size = min(batch, total - sent)
            outstanding += size
        assert connection is not None
        indexes = range(sent, sent + size)
        connection.send(
            [{"op": "call", "tool": tool, "args": checked[i]} for i in indexes],
            [_Slot(settle(i)) for i in indexes],
        )
        with state:
            sent += size
    with state:
        while settled < sent:
            state.wait()
    if failures and not return_errors:
        raise _hinted(failures[min(failures)])
    for index in failures:
        results[index] = _hinted(failures[index])
    return results


def progress(done: float, total: float | None = None, message: str | None = None) -> None:
    """Report the script's progress; shown live, never part of the result.

    Args:
        done: Units done so far.
        total: Units in all, when known (the UI then draws a bar).
        message: A short note (cut at 2,000 characters).
    """
    for name, value in (("done", done), ("total", total)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"progress {name} must be a number, got {value!r}")
    if message is not None and not isinstance(message, str):
        message = str(message)
    notice = {"op": "progress", "done": done, "total": total, "message": message}
    _connect().send([notice], [None])


def tools() -> list[dict[str, Any]]:
    """List the tools this script may call: ``[{"name", "description", "permission"}]``."""
    ok, value = _request({"op": "tools"})
    if not ok:
        raise _error("tools", value)
    return list(value)


def describe(name: str) -> dict[str, Any]:
    """Describe one callable tool: ``{"name", "description", "input_schema", "output_schema",
    "permission"}``.

    Raises:
        ToolError: when the tool does not exist or this script may not call it.
    """
    ok, value = _request({"op": "describe", "tool": name})
    if not ok:
        raise _hinted(_error(name, value))
    return dict(value)
