//! The SQLite back end (`advanced.store: { sqlite: path }`), through sqlx's runtime API (no
//! compile-time checked queries, so no database is needed to build).
//!
//! Durability and sharing between processes of one machine: WAL, `synchronous=FULL` (a commit
//! survives power loss, not just a process crash), `busy_timeout` so a writer waits for another
//! instead of failing, `foreign_keys=ON`, and every write in `BEGIN IMMEDIATE` so the write lock
//! is taken up front (a deferred transaction upgrading its lock can fail with SQLITE_BUSY at once,
//! whatever the timeout).

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Sqlite;
use tokio::time::Instant;

use super::codec::{messages_to_text, to_text};
use super::edge::{within, Guarded, DEADLINE};
use super::group_commit::{Durability, Writer};
use super::rows::{self, plain_output};
use super::shared::OpenStores;
use super::sql;
use super::{
    Attempt, Claim, Claimed, Decision, Deferred, DeferredOutcome, Due, Effect, Lease, LeaseState, PendingCall,
    PendingReason, Queued, SessionRecord, Settled, StartedEffect, Store, StoreError, ToolResult,
};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a write waits for another connection's (or process's) write lock.
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// The database clock, in Unix milliseconds, for the `*_at` columns.
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The shared statements: start order is the rowid (an upsert keeps it).
static DIALECT: LazyLock<sql::Dialect> =
    LazyLock::new(|| sql::Dialect::new(now_ms!(), "e.rowid", ("", ""), str::to_owned, plain_output));

/// `Ok` when `path` names a file the store can share between its connections; otherwise what is
/// wrong, phrased to follow the option's name. `:memory:` (and an empty name) opens a database
/// private to each connection, and the store holds several (its pool's): what one wrote,
/// the next would not find (`no such table: leases`).
pub fn check_sqlite_path(path: &str) -> Result<(), String> {
    let in_memory = path == ":memory:" || path.starts_with("file::memory:") || path.contains("mode=memory");
    if path.trim().is_empty() || in_memory {
        return Err(format!("must be a file path (got {path:?}): {NOT_IN_MEMORY}"));
    }
    Ok(())
}

/// Why an in-memory database is refused, and what to use instead. The store opens its file with
/// several connections and in WAL mode, so neither `:memory:` (private to one connection) nor its
/// shared-cache URI form (taken here as a file name) holds sessions.
const NOT_IN_MEMORY: &str = "an in-memory SQLite database (\":memory:\", or its shared-cache form \
     \"file::memory:?cache=shared\") cannot hold the store, which uses several connections; for \
     sessions kept in memory leave advanced.store out";

pub struct SqliteStore {
    /// Readers' connections (WAL: they never wait for the writer).
    pool: SqlitePool,
    /// Every write of the process, batched into shared transactions (see `group_commit`).
    writer: Writer,
    path: PathBuf,
}

/// A call recorded as started with a save: id, tool, input, side effect.
type Started = (String, String, Map<String, Value>, String);

