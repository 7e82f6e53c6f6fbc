//! Group commit for one SQLite file: every write of the process goes to one writer task, which
//! runs the writes waiting at that moment inside one `BEGIN IMMEDIATE` transaction, each under a
//! savepoint of its own, and commits them together.
//!
//! Why: a commit at `synchronous=FULL` costs an fsync, and concurrent connections of one process
//! contending for the file's write lock sleep in SQLite's busy handler (1, 2, 5, 10… ms) instead of
//! taking turns. One writer takes turns without sleeping, and while it commits, the next writes
//! queue and share the next fsync.
//!
//! What it keeps: a write is answered only after the commit that holds it returned, so nothing
//! acknowledged is lost (FULL: the WAL is synced before COMMIT returns). A write that fails (a
//! fence refusing a lost lease, a constraint) is rolled back to its savepoint alone; the others of
//! its batch still commit. If the commit itself fails, every write of the batch gets that error and
//! none of them is kept. Other processes still wait for the file's lock through `busy_timeout`.
//! A write whose caller stopped waiting (its deadline passed) before the writer reached it is
//! dropped, not run.

use futures::future::BoxFuture;
use sqlx::sqlite::{SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::StoreError;

/// The most writes one transaction holds: enough to share an fsync among every session of a busy
/// process, few enough that one batch never holds the file's lock for long.
const MAX_BATCH: usize = 128;

/// One write: statements run on the writer's connection, inside the batch's transaction.
pub type Work<T> = Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>> + Send>;

/// The handle the store keeps; the writer task ends when it is dropped.
pub struct Writer {
    queue: mpsc::UnboundedSender<Box<dyn Job>>,
}

impl Writer {
    /// Starts the writer task for `pool`'s file on the current tokio runtime.
    pub fn start(pool: SqlitePool) -> Writer {
        let (queue, jobs) = mpsc::unbounded_channel();
        tokio::spawn(serve(pool, jobs));
        Writer { queue }
    }

    /// Runs `work` in the next batch; answers once that batch has committed (or failed).
    pub async fn write<T: Send + 'static>(
        &self,
        operation: &str,
        durability: Durability,
        work: Work<T>,
    ) -> Result<T, StoreError> {
        let (answer, answered) = oneshot::channel();
        let job = Typed {
            durability,
            work: Some(work),
            outcome: None,
            operation: operation.to_owned(),
            answer,
        };
        self.queue
            .send(Box::new(job))
            .map_err(|_| StoreError::new(operation, "the store is closed"))?;
        answered
            .await
            .map_err(|_| StoreError::new(operation, "the store's writer stopped before this write ran"))?
    }
}

/// How a write's commit reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Durability {
    /// `synchronous=NORMAL` (WAL: the commit survives a process crash, not a power loss) for
    /// leases and the outbox's claims and reports: a power loss stops every process of the
    /// machine, so no holder of a lost lease survives it, and a lost claim or report only sends a
    /// row again, with the same `Idempotency-Key`.
    Normal,
    /// `synchronous=FULL` (the WAL is synced before COMMIT returns) for run state, decisions, the
    /// effects ledger and outbox rows. A batch holding one such write is committed this way.
    Full,
}

/// A write of any result type, as the writer task sees it.
trait Job: Send {
    fn durability(&self) -> Durability;
    /// Runs the write's statements; `false` when it failed (and must be rolled back).
    fn run<'a>(&'a mut self, conn: &'a mut SqliteConnection) -> BoxFuture<'a, bool>;
    /// Answers the caller with the write's outcome, or with why its batch was not kept.
    fn settle(self: Box<Self>, batch: Result<(), &StoreError>);
    /// The caller stopped waiting: nothing would read the answer.
    fn abandoned(&self) -> bool;
}

struct Typed<T> {
    durability: Durability,
    work: Option<Work<T>>,
    outcome: Option<Result<T, StoreError>>,
    operation: String,
    answer: oneshot::Sender<Result<T, StoreError>>,
}

impl<T: Send + 'static> Job for Typed<T> {
    fn durability(&self) -> Durability {
        self.durability
    }

    fn run<'a>(&'a mut self, conn: &'a mut SqliteConnection) -> BoxFuture<'a, bool> {
        let work = self.work.take();
        Box::pin(async move {
            let Some(work) = work else { return false };
            let outcome = work(conn).await;
            let ran = outcome.is_ok();
            self.outcome = Some(outcome);
            ran
        })
    }

    fn settle(self: Box<Self>, batch: Result<(), &StoreError>) {
        let answer = match (self.outcome, batch) {
            // A write that failed says why, whatever became of its batch.
            (Some(Err(failed)), _) => Err(failed),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(batch)) => Err(StoreError::new(&self.operation, &batch.cause)),
            (None, Ok(())) => Err(StoreError::new(&self.operation, "the write was not run")),
        };
        // The caller may have stopped waiting meanwhile; then nobody needs the answer.
        let _ = self.answer.send(answer);
    }

    fn abandoned(&self) -> bool {
        self.answer.is_closed()
    }
}

