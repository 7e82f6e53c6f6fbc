//! The PostgreSQL back end (`advanced.store: { postgres: url }`), through sqlx's runtime API (no
//! compile-time checked queries, so no database is needed to build), for many workers sharing
//! one database (SPEC §8.3; leases and the outbox come later, on top of this schema).
//!
//! The tables live in their own schema, `agent_runtime_hooks`, with their own migrations table
//! (`agent_runtime_hooks._sqlx_migrations`), so a database shared with an application keeps its
//! own `sessions` and its own sqlx migrations; the store's connections search that schema
//! (`search_path`), so the statements shared with SQLite (`sql.rs`) name tables bare. Statements run at PostgreSQL's default isolation
//! (READ COMMITTED); what must have exactly one winner is a conditional update (`UPDATE ... WHERE
//! decision IS NULL`, `... WHERE output IS NULL`): a second writer waits for the first's row lock,
//! then re-checks the condition on the committed row and changes nothing. A session's pending
//! calls are replaced by upserting them in place (and deleting the others), so a decision racing
//! a save sees the saved row, never a deleted one. Reads of a session and its pending calls share
//! one snapshot (REPEATABLE READ, READ ONLY).
//!
//! TLS: rustls with the ring provider (the one reqwest links), webpki roots; the URL's `sslmode`
//! decides (`prefer` by default: TLS when the server offers it, unverified; `verify-full` checks
//! the certificate and host name).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, Postgres, Row};

use super::codec::{messages_to_text, parse, to_text};
use super::edge::{within, Guarded, DEADLINE};
use super::outbox;
use super::rows;
use super::shared::OpenStores;
use super::sql;
use super::{
    Attempt, Claim, Claimed, Decision, Deferred, DeferredOutcome, Due, Effect, Lease, LeaseState, PendingCall,
    PendingReason, Queued, SessionRecord, Settled, StartedEffect, Store, StoreError, ToolResult,
};
use crate::model::{display_url, Secrets};

/// The schema the store's tables live in.
const SCHEMA: &str = "agent_runtime_hooks";

/// `migrations/postgres`, embedded, recording what it applied in the store's own schema. sqlx's
/// migrator holds a session advisory lock (`pg_advisory_lock`, keyed by the database name) from
/// before it creates the schema and the migrations table until it has applied every migration,
/// and applies each migration and its bookkeeping in one transaction: processes opening a new
/// database at once take turns, and each migration runs once.
static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    migrator.create_schema(SCHEMA);
    migrator.dangerous_set_table_name(format!("{SCHEMA}._sqlx_migrations"));
    migrator
});

/// Connections a process keeps open to one database at most.
const MAX_CONNECTIONS: u32 = 8;
/// Connections a process keeps for writes that need not wait for the disk (see `relaxed`).
const RELAXED_CONNECTIONS: u32 = 2;
/// How long an operation waits for a connection (a server restarting, a full pool) before it
/// fails with `STORE_ERROR`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle connection is closed after this long (a process that stopped working holds none).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Set on every pooled connection once it connects, as session settings (not startup
/// parameters, which PgBouncer refuses): the server ends a statement running 10 s, a wait for a
/// lock past 7 s, and a session idle inside a transaction for 5 s (a client gone silent there
/// holds its row locks: a lease row held `FOR SHARE` by a fenced write would keep every claim of
/// the session waiting). A lock wait outlasts the idle limit, so a claim behind a silent holder
/// is served once the server has ended it. The store's own transactions never idle between
/// statements.
macro_rules! session_settings {
    () => {
        "SET statement_timeout = 10000; SET lock_timeout = 7000; SET idle_in_transaction_session_timeout = 5000"
    };
}
const SESSION_SETTINGS: &str = session_settings!();
/// The same, for connections whose commits need not wait for the disk (see `relaxed`).
const RELAXED_SETTINGS: &str = concat!(session_settings!(), "; SET synchronous_commit = off");

