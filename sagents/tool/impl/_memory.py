"""Long-term memory: ``memory_store``, ``memory_search``, ``memory_delete`` (docs/builtin_tools.md).

Memories belong to one user (``SessionContext.user_id``) and one scope within that user: the
calling agent's (``SessionContext.agent``) by default, or ``user`` (shared by the user's
agents). Nothing ever crosses users; deduplication only compares memories of the same scope.
Search is SQLite FTS5 with BM25 ranking (Porter stemming), or, for gateway replicas sharing a
PostgreSQL store (docs/scale-out.md), PostgreSQL full-text search (``tsvector``, ``ts_rank``,
English stemming) through a :class:`MemoryBackend` with the same scoping rules; on both, a
query's runs of Chinese, Japanese or Korean characters are matched as substrings
(:func:`query_terms`), so that one or two characters find what they are part of. Writes and
deletes are recorded in the audit store. The same :class:`MemoryStore` backs the
``sagents.mcp_servers.memory`` MCP server.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio

from sagents.audit import AuditEntry, AuditStore, SqliteAuditStore, default_data_dir
from sagents.audit._store import sqlite_store_error
from sagents.core._result import ToolResult
from sagents.errors import InvalidArgumentsError, NotAllowedError, QuotaExceededError
from sagents.store._builtin_state import (
    USER_SCOPE,
    DeleteAudit,
    Memory,
    MemoryBackend,
    Scope,
    WriteAudit,
    memory_digest,
    merge_found,
)
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall

__all__ = [
    "MEMORY_FILE",
    "USER_SCOPE",
    "DeleteAudit",
    "Memory",
    "MemoryBackend",
    "MemoryLimits",
    "MemoryStore",
    "WriteAudit",
    "memory_digest",
    "memory_tool",
    "merge_found",
    "query_terms",
    "scope_of",
]

_T = TypeVar("_T")

MEMORY_FILE = "memory.sqlite3"
"""The memories' database in the data directory."""

_USER_SCOPE = USER_SCOPE