async fn serve(pool: SqlitePool, mut jobs: mpsc::UnboundedReceiver<Box<dyn Job>>) {
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        batch.retain(|job| !job.abandoned());
        if batch.is_empty() {
            continue;
        }
        let committed = commit(&pool, &mut batch).await;
        for job in batch {
            job.settle(committed.as_ref().map(|_| ()));
        }
    }
}

/// One transaction for `batch`, each write under its own savepoint.
async fn commit(pool: &SqlitePool, batch: &mut [Box<dyn Job>]) -> Result<(), StoreError> {
    let operation = "commit a batch of writes";
    let failed = |e: sqlx::Error| StoreError::new(operation, e);
    let durability = batch
        .iter()
        .map(|job| job.durability())
        .max()
        .unwrap_or(Durability::Full);
    let mut conn = pool.acquire().await.map_err(failed)?;
    // Per connection, and read at COMMIT: set for this batch before it begins.
    let pragma = match durability {
        Durability::Normal => "PRAGMA synchronous = NORMAL",
        Durability::Full => "PRAGMA synchronous = FULL",
    };
    sqlx::raw_sql(pragma).execute(&mut *conn).await.map_err(failed)?;
    let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE")
        .await
        .map_err(failed)?;
    for job in batch.iter_mut() {
        sqlx::raw_sql("SAVEPOINT write")
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        if !job.run(&mut tx).await {
            sqlx::raw_sql("ROLLBACK TO write")
                .execute(&mut *tx)
                .await
                .map_err(failed)?;
        }
        sqlx::raw_sql("RELEASE write").execute(&mut *tx).await.map_err(failed)?;
    }
    tx.commit().await.map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::Row;
    use std::time::Duration;

    async fn pool(dir: &tempfile::TempDir) -> SqlitePool {
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true);
        let pool = SqlitePool::connect_with(options).await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (v INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        pool
    }

    async fn kept(pool: &SqlitePool) -> Vec<i64> {
        let rows = sqlx::query("SELECT v FROM t ORDER BY v").fetch_all(pool).await.unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    }

    /// A write inserting `v`; `fail` makes it fail after its insert.
    fn insert(v: i64, fail: bool) -> Work<i64> {
        Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query("INSERT INTO t (v) VALUES (?)")
                    .bind(v)
                    .execute(&mut *conn)
                    .await
                    .map_err(|e| StoreError::new("insert", e))?;
                if fail {
                    return Err(StoreError::new("insert", "refused"));
                }
                Ok(v)
            })
        })
    }

    #[tokio::test]
    async fn a_failed_write_is_rolled_back_alone_and_the_rest_of_its_batch_commits() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let writer = Writer::start(pool.clone());
        // Sent together, so the writer finds them waiting and batches them.
        let (a, b, c) = tokio::join!(
            writer.write("a", Durability::Full, insert(1, false)),
            writer.write("b", Durability::Normal, insert(2, true)),
            writer.write("c", Durability::Full, insert(3, false)),
        );
        assert_eq!(a.unwrap(), 1);
        assert_eq!(b.unwrap_err().cause, "refused");
        assert_eq!(c.unwrap(), 3);
        assert_eq!(kept(&pool).await, vec![1, 3]);
    }

    #[tokio::test]
    async fn a_write_whose_caller_stopped_waiting_is_never_run() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let writer = Writer::start(pool.clone());
        // The writer is held up by a transaction of another connection, so the write waits in
        // the queue; its caller gives up first.
        let mut blocker = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
        sqlx::query("INSERT INTO t (v) VALUES (0)")
            .execute(&mut *blocker)
            .await
            .unwrap();
        let first = tokio::spawn({
            let writer = Writer {
                queue: writer.queue.clone(),
            };
            async move { writer.write("first", Durability::Full, insert(1, false)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let gave_up = tokio::time::timeout(
            Duration::from_millis(20),
            writer.write("late", Durability::Full, insert(2, false)),
        )
        .await;
        assert!(gave_up.is_err());
        blocker.rollback().await.unwrap();
        assert_eq!(first.await.unwrap().unwrap(), 1);
        // A write after it goes through the same queue: once it is answered, the late one was
        // either dropped or run before it.
        assert_eq!(
            writer.write("after", Durability::Full, insert(3, false)).await.unwrap(),
            3
        );
        assert_eq!(kept(&pool).await, vec![1, 3]);
    }
}
