//! The statements the SQL back ends (SQLite, PostgreSQL) run the same way, written once over
//! sqlx's `Database`: each back end gives its `Dialect` (the statements' text, with its
//! placeholders, schema and clock, and how its `output` columns keep a result's text) and the
//! connection or pool to run on (a write transaction where it needs one).

use serde_json::{Map, Value};
use sqlx::database::HasStatementCache;
use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use super::codec::to_text;
use super::lease::ttl_ms;
use super::outbox::{self, Attempt, Claimed, Due, Queued, Settled};
use super::pooler;
use super::rows::{self, OutputDecoder};
use super::{
    Claim, Decision, Deferred, DeferredOutcome, Effect, Lease, LeaseState, StartedEffect, StoreError, ToolResult,
};

/// A back end's statements, one text for both: `$n` placeholders (SQLite reads them too), tables
/// by their bare names (PostgreSQL connections search the store's schema), and the dialect's
/// clock and start order put in. `decide` and `publish` are conditional updates that return a
/// row when they took effect.
pub(super) struct Dialect {
    decide: String,
    start_effect: String,
    finish_effect: String,
    effect: &'static str,
    open_effects: String,
    publish: String,
    deferred: &'static str,
    claim: String,
    holder: String,
    renew: String,
    release: &'static str,
    lease_state: String,
    fence: String,
    enqueue: String,
    claim_deliveries: String,
    delivered: String,
    retry: String,
    gave_up: &'static str,
    queued: &'static str,
    /// Marks the `Started` ledger entry of a call saved as `outcome_unknown` (session, call).
    pub(super) unknown: &'static str,
    /// A result's text as the `output` columns keep it, and back.
    encode: fn(&str) -> String,
    decode: OutputDecoder,
    /// Whether a statement is kept prepared on its connection under a name, parsed once: not
    /// through a pooler that hands each transaction another server connection, where the name
    /// would be missing, or another client's.
    named: bool,
}