/// The database clock, in Unix milliseconds, for the `*_at` columns.
macro_rules! now_ms {
    () => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// The shared statements: start order is `seq` (an upsert keeps it); `output` is a JSON string,
/// since PostgreSQL text cannot hold U+0000, which a tool's output may.
static DIALECT: LazyLock<sql::Dialect> = LazyLock::new(|| {
    sql::Dialect::new(
        now_ms!(),
        "e.seq",
        (" FOR SHARE", " FOR UPDATE SKIP LOCKED"),
        to_text::<str>,
        |text, operation| parse(&text, operation, "output"),
    )
});

/// The fence as a CTE (`live`: the lease row, held `FOR SHARE` until the statement commits), so a
/// fenced write is one statement: one round trip, committed on its own.
macro_rules! live {
    ($session:literal, $token:literal) => {
        concat!(
            "WITH live AS (SELECT token FROM leases WHERE session_id = ",
            $session,
            " AND token = ",
            $token,
            " AND NOT released AND expires_at > ",
            now_ms!(),
            " FOR SHARE) "
        )
    };
}

/// `effect_started`, fenced: a row back when the lease is live (and the entry written).
const STARTED: &str = concat!(
    live!("$1", "$6"),
    "INSERT INTO effects (session_id, tool_call_id, tool_name, input, side_effect, status, started_at) ",
    "SELECT $1, $2, $3, $4, $5, 'started', ",
    now_ms!(),
    " FROM live ON CONFLICT (session_id, tool_call_id) DO UPDATE ",
    "SET tool_name = excluded.tool_name, input = excluded.input, side_effect = excluded.side_effect, ",
    "status = 'started', output = NULL, is_error = NULL, started_at = excluded.started_at, finished_at = NULL ",
    "RETURNING 1"
);

/// `effect_finished`, fenced: `live` says whether the lease was (a call never started records
/// nothing either way).
const FINISHED: &str = concat!(
    live!("$3", "$5"),
    ", done AS (UPDATE effects SET status = 'finished', output = $1, is_error = $2, finished_at = ",
    now_ms!(),
    " WHERE session_id = $3 AND tool_call_id = $4 AND EXISTS (SELECT 1 FROM live) RETURNING 1) ",
    "SELECT EXISTS (SELECT 1 FROM live) AS live"
);

/// `save` with no pending calls (a turn boundary), fenced, in one statement: the session
/// upserted, its pending calls deleted; `live` says whether the lease was.
const SAVE_UNPAUSED: &str = concat!(
    live!("$1", "$5"),
    ", saved AS (INSERT INTO sessions (session_id, messages, hooks, paused) SELECT $1, $2, $3, $4 FROM live ",
    "ON CONFLICT (session_id) DO UPDATE SET messages = excluded.messages, hooks = excluded.hooks, ",
    "paused = excluded.paused, updated_at = ",
    now_ms!(),
    " RETURNING 1), cleared AS (DELETE FROM pending_calls WHERE session_id = $1 AND EXISTS (SELECT 1 FROM live)) ",
    "SELECT EXISTS (SELECT 1 FROM live) AS live"
);

/// `enqueue`, every row in one statement; fenced when `$13` (the lease's token) is given: `live`
/// says whether it was. A row whose key is queued already is not written (the first body stands).
const ENQUEUE: &str = concat!(
    live!("$12", "$13"),
    ", queued AS (INSERT INTO outbox (id, session_id, hook_id, event, idempotency_key, operation_id, target, body, ",
    "max_attempts, claim_ms, critical, status, available_at, created_at) ",
    "SELECT r.id, r.session_id, r.hook_id, r.event, r.key, r.operation_id, r.target, r.body, r.max_attempts, ",
    "r.claim_ms, r.critical, 'queued', ",
    now_ms!(),
    ", ",
    now_ms!(),
    " FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], ",
    "$8::TEXT[], $9::INT4[], $10::INT8[], $11::BOOL[]) WITH ORDINALITY ",
    "AS r (id, session_id, hook_id, event, key, operation_id, target, body, max_attempts, claim_ms, critical, ord) ",
    "WHERE $13::BIGINT IS NULL OR EXISTS (SELECT 1 FROM live) ORDER BY r.ord ",
    "ON CONFLICT (idempotency_key) DO NOTHING RETURNING 1) ",
    "SELECT ($13::BIGINT IS NULL OR EXISTS (SELECT 1 FROM live)) AS live"
);

/// The connection parameters sqlx reads from a URL's query (others it would ignore, logging
/// their values: they are refused instead).
const URL_PARAMETERS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// `Ok` when `url` is a PostgreSQL URL the store can connect with; otherwise what is wrong with it,
/// phrased to follow an option's name (`must be a postgres:// URL ("postgres://db.internal/app":
/// invalid port number)`). Never shows the URL's user-info or query values.
pub fn check_postgres_url(url: &str) -> Result<(), String> {
    connect_options(url).map(drop)
}

fn connect_options(url: &str) -> Result<PgConnectOptions, String> {
    let shown = display_url(url);
    let problem = |why: &dyn std::fmt::Display| format!("must be a postgres:// URL (\"{shown}\": {why})");
    let parsed = reqwest::Url::parse(url).map_err(|e| problem(&e))?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(problem(&format_args!("the scheme is {}", parsed.scheme())));
    }
    if let Some((key, _)) = parsed
        .query_pairs()
        .find(|(key, _)| !(URL_PARAMETERS.contains(&key.as_ref()) || key.starts_with("options[") && key.ends_with(']')))
    {
        let secrets = Secrets::new(Some(url), []);
        return Err(problem(&format_args!("unknown parameter {}", secrets.mask(&key))));
    }
    let options = PgConnectOptions::from_url(&parsed).map_err(|e| {
        // sqlx wraps a parameter's error once more for the URL: "error with configuration: error
        // with configuration: unknown value ...".
        let text = e.to_string();
        let mut why = text.as_str();
        while let Some(inner) = why.strip_prefix("error with configuration: ") {
            why = inner;
        }
        problem(&Secrets::new(Some(url), []).mask(why))
    })?;
    // The statements name tables bare (one text for SQLite and PostgreSQL): the store's
    // connections search its schema.
    let options = options.options([("search_path", SCHEMA)]);
    Ok(match options.get_application_name() {
        Some(_) => options,
        None => options.application_name("agent-runtime-hooks"),
    })
}