impl SqliteStore {
    /// Opens (creating the file and its directory on first use) and migrates a SQLite store with
    /// its own connection pool.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let operation = format!("open sqlite store {}", path.display());
        check_sqlite_path(&path.to_string_lossy())
            .map_err(|problem| StoreError::new(&operation, format!("the path {problem}")))?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::new(&operation, format!("cannot create {}: {e}", dir.display())))?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let until = Instant::now() + BUSY_TIMEOUT;
        let pool = connect(options, until)
            .await
            .map_err(|e| StoreError::new(&operation, e))?;
        migrate(&pool, until)
            .await
            .map_err(|e| StoreError::new(&operation, e))?;
        Ok(SqliteStore {
            writer: Writer::start(pool.clone()),
            pool,
            path: path.to_owned(),
        })
    }

    /// The process's store for `path`: one pool per file while any handle to it lives (each
    /// `resumeAgent` need not open and migrate again), dropped with the last handle.
    ///
    /// Behind the edge: every operation has `DEADLINE` (a statement waits `busy_timeout` for the
    /// file's write lock; the deadline bounds the whole operation).
    pub async fn shared(path: &Path) -> Result<Arc<Guarded<SqliteStore>>, StoreError> {
        static OPEN: OpenStores<PathBuf, Guarded<SqliteStore>> = OpenStores::new();
        let key = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        OPEN.get_or_open(key, || async {
            let operation = || format!("open sqlite store {}", path.display());
            let open = within(Some(DEADLINE), operation, SqliteStore::open(path)).await?;
            Ok(Guarded::new(open, Some(DEADLINE)))
        })
        .await
    }

    /// The file this store writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the pool, waiting for its connections (tests reopen the file afterwards).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Runs `work` in the writer's next shared transaction (`BEGIN IMMEDIATE`, so the write lock
    /// is taken up front).
    async fn write<T, F>(&self, operation: &str, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        self.writer.write(operation, Durability::Full, Box::new(work)).await
    }

    /// `save` (with `release`, the lease's release; with `start`, a call's start) in one write.
    async fn save_with(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
        (release, start): (bool, Option<Started>),
        operation: String,
    ) -> Result<(), StoreError> {
        // Serialized here, on the caller's thread, so the writer only runs statements.
        let row = (
            record.session_id.clone(),
            messages_to_text(&record.messages),
            to_text(&record.hooks),
            record.paused.as_ref().map(to_text),
            record.running.as_ref().map(to_text),
        );
        let (pending, lease) = (pending.to_vec(), lease.clone());
        self.write_fenced(operation, &lease.clone(), move |conn, op| {
            Box::pin(async move {
                let (session_id, messages, hooks, paused, running) = row;
                sqlx::query(concat!(
                    "INSERT INTO sessions (session_id, messages, hooks, paused, running) VALUES (?, ?, ?, ?, ?) ",
                    "ON CONFLICT (session_id) DO UPDATE SET messages = excluded.messages, hooks = excluded.hooks, ",
                    "paused = excluded.paused, running = excluded.running, updated_at = ",
                    now_ms!()
                ))
                .bind(&session_id)
                .bind(messages)
                .bind(hooks)
                .bind(paused)
                .bind(running)
                .execute(&mut *conn)
                .await
                .map_err(failed(op))?;
                sqlx::query("DELETE FROM pending_calls WHERE session_id = ?")
                    .bind(&session_id)
                    .execute(&mut *conn)
                    .await
                    .map_err(failed(op))?;
                for (ord, call) in pending.iter().enumerate() {
                    let decision = call.decision.as_ref().map(to_text);
                    sqlx::query(concat!(
                        "INSERT INTO pending_calls (session_id, tool_call_id, ord, tool_name, input, fingerprint, ",
                        "reason, decision, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? IS NULL THEN NULL ",
                        "ELSE ",
                        now_ms!(),
                        " END)"
                    ))
                    .bind(&session_id)
                    .bind(&call.tool_call_id)
                    .bind(ord as i64)
                    .bind(&call.tool_name)
                    .bind(to_text(&call.input))
                    .bind(&call.fingerprint)
                    .bind(call.reason.as_str())
                    .bind(decision.clone())
                    .bind(decision)
                    .execute(&mut *conn)
                    .await
                    .map_err(failed(op))?;
                    if call.reason == PendingReason::Deferred {
                        sqlx::query(
                            "INSERT INTO deferred_results (session_id, tool_call_id) VALUES (?, ?) \
                             ON CONFLICT (session_id, tool_call_id) DO NOTHING",
                        )
                        .bind(&session_id)
                        .bind(&call.tool_call_id)
                        .execute(&mut *conn)
                        .await
                        .map_err(failed(op))?;
                    }
                }
                sql::mark_unknown::<Sqlite>(&mut *conn, &DIALECT, &session_id, &pending, op).await?;
                if let Some((tool_call_id, tool_name, input, side_effect)) = &start {
                    let effect = (tool_name.as_str(), input, side_effect.as_str());
                    sql::effect_started(&mut *conn, &DIALECT, (&session_id, tool_call_id), effect, op).await?;
                }
                match release {
                    true => sql::release(&mut *conn, &DIALECT, &lease).await,
                    false => Ok(()),
                }
            })
        })
        .await
    }

    /// `write` of a run's state under its lease: refused (nothing written) once the lease is no
    /// longer live. `work` gets the connection and the operation's name.
    async fn write_fenced<T, F>(&self, operation: String, lease: &Lease, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection, &'c str) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        let (lease, op) = (lease.clone(), operation.clone());
        self.write(&operation, move |conn| {
            Box::pin(async move {
                sql::fence(&mut *conn, &DIALECT, &lease, &op).await?;
                work(conn, &op).await
            })
        })
        .await
    }

    /// `write` for leases and the outbox's claims and reports, committed at `synchronous=NORMAL`
    /// when no other write of their batch needs `FULL` (see `group_commit::Durability`).
    async fn write_relaxed<T, F>(&self, operation: &str, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        self.writer.write(operation, Durability::Normal, Box::new(work)).await
    }
}

