//! Queued webhook notifications (SPEC §8.3): the rows a run writes to its store's outbox, and
//! what a delivering process claims and reports. Delivery itself (`delivery.rs`) is at least
//! once: a row claimed by a process that died is claimed again once its claim expires, and every
//! attempt carries the row's `Idempotency-Key`, so a receiver can drop duplicates.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::canonical::sha256_hex;
use super::StoreError;

/// Where a run's queued notifications go: its store's outbox, under its claim on the session.
#[async_trait]
pub trait Enqueue: Send + Sync + std::fmt::Debug {
    async fn enqueue(&self, rows: Vec<Queued>) -> Result<(), StoreError>;
}

/// The `Idempotency-Key` of hook `hook_id`'s notification of `event` with payload `fields`: the
/// same for the same hook, event and tool call (`toolCallId`); outside a tool call, for the same
/// hook, event, `operationId` and `stepIndex`; an event with neither (SessionStart, SessionEnd)
/// gets `once`, a value of its dispatch's own. SHA-256 over RFC 8785 JSON, lowercase hex: any
/// id fits a header.
pub fn idempotency_key(fields: &Map<String, Value>, hook_id: &str, event: &str, once: &str) -> String {
    let session = fields.get("sessionId").cloned().unwrap_or(Value::Null);
    let scope = match (fields.get("toolCallId"), fields.get("operationId")) {
        (Some(call @ Value::String(_)), _) => json!(["call", call]),
        (_, Some(operation @ Value::String(_))) => {
            json!([
                "step",
                operation,
                fields.get("stepIndex").cloned().unwrap_or(Value::Null)
            ])
        }
        _ => json!(["once", once]),
    };
    sha256_hex(&super::canonical_json(&json!([
        "agent-runtime-hooks/outbox/1",
        session,
        hook_id,
        event,
        scope
    ])))
}

/// A notification to deliver, as a run queues it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The row's own id (a UUID).
    pub id: String,
    pub session_id: String,
    pub hook_id: String,
    /// The event's name (`PostToolUse`, ...).
    pub event: String,
    /// Stable per hook, event and tool call (outside a tool call: per hook, event, operation and
    /// step), so a notification sent again after a crash carries the same key.
    pub idempotency_key: String,
    /// The run it was queued in: a critical row given up fails that run if it still runs here.
    pub operation_id: Option<String>,
    pub target: Target,
    /// The JSON text sent.
    pub body: String,
    pub max_attempts: u32,
    /// `fallback: 'none'`.
    pub critical: bool,
}

/// Where and how a row is sent: the webhook's URL, timeout and header templates, never a
/// resolved header value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub url: String,
    pub timeout_ms: u64,
    /// Lowercased names and `${NAME}` templates.
    pub headers: Vec<(String, String)>,
    pub allowed_env_vars: Vec<String>,
}

/// A row claimed for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub row: Queued,
    /// Attempts made before this one.
    pub attempts: u32,
    /// The claim this attempt's report must match (a claim that expired and was taken again by
    /// another process makes this process's report a no-op).
    pub claim_token: i64,
}

/// Which queued rows a claim takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due<'a> {
    /// Those whose backoff has passed (a delivering process's loop).
    Now,
    /// Every row, whatever its backoff, that drain `id` has not tried yet (`drainOutbox`).
    Drain(&'a str),
}

/// How an attempt went, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// Failed with this (code and status only, never a secret).
    Failed(String),
}

/// What the store made of an attempt's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Delivered,
    /// Failed; tried again after this long.
    Retry(Duration),
    /// Failed for the last of its `max_attempts`: no longer queued.
    GaveUp,
    /// The claim had expired and the row was taken again (or settled) by someone else: nothing
    /// changed.
    Stale,
}

/// How long a process may hold a row for one attempt beyond the webhook's own timeout (which
/// bounds the attempt) before another process may try it: the time to claim, connect and report.
/// A report later than that finds the row taken again and changes nothing (the receiver may see
/// the notification twice, with one `Idempotency-Key`).
pub const CLAIM_MARGIN: Duration = Duration::from_secs(5);

/// What an `enqueue` of `rows` is called in an error.
pub fn enqueue_operation(rows: &[Queued]) -> String {
    let session = rows.first().map_or("", |row| row.session_id.as_str());
    format!("queue {} webhook notification(s) of session {session}", rows.len())
}

/// How long a claim on `row` lasts: its webhook's timeout plus the margin.
pub fn claim_ms(row: &Queued) -> i64 {
    i64::try_from(row.target.timeout_ms)
        .unwrap_or(i64::MAX / 2)
        .saturating_add(CLAIM_MARGIN.as_millis() as i64)
}

/// The wait before retry `n` (n ≥ 1): min(2^(n-1) s, 60 s).
pub fn backoff(retry: u32) -> Duration {
    let exponent = retry.saturating_sub(1).min(6);
    Duration::from_secs((1u64 << exponent).min(60))
}

/// What an attempt's report settles to, given the attempts made before it.
pub fn settle(attempt: &Attempt, attempts_before: u32, max_attempts: u32) -> Settled {
    match attempt {
        Attempt::Delivered => Settled::Delivered,
        Attempt::Failed(_) if attempts_before + 1 >= max_attempts => Settled::GaveUp,
        Attempt::Failed(_) => Settled::Retry(backoff(attempts_before + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn keys_are_stable_per_hook_event_and_call_or_step() {
        let call = fields(json!({"sessionId": "s", "toolCallId": "c1", "operationId": "op", "stepIndex": 0}));
        let key = idempotency_key(&call, "audit", "PostToolUse", "x");
        assert_eq!(key.len(), 64);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        // The same call in another run (resumed after a crash): the same key.
        let again = fields(json!({"sessionId": "s", "toolCallId": "c1", "operationId": "op2", "stepIndex": 3}));
        assert_eq!(idempotency_key(&again, "audit", "PostToolUse", "y"), key);
        assert_ne!(idempotency_key(&call, "audit", "PreToolUse", "x"), key);
        assert_ne!(idempotency_key(&call, "other", "PostToolUse", "x"), key);
        let step = fields(json!({"sessionId": "s", "operationId": "op", "stepIndex": 1}));
        let next = fields(json!({"sessionId": "s", "operationId": "op", "stepIndex": 2}));
        assert_ne!(
            idempotency_key(&step, "audit", "StepEnd", "x"),
            idempotency_key(&next, "audit", "StepEnd", "x")
        );
        assert_eq!(
            idempotency_key(&step, "audit", "StepEnd", "x"),
            idempotency_key(&step, "audit", "StepEnd", "y")
        );
        let start = fields(json!({"sessionId": "s", "isResume": true}));
        assert_ne!(
            idempotency_key(&start, "audit", "SessionStart", "x"),
            idempotency_key(&start, "audit", "SessionStart", "y")
        );
    }

    #[test]
    fn retry_n_waits_two_to_the_n_minus_one_seconds_up_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX).as_secs(), 60);
    }

    #[test]
    fn the_last_attempt_gives_up() {
        let failed = Attempt::Failed("http_error (status 500)".into());
        assert_eq!(settle(&failed, 0, 8), Settled::Retry(Duration::from_secs(1)));
        assert_eq!(settle(&failed, 6, 8), Settled::Retry(Duration::from_secs(60)));
        assert_eq!(settle(&failed, 7, 8), Settled::GaveUp);
        assert_eq!(settle(&failed, 0, 1), Settled::GaveUp);
        assert_eq!(settle(&Attempt::Delivered, 7, 8), Settled::Delivered);
    }
}