pub struct PostgresStore {
    pool: PgPool,
    /// Connections whose commits do not wait for the WAL to reach the disk
    /// (`synchronous_commit = off`), for writes a server crash may lose without harm: renewing a
    /// lease (lost, it just expires sooner; fencing still holds), claiming a
    /// queued row or reporting an attempt (lost, the row is sent again, with the same
    /// `Idempotency-Key`). A claim of a session, the run state and outbox rows are always durable.
    relaxed: PgPool,
}

impl PostgresStore {
    /// Connects, creates or migrates the schema, and makes a connection pool of its own.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let operation = format!("open postgres store {}", display_url(url));
        let options = connect_options(url).map_err(|problem| StoreError::new(&operation, problem))?;
        // The server's own words (a refused connection, an unknown database, a failed
        // migration) with any part of the URL that may be secret masked.
        let secrets = Secrets::new(Some(url), []);
        let failed = |e: &dyn std::fmt::Display| StoreError::new(&operation, secrets.mask(&e.to_string()));
        // Migrations run on a connection of their own, closed afterwards: the migrator's advisory
        // lock is held by the session, and a pooled connection that failed half way would keep it.
        let mut conn = PgConnection::connect_with(&options).await.map_err(|e| failed(&e))?;
        // `run_direct` is `run` on a connection (what `run` calls after acquiring one): through
        // `Acquire`, the future is not `Send` for every lifetime, which a spawned open needs.
        MIGRATOR
            .run_direct(None, &mut conn, false)
            .await
            .map_err(|e| failed(&e))?;
        conn.close().await.map_err(|e| failed(&e))?;
        let pool = |connections: u32, settings: &'static str| {
            PgPoolOptions::new()
                .max_connections(connections)
                .min_connections(0)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .idle_timeout(IDLE_TIMEOUT)
                .after_connect(move |conn, _| Box::pin(async move { conn.execute(settings).await.map(drop) }))
                .connect_lazy_with(options.clone())
        };
        Ok(PostgresStore {
            pool: pool(MAX_CONNECTIONS, SESSION_SETTINGS),
            relaxed: pool(RELAXED_CONNECTIONS, RELAXED_SETTINGS),
        })
    }

    /// The process's store for `url`: one pool per URL while any handle to it lives, dropped
    /// with the last handle.
    ///
    /// Behind the edge: every operation, and the open, has `DEADLINE` (a server that stops
    /// answering fails them with `STORE_ERROR`; the server ends what they left open).
    pub async fn shared(url: &str) -> Result<Arc<Guarded<PostgresStore>>, StoreError> {
        static OPEN: OpenStores<String, Guarded<PostgresStore>> = OpenStores::new();
        OPEN.get_or_open(url.to_owned(), || async {
            let operation = || format!("open postgres store {}", display_url(url));
            let open = within(Some(DEADLINE), operation, PostgresStore::open(url)).await?;
            Ok(Guarded::new(open, Some(DEADLINE)))
        })
        .await
    }

    /// Closes the pool, waiting for its connections.
    pub async fn close(&self) {
        self.pool.close().await;
        self.relaxed.close().await;
    }
}

