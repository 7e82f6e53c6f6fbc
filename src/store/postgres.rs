//! The PostgreSQL back end (`advanced.store: { postgres: url }`), through sqlx's runtime API (no
//! compile-time checked queries, so no database is needed to build), for many workers sharing
//! one database (SPEC §8.3; leases and the outbox come later, on top of this schema).
//!
//! The tables live in their own schema, `agent_runtime_hooks`, with their own migrations table
//! (`agent_runtime_hooks._sqlx_migrations`), so a database shared with an application keeps its
//! own `sessions` and its own sqlx migrations; the store's connections search that schema
//! (`search_path`, set after connecting or at the start of each transaction, see `Pooling`), so
//! the statements shared with SQLite (`sql.rs`) name tables bare. Statements run at PostgreSQL's default isolation
//! (READ COMMITTED); what must have exactly one winner is a conditional update (`UPDATE ... WHERE
//! decision IS NULL`, `... WHERE output IS NULL`): a second writer waits for the first's row lock,
//! then re-checks the condition on the committed row and changes nothing. A session's pending
//! calls are replaced by upserting them in place (and deleting the others), so a decision racing
//! a save sees the saved row, never a deleted one. Reads of a session and its pending calls share
//! one snapshot (REPEATABLE READ, READ ONLY).
//!
//! Behind PgBouncer: in session pooling as straight to the server; in transaction pooling
//! (`?pgbouncer=true`) every operation is a transaction of its own, begun with the settings, its
//! statements prepared unnamed (see `Pooling`, `Hold`).
//!
//! TLS: rustls with the ring provider (the one reqwest links), webpki roots; the URL's `sslmode`
//! decides (`prefer` by default: TLS when the server offers it, unverified; `verify-full` checks
//! the certificate and host name).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::migrate::Migrator;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor, Postgres, Row, Transaction};

use super::codec::{messages_to_text, parse, to_text};
use super::edge::{within, Guarded, DEADLINE};
use super::outbox;
use super::pooler;
use super::rows;
use super::shared::OpenStores;
use super::sql;
use super::{
    Attempt, Claim, Claimed, Decision, Deferred, DeferredOutcome, Due, Effect, Lease, LeaseState, Loaded, PendingCall,
    PendingReason, Queued, SessionRecord, Settled, StartedEffect, Store, StoreError, ToolResult,
};
use crate::model::{display_url, Secrets};

/// The schema the store's tables live in.
macro_rules! schema {
    () => {
        "agent_runtime_hooks"
    };
}
const SCHEMA: &str = schema!();

/// `migrations/postgres`, embedded, recording what it applied in the store's own schema. It
/// runs inside one transaction that first takes a transaction-scoped advisory lock (`migrate`),
/// rather than behind the migrator's own session lock, which a pooler in transaction mode would
/// leave held on whichever server connection took it.
static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    migrator.create_schema(SCHEMA);
    migrator.dangerous_set_table_name(format!("{SCHEMA}._sqlx_migrations"));
    migrator.set_locking(false);
    migrator
});

/// Connections a process keeps open to one database at most.
const MAX_CONNECTIONS: u32 = 8;
/// Connections a process keeps for writes that need not wait for the disk (see `relaxed`).
const RELAXED_CONNECTIONS: u32 = 2;
/// How long an operation waits for a connection (a server restarting, a full pool) before it
/// fails with `STORE_ERROR`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection idle this long is tested before an operation gets it (a server restarted
/// meanwhile): it was tested as it went back to the pool, and a fresher one is taken as it is.
const TEST_WHEN_IDLE: Duration = Duration::from_secs(1);
/// An idle connection is closed after this long (a process that stopped working holds none).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the store's connections run with, by `SET` (once, after connecting) or `SET LOCAL` (in
/// each transaction, in transaction pooling), never as startup parameters (a pooler refuses
/// those): the store's schema searched (the statements, shared with SQLite, name tables bare);
/// the server ends a statement running 10 s, a wait for a lock past 7 s, and a session idle
/// inside a transaction for 5 s (a client gone silent there holds its row locks: a lease row held
/// `FOR SHARE` by a fenced write would keep every claim of the session waiting). A lock wait
/// outlasts the idle limit, so a claim behind a silent holder is served once the server has ended
/// it. The store's own transactions never idle between statements.
macro_rules! settings {
    ($set:literal) => {
        concat!(
            $set,
            " search_path = ",
            schema!(),
            "; ",
            $set,
            " statement_timeout = 10000; ",
            $set,
            " lock_timeout = 7000; ",
            $set,
            " idle_in_transaction_session_timeout = 5000"
        )
    };
}
/// The same, for connections whose commits need not wait for the disk (see `relaxed`).
macro_rules! relaxed_settings {
    ($set:literal) => {
        concat!(settings!($set), "; ", $set, " synchronous_commit = off")
    };
}

