//! The statements the SQL back ends (SQLite, PostgreSQL) run the same way, written once over
//! sqlx's `Database`: each back end gives its dialect's text (placeholders, schema, clock), the
//! connection or pool to run on, and how its `output` columns keep a result's text.

use serde_json::{Map, Value};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use super::codec::to_text;
use super::rows::{self, OutputDecoder};
use super::{Decision, DeferredOutcome, StartedEffect, StoreError, ToolResult};

fn failed(operation: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::new(operation, e)
}

/// `sql` updates a row with `$1` = the decision and `$2`, `$3` = session, call, only when it is
/// undecided, returning a row when it did: whether this decision is the one taken.
pub(super) async fn decide<'c, DB, E>(
    executor: E,
    sql: &'static str,
    session_id: &str,
    tool_call_id: &str,
    decision: &Decision,
    operation: &str,
) -> Result<bool, StoreError>
where
    DB: Database,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
{
    sqlx::query::<DB>(sql)
        .bind(to_text(decision))
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(failed(operation))
}

/// `sql` records a call as started: `$1`..`$5` = session, call, tool, input, side effect.
pub(super) async fn effect_started<'c, DB, E>(
    executor: E,
    sql: &'static str,
    (session_id, tool_call_id): (&str, &str),
    (tool_name, input, side_effect): (&str, &Map<String, Value>, &str),
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
{
    sqlx::query::<DB>(sql)
        .bind(session_id)
        .bind(tool_call_id)
        .bind(tool_name)
        .bind(to_text(input))
        .bind(side_effect)
        .execute(executor)
        .await
        .map(drop)
        .map_err(failed(operation))
}

/// `sql` writes a result: `$1`, `$2` = output (as the back end keeps it), is_error; `$3`, `$4` =
/// session, call. `Ok(true)` when it returned a row (a conditional update that took effect).
pub(super) async fn write_result<'c, DB, E>(
    executor: E,
    sql: &'static str,
    (session_id, tool_call_id): (&str, &str),
    (output, result): (String, &ToolResult),
    operation: &str,
) -> Result<bool, StoreError>
where
    DB: Database,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
{
    sqlx::query::<DB>(sql)
        .bind(output)
        .bind(result.is_error)
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(failed(operation))
}

/// What a call's row becomes (`rows::effect`, `rows::deferred`): `None` without a row.
pub(super) type Reader<R, T> = fn(Option<R>, &str, OutputDecoder) -> Result<Option<T>, StoreError>;

/// `sql` selects one call's row (`$1`, `$2` = session, call), which `read` reads.
pub(super) async fn call_row<'c, DB, E, T>(
    executor: E,
    sql: &'static str,
    (session_id, tool_call_id): (&str, &str),
    (read, output): (Reader<DB::Row, T>, OutputDecoder),
    operation: &str,
) -> Result<Option<T>, StoreError>
where
    DB: Database,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
{
    let found = sqlx::query::<DB>(sql)
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map_err(failed(operation))?;
    read(found, operation, output)
}

/// `sql` selects a session's open effects (`$1` = session), in start order.
pub(super) async fn open_effects<'c, DB, E>(
    executor: E,
    sql: &'static str,
    session_id: &str,
    operation: &str,
) -> Result<Vec<StartedEffect>, StoreError>
where
    DB: Database,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
{
    let started = sqlx::query::<DB>(sql)
        .bind(session_id)
        .fetch_all(executor)
        .await
        .map_err(failed(operation))?;
    started.iter().map(|row| rows::started_effect(row, operation)).collect()
}

/// The statements of a publication: the conditional update of the placeholder (returning a row
/// when it took effect), the ledger's finish, and the placeholder's read.
pub(super) struct Publication {
    pub publish: &'static str,
    pub finish: &'static str,
    pub read: &'static str,
}

/// Publishes a deferred result on `conn` (in the caller's write transaction): the conditional
/// update is the publication, so only an empty placeholder takes a result; a completion that
/// lost reads the winner's result in a statement of its own (under READ COMMITTED, a new snapshot
/// that sees it). `output` is the result's text as the back end's `output` columns keep it.
pub(super) async fn publish<DB>(
    conn: &mut DB::Connection,
    statements: &Publication,
    call: (&str, &str),
    (output, result): (String, &ToolResult),
    decoder: OutputDecoder,
    operation: &str,
) -> Result<DeferredOutcome, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
    for<'t> Option<bool>: Decode<'t, DB> + Type<DB>,
{
    if write_result(
        &mut *conn,
        statements.publish,
        call,
        (output.clone(), result),
        operation,
    )
    .await?
    {
        write_result(&mut *conn, statements.finish, call, (output, result), operation).await?;
        return Ok(DeferredOutcome::Published);
    }
    let placeholder = call_row(&mut *conn, statements.read, call, (rows::deferred, decoder), operation).await?;
    rows::not_filled(placeholder, operation)
}
