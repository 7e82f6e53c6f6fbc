-- An `Idempotency-Key` names one body: the first row queued under a key is the one delivered,
-- and a later enqueue of the same key (a run recovered after a crash queues its tool call's
-- notifications again, with another `operationId`) changes nothing. Rows already queued twice
-- keep their oldest.
DELETE FROM agent_runtime_hooks.outbox AS o
 WHERE EXISTS (SELECT 1 FROM agent_runtime_hooks.outbox AS older
                WHERE older.idempotency_key = o.idempotency_key AND older.seq < o.seq);
CREATE UNIQUE INDEX outbox_idempotency_key ON agent_runtime_hooks.outbox (idempotency_key);