/// A pool's settings, as session settings and as the start of a transaction.
#[derive(Clone, Copy)]
struct Settings {
    session: &'static str,
    local: &'static str,
}
const DURABLE: Settings = Settings {
    session: settings!("SET"),
    local: settings!("SET LOCAL"),
};
const RELAXED: Settings = Settings {
    session: relaxed_settings!("SET"),
    local: relaxed_settings!("SET LOCAL"),
};

/// The database clock, in Unix milliseconds, for the `*_at` columns.
macro_rules! now_ms {
    () => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// The shared statements: start order is `seq` (an upsert keeps it); `output` is a JSON string,
/// since PostgreSQL text cannot hold U+0000, which a tool's output may.
fn dialect() -> sql::Dialect {
    sql::Dialect::new(
        now_ms!(),
        "e.seq",
        (" FOR SHARE", " FOR UPDATE SKIP LOCKED"),
        to_text::<str>,
        decode_output,
    )
}

/// A result's text from its `output` column, which keeps it as a JSON string.
fn decode_output(text: String, operation: &str) -> Result<String, StoreError> {
    parse(&text, operation, "output")
}
static DIALECT: LazyLock<sql::Dialect> = LazyLock::new(dialect);
/// In transaction pooling: no statement kept prepared (see `Pooling`).
static UNNAMED: LazyLock<sql::Dialect> = LazyLock::new(|| dialect().unnamed());

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

/// `save`, fenced, in one statement (one round trip, one commit): the session upserted; its
/// pending calls not among `$7` deleted and those upserted in place (a decision racing this save
/// waits for it, then sees the saved row; a deleted and reinserted row would make it miss a
/// pending call); deferred calls' placeholders (`$13`) written once; the `Started` ledger entries
/// of calls kept as `outcome_unknown` (`$14`) marked `unknown`; with `$15`, the lease released
/// too. `live` says whether the lease was (nothing is written when it was not).
macro_rules! save_ctes {
    () => { concat!(
    live!("$1", "$5"),
    ", saved AS (INSERT INTO sessions (session_id, messages, hooks, paused, running) SELECT $1, $2, $3, $4, $6 FROM live ",
    "ON CONFLICT (session_id) DO UPDATE SET messages = excluded.messages, hooks = excluded.hooks, ",
    "paused = excluded.paused, running = excluded.running, updated_at = ",
    now_ms!(),
    " RETURNING 1), cleared AS (DELETE FROM pending_calls WHERE session_id = $1 AND NOT (tool_call_id = ANY($7::TEXT[])) ",
    "AND EXISTS (SELECT 1 FROM live)), ",
    "calls AS (INSERT INTO pending_calls AS p (session_id, tool_call_id, ord, tool_name, input, ",
    "fingerprint, reason, decision, decided_at) ",
    "SELECT $1, c.id, c.ord - 1, c.tool, c.input, c.fingerprint, c.reason, c.decision, ",
    "CASE WHEN c.decision IS NULL THEN NULL ELSE ",
    now_ms!(),
    " END FROM UNNEST($7::TEXT[], $8::TEXT[], $9::TEXT[], $10::TEXT[], $11::TEXT[], $12::TEXT[]) ",
    "WITH ORDINALITY AS c (id, tool, input, fingerprint, reason, decision, ord) WHERE EXISTS (SELECT 1 FROM live) ",
    "ON CONFLICT (session_id, tool_call_id) DO UPDATE SET ord = excluded.ord, tool_name = excluded.tool_name, ",
    "input = excluded.input, fingerprint = excluded.fingerprint, reason = excluded.reason, ",
    "decision = excluded.decision, decided_at = CASE WHEN excluded.decision IS NOT DISTINCT FROM p.decision ",
    "THEN p.decided_at ELSE excluded.decided_at END), ",
    "placeholders AS (INSERT INTO deferred_results (session_id, tool_call_id) SELECT $1, d.id ",
    "FROM UNNEST($13::TEXT[]) AS d (id) WHERE EXISTS (SELECT 1 FROM live) ",
    "ON CONFLICT (session_id, tool_call_id) DO NOTHING), ",
    "unknown AS (UPDATE effects SET status = 'unknown' WHERE session_id = $1 AND tool_call_id = ANY($14::TEXT[]) ",
    "AND status = 'started' AND EXISTS (SELECT 1 FROM live)), ",
    "freed AS (UPDATE leases SET released = TRUE WHERE session_id = $1 AND token = $5 AND $15 ",
    "AND EXISTS (SELECT 1 FROM live)) "
    ) };
}
const SAVE: &str = concat!(save_ctes!(), "SELECT EXISTS (SELECT 1 FROM live) AS live");

/// `save_and_start`: `SAVE`, and the call (`$16`, its tool `$17`, input `$18`, side effect `$19`)
/// recorded as started, as `STARTED` records it.
const SAVE_AND_START: &str = concat!(
    save_ctes!(),
    ", started AS (INSERT INTO effects (session_id, tool_call_id, tool_name, input, side_effect, status, started_at) ",
    "SELECT $1, $16, $17, $18, $19, 'started', ",
    now_ms!(),
    " FROM live ON CONFLICT (session_id, tool_call_id) DO UPDATE ",
    "SET tool_name = excluded.tool_name, input = excluded.input, side_effect = excluded.side_effect, ",
    "status = 'started', output = NULL, is_error = NULL, started_at = excluded.started_at, finished_at = NULL) ",
    "SELECT EXISTS (SELECT 1 FROM live) AS live"
);

/// `load_with_lease` in one statement, one snapshot: the session, its lease (`lease_token`
/// NULL when never claimed) and its pending calls with their ledger entries (`status` NULL when
/// never started), one row per call in saved order (one row with a NULL `tool_call_id` when it
/// has none).
const LOAD_WITH_LEASE: &str = concat!(
    "SELECT s.messages, s.hooks, s.paused, s.running, l.token AS lease_token, ",
    "CASE WHEN NOT l.released AND l.expires_at > ",
    now_ms!(),
    " THEN 1 ELSE 0 END AS lease_live, ",
    "p.tool_call_id, p.tool_name, p.input, p.fingerprint, p.reason, p.decision, ",
    "e.status, e.output, e.is_error ",
    "FROM sessions s LEFT JOIN leases l ON l.session_id = s.session_id ",
    "LEFT JOIN pending_calls p ON p.session_id = s.session_id ",
    "LEFT JOIN effects e ON e.session_id = p.session_id AND e.tool_call_id = p.tool_call_id ",
    "WHERE s.session_id = $1 ORDER BY p.ord"
);

/// `effects`: the ledger entries of the calls `$2` of session `$1`, in one statement.
const EFFECTS: &str =
    "SELECT tool_call_id, status, output, is_error FROM effects WHERE session_id = $1 AND tool_call_id = ANY($2)";

/// `save_running`, fenced, in one statement: only the `running` column changes.
const SAVE_RUNNING: &str = concat!(
    live!("$1", "$3"),
    ", saved AS (UPDATE sessions SET running = $2 WHERE session_id = $1 AND EXISTS (SELECT 1 FROM live) ",
    "RETURNING 1) SELECT EXISTS (SELECT 1 FROM live) AS live"
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

/// How the server connections behind the URL are handed out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pooling {
    /// The server itself, or a pooler that gives a client one server connection for as long as
    /// it stays connected (PgBouncer's session pooling): settings made once after connecting
    /// hold, statements are kept prepared on the connection.
    Session,
    /// A pooler that gives a client a server connection for one transaction at a time
    /// (PgBouncer's transaction pooling, `?pgbouncer=true`): nothing may outlive a transaction.
    Transaction,
}

fn connect_options(url: &str) -> Result<(PgConnectOptions, Pooling), String> {
    let shown = display_url(url);
    let problem = |why: &dyn std::fmt::Display| format!("must be a postgres:// URL (\"{shown}\": {why})");
    let mut parsed = reqwest::Url::parse(url).map_err(|e| problem(&e))?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(problem(&format_args!("the scheme is {}", parsed.scheme())));
    }
    if let Some((key, _)) = parsed.query_pairs().find(|(key, _)| {
        !(URL_PARAMETERS.contains(&key.as_ref())
            || key == pooler::SWITCH
            || key.starts_with("options[") && key.ends_with(']'))
    }) {
        let secrets = Secrets::new(Some(url), []);
        return Err(problem(&format_args!("unknown parameter {}", secrets.mask(&key))));
    }
    // The switch is the store's own: sqlx does not read it.
    let mut pooling = Pooling::Session;
    let others: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(key, _)| key != pooler::SWITCH)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    for (_, value) in parsed.query_pairs().filter(|(key, _)| key == pooler::SWITCH) {
        pooling = match value.as_ref() {
            "true" => Pooling::Transaction,
            "false" => Pooling::Session,
            _ => {
                let value = Secrets::new(Some(url), []).mask(&value);
                return Err(problem(&format_args!(
                    "{} must be true or false (got \"{value}\")",
                    pooler::SWITCH
                )));
            }
        };
    }
    if parsed.query_pairs().any(|(key, _)| key == pooler::SWITCH) {
        match others.is_empty() {
            true => parsed.set_query(None),
            false => drop(parsed.query_pairs_mut().clear().extend_pairs(&others)),
        }
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
    // No startup parameter past the ones a pooler keeps track of itself (PgBouncer refuses any
    // other it is not told to ignore): `extra_float_digits` only shapes floats sent as text,
    // which the store never reads, and the schema is set after connecting.
    let options = options.extra_float_digits(None);
    let options = match options.get_application_name() {
        Some(_) => options,
        None => options.application_name("agent-runtime-hooks"),
    };
    Ok((options, pooling))
}

