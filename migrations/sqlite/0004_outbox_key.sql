-- An `Idempotency-Key` names one body: the first row queued under a key is the one delivered,
-- and a later enqueue of the same key (a run recovered after a crash queues its tool call's
-- notifications again, with another `operationId`) changes nothing. Rows already queued twice
-- keep their oldest.
DELETE FROM outbox WHERE seq NOT IN (SELECT MIN(seq) FROM outbox GROUP BY idempotency_key);
CREATE UNIQUE INDEX outbox_idempotency_key ON outbox (idempotency_key);
