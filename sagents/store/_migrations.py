"""The PostgreSQL schema, as numbered migrations applied in order (docs/scale-out.md).

The database records the version it is at in ``sagents_schema``. A store entering applies, under
a transaction-scoped advisory lock (so two replicas starting together do not race), every
migration above that version; a database at a version this sagents does not know (written by a
newer release) is refused with :class:`~sagents.errors.StoreSchemaError` rather than used.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

MIGRATIONS: tuple[str, ...] = (
    # 1: audit rows, background tasks with the replica running them, replica heartbeats,
    #    pending approvals, session grants, secrets shared by the replicas.
    """
    CREATE TABLE sagents_audit (
        id BIGSERIAL PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        session_id TEXT,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        data JSONB NOT NULL
    );
    CREATE INDEX sagents_audit_kind_ts ON sagents_audit (kind, ts);
    CREATE TABLE sagents_tasks (
        task_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        result TEXT,
        is_error BOOLEAN,
        reason TEXT,
        announced BOOLEAN NOT NULL DEFAULT FALSE,
        replica_id TEXT NOT NULL
    );
    CREATE INDEX sagents_tasks_owner ON sagents_tasks (owner, started_at);
    CREATE INDEX sagents_tasks_running ON sagents_tasks (replica_id) WHERE status = 'running';
    CREATE TABLE sagents_replicas (
        replica_id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        lease_s DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE sagents_pending_approvals (
        nonce TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        call TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX sagents_pending_approvals_session ON sagents_pending_approvals (session_id);
    CREATE TABLE sagents_grants (
        session_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        PRIMARY KEY (session_id, tool)
    );
    CREATE TABLE sagents_secrets (
        name TEXT PRIMARY KEY,
        value BYTEA NOT NULL
    );
    """,
    # 2: the built-in todo lists (one JSON list per session) and long-term memories with a
    #    full-text index (English stemming, content and tags).
    """
    CREATE TABLE sagents_todos (
        session_id TEXT PRIMARY KEY,
        items JSONB NOT NULL,
        updated DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE sagents_memories (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        agent TEXT NOT NULL,
        content TEXT NOT NULL,
        digest TEXT NOT NULL,
        tags JSONB NOT NULL,
        tags_text TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        search TSVECTOR GENERATED ALWAYS AS (
            to_tsvector('english'::regconfig, content || ' ' || tags_text)
        ) STORED,
        UNIQUE (user_id, agent, digest)
    );
    CREATE INDEX sagents_memories_scope ON sagents_memories (user_id, agent);
    CREATE INDEX sagents_memories_search ON sagents_memories USING GIN (search);
    """,
    # 3: pinned definitions of upstream tools (docs/gateway.md, "Pinned definitions"): the
    #    accepted definition per server and tool, and a changed one offered since.
    """
    CREATE TABLE sagents_tool_pins (
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        definition TEXT NOT NULL,
        digest TEXT NOT NULL,
        offered TEXT,
        offered_digest TEXT,
        updated DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (server, tool)
    );
    """,
    # 4: the agent loop's paused runs (signed documents), their claims (a resume happens
    #    once) and agent sessions (docs/agent.md, "Pausing and resuming").
    """
    CREATE TABLE sagents_run_states (
        state_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        document TEXT NOT NULL,
        saved DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE sagents_run_claims (
        state_id TEXT PRIMARY KEY,
        claimed DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE sagents_agent_sessions (
        session_id TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        saved DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX sagents_agent_sessions_saved ON sagents_agent_sessions (saved);
    """,
    # 5: upstream logins (docs/oauth.md): each principal's OAuth tokens for an upstream
    #    server, sealed (encrypted with the key of SAGENTS_SECRET_KEY) before they get here.
    """
    CREATE TABLE sagents_upstream_logins (
        server TEXT NOT NULL,
        principal TEXT NOT NULL,
        sealed BYTEA NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (server, principal)
    );
    """,
    # 6: a session's paused runs looked up by session (``AgentStore.pending_state``), newest
    #    first, without reading the whole table.
    """
    CREATE INDEX sagents_run_states_session ON sagents_run_states (session_id, saved);
    """,
    # 7: approvals that wait for the web console (docs/console.md, "Approvals"), so that a
    #    card a gone replica left is shown again and its answer is taken once.
    """
    CREATE TABLE sagents_held_approvals (
        approval_id TEXT PRIMARY KEY,
        binding TEXT NOT NULL,
        call TEXT NOT NULL,
        card TEXT NOT NULL,
        asker TEXT NOT NULL,
        asked_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        answer TEXT
    );
    CREATE INDEX sagents_held_approvals_binding ON sagents_held_approvals (binding, call);
    """,
    # 8: a pending approval's call digest is keyed with the replicas' approval key (HMAC), like
    #    a held approval's: the bare SHA-256 digests older releases wrote would confirm a guess
    #    of an argument to whoever reads the table. They are removed (each is asked again).
    """
    DELETE FROM sagents_pending_approvals;
    """,
)
"""Migration ``n`` (1-based) takes the schema from version ``n - 1`` to ``n``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this sagents writes and reads."""
