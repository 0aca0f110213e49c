"""The built-in todo and memory tools on the PostgreSQL store of gateway replicas
(docs/scale-out.md, docs/builtin_tools.md): the same rules as the SQLite files, on the tables of
:mod:`sagents.store._migrations`.

- todo: one JSON list per session, rewritten in a transaction that holds a lock on the session
  (``pg_advisory_xact_lock``), so two replicas writing one list go one after the other;
- memory: scoped by user and agent column exactly as :func:`~sagents.tool.impl._memory.scope_of`
  resolves them, deduplicated within a scope by digest under a lock on the scope, searched with
  PostgreSQL full-text search (``to_tsvector('english', ...)``, any of the query's words,
  ``ts_rank`` best first) and, for runs of CJK characters, as substrings (``strpos``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any, cast

from sagents.errors import QuotaExceededError
from sagents.store._builtin_state import (
    USER_SCOPE,
    DeleteAudit,
    Memory,
    Merge,
    Scope,
    Status,
    TodoItem,
    WriteAudit,
    memory_digest,
    merge_found,
)
from sagents.store._postgres_db import Database, insert_audit

__all__ = ["PostgresMemory", "PostgresTodos"]


def _items(value: Any) -> list[TodoItem]:
    return [
        TodoItem(
            id=item["id"],
            content=item["content"],
            status=cast(Status, item["status"]),
            owner=item.get("owner"),
            blocked_by=tuple(item.get("blocked_by", ())),
        )
        for item in value or []
    ]


class PostgresTodos:
    """Task lists in ``sagents_todos`` (a :class:`~sagents.store._builtin_state.TodoBackend`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def read(self, session_id: str) -> list[TodoItem]:
        """The session's list, in order."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT items FROM sagents_todos WHERE session_id = %s", (session_id,)
            )
            row = await cursor.fetchone()
        return _items(row[0] if row is not None else [])

    async def write(self, session_id: str, merge: Merge) -> list[TodoItem]:
        """Apply ``merge`` under the session's lock; nothing changes when it raises."""
        async with self._db.connection() as db, db.transaction():
            await db.execute(
                "SELECT pg_advisory_xact_lock(hashtext('sagents_todo'), hashtext(%s))",
                (session_id,),
            )
            cursor = await db.execute(
                "SELECT items FROM sagents_todos WHERE session_id = %s", (session_id,)
            )
            row = await cursor.fetchone()
            items = merge(_items(row[0] if row is not None else []))
            document = json.dumps([item.to_json() for item in items])
            await db.execute(
                "INSERT INTO sagents_todos (session_id, items, updated) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET items = EXCLUDED.items, "
                "updated = EXCLUDED.updated",
                (session_id, document, time.time()),
            )
        return items


def _scope(agent: str) -> Scope:
    return "user" if agent == USER_SCOPE else "agent"


class PostgresMemory:
    """Memories in ``sagents_memories`` (a :class:`~sagents.store._builtin_state.MemoryBackend`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def store(
        self,
        user: str,
        agent: str,
        content: str,
        tags: tuple[str, ...],
        max_per_scope: int,
        *,
        audit: WriteAudit | None = None,
    ) -> tuple[Memory, bool]:
        """Insert, or merge the tags into the scope's memory of the same digest; ``audit``'s
        row in the same transaction."""
        now = time.time()
        digest = memory_digest(content)
        async with self._db.connection() as db, db.transaction():
            await db.execute(  # check-then-insert, one writer per scope
                "SELECT pg_advisory_xact_lock(hashtext('sagents_memory:' || %s), hashtext(%s))",
                (user, agent),
            )
            cursor = await db.execute(
                "SELECT id, content, tags, created FROM sagents_memories "
                "WHERE user_id = %s AND agent = %s AND digest = %s",
                (user, agent, digest),
            )
            row = await cursor.fetchone()
            if row is not None:
                memory_id, stored, old_tags, created = row
                merged = tuple(dict.fromkeys([*old_tags, *tags]))
                await db.execute(
                    "UPDATE sagents_memories SET tags = %s, tags_text = %s, updated = %s "
                    "WHERE id = %s",
                    (json.dumps(merged), " ".join(merged), now, memory_id),
                )
                memory = Memory(
                    id=memory_id,
                    content=stored,
                    tags=merged,
                    scope=_scope(agent),
                    created=created,
                    updated=now,
                )
                if audit is not None:
                    await insert_audit(db, audit(memory, False))
                return memory, False
            cursor = await db.execute(
                "SELECT count(*) FROM sagents_memories WHERE user_id = %s AND agent = %s",
                (user, agent),
            )
            count_row = await cursor.fetchone()
            if count_row is not None and count_row[0] >= max_per_scope:
                raise QuotaExceededError(
                    f"this memory scope is full ({max_per_scope:,} memories)",
                    hint="delete memories that are no longer useful (memory_delete)",
                    details={"limit": "max_per_scope"},
                )
            memory_id = uuid.uuid4().hex[:12]
            await db.execute(
                "INSERT INTO sagents_memories (id, user_id, agent, content, digest, tags, "
                "tags_text, created, updated) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    memory_id,
                    user,
                    agent,
                    content,
                    digest,
                    json.dumps(tags),
                    " ".join(tags),
                    now,
                    now,
                ),
            )
            memory = Memory(
                id=memory_id,
                content=content,
                tags=tags,
                scope=_scope(agent),
                created=now,
                updated=now,
            )
            if audit is not None:
                await insert_audit(db, audit(memory, True))
        return memory, True

    async def search(
        self,
        user: str,
        agents: Sequence[str],
        words: Sequence[str],
        limit: int,
        runs: Sequence[str] = (),
    ) -> list[Memory]:
        """Memories matching any of ``words`` (English stemming, ``ts_rank``) or containing any
        of ``runs`` (CJK runs, one point each: :func:`~sagents.tool.impl._memory.query_terms`),
        best first."""
        select = (
            "SELECT id, content, tags, agent, created, updated, {score} AS score "
            "FROM sagents_memories{source} WHERE {match} AND user_id = %s AND agent = ANY(%s) "
            "ORDER BY score DESC, updated DESC LIMIT %s"
        )
        searches: list[tuple[str, tuple[Any, ...]]] = []
        if words:
            query = " | ".join("'" + word.replace("'", "") + "'" for word in words)  # \w+ words
            sql = select.format(
                score="ts_rank(search, q)",
                source=", to_tsquery('english'::regconfig, %s) AS q",
                match="search @@ q",
            )
            searches.append((sql, (query, user, list(agents), limit)))
        if runs:
            hits = " + ".join(
                "(strpos(content, %s) > 0 OR strpos(tags_text, %s) > 0)::int" for _ in runs
            )
            match = " OR ".join(
                "strpos(content, %s) > 0 OR strpos(tags_text, %s) > 0" for _ in runs
            )
            pairs = tuple(run for run in runs for _ in (0, 1))
            sql = select.format(score=hits, source="", match=f"({match})")
            searches.append((sql, (*pairs, *pairs, user, list(agents), limit)))
        results = []
        async with self._db.connection() as db:
            for sql, values in searches:
                cursor = await db.execute(cast(Any, sql), values)
                results.append(await cursor.fetchall())
        return merge_found(*([_memory(row) for row in rows] for rows in results))

    async def delete(
        self,
        user: str,
        agents: Sequence[str],
        memory_id: str,
        *,
        audit: DeleteAudit | None = None,
    ) -> Memory | None:
        """Delete one memory of ``user`` in ``agents``, with ``audit``'s row in the same
        transaction; None when there is none."""
        async with self._db.connection() as db, db.transaction():
            cursor = await db.execute(
                "DELETE FROM sagents_memories WHERE id = %s AND user_id = %s AND agent = ANY(%s) "
                "RETURNING id, content, tags, agent, created, updated",
                (memory_id, user, list(agents)),
            )
            row = await cursor.fetchone()
            memory = None if row is None else _memory(row)
            if memory is not None and audit is not None:
                await insert_audit(db, audit(memory))
        return memory


def _memory(row: Sequence[Any]) -> Memory:
    """A memory from a row ``(id, content, tags, agent, created, updated[, score])``."""
    memory_id, content, tags, agent, created, updated, *score = row
    return Memory(
        id=memory_id,
        content=content,
        tags=tuple(tags),
        scope=_scope(agent),
        created=created,
        updated=updated,
        score=round(float(score[0]), 6) if score else None,
    )