pub struct PostgresStore {
    pool: Pool,
    /// Connections whose commits do not wait for the WAL to reach the disk
    /// (`synchronous_commit = off`), for writes a server crash may lose without harm: renewing a
    /// lease (lost, it just expires sooner; fencing still holds), claiming a
    /// queued row or reporting an attempt (lost, the row is sent again, with the same
    /// `Idempotency-Key`). A claim of a session, the run state and outbox rows are always durable.
    relaxed: Pool,
    dialect: &'static sql::Dialect,
}

/// A pool of connections with its settings, made for the URL's pooling.
struct Pool {
    pool: PgPool,
    pooling: Pooling,
    settings: Settings,
}

/// One operation's connection, its statements run on it, then `done`.
enum Hold {
    /// In session pooling, an operation of single statements: the pool's connection as it is.
    Connection(PoolConnection<Postgres>),
    /// The operation's own transaction; in transaction pooling every operation's, begun with the
    /// pool's settings as `SET LOCAL`: the pooler keeps a transaction on one server connection,
    /// and an unnamed statement is two exchanges (prepared, then run) that must reach the same one.
    Transaction(Transaction<'static, Postgres>),
}

impl Deref for Hold {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Hold::Connection(conn) => conn,
            Hold::Transaction(tx) => tx,
        }
    }
}

