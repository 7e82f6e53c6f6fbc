-- Leases (SPEC §8.3): one row per session ever claimed. `token` grows by one with every claim
-- and is never reset; a lease is live while it is not released and `expires_at` (Unix
-- milliseconds, the database clock) is ahead. Writes of run state check the token in their
-- transaction (the fence, `FOR SHARE`, so a claim waits for a write in flight to commit).
CREATE TABLE agent_runtime_hooks.leases (
    session_id TEXT PRIMARY KEY,
    token BIGINT NOT NULL,
    owner TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    released BOOLEAN NOT NULL,
    claimed_at BIGINT NOT NULL
);

-- A call found started without a result after a crash becomes an `outcome_unknown` approval;
-- the save that says so marks its ledger entry 'unknown', so a decision taken on it afterwards
-- is not mistaken for one taken before it started (the entry says 'started' again only when the
-- approved call runs again).
ALTER TABLE agent_runtime_hooks.effects
    DROP CONSTRAINT effects_status_check,
    ADD CONSTRAINT effects_status_check CHECK (status IN ('started', 'finished', 'unknown'));
