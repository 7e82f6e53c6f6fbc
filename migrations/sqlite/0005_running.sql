-- The sub-agents at work in the session's current turn, as of their last turn boundaries (SPEC
-- §8.7): each one's place (the `Task` calls above it), conversation and turn count. Written at a
-- sub-agent's boundary, cleared by every save of the session itself; read only to go on after a
-- crash, so that a sub-agent's finished turns are not asked of its model again.
ALTER TABLE sessions ADD COLUMN running TEXT;