_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    content TEXT NOT NULL,
    digest TEXT NOT NULL,
    tags TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    UNIQUE (user_id, agent, digest)
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    id UNINDEXED, content, tags, tokenize = 'porter unicode61'
);
"""


@dataclass(frozen=True, kw_only=True)
class MemoryLimits:
    """Caps of the memory store.

    Attributes:
        max_chars: Characters of one memory.
        max_tags: Tags of one memory; max_tag_chars: characters of one tag.
        max_per_scope: Memories one scope (user and agent) holds at most.
        default_results / max_results: Search results when the call does not say, and at most.
    """

    max_chars: int = 4000
    max_tags: int = 16
    max_tag_chars: int = 64
    max_per_scope: int = 1000
    default_results: int = 5
    max_results: int = 50


# Runs of the scripts written without spaces between words (Han, Hiragana, Katakana) and of
# Hangul (whose spaced words carry particles: 한국어를): full-text tokenizers keep a whole run as
# one token (FTS5's unicode61) or need three characters (its trigram tokenizer), so a query
# of one or two such characters would find nothing. They are matched as substrings instead.
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f]+"
)


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """``(words, runs)`` of a search query: its words outside the CJK scripts (searched with
    full-text search, any of them) and its runs of CJK characters (each matched as a
    substring of a memory's text or tags).

    Raises:
        InvalidArgumentsError: the query has neither.
    """
    runs = _CJK.findall(query)
    words = re.findall(r"\w+", _CJK.sub(" ", query))
    if not words and not runs:
        raise InvalidArgumentsError("the search query has no words")
    return words, runs


def _fts_query(words: Sequence[str]) -> str:
    return " OR ".join('"' + w.replace('"', "") + '"' for w in words)


MAX_NAME_CHARS = 256  # a user or agent name longer than this is refused
_NAME_REFUSED = frozenset("*?%[]/\\")  # wildcards (glob, SQL LIKE) and path separators


def _checked_name(kind: str, name: str) -> str:
    """``name`` (a user's or an agent's) as a memory scope may use it.

    The user scope's agent column is ``*``, so an agent named ``*`` would write into every agent
    of the user; wildcards, path separators, dot names, control characters, surrounding spaces
    and empty names are refused alike, so that a name is only ever one literal scope.

    Raises:
        NotAllowedError: naming the rule the name breaks.
    """
    problem = None
    if not name.strip():
        problem = "is empty"
    elif name != name.strip():
        problem = "starts or ends with a space"
    elif len(name) > MAX_NAME_CHARS:
        problem = f"is longer than {MAX_NAME_CHARS} characters"
    elif name in (".", ".."):
        problem = "is a path"
    elif any(c in _NAME_REFUSED for c in name):
        problem = "holds a wildcard or a path separator (* ? % [ ] / \\)"
    elif any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        problem = "holds a control character"
    if problem is None:
        return name
    raise NotAllowedError(
        f"long-term memory refuses the {kind} name {name!r}: it {problem}",
        hint=f"the host names the {kind} with a plain literal name (SessionContext."
        f"{'user_id' if kind == 'user' else 'agent'})",
        details={"kind": kind},
    )


def _row_memory(row: tuple[Any, ...]) -> Memory:
    memory_id, content, tag_json, agent, created, updated, score = row
    scope: Scope = "user" if agent == _USER_SCOPE else "agent"
    return Memory(
        id=memory_id,
        content=content,
        tags=tuple(json.loads(tag_json)),
        scope=scope,
        created=created,
        updated=updated,
        score=round(float(score), 6),
    )


def scope_of(context: SessionContext, scope: Scope, anonymous_user: str | None) -> tuple[str, str]:
    """``(user, agent column)`` of a call, for ``scope``.

    Raises:
        NotAllowedError: the session has no user and the store has no ``anonymous_user``; a
            user or agent name that is empty, a wildcard (``*``), path-like or otherwise not
            one literal name.
    """
    user = context.user_id if context.user_id is not None else anonymous_user
    if user is None:
        raise NotAllowedError(
            "long-term memory needs a user, and this session has none",
            hint="the host sets SessionContext.user_id (or MemoryStore(anonymous_user=...) for "
            "a single-user host)",
        )
    user = _checked_name("user", user)
    agent = "" if context.agent is None else _checked_name("agent", context.agent)
    return user, (_USER_SCOPE if scope == "user" else agent)


@dataclass(kw_only=True)
class MemoryStore:
    """Memories in one SQLite file with an FTS5 index.

    Attributes:
        path: The database (``<data dir>/memory.sqlite3`` by default).
        limits: :class:`MemoryLimits`.
        audit: Where writes and deletes are recorded (the default audit store; None: not
            recorded). A change is kept only with its row: a SQLite audit is written in one
            transaction with it (:meth:`~sagents.audit.SqliteAuditStore.record_with`), a
            ``backend`` writes the row in its own store's transaction; with another kind of
            audit store, the row is written after the change and a failure is the call's
            error.
        anonymous_user: The user of sessions without ``user_id`` (None: such sessions are
            refused, so that no two unknown users ever share memories).
        backend: Where memories live instead of ``path`` (PostgreSQL); None: the SQLite file.
    """

    path: Path = field(default_factory=lambda: default_data_dir() / MEMORY_FILE)
    limits: MemoryLimits = field(default_factory=MemoryLimits)
    audit: AuditStore | None = field(default_factory=SqliteAuditStore)
    anonymous_user: str | None = None
    backend: MemoryBackend | None = None

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=10.0)
        connection.executescript(_SCHEMA)
        return connection

    def _check(self, content: str, tags: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        content = content.strip()
        if not content:
            raise InvalidArgumentsError("a memory cannot be empty")
        limits = self.limits
        if len(content) > limits.max_chars:
            raise QuotaExceededError(
                f"a memory holds at most {limits.max_chars:,} characters, this one has "
                f"{len(content):,}",
                hint="store a shorter summary, or several memories",
                details={"limit": "max_chars"},
            )
        clean = tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip()))
        if len(clean) > limits.max_tags or any(len(t) > limits.max_tag_chars for t in clean):
            raise QuotaExceededError(
                f"at most {limits.max_tags} tags of at most {limits.max_tag_chars} characters",
                details={"limit": "max_tags"},
            )
        return content, clean

    def _store(
        self, user: str, agent: str, content: str, tags: tuple[str, ...]
    ) -> tuple[Memory, bool]:
        now = time.time()
        digest = memory_digest(content)
        scope: Scope = "user" if agent == _USER_SCOPE else "agent"
        connection = self._connect()
        try:
            with connection:
                connection.execute("BEGIN IMMEDIATE")  # check-then-insert under the write lock
                row = connection.execute(
                    "SELECT id, tags, created FROM memories "
                    "WHERE user_id = ? AND agent = ? AND digest = ?",
                    (user, agent, digest),
                ).fetchone()
                if row is not None:
                    merged = tuple(dict.fromkeys([*json.loads(row[1]), *tags]))
                    connection.execute(
                        "UPDATE memories SET tags = ?, updated = ? WHERE id = ?",
                        (json.dumps(merged), now, row[0]),
                    )
                    connection.execute(
                        "UPDATE memories_fts SET tags = ? WHERE id = ?", (" ".join(merged), row[0])
                    )
                    stored = connection.execute(
                        "SELECT content FROM memories WHERE id = ?", (row[0],)
                    ).fetchone()[0]
                    memory = Memory(
                        id=row[0],
                        content=stored,
                        tags=merged,
                        scope=scope,
                        created=row[2],
                        updated=now,
                    )
                    return memory, False
                (count,) = connection.execute(
                    "SELECT count(*) FROM memories WHERE user_id = ? AND agent = ?", (user, agent)
                ).fetchone()
                if count >= self.limits.max_per_scope:
                    raise QuotaExceededError(
                        f"this memory scope is full ({self.limits.max_per_scope:,} memories)",
                        hint="delete memories that are no longer useful (memory_delete)",
                        details={"limit": "max_per_scope"},
                    )
                memory_id = uuid.uuid4().hex[:12]
                connection.execute(
                    "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (memory_id, user, agent, content, digest, json.dumps(tags), now, now),
                )
                connection.execute(
                    "INSERT INTO memories_fts (id, content, tags) VALUES (?, ?, ?)",
                    (memory_id, content, " ".join(tags)),
                )
        finally:
            connection.close()
        memory = Memory(
            id=memory_id, content=content, tags=tags, scope=scope, created=now, updated=now
        )
        return memory, True

    def _search(
        self, user: str, agents: Sequence[str], query: str, limit: int, tags: Sequence[str]
    ) -> list[Memory]:
        words, runs = query_terms(query)
        marks = ",".join("?" * len(agents))
        select = (
            "SELECT m.id, m.content, m.tags, m.agent, m.created, m.updated, {score} AS score "
            "FROM memories_fts JOIN memories m ON m.id = memories_fts.id WHERE {match} "
            f"AND m.user_id = ? AND m.agent IN ({marks}) ORDER BY score DESC, m.updated DESC "
            "LIMIT ?"
        )
        wanted = {t.strip().lower() for t in tags if t.strip()}
        fetch = limit if not wanted else limit * 20
        searches: list[tuple[str, tuple[Any, ...]]] = []
        if words:  # BM25: lower is better, so its negation is the score
            sql = select.format(score="-bm25(memories_fts)", match="memories_fts MATCH ?")
            searches.append((sql, (_fts_query(words), user, *agents, fetch)))
        if runs:  # one point per run found in the text or the tags
            hits = " + ".join(
                "(instr(m.content, ?) > 0 OR instr(memories_fts.tags, ?) > 0)" for _ in runs
            )
            sql = select.format(score=hits, match=f"({hits.replace(' + ', ' OR ')})")
            pairs = tuple(run for run in runs for _ in (0, 1))
            searches.append((sql, (*pairs, *pairs, user, *agents, fetch)))
        connection = self._connect()
        try:
            results = [connection.execute(sql, values).fetchall() for sql, values in searches]
        finally:
            connection.close()
        found = merge_found(*([_row_memory(row) for row in rows] for rows in results))
        return [m for m in found if wanted <= set(m.tags)][:limit]

    def _delete(self, user: str, agents: Sequence[str], memory_id: str) -> Memory | None:
        marks = ",".join("?" * len(agents))
        connection = self._connect()
        try:
            with connection:
                row = connection.execute(
                    "SELECT id, content, tags, agent, created, updated FROM memories "
                    f"WHERE id = ? AND user_id = ? AND agent IN ({marks})",
                    (memory_id, user, *agents),
                ).fetchone()
                if row is None:
                    return None
                connection.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                connection.execute("DELETE FROM memories_fts WHERE id = ?", (memory_id,))
        finally:
            connection.close()
        scope: Scope = "user" if row[3] == _USER_SCOPE else "agent"
        return Memory(
            id=row[0],
            content=row[1],
            tags=tuple(json.loads(row[2])),
            scope=scope,
            created=row[4],
            updated=row[5],
        )

    def _entry(
        self, kind: Literal["memory_write", "memory_delete"], context: SessionContext, **data: Any
    ) -> AuditEntry:
        return AuditEntry(
            kind=kind,
            ts=time.time(),
            tool="memory_store" if kind == "memory_write" else "memory_delete",
            status="ok",
            session_id=context.session_id,
            data=data,
        )

    async def _kept_with_row(
        self, write: Callable[[], _T], entry_of: Callable[[_T], AuditEntry | None]
    ) -> _T:
        """Run the SQLite ``write`` (in a worker thread) and record its row with it."""

        def guarded() -> _T:  # the memory file's failures name the memory file
            try:
                return write()
            except (sqlite3.Error, OSError) as error:
                raise sqlite_store_error(self.path, error) from error

        audit = self.audit
        if isinstance(audit, SqliteAuditStore):
            return await anyio.to_thread.run_sync(audit.record_with, guarded, entry_of)
        result = await anyio.to_thread.run_sync(guarded)
        entry = entry_of(result)
        if audit is not None and entry is not None:
            await audit.record(entry)
        return result

    async def store(
        self,
        context: SessionContext,
        content: str,
        *,
        tags: Sequence[str] = (),
        scope: Scope = "agent",
    ) -> tuple[Memory, bool]:
        """Store a memory; ``(memory, created)`` (False: the scope already held the same text,
        whose tags now include ``tags``). Kept only with its audit row.

        Raises:
            NotAllowedError: no user. QuotaExceededError: a limit. InvalidArgumentsError: empty.
            StoreError: the memory or its audit row could not be written (nothing was kept).
        """
        user, agent = scope_of(context, scope, self.anonymous_user)
        content, clean = self._check(content, tags)

        def row(memory: Memory, created: bool) -> AuditEntry:
            return self._entry(
                "memory_write",
                context,
                user_id=user,
                agent=agent,
                memory_id=memory.id,
                created=created,
                chars=len(content),
            )

        if self.backend is not None:
            return await self.backend.store(
                user,
                agent,
                content,
                clean,
                self.limits.max_per_scope,
                audit=row if self.audit is not None else None,
            )
        return await self._kept_with_row(
            lambda: self._store(user, agent, content, clean), lambda written: row(*written)
        )

    def _visible(self, context: SessionContext) -> tuple[str, list[str]]:
        user, agent = scope_of(context, "agent", self.anonymous_user)
        return user, [agent, _USER_SCOPE]

    async def search(
        self,
        context: SessionContext,
        query: str,
        *,
        limit: int | None = None,
        tags: Sequence[str] = (),
    ) -> list[Memory]:
        """The caller's memories (its agent scope and its user scope) matching ``query``,
        best first (BM25)."""
        user, agents = self._visible(context)
        count = min(limit or self.limits.default_results, self.limits.max_results)
        if self.backend is None:
            return await anyio.to_thread.run_sync(self._search, user, agents, query, count, tags)
        words, runs = query_terms(query)
        wanted = {t.strip().lower() for t in tags if t.strip()}
        fetch = count if not wanted else count * 20
        found = await self.backend.search(user, agents, words, fetch, runs)
        return [m for m in found if wanted <= set(m.tags)][:count]

    async def delete(self, context: SessionContext, memory_id: str) -> Memory:
        """Delete one of the caller's memories; deleted only with its audit row.

        Raises:
            InvalidArgumentsError: no such memory among the caller's (another user's id is
                indistinguishable from an unknown one).
            StoreError: the deletion or its audit row could not be written (nothing deleted).
        """
        user, agents = self._visible(context)

        def row(memory: Memory) -> AuditEntry:
            return self._entry(
                "memory_delete", context, user_id=user, agent=agents[0], memory_id=memory.id
            )

        if self.backend is not None:
            audit = row if self.audit is not None else None
            memory = await self.backend.delete(user, agents, memory_id, audit=audit)
        else:
            memory = await self._kept_with_row(
                lambda: self._delete(user, agents, memory_id),
                lambda deleted: None if deleted is None else row(deleted),
            )
        if memory is None:
            raise InvalidArgumentsError(
                f"no memory {memory_id!r} among yours",
                hint="memory_search returns the ids of your memories",
            )
        return memory


async def memory_tool(
    store: MemoryStore, name: str, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    """Run ``memory_store``, ``memory_search`` or ``memory_delete`` with validated arguments."""
    context = call.session_context
    if name == "memory_store":
        memory, created = await store.store(
            context,
            arguments["content"],
            tags=arguments.get("tags", ()),
            scope=arguments.get("scope", "agent"),
        )
        return ToolResult.from_structured({"memory": memory.to_json(), "duplicate": not created})
    if name == "memory_search":
        found = await store.search(
            context,
            arguments["query"],
            limit=arguments.get("limit"),
            tags=arguments.get("tags", ()),
        )
        return ToolResult.from_structured({"memories": [m.to_json() for m in found]})
    if name == "memory_delete":
        memory = await store.delete(context, arguments["id"])
        return ToolResult.from_structured({"deleted": memory.to_json()})
    raise KeyError(f"no memory tool {name!r}")
