//! Reading stored rows, for every SQL back end: a column that cannot be read is a `StoreError`
//! naming the column (never its text), and the shapes the tables share (a pending call, a result
//! pair, an effect, a started effect, a placeholder) are read the same way whatever the driver.

use sqlx::{ColumnIndex, Decode, Row, Type};

use super::codec::{messages_from_text, parse, parse_decision, parse_object};
use super::{
    Deferred, DeferredOutcome, Effect, PendingCall, PendingReason, SessionRecord, StartedEffect, StoreError, ToolResult,
};

/// How a back end keeps a result's text in its `output` column: as it is (SQLite), or encoded
/// (PostgreSQL keeps a JSON string, since its text cannot hold U+0000).
pub(super) type OutputDecoder = fn(String, &str) -> Result<String, StoreError>;

/// The text as it is.
pub(super) fn plain_output(text: String, _operation: &str) -> Result<String, StoreError> {
    Ok(text)
}

pub(super) fn column<'r, R, T>(row: &'r R, name: &str, operation: &str) -> Result<T, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    T: Decode<'r, R::Database> + Type<R::Database>,
{
    row.try_get(name)
        .map_err(|e| StoreError::new(operation, format!("stored {name} is unreadable: {e}")))
}

/// A `sessions` row (`messages`, `hooks`, `paused`, `running`).
pub(super) fn session_record<R>(row: &R, session_id: &str, operation: &str) -> Result<SessionRecord, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database>,
{
    let paused: Option<String> = column(row, "paused", operation)?;
    let running: Option<String> = column(row, "running", operation)?;
    Ok(SessionRecord {
        session_id: session_id.to_owned(),
        messages: messages_from_text(&column::<_, String>(row, "messages", operation)?, operation)?,
        hooks: parse(&column::<_, String>(row, "hooks", operation)?, operation, "hooks")?,
        paused: paused.map(|text| parse(&text, operation, "paused")).transpose()?,
        running: running.map(|text| parse(&text, operation, "running")).transpose()?,
    })
}

/// A `pending_calls` row.
pub(super) fn pending_call<R>(row: &R, operation: &str) -> Result<PendingCall, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database>,
{
    let reason: String = column(row, "reason", operation)?;
    let decision: Option<String> = column(row, "decision", operation)?;
    Ok(PendingCall {
        tool_call_id: column(row, "tool_call_id", operation)?,
        tool_name: column(row, "tool_name", operation)?,
        input: parse_object(&column::<_, String>(row, "input", operation)?, operation, "input")?,
        fingerprint: column(row, "fingerprint", operation)?,
        reason: PendingReason::parse(&reason)
            .ok_or_else(|| StoreError::new(operation, format!("stored reason {reason:?} is unknown")))?,
        decision: parse_decision(decision.as_deref(), operation)?,
    })
}

/// A result column pair (`output`, `is_error`): `None` while not filled.
pub(super) fn result<R>(row: &R, operation: &str, output: OutputDecoder) -> Result<Option<ToolResult>, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<bool>: Decode<'r, R::Database> + Type<R::Database>,
{
    let text: Option<String> = column(row, "output", operation)?;
    let is_error: Option<bool> = column(row, "is_error", operation)?;
    match (text, is_error) {
        (Some(text), Some(is_error)) => Ok(Some(ToolResult {
            output: output(text, operation)?,
            is_error,
        })),
        (None, None) => Ok(None),
        _ => Err(StoreError::new(operation, "stored result is half written")),
    }
}

/// An `effects` row (`status`, `output`, `is_error`), if there is one.
pub(super) fn effect<R>(row: Option<R>, operation: &str, output: OutputDecoder) -> Result<Option<Effect>, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<bool>: Decode<'r, R::Database> + Type<R::Database>,
{
    let Some(row) = row else { return Ok(None) };
    let status: String = column(&row, "status", operation)?;
    match (status.as_str(), result(&row, operation, output)?) {
        ("started", None) => Ok(Some(Effect::Started)),
        ("unknown", None) => Ok(Some(Effect::Unknown)),
        ("finished", Some(result)) => Ok(Some(Effect::Finished(result))),
        _ => Err(StoreError::new(
            operation,
            format!("stored effect {status:?} does not match its result"),
        )),
    }
}

/// An open `effects` row (`tool_call_id`, `tool_name`, `input`, `side_effect`).
pub(super) fn started_effect<R>(row: &R, operation: &str) -> Result<StartedEffect, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(StartedEffect {
        tool_call_id: column(row, "tool_call_id", operation)?,
        tool_name: column(row, "tool_name", operation)?,
        input: parse_object(&column::<_, String>(row, "input", operation)?, operation, "input")?,
        side_effect: column(row, "side_effect", operation)?,
    })
}

/// A `deferred_results` row (`output`, `is_error`), if there is one.
pub(super) fn deferred<R>(
    row: Option<R>,
    operation: &str,
    output: OutputDecoder,
) -> Result<Option<Deferred>, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<bool>: Decode<'r, R::Database> + Type<R::Database>,
{
    let Some(row) = row else { return Ok(None) };
    Ok(Some(match result(&row, operation, output)? {
        None => Deferred::Waiting,
        Some(first) => Deferred::Published(first),
    }))
}

/// What a completion whose conditional update filled nothing answers, from what the placeholder
/// holds (read after the update, so it is the completion that won).
pub(super) fn not_filled(placeholder: Option<Deferred>, operation: &str) -> Result<DeferredOutcome, StoreError> {
    match placeholder {
        None => Ok(DeferredOutcome::NotDeferred),
        Some(Deferred::Published(first)) => Ok(DeferredOutcome::AlreadyPublished(first)),
        Some(Deferred::Waiting) => Err(StoreError::new(operation, "the placeholder is empty but not writable")),
    }
}

/// An `outbox` row as a claim returns it.
pub(super) fn claimed<R>(row: &R, operation: &str) -> Result<super::outbox::Claimed, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i32: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let target: String = column(row, "target", operation)?;
    let max_attempts: i32 = column(row, "max_attempts", operation)?;
    let attempts: i32 = column(row, "attempts", operation)?;
    Ok(super::outbox::Claimed {
        row: super::outbox::Queued {
            id: column(row, "id", operation)?,
            session_id: column(row, "session_id", operation)?,
            hook_id: column(row, "hook_id", operation)?,
            event: column(row, "event", operation)?,
            idempotency_key: column(row, "idempotency_key", operation)?,
            operation_id: column(row, "operation_id", operation)?,
            target: parse(&target, operation, "target")?,
            body: column(row, "body", operation)?,
            max_attempts: u32::try_from(max_attempts).unwrap_or(1).max(1),
            critical: column(row, "critical", operation)?,
        },
        attempts: u32::try_from(attempts).unwrap_or(0),
        claim_token: column(row, "claim_token", operation)?,
    })
}
