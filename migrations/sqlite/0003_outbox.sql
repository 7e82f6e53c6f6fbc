-- Queued webhook notifications (SPEC §8.3): written before the run goes past their event,
-- delivered at least once by any process attached to the store, each with its
-- `Idempotency-Key`. `target` is the webhook's URL, timeout and header templates (unresolved,
-- never their values); `body` the JSON sent. A process claims a row for one attempt
-- (`claimed_until`, `claim_token`: a claim that expired is taken again, and the late process's
-- report of it is ignored). `drain` marks rows a `drainOutbox` call has tried.
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    hook_id TEXT NOT NULL,
    event TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    operation_id TEXT,
    target TEXT NOT NULL,
    body TEXT NOT NULL,
    max_attempts INTEGER NOT NULL CHECK (max_attempts > 0),
    claim_ms INTEGER NOT NULL CHECK (claim_ms > 0),
    critical INTEGER NOT NULL CHECK (critical IN (0, 1)),
    status TEXT NOT NULL CHECK (status IN ('queued', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at INTEGER NOT NULL,
    claimed_by TEXT,
    claimed_until INTEGER,
    claim_token INTEGER NOT NULL DEFAULT 0,
    drain TEXT,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
) STRICT;

CREATE INDEX outbox_queued ON outbox (available_at, seq) WHERE status = 'queued';
