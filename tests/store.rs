//! The store (SPEC §8.2): a conformance suite written once and run against every back end (memory,
//! SQLite; PostgreSQL joins with one more `conformance!` line), then what only SQLite has (files,
//! pragmas, migrations, unreadable rows, several pools on one file).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_runtime_hooks::model::{AssistantToolCall, ContentPart, Message, UserContent};
use agent_runtime_hooks::store::{
    self, fingerprint, Decision, Deferred, DeferredOutcome, Effect, MemoryStore, PendingCall, PendingReason,
    SessionRecord, SqliteStore, StartedEffect, Store, StoreConfig, StoreError, ToolResult,
};
use serde_json::{json, Map, Value};
use sqlx::sqlite::SqlitePool;
use tempfile::TempDir;

/// A back end under test: `store`, and `other`, a second handle on the same storage as another
/// process would hold it (the same object for memory, a second pool on the same file for SQLite).
struct Fixture {
    store: Arc<dyn Store>,
    other: Arc<dyn Store>,
    _dir: Option<TempDir>,
}

async fn memory() -> Fixture {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    Fixture {
        other: store.clone(),
        store,
        _dir: None,
    }
}

async fn sqlite() -> Fixture {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("sessions.db");
    Fixture {
        store: Arc::new(SqliteStore::open(&path).await.unwrap()),
        other: Arc::new(SqliteStore::open(&path).await.unwrap()),
        _dir: Some(dir),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn pending(id: &str, tool: &str, input: Value, reason: PendingReason, decision: Option<Decision>) -> PendingCall {
    let input = object(input);
    PendingCall {
        tool_call_id: id.into(),
        tool_name: tool.into(),
        fingerprint: fingerprint(tool, &input),
        input,
        reason,
        decision,
    }
}

fn record(session_id: &str, paused: Option<Value>) -> SessionRecord {
    SessionRecord {
        session_id: session_id.into(),
        messages: vec![
            Message::User {
                content: UserContent::Parts(vec![ContentPart::Text {
                    text: "clean up".into(),
                }]),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![
                    AssistantToolCall::new("c1".into(), "ls".into(), "{}".into()),
                    AssistantToolCall::new("c2".into(), "rm".into(), "{\"path\":\"/tmp/x\"}".into()),
                ],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "permission denied".into(),
                is_error: true,
            },
            Message::Tool {
                tool_call_id: "c0".into(),
                content: "a.txt".into(),
                is_error: false,
            },
        ],
        hooks: json!([{ "id": "audit", "event": "PreToolUse", "webhook": {
            "url": "https://hooks.example/audit",
            "headers": { "Authorization": "Bearer ${AUDIT_TOKEN}" },
            "allowedEnvVars": ["AUDIT_TOKEN"]
        }}]),
        paused,
    }
}

/// Runs every check of `checks` (one async fn over a fixture each) against a back end.
macro_rules! conformance {
    ($backend:ident) => {
        conformance!($backend:
            save_and_load_round_trip,
            save_replaces_pending_calls_wholesale,
            decide_is_conditional,
            concurrent_decisions_have_one_winner,
            effects_ledger,
            deferred_result_is_published_once,
            concurrent_completions_have_one_winner
        );
    };
    ($backend:ident: $($check:ident),+) => {
        mod $backend {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    checks::$check(super::$backend().await).await
                }
            )+
        }
    };
}

conformance!(memory);
conformance!(sqlite);

mod checks {
    use super::*;