impl Dialect {
    /// `now`: the database clock in Unix milliseconds (a SQL expression); `start_order`: what
    /// orders an `effects e` row by its first start; `share_lock`: what a fence's `SELECT` ends
    /// with so a claim waits for the fenced write to commit (SQLite's write transactions are
    /// serial already).
    pub fn new(
        now: &str,
        start_order: &str,
        (share_lock, skip_locked): (&str, &str),
        encode: fn(&str) -> String,
        decode: OutputDecoder,
    ) -> Dialect {
        let live = format!("NOT released AND expires_at > {now}");
        Dialect {
            // One statement, so two claimers cannot both win: the second waits for the first's
            // row and re-checks the condition on it.
            claim: format!(
                "INSERT INTO leases AS l (session_id, token, owner, expires_at, released, claimed_at) \
                 VALUES ($1, 1, $2, {now} + $3, FALSE, {now}) ON CONFLICT (session_id) DO UPDATE \
                 SET token = l.token + 1, owner = excluded.owner, expires_at = excluded.expires_at, \
                 released = FALSE, claimed_at = excluded.claimed_at \
                 WHERE l.released OR l.expires_at <= {now} RETURNING token"
            ),
            holder: format!("SELECT owner, expires_at - {now} AS remaining FROM leases WHERE session_id = $1"),
            renew: format!(
                "UPDATE leases SET expires_at = {now} + $3 WHERE session_id = $1 AND token = $2 AND {live} \
                 RETURNING token"
            ),
            release: "UPDATE leases SET released = TRUE WHERE session_id = $1 AND token = $2",
            lease_state: format!(
                "SELECT token, CASE WHEN {live} THEN 1 ELSE 0 END AS live FROM leases WHERE session_id = $1"
            ),
            unknown: "UPDATE effects SET status = 'unknown' WHERE session_id = $1 AND tool_call_id = $2 \
                      AND status = 'started'",
            fence: format!("SELECT token FROM leases WHERE session_id = $1 AND token = $2 AND {live}{share_lock}"),
            enqueue: format!(
                "INSERT INTO outbox (id, session_id, hook_id, event, idempotency_key, operation_id, target, body, \
                 max_attempts, claim_ms, critical, status, available_at, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'queued', {now}, {now}) \
                 ON CONFLICT (idempotency_key) DO NOTHING"
            ),
            // Oldest first; rows another process holds (live claim, or locked right now) are
            // skipped. `$2` NULL: rows due now; else every row drain `$2` has not tried.
            claim_deliveries: format!(
                "UPDATE outbox AS o SET claimed_by = $1, claimed_until = {now} + claim_ms, \
                 claim_token = claim_token + 1, drain = COALESCE($2, drain) \
                 FROM (SELECT seq FROM outbox WHERE status = 'queued' \
                 AND (claimed_until IS NULL OR claimed_until <= {now}) \
                 AND (($2 IS NULL AND available_at <= {now}) OR ($2 IS NOT NULL AND drain IS DISTINCT FROM $2)) \
                 ORDER BY available_at, seq LIMIT $3{skip_locked}) AS c WHERE o.seq = c.seq \
                 RETURNING id, session_id, hook_id, event, idempotency_key, operation_id, target, body, \
                 max_attempts, critical, attempts, claim_token"
            ),
            delivered: format!(
                "UPDATE outbox SET status = 'delivered', attempts = attempts + 1, finished_at = {now}, \
                 claimed_by = NULL, claimed_until = NULL, last_error = NULL \
                 WHERE id = $1 AND claim_token = $2 AND status = 'queued' RETURNING seq"
            ),
            retry: format!(
                "UPDATE outbox SET attempts = attempts + 1, available_at = {now} + $3, last_error = $4, \
                 claimed_by = NULL, claimed_until = NULL \
                 WHERE id = $1 AND claim_token = $2 AND status = 'queued' RETURNING seq"
            ),
            gave_up: "UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $3, \
                      claimed_by = NULL, claimed_until = NULL \
                      WHERE id = $1 AND claim_token = $2 AND status = 'queued' RETURNING seq",
            queued: "SELECT COUNT(*) AS queued FROM outbox WHERE status = 'queued'",
            decide: format!(
                "UPDATE pending_calls SET decision = $1, decided_at = {now} \
                 WHERE session_id = $2 AND tool_call_id = $3 AND decision IS NULL RETURNING session_id"
            ),
            // An upsert keeps the row (and its start order) when a call starts again.
            start_effect: format!(
                "INSERT INTO effects (session_id, tool_call_id, tool_name, input, side_effect, status, started_at) \
                 VALUES ($1, $2, $3, $4, $5, 'started', {now}) ON CONFLICT (session_id, tool_call_id) DO UPDATE \
                 SET tool_name = excluded.tool_name, input = excluded.input, side_effect = excluded.side_effect, \
                 status = 'started', output = NULL, is_error = NULL, started_at = excluded.started_at, \
                 finished_at = NULL"
            ),
            finish_effect: format!(
                "UPDATE effects SET status = 'finished', output = $1, is_error = $2, finished_at = {now} \
                 WHERE session_id = $3 AND tool_call_id = $4"
            ),
            effect: "SELECT status, output, is_error FROM effects WHERE session_id = $1 AND tool_call_id = $2",
            open_effects: format!(
                "SELECT e.tool_call_id, e.tool_name, e.input, e.side_effect FROM effects e \
                 WHERE e.session_id = $1 AND e.status = 'started' AND NOT EXISTS (SELECT 1 FROM deferred_results d \
                 WHERE d.session_id = e.session_id AND d.tool_call_id = e.tool_call_id) ORDER BY {start_order}"
            ),
            publish: format!(
                "UPDATE deferred_results SET output = $1, is_error = $2, published_at = {now} \
                 WHERE session_id = $3 AND tool_call_id = $4 AND output IS NULL RETURNING session_id"
            ),
            deferred: "SELECT output, is_error FROM deferred_results WHERE session_id = $1 AND tool_call_id = $2",
            encode,
            decode,
            named: true,
        }
    }

    /// The same statements, each prepared unnamed where it runs (parsed every time).
    pub fn unnamed(self) -> Dialect {
        Dialect { named: false, ..self }
    }

    /// `sql` as this dialect runs a statement.
    pub(super) fn query<DB: Database + HasStatementCache>(
        &self,
        sql: &'static str,
    ) -> Query<'static, DB, DB::Arguments> {
        sqlx::query::<DB>(sql).persistent(self.named)
    }
}

/// A failed statement, with the fix named when a connection pooler refused it.
fn failed(operation: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::new(operation, pooler::explain(e.to_string()))
}

/// Whether this decision is the one taken (the call was pending and undecided).
pub(super) async fn decide<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    (session_id, tool_call_id): (&str, &str),
    decision: &Decision,
    operation: &str,
) -> Result<bool, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
{
    dialect
        .query::<DB>(dialect.decide.as_str())
        .bind(to_text(decision))
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(failed(operation))
}