impl DerefMut for Hold {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Hold::Connection(conn) => conn,
            Hold::Transaction(tx) => tx,
        }
    }
}

impl Hold {
    /// Commits the transaction, if there is one.
    async fn done(self, operation: &str) -> Result<(), StoreError> {
        match self {
            Hold::Connection(_) => Ok(()),
            Hold::Transaction(tx) => tx.commit().await.map_err(failed(operation)),
        }
    }
}

impl Pool {
    fn new(options: &PgConnectOptions, pooling: Pooling, connections: u32, settings: Settings) -> Pool {
        // A connection is tested (one exchange) as it goes back to the pool, always; tested again
        // as it is handed out only when it has been idle a while since: a busy store's operations
        // then cost their statements and one test, not two.
        let pool = PgPoolOptions::new()
            .max_connections(connections)
            .min_connections(0)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .idle_timeout(IDLE_TIMEOUT)
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= TEST_WHEN_IDLE {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            });
        // In transaction pooling a session setting would stay on whichever server connection ran
        // it, for other clients (`synchronous_commit = off` under durable writes), and be missing
        // from the next: settings are made in each transaction instead.
        let pool = match pooling {
            Pooling::Session => pool
                .after_connect(move |conn, _| Box::pin(async move { conn.execute(settings.session).await.map(drop) })),
            Pooling::Transaction => pool,
        };
        Pool {
            pool: pool.connect_lazy_with(options.clone()),
            pooling,
            settings,
        }
    }

    /// A connection for one operation; `begin`: the operation's own transaction, if it needs one.
    async fn hold(&self, begin: Option<&'static str>, operation: &str) -> Result<Hold, StoreError> {
        let held = match (self.pooling, begin) {
            (Pooling::Session, None) => self.pool.acquire().await.map(Hold::Connection),
            (Pooling::Session, Some(begin)) => self.pool.begin_with(begin).await.map(Hold::Transaction),
            (Pooling::Transaction, begin) => {
                let begin = format!("{}; {}", begin.unwrap_or("BEGIN"), self.settings.local);
                self.pool.begin_with(AssertSqlSafe(begin)).await.map(Hold::Transaction)
            }
        };
        held.map_err(failed(operation))
    }
}