    pub async fn save_and_load_round_trip(f: Fixture) {
        assert!(f.store.load("s1").await.unwrap().is_none());
        // 333333333.3333333: a double whose neighbours print close to it; it must reload bit for bit.
        let ratio = f64::from_bits(0x41b3_de43_5555_5555);
        let input = json!({ "path": "/tmp/x", "recursive": true, "ratio": ratio, "n": 3 });
        let calls = vec![
            pending("c2", "rm", input.clone(), PendingReason::Ask, None),
            pending(
                "c3",
                "deploy",
                json!({}),
                PendingReason::OutcomeUnknown,
                Some(Decision::Approve {
                    updated_input: Some(object(json!({ "env": "staging" }))),
                }),
            ),
            pending(
                "c4",
                "mail",
                json!({ "to": ["a@b.c"] }),
                PendingReason::Deferred,
                Some(Decision::Reject {
                    reason: Some("not now".into()),
                    stop: true,
                }),
            ),
        ];
        let paused = json!({ "operationId": "op_1", "stepIndex": 2, "usage": { "inputTokens": 10, "cost": 0.25 } });
        let saved = record("s1", Some(paused));
        f.store.save(&saved, &calls).await.unwrap();

        let (loaded, loaded_calls) = f.other.load("s1").await.unwrap().expect("saved session");
        assert_eq!(loaded, saved);
        assert_eq!(loaded_calls, calls);
        assert!(matches!(loaded.messages[2], Message::Tool { is_error: true, .. }));
        // The reloaded input still has the fingerprint the call paused with.
        assert_eq!(fingerprint("rm", &loaded_calls[0].input), calls[0].fingerprint);
        assert!(f.store.load("s2").await.unwrap().is_none());
    }

