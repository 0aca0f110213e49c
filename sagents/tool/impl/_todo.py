"""The session's task list: ``todo_write`` and ``todo_read`` (docs/builtin_tools.md).

One list per ``SessionContext.session_id``, shared by every agent of the session (each call's
``SessionContext.agent`` becomes the owner of the items it creates unless it names another).
Items have an id, content, a status (``pending``, ``in_progress``, ``done``, ``cancelled``), an
owner and ``blocked_by`` ids. ``todo_write`` replaces the list (``mode="replace"``) or updates
and adds items by id (``mode="update"``); the result must have no unknown ``blocked_by`` id and
no cycle, else nothing changes. The list lives in SQLite (``<data dir>/todo.sqlite3``, beside
the audit store), so it survives history compaction and a restart. Every change sends the
whole list as a ``tool_progress`` event (stream ``info``, a JSON object of type
``todo.changed``) for a UI to show.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import anyio

from sagents.audit import default_data_dir
from sagents.core._result import TextContent, ToolResult
from sagents.errors import InvalidArgumentsError, QuotaExceededError
from sagents.progress import emit_tool_progress
from sagents.store._builtin_state import STATUSES, Merge, Status, TodoBackend, TodoItem
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall

__all__ = [
    "STATUSES",
    "TODO_FILE",
    "Merge",
    "TodoBackend",
    "TodoItem",
    "TodoStore",
    "todo_tool",
    "validate",
]

TODO_FILE = "todo.sqlite3"
"""The todo lists' database in the data directory (beside the audit store)."""