/// Records a call as started (again: its entry is reset, its start order kept).
pub(super) async fn effect_started<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    (session_id, tool_call_id): (&str, &str),
    (tool_name, input, side_effect): (&str, &Map<String, Value>, &str),
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
{
    dialect
        .query::<DB>(dialect.start_effect.as_str())
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

/// The ledger entries of the calls a save keeps as `outcome_unknown` become `Unknown`.
pub(super) async fn mark_unknown<DB>(
    conn: &mut DB::Connection,
    dialect: &'static Dialect,
    session_id: &str,
    pending: &[super::PendingCall],
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
{
    for call in pending
        .iter()
        .filter(|call| call.reason == super::PendingReason::OutcomeUnknown)
    {
        dialect
            .query::<DB>(dialect.unknown)
            .bind(session_id)
            .bind(call.tool_call_id.as_str())
            .execute(&mut *conn)
            .await
            .map_err(failed(operation))?;
    }
    Ok(())
}

/// Runs `sql` with a result (`finish_effect`, `publish`): `Ok(true)` when it returned a row.
async fn write_result<'c, DB, E>(
    executor: E,
    (sql, dialect): (&'static str, &'static Dialect),
    (session_id, tool_call_id): (&str, &str),
    result: &ToolResult,
    operation: &str,
) -> Result<bool, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
{
    dialect
        .query::<DB>(sql)
        .bind((dialect.encode)(&result.output))
        .bind(result.is_error)
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(failed(operation))
}

/// Records a call's result (a call never started records nothing).
pub(super) async fn effect_finished<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    call: (&str, &str),
    result: &ToolResult,
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
{
    let finish = (dialect.finish_effect.as_str(), dialect);
    write_result(executor, finish, call, result, operation).await.map(drop)
}

/// What a call's row becomes (`rows::effect`, `rows::deferred`): `None` without a row.
type Reader<R, T> = fn(Option<R>, &str, OutputDecoder) -> Result<Option<T>, StoreError>;

/// `sql` selects one call's row (session, call), which `read` reads.
async fn call_row<'c, DB, E, T>(
    executor: E,
    (dialect, sql, read): (&'static Dialect, &'static str, Reader<DB::Row, T>),
    (session_id, tool_call_id): (&str, &str),
    operation: &str,
) -> Result<Option<T>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
{
    let found = dialect
        .query::<DB>(sql)
        .bind(session_id)
        .bind(tool_call_id)
        .fetch_optional(executor)
        .await
        .map_err(failed(operation))?;
    read(found, operation, dialect.decode)
}

/// A call's ledger entry.
pub(super) async fn effect<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    (session_id, tool_call_id): (&str, &str),
) -> Result<Option<Effect>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
    for<'t> Option<bool>: Decode<'t, DB> + Type<DB>,
{
    let operation = format!("read effect of call {tool_call_id} of session {session_id}");
    let read = (dialect, dialect.effect, rows::effect as Reader<DB::Row, Effect>);
    call_row(executor, read, (session_id, tool_call_id), &operation).await
}

/// A deferred call's placeholder.
pub(super) async fn deferred<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    (session_id, tool_call_id): (&str, &str),
    operation: &str,
) -> Result<Option<Deferred>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
    for<'t> Option<bool>: Decode<'t, DB> + Type<DB>,
{
    let read = (dialect, dialect.deferred, rows::deferred as Reader<DB::Row, Deferred>);
    call_row(executor, read, (session_id, tool_call_id), operation).await
}

/// A session's calls started without a result, in start order.
pub(super) async fn open_effects<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    session_id: &str,
) -> Result<Vec<StartedEffect>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
{
    let operation = format!("list open effects of session {session_id}");
    let started = dialect
        .query::<DB>(dialect.open_effects.as_str())
        .bind(session_id)
        .fetch_all(executor)
        .await
        .map_err(failed(&operation))?;
    started
        .iter()
        .map(|row| rows::started_effect(row, &operation))
        .collect()
}