    pub async fn save_replaces_pending_calls_wholesale(f: Fixture) {
        let calls = vec![
            pending("a", "t", json!({}), PendingReason::Ask, None),
            pending("b", "t", json!({}), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
        let mut later = record("s1", None);
        later.messages.truncate(1);
        let kept = vec![
            pending("c", "t", json!({ "x": 1 }), PendingReason::Ask, None),
            calls[1].clone(),
        ];
        f.store.save(&later, &kept).await.unwrap();
        let (loaded, loaded_calls) = f.other.load("s1").await.unwrap().unwrap();
        assert_eq!(loaded, later);
        assert_eq!(loaded_calls, kept, "in saved order, the old set gone");
        f.store.save(&later, &[]).await.unwrap();
        assert!(f.other.load("s1").await.unwrap().unwrap().1.is_empty());
    }

    pub async fn decide_is_conditional(f: Fixture) {
        let calls = vec![
            pending("c1", "rm", json!({ "path": "a" }), PendingReason::Ask, None),
            pending("c2", "rm", json!({ "path": "b" }), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
        let approve = Decision::Approve {
            updated_input: Some(object(json!({ "path": "a2" }))),
        };
        let reject = Decision::Reject {
            reason: None,
            stop: false,
        };
        assert!(f.store.decide("s1", "c1", &approve).await.unwrap());
        assert!(!f.other.decide("s1", "c1", &reject).await.unwrap(), "already decided");
        assert!(!f.store.decide("s1", "nope", &reject).await.unwrap(), "not pending");
        assert!(
            !f.store.decide("missing", "c1", &reject).await.unwrap(),
            "no such session"
        );
        assert!(f.other.decide("s1", "c2", &reject).await.unwrap());

        let (_, loaded) = f.store.load("s1").await.unwrap().unwrap();
        assert_eq!(loaded[0].decision, Some(approve), "the first decision stays");
        assert_eq!(loaded[1].decision, Some(reject));
    }

    /// Saves 16 pending calls of `reason`, then for each runs `act` on both handles at once
    /// (`true` for the first handle): the two outcomes per call.
    async fn race<T, F, Fut>(f: &Fixture, reason: PendingReason, act: F) -> Vec<(String, T, T)>
    where
        F: Fn(Arc<dyn Store>, String, bool) -> Fut,
        Fut: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let ids: Vec<String> = (0..16).map(|i| format!("c{i}")).collect();
        let calls: Vec<PendingCall> = ids.iter().map(|id| pending(id, "t", json!({}), reason, None)).collect();
        f.store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
        let mut outcomes = Vec::new();
        for id in ids {
            let first = tokio::spawn(act(f.store.clone(), id.clone(), true));
            let second = tokio::spawn(act(f.other.clone(), id.clone(), false));
            outcomes.push((id, first.await.unwrap(), second.await.unwrap()));
        }
        outcomes
    }

    pub async fn concurrent_decisions_have_one_winner(f: Fixture) {
        let outcomes = race(&f, PendingReason::Ask, |store, id, first| async move {
            let decision = match first {
                true => Decision::Approve { updated_input: None },
                false => Decision::Reject {
                    reason: None,
                    stop: false,
                },
            };
            store.decide("s1", &id, &decision).await.unwrap()
        })
        .await;
        let (_, loaded) = f.store.load("s1").await.unwrap().unwrap();
        for ((id, first, second), call) in outcomes.into_iter().zip(loaded) {
            assert!(first ^ second, "{id}: exactly one decision wins ({first}, {second})");
            assert_eq!(matches!(call.decision, Some(Decision::Approve { .. })), first);
        }
    }

    pub async fn effects_ledger(f: Fixture) {
        let input = object(json!({ "path": "/tmp/x" }));
        assert_eq!(f.store.effect("s1", "c1").await.unwrap(), None);
        f.store
            .effect_started("s1", "c1", "rm", &input, "destructive")
            .await
            .unwrap();
        f.store
            .effect_started("s1", "c2", "ls", &Map::new(), "pure")
            .await
            .unwrap();
        let open = f.other.open_effects("s1").await.unwrap();
        let started = |id: &str, tool: &str, input: &Map<String, Value>, side: &str| StartedEffect {
            tool_call_id: id.into(),
            tool_name: tool.into(),
            input: input.clone(),
            side_effect: side.into(),
        };
        assert_eq!(
            open,
            vec![
                started("c1", "rm", &input, "destructive"),
                started("c2", "ls", &Map::new(), "pure")
            ]
        );
        assert_eq!(f.other.effect("s1", "c1").await.unwrap(), Some(Effect::Started));

        f.store
            .effect_finished("s1", "c1", &ToolResult::new("removed", false))
            .await
            .unwrap();
        f.store
            .effect_finished("s1", "c2", &ToolResult::new("boom", true))
            .await
            .unwrap();
        assert!(f.other.open_effects("s1").await.unwrap().is_empty());
        assert_eq!(
            f.other.effect("s1", "c2").await.unwrap(),
            Some(Effect::Finished(ToolResult::new("boom", true)))
        );

        // Starting again (an approved `outcome_unknown` call) opens it again, in its first place.
        f.store
            .effect_started("s1", "c3", "ls", &Map::new(), "pure")
            .await
            .unwrap();
        f.store
            .effect_started("s1", "c1", "rm", &input, "destructive")
            .await
            .unwrap();
        let open: Vec<String> = f
            .other
            .open_effects("s1")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.tool_call_id)
            .collect();
        assert_eq!(open, ["c1", "c3"]);

        // A result for a call never started records nothing; other sessions are apart.
        f.store
            .effect_finished("s1", "never", &ToolResult::new("x", false))
            .await
            .unwrap();
        assert_eq!(f.other.effect("s1", "never").await.unwrap(), None);
        assert!(f.other.open_effects("s2").await.unwrap().is_empty());
    }

    pub async fn deferred_result_is_published_once(f: Fixture) {
        let calls = vec![
            pending("d1", "mail", json!({ "to": "a" }), PendingReason::Deferred, None),
            pending("c1", "rm", json!({}), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
        f.store
            .effect_started("s1", "d1", "mail", &calls[0].input, "destructive")
            .await
            .unwrap();
        assert_eq!(f.other.deferred("s1", "d1").await.unwrap(), Some(Deferred::Waiting));
        assert!(
            f.other.open_effects("s1").await.unwrap().is_empty(),
            "a deferred call is not a crash"
        );

        assert_eq!(
            f.store
                .complete_deferred("s1", "d1", &ToolResult::new("sent", false))
                .await
                .unwrap(),
            DeferredOutcome::Published
        );
        let first = DeferredOutcome::AlreadyPublished(ToolResult::new("sent", false));
        assert_eq!(
            f.other
                .complete_deferred("s1", "d1", &ToolResult::new("denied", true))
                .await
                .unwrap(),
            first
        );
        assert_eq!(
            f.other.deferred("s1", "d1").await.unwrap(),
            Some(Deferred::Published(ToolResult::new("sent", false)))
        );
        assert_eq!(
            f.other.effect("s1", "d1").await.unwrap(),
            Some(Effect::Finished(ToolResult::new("sent", false)))
        );

        // Saving the run on (the call no longer pending) never clears the published result.
        f.store.save(&record("s1", None), &[]).await.unwrap();
        f.store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
        assert_eq!(
            f.store
                .complete_deferred("s1", "d1", &ToolResult::new("again", false))
                .await
                .unwrap(),
            first
        );

        assert_eq!(
            f.store
                .complete_deferred("s1", "c1", &ToolResult::new("x", false))
                .await
                .unwrap(),
            DeferredOutcome::NotDeferred,
            "an 'ask' call is not deferred"
        );
        assert_eq!(
            f.store
                .complete_deferred("s1", "zz", &ToolResult::new("x", false))
                .await
                .unwrap(),
            DeferredOutcome::NotDeferred
        );
        assert_eq!(
            f.store
                .complete_deferred("s9", "d1", &ToolResult::new("x", false))
                .await
                .unwrap(),
            DeferredOutcome::NotDeferred
        );
        assert_eq!(f.store.deferred("s1", "c1").await.unwrap(), None);
    }

    pub async fn concurrent_completions_have_one_winner(f: Fixture) {
        let outcomes = race(&f, PendingReason::Deferred, |store, id, first| async move {
            let result = ToolResult::new(if first { "A" } else { "B" }, !first);
            store.complete_deferred("s1", &id, &result).await.unwrap()
        })
        .await;
        for (id, first, second) in outcomes {
            let winner = match (first, second) {
                (DeferredOutcome::Published, DeferredOutcome::AlreadyPublished(stored)) => {
                    assert_eq!(stored, ToolResult::new("A", false));
                    stored
                }
                (DeferredOutcome::AlreadyPublished(stored), DeferredOutcome::Published) => {
                    assert_eq!(stored, ToolResult::new("B", true));
                    stored
                }
                other => panic!("{id}: not exactly one publication: {other:?}"),
            };
            assert_eq!(
                f.store.deferred("s1", &id).await.unwrap(),
                Some(Deferred::Published(winner))
            );
        }
    }
}

// ---- What only the memory store has ----

#[tokio::test]
async fn the_memory_store_is_one_per_process() {
    let a = store::open(&StoreConfig::Memory).await.unwrap();
    let b = store::open(&StoreConfig::Memory).await.unwrap();
    let session = format!("process-wide-{}", std::process::id());
    a.save(&record(&session, None), &[]).await.unwrap();
    assert_eq!(b.load(&session).await.unwrap().unwrap().0, record(&session, None));
}

// ---- What only SQLite has ----

fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("sessions.db")
}

/// A separate raw connection, as a tool outside the store would open the file.
async fn raw(path: &Path) -> SqlitePool {
    SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

fn assert_names(error: &StoreError, operation: &str, cause: &str) {
    assert!(
        error.operation.contains(operation),
        "operation {:?} lacks {operation:?}",
        error.operation
    );
    assert!(error.cause.contains(cause), "cause {:?} lacks {cause:?}", error.cause);
    assert!(error.to_string().starts_with("store: "), "{error}");
}

#[tokio::test]
async fn a_store_that_cannot_be_opened_is_an_error_naming_it() {
    let dir = TempDir::new().unwrap();
    // A directory that cannot be made: under a regular file (root ignores permission bits), and
    // on a read-only file system.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    for path in [
        file.join("missing/sessions.db"),
        PathBuf::from("/proc/no-such-dir/sessions.db"),
    ] {
        let config = StoreConfig::Sqlite(path.clone());
        let error = store::open(&config).await.err().expect("cannot open");
        assert_names(
            &error,
            &format!("open sqlite store {}", path.display()),
            "cannot create",
        );
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_an_error_not_an_empty_store() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    std::fs::write(&path, vec![b'z'; 8192]).unwrap();
    let error = SqliteStore::open(&path).await.err().expect("not a database");
    assert_names(&error, "open sqlite store", "not a database");
}

#[tokio::test]
async fn the_file_and_its_directory_are_created_on_first_use_in_wal_mode() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("state/nested/sessions.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store.save(&record("s1", None), &[]).await.unwrap();
    assert!(path.exists());
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    assert!(wal.exists(), "WAL file next to the database");
    let pool = raw(&path).await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn migrations_are_applied_once_and_data_survives_reopening() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = SqliteStore::open(&path).await.unwrap();
    store.save(&record("s1", None), &[]).await.unwrap();
    store.close().await;
    let again = SqliteStore::open(&path).await.unwrap();
    assert_eq!(again.load("s1").await.unwrap().unwrap().0, record("s1", None));
    let pool = raw(&path).await;
    let applied: Vec<(i64, bool)> = sqlx::query_as("SELECT version, success FROM _sqlx_migrations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(applied, [(1, true)]);
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_version_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    SqliteStore::open(&path).await.unwrap().close().await;
    let pool = raw(&path).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', 1, x'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let error = SqliteStore::open(&path).await.err().expect("refused");
    assert_names(&error, "open sqlite store", "9999");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pools_opening_a_new_file_at_once_both_succeed() {
    for _ in 0..4 {
        let dir = TempDir::new().unwrap();
        let path = db_path(&dir);
        let (a, b) = tokio::join!(SqliteStore::open(&path), SqliteStore::open(&path));
        let (a, b) = (a.unwrap(), b.unwrap());
        a.save(&record("s1", None), &[]).await.unwrap();
        assert!(b.load("s1").await.unwrap().is_some());
    }
}

#[tokio::test]
async fn one_pool_per_file_within_a_process() {
    let dir = TempDir::new().unwrap();
    let config = StoreConfig::Sqlite(db_path(&dir));
    let a = store::open(&config).await.unwrap();
    let b = store::open(&config).await.unwrap();
    assert!(std::ptr::eq(Arc::as_ptr(&a) as *const (), Arc::as_ptr(&b) as *const ()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_first_opens_at_once_share_one_pool_and_none_fails() {
    let dir = TempDir::new().unwrap();
    let config = StoreConfig::Sqlite(db_path(&dir));
    let opens = futures::future::join_all((0..24).map(|_| {
        let config = config.clone();
        tokio::spawn(async move { store::open(&config).await })
    }))
    .await;
    let stores: Vec<_> = opens.into_iter().map(|open| open.unwrap().expect("opened")).collect();
    let first = Arc::as_ptr(&stores[0]) as *const ();
    assert!(stores
        .iter()
        .all(|store| std::ptr::eq(Arc::as_ptr(store) as *const (), first)));
}

#[tokio::test]
async fn unreadable_rows_are_errors_never_nothing_stored() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = SqliteStore::open(&path).await.unwrap();
    let calls = vec![pending("c1", "rm", json!({}), PendingReason::Ask, None)];
    store.save(&record("s1", Some(json!({}))), &calls).await.unwrap();
    store
        .effect_started("s1", "c1", "rm", &Map::new(), "destructive")
        .await
        .unwrap();
    let pool = raw(&path).await;
    let corrupt = |sql: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query(sql).execute(&pool).await.unwrap() }
    };

    corrupt("UPDATE pending_calls SET decision = '{\"action\":\"maybe\"}'").await;
    let error = store.load("s1").await.unwrap_err();
    assert_names(&error, "load session s1", "stored decision is unreadable");

    corrupt("UPDATE sessions SET messages = 'not json'").await;
    let error = store.load("s1").await.unwrap_err();
    assert_names(&error, "load session s1", "stored messages is unreadable");

    corrupt("UPDATE effects SET input = '[1]'").await;
    let error = store.open_effects("s1").await.unwrap_err();
    assert_names(&error, "list open effects of session s1", "stored input is unreadable");

    corrupt("UPDATE effects SET status = 'finished'").await;
    let error = store.effect("s1", "c1").await.unwrap_err();
    assert_names(
        &error,
        "read effect of call c1 of session s1",
        "does not match its result",
    );
}

#[tokio::test]
async fn only_what_is_given_is_written_hook_templates_not_resolved_secrets() {
    const SECRET: &str = "sk-live-4f2a-marker-never-stored";
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    // The caller resolves `${AUDIT_TOKEN}` (to SECRET, say) only when it sends a webhook; it gives
    // the store the hook objects as the options had them.
    let store = SqliteStore::open(&path).await.unwrap();
    store
        .save(&record("s1", Some(json!({ "stepIndex": 1 }))), &[])
        .await
        .unwrap();
    let bytes = |suffix: &str| std::fs::read(format!("{}{suffix}", path.display())).unwrap_or_default();
    let written = [bytes(""), bytes("-wal")].concat();
    let contains = |needle: &str| written.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains("Bearer ${AUDIT_TOKEN}"), "the template is stored as given");
    assert!(!contains(SECRET), "the resolved value is not");
}