_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS todos (
    session_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    id TEXT NOT NULL,
    content TEXT NOT NULL,
    status TEXT NOT NULL,
    owner TEXT,
    blocked_by TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (session_id, id)
);
"""


def _find_cycle(items: Sequence[TodoItem]) -> list[str] | None:
    """A ``blocked_by`` cycle as a path of ids (first id repeated at the end), or None."""
    edges = {item.id: item.blocked_by for item in items}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        state[start] = 1
        while stack:
            node, index = stack[-1]
            targets = edges.get(node, ())
            if index < len(targets):
                stack[-1] = (node, index + 1)
                target = targets[index]
                if state.get(target) == 1:
                    return [*path[path.index(target) :], target]
                if not state.get(target):
                    state[target] = 1
                    stack.append((target, 0))
                    path.append(target)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return None


def validate(items: Sequence[TodoItem]) -> None:
    """Check a whole list: unique ids, known ``blocked_by`` ids, no cycle.

    Raises:
        InvalidArgumentsError: naming the first problem.
    """
    ids = [item.id for item in items]
    seen: set[str] = set()
    for item_id in ids:
        if item_id in seen:
            raise InvalidArgumentsError(f"todo id {item_id!r} appears twice")
        seen.add(item_id)
    for item in items:
        for blocker in item.blocked_by:
            if blocker not in seen:
                raise InvalidArgumentsError(
                    f"todo {item.id!r} is blocked by {blocker!r}, which is not in the list",
                    hint=f"known ids: {', '.join(ids)}",
                )
    cycle = _find_cycle(items)
    if cycle is not None:
        raise InvalidArgumentsError(
            f"blocked_by makes a cycle: {' -> '.join(cycle)}",
            hint="a task cannot wait, directly or not, for itself",
        )


@dataclass(kw_only=True)
class TodoStore:
    """Task lists of sessions in one SQLite file.

    Attributes:
        path: The database (``<data dir>/todo.sqlite3`` by default, beside the audit store).
        max_items: Items one list holds at most. max_chars: characters of one item.
    """

    path: Path = field(default_factory=lambda: default_data_dir() / TODO_FILE)
    max_items: int = 200
    max_chars: int = 2000
    backend: TodoBackend | None = None
    """Where lists live instead of ``path`` (PostgreSQL, docs/scale-out.md); None: SQLite."""

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=10.0)
        connection.executescript(_SCHEMA)
        return connection

    @staticmethod
    def _rows(connection: sqlite3.Connection, session_id: str) -> list[TodoItem]:
        rows = connection.execute(
            "SELECT id, content, status, owner, blocked_by FROM todos WHERE session_id = ? "
            "ORDER BY position",
            (session_id,),
        )
        return [
            TodoItem(
                id=i,
                content=c,
                status=cast(Status, s),
                owner=o,
                blocked_by=tuple(json.loads(b)),
            )
            for i, c, s, o, b in rows.fetchall()
        ]

    def _read(self, session_id: str) -> list[TodoItem]:
        connection = self._connect()
        try:
            return self._rows(connection, session_id)
        finally:
            connection.close()

    def _merge(
        self,
        current: list[TodoItem],
        changes: Sequence[Mapping[str, Any]],
        mode: Literal["replace", "update"],
        agent: str | None,
    ) -> list[TodoItem]:
        by_id = {} if mode == "replace" else {item.id: item for item in current}
        order = [] if mode == "replace" else [item.id for item in current]
        for number, change in enumerate(changes):
            item_id = str(change.get("id") or "").strip()
            if not item_id:
                item_id = self._next_id(set(by_id) | {str(c.get("id")) for c in changes})
            old = by_id.get(item_id)
            content = change.get("content", old.content if old else None)
            if not content or not str(content).strip():
                raise InvalidArgumentsError(
                    f"todo item {number} ({item_id!r}) needs content",
                    hint="a new item needs content; an update may leave it out",
                )
            if len(str(content)) > self.max_chars:
                raise QuotaExceededError(
                    f"todo {item_id!r} has {len(str(content)):,} characters; at most "
                    f"{self.max_chars:,}",
                    details={"limit": "max_chars"},
                )
            status = change.get("status", old.status if old else "pending")
            if status not in STATUSES:
                raise InvalidArgumentsError(
                    f"todo {item_id!r} has status {status!r}; one of {', '.join(STATUSES)}"
                )
            item = TodoItem(
                id=item_id,
                content=str(content).strip(),
                status=cast(Status, status),
                owner=change.get("owner", old.owner if old else agent),
                blocked_by=tuple(
                    dict.fromkeys(change.get("blocked_by", old.blocked_by if old else ()))
                ),
            )
            if item_id not in by_id:
                order.append(item_id)
            by_id[item_id] = item
        result = [by_id[item_id] for item_id in order]
        if len(result) > self.max_items:
            raise QuotaExceededError(
                f"a todo list holds at most {self.max_items} items; this one would have "
                f"{len(result)}",
                details={"limit": "max_items"},
            )
        validate(result)
        return result

    @staticmethod
    def _next_id(taken: set[str]) -> str:
        number = 1
        while f"t{number}" in taken:
            number += 1
        return f"t{number}"

    def _write(
        self,
        session_id: str,
        changes: Sequence[Mapping[str, Any]],
        mode: Literal["replace", "update"],
        agent: str | None,
    ) -> list[TodoItem]:
        connection = self._connect()
        try:
            with connection:
                connection.execute("BEGIN IMMEDIATE")  # two agents writing: one after the other
                items = self._merge(self._rows(connection, session_id), changes, mode, agent)
                connection.execute("DELETE FROM todos WHERE session_id = ?", (session_id,))
                now = time.time()
                connection.executemany(
                    "INSERT INTO todos VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            session_id,
                            position,
                            item.id,
                            item.content,
                            item.status,
                            item.owner,
                            json.dumps(list(item.blocked_by)),
                            now,
                        )
                        for position, item in enumerate(items)
                    ],
                )
            return items
        finally:
            connection.close()

    async def read(self, context: SessionContext) -> list[TodoItem]:
        """The session's list, in order."""
        if self.backend is not None:
            return await self.backend.read(context.session_id)
        return await anyio.to_thread.run_sync(self._read, context.session_id)

    async def write(
        self,
        context: SessionContext,
        items: Sequence[Mapping[str, Any]],
        *,
        mode: Literal["replace", "update"] = "update",
    ) -> list[TodoItem]:
        """Replace the session's list, or update and add items by id; return the new list.

        Raises:
            InvalidArgumentsError: unknown ``blocked_by`` id, a cycle, a duplicate id, a bad
                status, an item without content (nothing is changed).
            QuotaExceededError: too many items, or too long.
        """
        if self.backend is not None:
            return await self.backend.write(
                context.session_id,
                lambda current: self._merge(current, items, mode, context.agent),
            )
        return await anyio.to_thread.run_sync(
            self._write, context.session_id, items, mode, context.agent
        )


def _render(items: Sequence[TodoItem]) -> str:
    if not items:
        return "The todo list is empty."
    marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "cancelled": "[-]"}
    lines = []
    for item in items:
        line = f"{marks[item.status]} {item.id}: {item.content}"
        if item.owner:
            line += f" (owner: {item.owner})"
        if item.blocked_by:
            line += f" (blocked by: {', '.join(item.blocked_by)})"
        lines.append(line)
    return "\n".join(lines)


async def todo_tool(
    store: TodoStore, name: str, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    """Run ``todo_write`` or ``todo_read`` with validated arguments."""
    context = call.session_context
    if name == "todo_write":
        items = await store.write(
            context, list(arguments["items"]), mode=arguments.get("mode", "update")
        )
        event = {
            "type": "todo.changed",
            "session_id": context.session_id,
            "agent": context.agent,
            "items": [item.to_json() for item in items],
        }
        await emit_tool_progress(json.dumps(event, ensure_ascii=False), stream="info")
    elif name == "todo_read":
        items = await store.read(context)
    else:
        raise KeyError(f"no todo tool {name!r}")
    structured = {"items": [item.to_json() for item in items]}
    return ToolResult(content=(TextContent(text=_render(items)),), structured=structured)
