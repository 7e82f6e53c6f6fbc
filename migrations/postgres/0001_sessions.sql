-- Durable sessions (SPEC §8.2) on PostgreSQL: the logical schema of migrations/sqlite/0001, in its
-- own schema (`agent_runtime_hooks`, created by the migrator) so a database shared with an
-- application keeps its own `sessions` table and its own `_sqlx_migrations`. JSON columns hold
-- the exact text the store wrote (not JSONB, which reorders keys, rewrites numbers and refuses
-- `\u0000`); times are Unix milliseconds from the database clock. Never stored: resolved header
-- values, API keys, environment hooks, JS functions.

-- One row per session: the conversation, the caller's webhook hook objects (templates
-- unresolved) and the paused run's state (NULL when not paused).
CREATE TABLE agent_runtime_hooks.sessions (
    session_id TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    hooks TEXT NOT NULL,
    paused TEXT,
    created_at BIGINT NOT NULL DEFAULT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
    updated_at BIGINT NOT NULL DEFAULT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
);

-- The calls a paused run waits on, replaced wholesale with each save (rows upserted in place, so
-- a decision racing a save sees the saved row); `ord` keeps their order. `decision` is set once,
-- by a conditional update (`WHERE decision IS NULL`).
CREATE TABLE agent_runtime_hooks.pending_calls (
    session_id TEXT NOT NULL REFERENCES agent_runtime_hooks.sessions (session_id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    reason TEXT NOT NULL CHECK (reason IN ('ask', 'outcome_unknown', 'deferred')),
    decision TEXT,
    decided_at BIGINT,
    PRIMARY KEY (session_id, tool_call_id)
);

-- The effects ledger: a row before a tool executes (`output` NULL), filled when its result is
-- known. A row still 'started' after a crash is a call whose outcome is unknown. `seq` is the
-- start order (SQLite's rowid), kept when a call starts again. Not tied to `sessions` by a
-- foreign key: a tool may start before the session's first save. `output` is the result text as
-- a JSON string: PostgreSQL text cannot hold U+0000, which a tool's output may.
CREATE TABLE agent_runtime_hooks.effects (
    session_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    side_effect TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('started', 'finished')),
    output TEXT,
    is_error BOOLEAN,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (session_id, tool_call_id)
);

CREATE INDEX effects_open ON agent_runtime_hooks.effects (session_id, seq) WHERE status = 'started';

-- Deferred calls' placeholders: created with the pause that saves the call, filled once by a
-- conditional update (`WHERE output IS NULL`), never cleared by a later save. `output` as in
-- `effects` (a JSON string).
CREATE TABLE agent_runtime_hooks.deferred_results (
    session_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    output TEXT,
    is_error BOOLEAN,
    published_at BIGINT,
    PRIMARY KEY (session_id, tool_call_id)
);