/// Creates or migrates the schema on a connection of its own, closed afterwards, in one
/// transaction holding an advisory lock until it ends (committed, rolled back, or the
/// connection lost): processes opening a new database at once take turns, each migration runs
/// once, and no lock outlives the transaction, whatever the pooling. The lock's key is the one
/// sqlx's migrator takes, so older versions of the store, migrating behind that lock, take turns
/// with these. The migrator's statements are prepared under names, which are let go before the
/// commit so that a pooler's server connection keeps none.
async fn migrate(options: &PgConnectOptions) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut conn = PgConnection::connect_with(options).await?;
    let mut tx = conn.begin().await?;
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .persistent(false)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(migration_lock_key(&database))
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    // `run_direct` is `run` on a connection (what `run` calls after acquiring one): through
    // `Acquire`, the future is not `Send` for every lifetime, which a spawned open needs.
    MIGRATOR.run_direct(None, &mut *tx, false).await?;
    tx.execute("DEALLOCATE ALL").await?;
    tx.commit().await?;
    conn.close().await?;
    Ok(())
}

/// sqlx's migration lock key for a database: its name's CRC-32 (IEEE) times 0x3d32ad9e.
fn migration_lock_key(database: &str) -> i64 {
    let mut crc = !0u32;
    for byte in database.bytes() {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    0x3d32_ad9e * i64::from(!crc)
}

impl PostgresStore {
    /// Connects, creates or migrates the schema, and makes a connection pool of its own.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let operation = format!("open postgres store {}", display_url(url));
        let (options, pooling) = connect_options(url).map_err(|problem| StoreError::new(&operation, problem))?;
        // The server's own words (a refused connection, an unknown database, a failed
        // migration) with any part of the URL that may be secret masked, and the fix named when
        // a connection pooler refused something.
        let secrets = Secrets::new(Some(url), []);
        migrate(&options)
            .await
            .map_err(|e| StoreError::new(&operation, pooler::explain(secrets.mask(&e.to_string()).into_owned())))?;
        Ok(PostgresStore {
            pool: Pool::new(&options, pooling, MAX_CONNECTIONS, DURABLE),
            relaxed: Pool::new(&options, pooling, RELAXED_CONNECTIONS, RELAXED),
            dialect: match pooling {
                Pooling::Session => &DIALECT,
                Pooling::Transaction => &UNNAMED,
            },
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
        self.pool.pool.close().await;
        self.relaxed.pool.close().await;
    }
}

/// A failed statement, with the fix named when a connection pooler refused it.
/// A call recorded as started with a save: (id, tool, input), side effect.
type Starting<'a> = ((&'a str, &'a str, &'a Map<String, Value>), &'a str);

impl PostgresStore {
    /// `save` (with `release`, the lease's release; with `start`, a call's start) in one
    /// statement (see `SAVE`, `SAVE_AND_START`).
    async fn save_with(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
        (release, start): (bool, Option<Starting<'_>>),
        op: &str,
    ) -> Result<(), StoreError> {
        let ids = |keep: fn(&PendingCall) -> bool| -> Vec<&str> {
            pending
                .iter()
                .filter(|call| keep(call))
                .map(|call| call.tool_call_id.as_str())
                .collect()
        };
        let decisions: Vec<Option<String>> = pending.iter().map(|call| call.decision.as_ref().map(to_text)).collect();
        let mut conn = self.pool.hold(None, op).await?;
        let statement = match start {
            Some(_) => SAVE_AND_START,
            None => SAVE,
        };
        let query = self
            .dialect
            .query::<Postgres>(statement)
            .bind(&record.session_id)
            .bind(messages_to_text(&record.messages))
            .bind(to_text(&record.hooks))
            .bind(record.paused.as_ref().map(to_text))
            .bind(lease.token)
            .bind(record.running.as_ref().map(to_text))
            .bind(ids(|_| true))
            .bind(pending.iter().map(|call| call.tool_name.as_str()).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| to_text(&call.input)).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| call.fingerprint.as_str()).collect::<Vec<_>>())
            .bind(pending.iter().map(|call| call.reason.as_str()).collect::<Vec<_>>())
            .bind(decisions)
            .bind(ids(|call| call.reason == PendingReason::Deferred))
            .bind(ids(|call| call.reason == PendingReason::OutcomeUnknown))
            .bind(release);
        let query = match start {
            Some(((tool_call_id, tool_name, input), side_effect)) => query
                .bind(tool_call_id)
                .bind(tool_name)
                .bind(to_text(input))
                .bind(side_effect),
            None => query,
        };
        let row = query.fetch_one(&mut *conn).await.map_err(failed(op))?;
        conn.done(op).await?;
        match rows::column::<_, bool>(&row, "live", op)? {
            true => Ok(()),
            false => Err(StoreError::lease_lost(op, lease)),
        }
    }
}

