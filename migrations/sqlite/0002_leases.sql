-- Leases (SPEC §8.3): one row per session ever claimed. `token` grows by one with every claim
-- and is never reset; a lease is live while it is not released and `expires_at` (Unix
-- milliseconds, the machine's clock) is ahead. Writes of run state check the token in their
-- transaction (the fence).
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY NOT NULL,
    token INTEGER NOT NULL,
    owner TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    released INTEGER NOT NULL CHECK (released IN (0, 1)),
    claimed_at INTEGER NOT NULL
) STRICT;

-- A call found started without a result after a crash becomes an `outcome_unknown` approval;
-- the save that says so marks its ledger entry 'unknown', so a decision taken on it afterwards
-- is not mistaken for one taken before it started (the entry says 'started' again only when the
-- approved call runs again). SQLite cannot change a CHECK in place: the table is rebuilt, its
-- rowids (the start order) kept.
CREATE TABLE effects_new (
    session_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    side_effect TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('started', 'finished', 'unknown')),
    output TEXT,
    is_error INTEGER CHECK (is_error IN (0, 1)),
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT;
INSERT INTO effects_new (rowid, session_id, tool_call_id, tool_name, input, side_effect, status, output, is_error,
    started_at, finished_at)
SELECT rowid, session_id, tool_call_id, tool_name, input, side_effect, status, output, is_error, started_at,
    finished_at FROM effects;
DROP TABLE effects;
ALTER TABLE effects_new RENAME TO effects;