/// Opening waits for the file as a write does, up to `BUSY_TIMEOUT`: a pool's first connection
/// turns a new file to WAL, and the migrator reads (and may write) its table, and SQLite answers
/// some of that with SQLITE_BUSY at once, whatever `busy_timeout` says (another process opening
/// the file, or one holding its write lock). Tried again until the busy timeout has passed.
async fn connect(options: SqliteConnectOptions, until: Instant) -> Result<SqlitePool, sqlx::Error> {
    let mut attempt = 0;
    loop {
        match SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone())
            .await
        {
            Err(sqlx::Error::Database(e)) if busy(e.code().as_deref()) && Instant::now() < until => {
                attempt += 1;
                pause(attempt, until).await;
            }
            other => return other,
        }
    }
}

/// A growing pause between tries (20 ms more each time, at most 200 ms), never past `until`.
async fn pause(attempt: u32, until: Instant) {
    let wait = Duration::from_millis(20 * u64::from(attempt.min(10)));
    tokio::time::sleep(wait.min(until.saturating_duration_since(Instant::now()))).await;
}

/// SQLITE_BUSY, or one of its extended codes.
fn busy(code: Option<&str>) -> bool {
    code.and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

/// Whether a migration failed because the file was locked (tried again until `BUSY_TIMEOUT`).
fn busy_migration(error: &MigrateError) -> bool {
    let cause = match error {
        MigrateError::Execute(cause) | MigrateError::ExecuteMigration(cause, _) => cause,
        _ => return false,
    };
    matches!(cause, sqlx::Error::Database(e) if busy(e.code().as_deref()))
}

/// Two processes opening a new file at once can race to apply a migration; the loser's `CREATE`
/// fails and rolls back. Trying again then finds it applied (checksums checked). Each migration
/// can be lost once, so there are as many tries as migrations (two were too few once a fourth
/// migration came: a pool could lose the race on two of them).
async fn migrate(pool: &SqlitePool, until: Instant) -> Result<(), MigrateError> {
    let (mut raced, mut attempt) = (0, 0);
    loop {
        match MIGRATOR.run(pool).await {
            Err(error) if busy_migration(&error) && Instant::now() < until => {
                attempt += 1;
                pause(attempt, until).await;
            }
            Err(MigrateError::Execute(_) | MigrateError::ExecuteMigration(..)) if raced < MIGRATOR.iter().count() => {
                raced += 1
            }
            other => return other,
        }
    }
}

fn failed(operation: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::new(operation, e)
}

#[async_trait]
impl Store for SqliteStore {
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError> {
        let operation = format!("load session {session_id}");
        let op = operation.as_str();
        // One read transaction: the record and its pending calls from the same snapshot.
        let mut tx = self.pool.begin().await.map_err(failed(op))?;
        let Some(row) = sqlx::query("SELECT messages, hooks, paused, running FROM sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed(op))?
        else {
            return Ok(None);
        };
        let record = rows::session_record(&row, session_id, op)?;
        let rows = sqlx::query(
            "SELECT tool_call_id, tool_name, input, fingerprint, reason, decision FROM pending_calls \
             WHERE session_id = ? ORDER BY ord",
        )
        .bind(session_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed(op))?;
        let pending = rows
            .iter()
            .map(|row| rows::pending_call(row, op))
            .collect::<Result<_, _>>()?;
        tx.commit().await.map_err(failed(op))?;
        Ok(Some((record, pending)))
    }

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("save session {}", record.session_id);
        self.save_with(record, pending, lease, (false, None), operation).await
    }

    async fn save_and_release(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let operation = format!("save session {} and release its lease", record.session_id);
        self.save_with(record, pending, lease, (true, None), operation).await
    }

    async fn save_and_start(
        &self,
        record: &SessionRecord,
        lease: &Lease,
        (tool_call_id, tool_name, input): (&str, &str, &Map<String, Value>),
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let operation = format!(
            "save session {} and record the start of call {tool_call_id}",
            record.session_id
        );
        let start = (
            tool_call_id.to_owned(),
            tool_name.to_owned(),
            input.clone(),
            side_effect.to_owned(),
        );
        self.save_with(record, &[], lease, (false, Some(start)), operation)
            .await
    }

    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError> {
        sql::pending_calls(&self.pool, &DIALECT, session_id).await
    }

    async fn save_running(&self, session_id: &str, running: &Value, lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("save the sub-agents at work in session {session_id}");
        let (running, session_id) = (to_text(running), session_id.to_owned());
        self.write_fenced(operation, lease, move |conn, op| {
            Box::pin(async move {
                sqlx::query("UPDATE sessions SET running = ? WHERE session_id = ?")
                    .bind(running)
                    .bind(session_id)
                    .execute(conn)
                    .await
                    .map_err(failed(op))?;
                Ok(())
            })
        })
        .await
    }

    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError> {
        let operation = format!("decide call {tool_call_id} of session {session_id}");
        let call = (session_id.to_owned(), tool_call_id.to_owned());
        let (decision, op) = (decision.clone(), operation.clone());
        self.write(&operation, move |conn| {
            Box::pin(async move { sql::decide(&mut *conn, &DIALECT, (&call.0, &call.1), &decision, &op).await })
        })
        .await
    }

    async fn effect_started(
        &self,
        lease: &Lease,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let operation = format!("record start of call {tool_call_id} of session {}", lease.session_id);
        let call = (lease.session_id.clone(), tool_call_id.to_owned());
        let effect = (tool_name.to_owned(), input.clone(), side_effect.to_owned());
        self.write_fenced(operation, lease, move |conn, op| {
            Box::pin(async move {
                let (tool_name, input, side_effect) = effect;
                sql::effect_started(
                    conn,
                    &DIALECT,
                    (&call.0, &call.1),
                    (&tool_name, &input, &side_effect),
                    op,
                )
                .await
            })
        })
        .await
    }

    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError> {
        let operation = format!("record result of call {tool_call_id} of session {}", lease.session_id);
        let (call, result) = ((lease.session_id.clone(), tool_call_id.to_owned()), result.clone());
        self.write_fenced(operation, lease, move |conn, op| {
            Box::pin(async move { sql::effect_finished(conn, &DIALECT, (&call.0, &call.1), &result, op).await })
        })
        .await
    }

    async fn effect(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Effect>, StoreError> {
        sql::effect(&self.pool, &DIALECT, (session_id, tool_call_id)).await
    }

    async fn open_effects(&self, session_id: &str) -> Result<Vec<StartedEffect>, StoreError> {
        sql::open_effects(&self.pool, &DIALECT, session_id).await
    }

    async fn complete_deferred(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<DeferredOutcome, StoreError> {
        let operation = format!("complete deferred call {tool_call_id} of session {session_id}");
        let call = (session_id.to_owned(), tool_call_id.to_owned());
        let (result, op) = (result.clone(), operation.clone());
        self.write(&operation, move |conn| {
            Box::pin(async move { sql::publish::<Sqlite>(conn, &DIALECT, (&call.0, &call.1), &result, &op).await })
        })
        .await
    }

    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError> {
        let operation = format!("read deferred call {tool_call_id} of session {session_id}");
        sql::deferred(&self.pool, &DIALECT, (session_id, tool_call_id), &operation).await
    }

    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let operation = format!("claim session {session_id}");
        let claimant = (session_id.to_owned(), owner.to_owned());
        self.write_relaxed(&operation, move |conn| {
            Box::pin(async move { sql::claim::<Sqlite>(conn, &DIALECT, (&claimant.0, &claimant.1), ttl).await })
        })
        .await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        let operation = format!("renew the lease on session {}", lease.session_id);
        let lease = lease.clone();
        self.write_relaxed(&operation, move |conn| {
            Box::pin(async move { sql::renew(&mut *conn, &DIALECT, &lease, ttl).await })
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("release the lease on session {}", lease.session_id);
        let lease = lease.clone();
        self.write_relaxed(&operation, move |conn| {
            Box::pin(async move { sql::release(&mut *conn, &DIALECT, &lease).await })
        })
        .await
    }

    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError> {
        sql::lease_state(&self.pool, &DIALECT, session_id).await
    }

    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let operation = super::outbox::enqueue_operation(rows);
        let (rows, lease, op) = (rows.to_vec(), lease.cloned(), operation.clone());
        self.write(&operation, move |conn| {
            Box::pin(async move {
                if let Some(lease) = &lease {
                    sql::fence(&mut *conn, &DIALECT, lease, &op).await?;
                }
                sql::enqueue::<Sqlite>(conn, &DIALECT, &rows, &op).await
            })
        })
        .await
    }

    async fn claim_deliveries(&self, owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError> {
        let op = "claim queued webhook notifications";
        // An idle deliverer looks often: a read first, so an empty outbox never takes the
        // file's write lock.
        let any = sqlx::query("SELECT 1 FROM outbox WHERE status = 'queued' LIMIT 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(failed(op))?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let drain = match due {
            Due::Now => None,
            Due::Drain(id) => Some(id.to_owned()),
        };
        let owner = owner.to_owned();
        self.write_relaxed(op, move |conn| {
            Box::pin(async move {
                let due = drain.as_deref().map_or(Due::Now, Due::Drain);
                sql::claim_deliveries(&mut *conn, &DIALECT, &owner, due, limit).await
            })
        })
        .await
    }

    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError> {
        let operation = "report a webhook delivery attempt";
        let (claimed, attempt) = (claimed.clone(), attempt.clone());
        self.write_relaxed(operation, move |conn| {
            Box::pin(async move { sql::report(&mut *conn, &DIALECT, &claimed, &attempt).await })
        })
        .await
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        sql::queued(&self.pool, &DIALECT).await
    }
}
