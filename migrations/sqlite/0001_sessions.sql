-- Durable sessions (SPEC §8.2). JSON columns hold text; times are Unix milliseconds from the
-- database clock. Never stored: resolved header values, API keys, environment hooks, JS functions.

-- One row per session: the conversation, the caller's webhook hook objects (templates
-- unresolved) and the paused run's state (NULL when not paused).
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    messages TEXT NOT NULL,
    hooks TEXT NOT NULL,
    paused TEXT,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
) STRICT;

-- The calls a paused run waits on, replaced wholesale with each save; `ord` keeps their order.
-- `decision` is set once, by a conditional update (`WHERE decision IS NULL`).
CREATE TABLE pending_calls (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    reason TEXT NOT NULL CHECK (reason IN ('ask', 'outcome_unknown', 'deferred')),
    decision TEXT,
    decided_at INTEGER,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT;

-- The effects ledger: a row before a tool executes (`output` NULL), filled when its result is
-- known. A row still 'started' after a crash is a call whose outcome is unknown. Not tied to
-- `sessions` by a foreign key: a tool may start before the session's first save.
CREATE TABLE effects (
    session_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    side_effect TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('started', 'finished')),
    output TEXT,
    is_error INTEGER CHECK (is_error IN (0, 1)),
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT;

-- Deferred calls' placeholders: created with the pause that saves the call, filled once by a
-- conditional update (`WHERE output IS NULL`), never cleared by a later save.
CREATE TABLE deferred_results (
    session_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    output TEXT,
    is_error INTEGER CHECK (is_error IN (0, 1)),
    published_at INTEGER,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT;