/// Publishes a deferred result on `conn` (in the caller's write transaction): the conditional
/// update is the publication, so only an empty placeholder takes a result, and it finishes the
/// ledger entry too; a completion that lost reads the winner's result in a statement of its own
/// (under READ COMMITTED, a new snapshot that sees it).
pub(super) async fn publish<DB>(
    conn: &mut DB::Connection,
    dialect: &'static Dialect,
    call: (&str, &str),
    result: &ToolResult,
    operation: &str,
) -> Result<DeferredOutcome, StoreError>
where
    DB: Database + HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
    for<'t> Option<bool>: Decode<'t, DB> + Type<DB>,
{
    if write_result(&mut *conn, (dialect.publish.as_str(), dialect), call, result, operation).await? {
        effect_finished(&mut *conn, dialect, call, result, operation).await?;
        return Ok(DeferredOutcome::Published);
    }
    let placeholder = deferred(&mut *conn, dialect, call, operation).await?;
    rows::not_filled(placeholder, operation)
}

/// Claims a session (see `Store::claim`). A lease released between the refused claim and the
/// read of its holder is claimed again.
pub(super) async fn claim<DB>(
    conn: &mut DB::Connection,
    dialect: &'static Dialect,
    (session_id, owner): (&str, &str),
    ttl: std::time::Duration,
) -> Result<Claim, StoreError>
where
    DB: Database + HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Decode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
{
    let operation = format!("claim session {session_id}");
    let op = operation.as_str();
    for _ in 0..3 {
        let granted = dialect
            .query::<DB>(dialect.claim.as_str())
            .bind(session_id)
            .bind(owner)
            .bind(ttl_ms(ttl))
            .fetch_optional(&mut *conn)
            .await
            .map_err(failed(op))?;
        if let Some(row) = granted {
            return Ok(Claim::Granted(Lease {
                session_id: session_id.to_owned(),
                token: rows::column(&row, "token", op)?,
            }));
        }
        let holder = dialect
            .query::<DB>(dialect.holder.as_str())
            .bind(session_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(failed(op))?;
        if let Some(row) = holder {
            let remaining: i64 = rows::column(&row, "remaining", op)?;
            if remaining > 0 {
                return Ok(Claim::Held {
                    owner: rows::column(&row, "owner", op)?,
                    remaining_ms: remaining,
                });
            }
        }
    }
    Err(StoreError::new(
        op,
        "the lease changed hands three times while claiming",
    ))
}

/// Extends a live lease; `false` when it is lost.
pub(super) async fn renew<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    lease: &Lease,
    ttl: std::time::Duration,
) -> Result<bool, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let operation = format!("renew the lease on session {}", lease.session_id);
    dialect
        .query::<DB>(dialect.renew.as_str())
        .bind(lease.session_id.as_str())
        .bind(lease.token)
        .bind(ttl_ms(ttl))
        .fetch_optional(executor)
        .await
        .map(|row| row.is_some())
        .map_err(failed(&operation))
}

/// Ends a lease (a lost one is left as its new holder has it).
pub(super) async fn release<'c, DB, E>(executor: E, dialect: &'static Dialect, lease: &Lease) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let operation = format!("release the lease on session {}", lease.session_id);
    dialect
        .query::<DB>(dialect.release)
        .bind(lease.session_id.as_str())
        .bind(lease.token)
        .execute(executor)
        .await
        .map(drop)
        .map_err(failed(&operation))
}

/// The session's last claim.
pub(super) async fn lease_state<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    session_id: &str,
) -> Result<Option<LeaseState>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Decode<'t, DB> + Type<DB>,
    for<'t> i32: Decode<'t, DB> + Type<DB>,
{
    let operation = format!("read the lease on session {session_id}");
    let op = operation.as_str();
    let row = dialect
        .query::<DB>(dialect.lease_state.as_str())
        .bind(session_id)
        .fetch_optional(executor)
        .await
        .map_err(failed(op))?;
    row.map(|row| {
        Ok(LeaseState {
            token: rows::column(&row, "token", op)?,
            live: rows::column::<_, i32>(&row, "live", op)? == 1,
        })
    })
    .transpose()
}

/// The fence, inside a write transaction: refuses the write unless `lease` is live (and, on
/// PostgreSQL, holds the lease row against a claim until the transaction ends).
pub(super) async fn fence<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    lease: &Lease,
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let live = dialect
        .query::<DB>(dialect.fence.as_str())
        .bind(lease.session_id.as_str())
        .bind(lease.token)
        .fetch_optional(executor)
        .await
        .map_err(failed(operation))?;
    match live {
        Some(_) => Ok(()),
        None => Err(StoreError::lease_lost(operation, lease)),
    }
}