fn failed(operation: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::new(operation, pooler::explain(e.to_string()))
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError> {
        let operation = format!("load session {session_id}");
        let op = operation.as_str();
        // One snapshot: the record and its pending calls as one save left them.
        let mut tx = self
            .pool
            .hold(Some("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"), op)
            .await?;
        let Some(row) = self
            .dialect
            .query::<Postgres>("SELECT messages, hooks, paused, running FROM sessions WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed(op))?
        else {
            return Ok(None);
        };
        let record = rows::session_record(&row, session_id, op)?;
        let calls = self
            .dialect
            .query::<Postgres>(
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
        tx.done(op).await?;
        Ok(Some((record, pending)))
    }

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("save session {}", record.session_id);
        self.save_with(record, pending, lease, (false, None), &operation).await
    }

    async fn save_and_release(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let operation = format!("save session {} and release its lease", record.session_id);
        self.save_with(record, pending, lease, (true, None), &operation).await
    }

    async fn save_and_start(
        &self,
        record: &SessionRecord,
        lease: &Lease,
        call: (&str, &str, &Map<String, Value>),
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let operation = format!(
            "save session {} and record the start of call {}",
            record.session_id, call.0
        );
        self.save_with(record, &[], lease, (false, Some((call, side_effect))), &operation)
            .await
    }

    async fn load_with_lease(&self, session_id: &str) -> Result<Option<Loaded>, StoreError> {
        let operation = format!("load session {session_id}");
        let op = operation.as_str();
        let mut conn = self.pool.hold(None, op).await?;
        let found = self
            .dialect
            .query::<Postgres>(LOAD_WITH_LEASE)
            .bind(session_id)
            .fetch_all(&mut *conn)
            .await
            .map_err(failed(op))?;
        conn.done(op).await?;
        let Some(first) = found.first() else {
            return Ok(None);
        };
        let record = rows::session_record(first, session_id, op)?;
        let lease = rows::column::<_, Option<i64>>(first, "lease_token", op)?
            .map(|token| {
                Ok(LeaseState {
                    token,
                    live: rows::column::<_, i32>(first, "lease_live", op)? == 1,
                })
            })
            .transpose()?;
        let mut pending = Vec::with_capacity(found.len());
        let mut pending_effects = Vec::new();
        for row in found {
            if rows::column::<_, Option<String>>(&row, "tool_call_id", op)?.is_none() {
                continue;
            }
            let call = rows::pending_call(&row, op)?;
            if rows::column::<_, Option<String>>(&row, "status", op)?.is_some() {
                if let Some(effect) = rows::effect(Some(row), op, decode_output)? {
                    pending_effects.push((call.tool_call_id.clone(), effect));
                }
            }
            pending.push(call);
        }
        Ok(Some(Loaded {
            record,
            pending,
            lease,
            pending_effects,
        }))
    }

    async fn effects(&self, session_id: &str, tool_call_ids: &[String]) -> Result<Vec<(String, Effect)>, StoreError> {
        let operation = format!("read the effects ledger of session {session_id}");
        let op = operation.as_str();
        let mut conn = self.pool.hold(None, op).await?;
        let found = self
            .dialect
            .query::<Postgres>(EFFECTS)
            .bind(session_id)
            .bind(tool_call_ids)
            .fetch_all(&mut *conn)
            .await
            .map_err(failed(op))?;
        conn.done(op).await?;
        let mut effects = Vec::with_capacity(found.len());
        for row in found {
            let id: String = rows::column(&row, "tool_call_id", op)?;
            if let Some(effect) = rows::effect(Some(row), op, decode_output)? {
                effects.push((id, effect));
            }
        }
        Ok(effects)
    }

    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError> {
        let operation = format!("read the pending calls of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let calls = sql::pending_calls(&mut *conn, self.dialect, session_id).await?;
        conn.done(&operation).await?;
        Ok(calls)
    }

    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError> {
        let operation = format!("decide call {tool_call_id} of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let decided = sql::decide(
            &mut *conn,
            self.dialect,
            (session_id, tool_call_id),
            decision,
            &operation,
        )
        .await?;
        conn.done(&operation).await?;
        Ok(decided)
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
        let mut conn = self.pool.hold(None, &operation).await?;
        let started = self
            .dialect
            .query::<Postgres>(STARTED)
            .bind(session_id)
            .bind(tool_call_id)
            .bind(tool_name)
            .bind(to_text(input))
            .bind(side_effect)
            .bind(lease.token)
            .fetch_optional(&mut *conn)
            .await
            .map_err(failed(&operation))?;
        conn.done(&operation).await?;
        match started {
            Some(_) => Ok(()),
            None => Err(StoreError::lease_lost(operation, lease)),
        }
    }

    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError> {
        let session_id = lease.session_id.as_str();
        let operation = format!("record result of call {tool_call_id} of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let row = self
            .dialect
            .query::<Postgres>(FINISHED)
            .bind(to_text(result.output.as_str()))
            .bind(result.is_error)
            .bind(session_id)
            .bind(tool_call_id)
            .bind(lease.token)
            .fetch_one(&mut *conn)
            .await
            .map_err(failed(&operation))?;
        conn.done(&operation).await?;
        match rows::column::<_, bool>(&row, "live", &operation)? {
            true => Ok(()),
            false => Err(StoreError::lease_lost(operation, lease)),
        }
    }

    async fn save_running(&self, session_id: &str, running: &Value, lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("save the sub-agents at work in session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let row = self
            .dialect
            .query::<Postgres>(SAVE_RUNNING)
            .bind(session_id)
            .bind(to_text(running))
            .bind(lease.token)
            .fetch_one(&mut *conn)
            .await
            .map_err(failed(&operation))?;
        conn.done(&operation).await?;
        match rows::column::<_, bool>(&row, "live", &operation)? {
            true => Ok(()),
            false => Err(StoreError::lease_lost(operation, lease)),
        }
    }

    async fn effect(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Effect>, StoreError> {
        let operation = format!("read effect of call {tool_call_id} of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let effect = sql::effect(&mut *conn, self.dialect, (session_id, tool_call_id)).await?;
        conn.done(&operation).await?;
        Ok(effect)
    }

    async fn open_effects(&self, session_id: &str) -> Result<Vec<StartedEffect>, StoreError> {
        let operation = format!("list open effects of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let open = sql::open_effects(&mut *conn, self.dialect, session_id).await?;
        conn.done(&operation).await?;
        Ok(open)
    }

    async fn complete_deferred(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<DeferredOutcome, StoreError> {
        let operation = format!("complete deferred call {tool_call_id} of session {session_id}");
        let op = operation.as_str();
        let mut tx = self.pool.hold(Some("BEGIN"), op).await?;
        let outcome = sql::publish::<Postgres>(&mut tx, self.dialect, (session_id, tool_call_id), result, op).await?;
        tx.done(op).await?;
        Ok(outcome)
    }

    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError> {
        let operation = format!("read deferred call {tool_call_id} of session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let deferred = sql::deferred(&mut *conn, self.dialect, (session_id, tool_call_id), &operation).await?;
        conn.done(&operation).await?;
        Ok(deferred)
    }

    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let operation = format!("claim session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let claim = sql::claim::<Postgres>(&mut conn, self.dialect, (session_id, owner), ttl).await?;
        conn.done(&operation).await?;
        Ok(claim)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        let operation = format!("renew the lease on session {}", lease.session_id);
        let mut conn = self.relaxed.hold(None, &operation).await?;
        let renewed = sql::renew(&mut *conn, self.dialect, lease, ttl).await?;
        conn.done(&operation).await?;
        Ok(renewed)
    }

    /// Durable, unlike a renewal: a release a server crash lost would bring the lease back live,
    /// and the session would stay shut for its TTL.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let operation = format!("release the lease on session {}", lease.session_id);
        let mut conn = self.pool.hold(None, &operation).await?;
        sql::release(&mut *conn, self.dialect, lease).await?;
        conn.done(&operation).await
    }

    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError> {
        let operation = format!("read the lease on session {session_id}");
        let mut conn = self.pool.hold(None, &operation).await?;
        let state = sql::lease_state(&mut *conn, self.dialect, session_id).await?;
        conn.done(&operation).await?;
        Ok(state)
    }

    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let operation = super::outbox::enqueue_operation(rows);
        let texts = |field: fn(&Queued) -> &str| rows.iter().map(field).collect::<Vec<_>>();
        let claim_ms: Vec<i64> = rows.iter().map(outbox::claim_ms).collect();
        let mut conn = self.pool.hold(None, &operation).await?;
        let written = self
            .dialect
            .query::<Postgres>(ENQUEUE)
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
            .fetch_one(&mut *conn)
            .await
            .map_err(failed(&operation))?;
        conn.done(&operation).await?;
        let live: bool = written.try_get("live").map_err(failed(&operation))?;
        match (live, lease) {
            (false, Some(lease)) => Err(StoreError::lease_lost(operation, lease)),
            _ => Ok(()),
        }
    }

    async fn claim_deliveries(&self, owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError> {
        let operation = "claim queued webhook notifications";
        let mut conn = self.relaxed.hold(None, operation).await?;
        let claimed = sql::claim_deliveries(&mut *conn, self.dialect, owner, due, limit).await?;
        conn.done(operation).await?;
        Ok(claimed)
    }

    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError> {
        let operation = format!("record a delivery attempt of queued notification {}", claimed.row.id);
        let mut conn = self.relaxed.hold(None, &operation).await?;
        let settled = sql::report(&mut *conn, self.dialect, claimed, attempt).await?;
        conn.done(&operation).await?;
        Ok(settled)
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        let operation = "count queued webhook notifications";
        let mut conn = self.pool.hold(None, operation).await?;
        let queued = sql::queued(&mut *conn, self.dialect).await?;
        conn.done(operation).await?;
        Ok(queued)
    }
}

#[cfg(test)]
mod tests {
    use super::{connect_options, migration_lock_key, Pooling};

    #[test]
    fn the_migration_lock_key_is_sqlxs() {
        // CRC-32 (IEEE) of "123456789" is 0xCBF43926.
        assert_eq!(migration_lock_key("123456789"), 0x3d32_ad9e * 0xCBF4_3926);
    }

    #[test]
    fn the_pooling_switch_is_read_and_not_passed_on() {
        let pooling = |url: &str| connect_options(url).map(|(_, pooling)| pooling);
        assert_eq!(pooling("postgres://db/app"), Ok(Pooling::Session));
        assert_eq!(pooling("postgres://db/app?pgbouncer=false"), Ok(Pooling::Session));
        assert_eq!(
            pooling("postgres://db/app?sslmode=disable&pgbouncer=true"),
            Ok(Pooling::Transaction)
        );
        assert_eq!(
            pooling("postgres://u:pw-918273645@db/app?pgbouncer=yes"),
            Err(
                "must be a postgres:// URL (\"postgres://db/app\": pgbouncer must be true or false (got \"yes\"))"
                    .into()
            )
        );
        // What sqlx reads of the query is kept.
        let (options, _) = connect_options("postgres://db/app?pgbouncer=true&application_name=worker").unwrap();
        assert_eq!(options.get_application_name(), Some("worker"));
    }
}