fn failed(operation: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::new(operation, e)
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError> {
        let operation = format!("load session {session_id}");
        let op = operation.as_str();
        // One snapshot: the record and its pending calls as one save left them.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(failed(op))?;
        let Some(row) = sqlx::query("SELECT messages, hooks, paused FROM sessions WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed(op))?
        else {
            return Ok(None);
        };
        let record = rows::session_record(&row, session_id, op)?;
        let calls = sqlx::query(
            "SELECT tool_call_id, tool_name, input, fingerprint, reason, decision \
             FROM pending_calls WHERE session_id = $1 ORDER BY ord",
        )
        .bind(session_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed(op))?;
        let pending = calls
            .iter()
            .map(|row| rows::pending_call(row, op))
            .collect::<Result<_, _>>()?;
        tx.commit().await.map_err(failed(op))?;
        Ok(Some((record, pending)))
    }

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("save session {}", record.session_id);
        let op = operation.as_str();
        if pending.is_empty() {
            // A turn boundary: one statement.
            let row = sqlx::query(SAVE_UNPAUSED)
                .bind(&record.session_id)
                .bind(messages_to_text(&record.messages))
                .bind(to_text(&record.hooks))
                .bind(record.paused.as_ref().map(to_text))
                .bind(lease.token)
                .fetch_one(&self.pool)
                .await
                .map_err(failed(op))?;
            return match rows::column::<_, bool>(&row, "live", op)? {
                true => Ok(()),
                false => Err(StoreError::lease_lost(operation, lease)),
            };
        }
        let ids: Vec<&str> = pending.iter().map(|call| call.tool_call_id.as_str()).collect();
        let mut tx = self.pool.begin().await.map_err(failed(op))?;
        sql::fence(&mut *tx, &DIALECT, lease, op).await?;
        sqlx::query(concat!(
            "INSERT INTO sessions (session_id, messages, hooks, paused) VALUES ($1, $2, $3, $4) ",
            "ON CONFLICT (session_id) DO UPDATE SET messages = excluded.messages, hooks = excluded.hooks, ",
            "paused = excluded.paused, updated_at = ",
            now_ms!()
        ))
        .bind(&record.session_id)
        .bind(messages_to_text(&record.messages))
        .bind(to_text(&record.hooks))
        .bind(record.paused.as_ref().map(to_text))
        .execute(&mut *tx)
        .await
        .map_err(failed(op))?;
        sqlx::query("DELETE FROM pending_calls WHERE session_id = $1 AND NOT (tool_call_id = ANY($2))")
            .bind(&record.session_id)
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .map_err(failed(op))?;
        if !pending.is_empty() {
            // Upserted in place: a decision racing this save waits for it, then sees the saved
            // row (a deleted and reinserted row would make it miss a pending call).
            let decisions: Vec<Option<String>> =
                pending.iter().map(|call| call.decision.as_ref().map(to_text)).collect();
            sqlx::query(concat!(
                "INSERT INTO pending_calls AS p (session_id, tool_call_id, ord, tool_name, input, ",
                "fingerprint, reason, decision, decided_at) ",
                "SELECT $1, c.id, c.ord - 1, c.tool, c.input, c.fingerprint, c.reason, c.decision, ",
                "CASE WHEN c.decision IS NULL THEN NULL ELSE ",
                now_ms!(),
                " END FROM UNNEST($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[]) ",
                "WITH ORDINALITY AS c (id, tool, input, fingerprint, reason, decision, ord) ",
                "ON CONFLICT (session_id, tool_call_id) DO UPDATE SET ord = excluded.ord, tool_name = excluded.tool_name, ",
                "input = excluded.input, fingerprint = excluded.fingerprint, reason = excluded.reason, ",
                "decision = excluded.decision, decided_at = CASE WHEN excluded.decision IS NOT DISTINCT FROM p.decision ",
                "THEN p.decided_at ELSE excluded.decided_at END"
            ))
            .bind(&record.session_id)
            .bind(&ids)
            .bind(pending.iter().map(|call| call.tool_name.as_str()).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| to_text(&call.input)).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| call.fingerprint.as_str()).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| call.reason.as_str()).collect::<Vec<_>>())
            .bind(decisions)
            .execute(&mut *tx)
            .await
            .map_err(failed(op))?;
        }
        let deferred: Vec<&str> = pending
            .iter()
            .filter(|call| call.reason == PendingReason::Deferred)
            .map(|call| call.tool_call_id.as_str())
            .collect();
        if !deferred.is_empty() {
            sqlx::query(
                "INSERT INTO deferred_results (session_id, tool_call_id) \
                 SELECT $1, UNNEST($2::TEXT[]) ON CONFLICT (session_id, tool_call_id) DO NOTHING",
            )
            .bind(&record.session_id)
            .bind(&deferred)
            .execute(&mut *tx)
            .await
            .map_err(failed(op))?;
        }
        sql::mark_unknown::<Postgres>(&mut tx, &DIALECT, &record.session_id, pending, op).await?;
        tx.commit().await.map_err(failed(op))
    }

    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError> {
        sql::pending_calls(&self.pool, session_id).await
    }

    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError> {
        let operation = format!("decide call {tool_call_id} of session {session_id}");
        sql::decide(&self.pool, &DIALECT, (session_id, tool_call_id), decision, &operation).await
    }

    async fn effect_started(
        &self,
        lease: &Lease,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let session_id = lease.session_id.as_str();
        let operation = format!("record start of call {tool_call_id} of session {session_id}");
        let started = sqlx::query(STARTED)
            .bind(session_id)
            .bind(tool_call_id)
            .bind(tool_name)
            .bind(to_text(input))
            .bind(side_effect)
            .bind(lease.token)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed(&operation))?;
        match started {
            Some(_) => Ok(()),
            None => Err(StoreError::lease_lost(operation, lease)),
        }
    }

    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError> {
        let session_id = lease.session_id.as_str();
        let operation = format!("record result of call {tool_call_id} of session {session_id}");
        let row = sqlx::query(FINISHED)
            .bind(to_text(result.output.as_str()))
            .bind(result.is_error)
            .bind(session_id)
            .bind(tool_call_id)
            .bind(lease.token)
            .fetch_one(&self.pool)
            .await
            .map_err(failed(&operation))?;
        match rows::column::<_, bool>(&row, "live", &operation)? {
            true => Ok(()),
            false => Err(StoreError::lease_lost(operation, lease)),
        }
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
        let op = operation.as_str();
        let mut tx = self.pool.begin().await.map_err(failed(op))?;
        let outcome = sql::publish::<Postgres>(&mut tx, &DIALECT, (session_id, tool_call_id), result, op).await?;
        tx.commit().await.map_err(failed(op))?;
        Ok(outcome)
    }

    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError> {
        let operation = format!("read deferred call {tool_call_id} of session {session_id}");
        sql::deferred(&self.pool, &DIALECT, (session_id, tool_call_id), &operation).await
    }

    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let operation = format!("claim session {session_id}");
        let mut conn = self.pool.acquire().await.map_err(failed(&operation))?;
        sql::claim::<Postgres>(&mut conn, &DIALECT, (session_id, owner), ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        sql::renew(&self.relaxed, &DIALECT, lease, ttl).await
    }

    /// Durable, unlike a renewal: a release a server crash lost would bring the lease back live,
    /// and the session would stay shut for its TTL.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        sql::release(&self.pool, &DIALECT, lease).await
    }

    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError> {
        sql::lease_state(&self.pool, &DIALECT, session_id).await
    }

    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let operation = super::outbox::enqueue_operation(rows);
        let texts = |field: fn(&Queued) -> &str| rows.iter().map(field).collect::<Vec<_>>();
        let claim_ms: Vec<i64> = rows.iter().map(outbox::claim_ms).collect();
        let written = sqlx::query(ENQUEUE)
            .bind(texts(|row| &row.id))
            .bind(texts(|row| &row.session_id))
            .bind(texts(|row| &row.hook_id))
            .bind(texts(|row| &row.event))
            .bind(texts(|row| &row.idempotency_key))
            .bind(rows.iter().map(|row| row.operation_id.as_deref()).collect::<Vec<_>>())
            .bind(rows.iter().map(|row| to_text(&row.target)).collect::<Vec<_>>())
            .bind(texts(|row| &row.body))
            .bind(
                rows.iter()
                    .map(|row| i32::try_from(row.max_attempts).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(claim_ms)
            .bind(rows.iter().map(|row| row.critical).collect::<Vec<_>>())
            .bind(lease.map(|lease| lease.session_id.as_str()))
            .bind(lease.map(|lease| lease.token))
            .fetch_one(&self.pool)
            .await
            .map_err(failed(&operation))?;
        let live: bool = written.try_get("live").map_err(failed(&operation))?;
        match (live, lease) {
            (false, Some(lease)) => Err(StoreError::lease_lost(operation, lease)),
            _ => Ok(()),
        }
    }

    async fn claim_deliveries(&self, owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError> {
        sql::claim_deliveries(&self.relaxed, &DIALECT, owner, due, limit).await
    }

    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError> {
        sql::report(&self.relaxed, &DIALECT, claimed, attempt).await
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        sql::queued(&self.pool, &DIALECT).await
    }
}