/// Writes `rows` to the outbox on `conn` (in the caller's write transaction).
pub(super) async fn enqueue<DB>(
    conn: &mut DB::Connection,
    dialect: &'static Dialect,
    rows: &[Queued],
    operation: &str,
) -> Result<(), StoreError>
where
    DB: Database + HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> i32: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
{
    for row in rows {
        let claim_ms = outbox::claim_ms(row);
        dialect
            .query::<DB>(dialect.enqueue.as_str())
            .bind(row.id.as_str())
            .bind(row.session_id.as_str())
            .bind(row.hook_id.as_str())
            .bind(row.event.as_str())
            .bind(row.idempotency_key.as_str())
            .bind(row.operation_id.as_deref())
            .bind(to_text(&row.target))
            .bind(row.body.as_str())
            .bind(i32::try_from(row.max_attempts).unwrap_or(i32::MAX))
            .bind(claim_ms)
            .bind(row.critical)
            .execute(&mut *conn)
            .await
            .map_err(failed(operation))?;
    }
    Ok(())
}

/// Claims up to `limit` rows for `owner` (see `Store::claim_deliveries`).
pub(super) async fn claim_deliveries<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    owner: &str,
    due: Due<'_>,
    limit: u32,
) -> Result<Vec<Claimed>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Decode<'t, DB> + Type<DB>,
    for<'t> i32: Decode<'t, DB> + Type<DB>,
    for<'t> bool: Decode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
{
    let operation = "claim queued webhook notifications";
    let drain = match due {
        Due::Now => None,
        Due::Drain(id) => Some(id),
    };
    let claimed = dialect
        .query::<DB>(dialect.claim_deliveries.as_str())
        .bind(owner)
        .bind(drain)
        .bind(i64::from(limit))
        .fetch_all(executor)
        .await
        .map_err(failed(operation))?;
    claimed.iter().map(|row| rows::claimed(row, operation)).collect()
}

/// Records one attempt at `claimed`, if the claim still stands.
pub(super) async fn report<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    claimed: &Claimed,
    attempt: &Attempt,
) -> Result<Settled, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let operation = format!("record a delivery attempt of queued notification {}", claimed.row.id);
    let settled = outbox::settle(attempt, claimed.attempts, claimed.row.max_attempts);
    let error = match attempt {
        Attempt::Delivered => "",
        Attempt::Failed(error) => error.as_str(),
    };
    let query = match settled {
        Settled::Delivered => dialect
            .query::<DB>(dialect.delivered.as_str())
            .bind(claimed.row.id.as_str())
            .bind(claimed.claim_token),
        Settled::Retry(wait) => dialect
            .query::<DB>(dialect.retry.as_str())
            .bind(claimed.row.id.as_str())
            .bind(claimed.claim_token)
            .bind(ttl_ms(wait))
            .bind(error),
        Settled::GaveUp | Settled::Stale => dialect
            .query::<DB>(dialect.gave_up)
            .bind(claimed.row.id.as_str())
            .bind(claimed.claim_token)
            .bind(error),
    };
    let changed = query.fetch_optional(executor).await.map_err(failed(&operation))?;
    Ok(if changed.is_some() { settled } else { Settled::Stale })
}

/// How many rows are still queued.
pub(super) async fn queued<'c, DB, E>(executor: E, dialect: &'static Dialect) -> Result<u64, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> i64: Decode<'t, DB> + Type<DB>,
{
    let operation = "count queued webhook notifications";
    let row = dialect
        .query::<DB>(dialect.queued)
        .fetch_one(executor)
        .await
        .map_err(failed(operation))?;
    Ok(rows::column::<_, i64>(&row, "queued", operation)?.max(0) as u64)
}

/// A session's pending calls, in saved order.
pub(super) async fn pending_calls<'c, DB, E>(
    executor: E,
    dialect: &'static Dialect,
    session_id: &str,
) -> Result<Vec<super::PendingCall>, StoreError>
where
    DB: Database + HasStatementCache,
    E: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> String: Decode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Decode<'t, DB> + Type<DB>,
{
    let operation = format!("read the pending calls of session {session_id}");
    let found = dialect
        .query::<DB>(
            "SELECT tool_call_id, tool_name, input, fingerprint, reason, decision FROM pending_calls \
         WHERE session_id = $1 ORDER BY ord",
        )
        .bind(session_id)
        .fetch_all(executor)
        .await
        .map_err(failed(&operation))?;
    found.iter().map(|row| rows::pending_call(row, &operation)).collect()
}
