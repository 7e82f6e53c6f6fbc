//! The store (SPEC §8.2): a conformance suite written once and run against every back end (memory,
//! SQLite, PostgreSQL, PostgreSQL through PgBouncer's session and transaction pooling), then what
//! only SQLite has (files, pragmas, migrations, unreadable rows, several pools on one file) and
//! what only PostgreSQL has (URLs, migrations between processes, TLS, many pools deciding at
//! once, what a pooler refuses, the exchanges an operation costs).
//!
//! PostgreSQL: each check creates a database of its own (`arh_test_<pid>_<n>_<time>`) on the server
//! at `ARH_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) and drops it
//! afterwards. When no server answers there, the PostgreSQL checks pass without running and the
//! run prints `skipping PostgreSQL store tests: no server at ...` on its standard error (once,
//! not captured by the test harness).
//!
//! PgBouncer: the checks through it start `pgbouncer` (on PATH or in /usr/sbin, as `-u postgres`
//! when run as root), one process per pooling mode on a free port, in front of that server, and
//! stop it when the test binary ends. Without it they pass without running, and the run prints
//! `skipping PgBouncer (session pooling) store tests: ...` once per mode.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_runtime_hooks::model::{AssistantToolCall, ContentPart, Message, UserContent};
use agent_runtime_hooks::store::{
    self, fingerprint, Claim, Decision, Deferred, DeferredOutcome, Effect, Guarded, Lease, LeaseState, Loaded,
    MemoryStore, PendingCall, PendingReason, PostgresStore, SessionRecord, SqliteStore, StartedEffect, Store,
    StoreConfig, StoreError, StoreErrorKind, ToolResult,
};
use serde_json::{json, Map, Value};
use sqlx::sqlite::SqlitePool;
use tempfile::TempDir;

/// A back end under test: `store`, and `other`, a second handle on the same storage as another
/// process would hold it (the same object for memory, a second pool on the same file for SQLite,
/// a second pool on the same database for PostgreSQL). `None`: the back end cannot be tested here
/// (no PostgreSQL server), which was said once on standard error.
struct Fixture {
    store: Arc<dyn Store>,
    other: Arc<dyn Store>,
    _dir: Option<TempDir>,
    _database: Option<pg::Database>,
}

/// Every back end as `store::open` gives it: behind the edge (ids checked, SQL operations under
/// a deadline).
fn guarded<S: Store + 'static>(store: S, deadline: Option<Duration>) -> Arc<dyn Store> {
    Arc::new(Guarded::new(store, deadline))
}

async fn memory() -> Option<Fixture> {
    let store = guarded(MemoryStore::new(), None);
    Some(Fixture {
        other: store.clone(),
        store,
        _dir: None,
        _database: None,
    })
}

async fn sqlite() -> Option<Fixture> {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("sessions.db");
    Some(Fixture {
        store: guarded(SqliteStore::open(&path).await.unwrap(), Some(store::DEADLINE)),
        other: guarded(SqliteStore::open(&path).await.unwrap(), Some(store::DEADLINE)),
        _dir: Some(dir),
        _database: None,
    })
}

async fn postgres() -> Option<Fixture> {
    let database = pg::Database::create().await?;
    Some(Fixture {
        store: guarded(PostgresStore::open(&database.url).await.unwrap(), Some(store::DEADLINE)),
        other: guarded(PostgresStore::open(&database.url).await.unwrap(), Some(store::DEADLINE)),
        _dir: None,
        _database: Some(database),
    })
}

/// PostgreSQL through PgBouncer in session pooling: the store's URL as it is, only another port.
async fn pgbouncer_session() -> Option<Fixture> {
    through_bouncer(bouncer::Mode::Session).await
}

/// PostgreSQL through PgBouncer in transaction pooling, the URL carrying `pgbouncer=true`.
async fn pgbouncer_transaction() -> Option<Fixture> {
    through_bouncer(bouncer::Mode::Transaction).await
}

/// A database of its own (created on the server itself), reached through the bouncer of `mode`.
async fn through_bouncer(mode: bouncer::Mode) -> Option<Fixture> {
    let database = pg::Database::create().await?;
    let url = bouncer::Bouncer::get(mode)?.url(&database);
    Some(Fixture {
        store: guarded(PostgresStore::open(&url).await.unwrap(), Some(store::DEADLINE)),
        other: guarded(PostgresStore::open(&url).await.unwrap(), Some(store::DEADLINE)),
        _dir: None,
        _database: Some(database),
    })
}

/// A live lease on `session` (a long one: the checks that use it are not about expiry).
async fn claim(store: &dyn Store, session: &str) -> Lease {
    match store.claim(session, "test", Duration::from_secs(600)).await.unwrap() {
        Claim::Granted(lease) => lease,
        held => panic!("session {session} is held: {held:?}"),
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
        running: None,
    }
}

/// Runs every check of `checks` (one async fn over a fixture each) against a back end.
macro_rules! conformance {
    ($backend:ident) => {
        conformance!($backend:
            save_and_load_round_trip,
            save_replaces_pending_calls_wholesale,
            the_sub_agents_at_work_are_replaced_alone_cleared_by_a_save_and_fenced,
            decide_is_conditional,
            concurrent_decisions_have_one_winner,
            effects_ledger,
            deferred_result_is_published_once,
            concurrent_completions_have_one_winner,
            every_character_round_trips,
            a_live_lease_excludes_other_claims_and_fences_writes,
            concurrent_claims_have_one_winner,
            an_expired_lease_is_taken_over_and_its_holder_refused,
            a_call_saved_as_outcome_unknown_is_unknown_in_the_ledger,
            queued_rows_are_claimed_once_oldest_first_and_settled,
            failed_attempts_back_off_and_give_up_after_max_attempts,
            a_drain_tries_each_row_once_whatever_its_backoff,
            concurrent_deliverers_never_claim_one_row_twice,
            one_key_names_one_body,
            a_run_that_lost_its_lease_queues_nothing,
            ids_are_kept_or_refused_by_one_rule_on_every_back_end,
            the_last_save_releases_the_lease_in_the_same_write,
            a_session_is_read_with_its_lease,
            the_ledger_is_read_for_many_calls_at_once,
            a_turn_and_its_first_call_start_are_kept_together
        );
    };
    ($backend:ident: $($check:ident),+) => {
        mod $backend {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    if let Some(fixture) = super::$backend().await {
                        checks::$check(fixture).await
                    }
                }
            )+
        }
    };
}

conformance!(memory);
conformance!(sqlite);
conformance!(postgres);
conformance!(pgbouncer_session);
conformance!(pgbouncer_transaction);

mod checks {
    use super::*;
    use agent_runtime_hooks::store::outbox::{Attempt, Due, Queued, Settled, Target};

    fn queued(id: &str, max_attempts: u32) -> Queued {
        Queued {
            id: id.into(),
            session_id: "s1".into(),
            hook_id: "audit".into(),
            event: "PostToolUse".into(),
            idempotency_key: format!("key-{id}"),
            operation_id: Some("op-1".into()),
            target: Target {
                url: "http://127.0.0.1:9/hook".into(),
                timeout_ms: 1000,
                headers: vec![("authorization".into(), "Bearer ${AUDIT_TOKEN}".into())],
                allowed_env_vars: vec!["AUDIT_TOKEN".into()],
            },
            body: r#"{"event":"PostToolUse","text":"\u0000 ü"}"#.into(),
            max_attempts,
            critical: id.ends_with('!'),
        }
    }

    pub async fn queued_rows_are_claimed_once_oldest_first_and_settled(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        f.store
            .enqueue(&[queued("q1", 8), queued("q2!", 8)], Some(&l))
            .await
            .unwrap();
        f.store.enqueue(&[queued("q3", 8)], None).await.unwrap();
        assert_eq!(f.other.queued().await.unwrap(), 3);
        let first = f.store.claim_deliveries("a", Due::Now, 2).await.unwrap();
        let ids: Vec<&str> = first.iter().map(|c| c.row.id.as_str()).collect();
        assert_eq!(ids, ["q1", "q2!"]);
        assert_eq!(first[0].row, queued("q1", 8), "the row comes back as it was queued");
        assert_eq!(first[1].row, queued("q2!", 8));
        assert_eq!(first[0].attempts, 0);
        // Held rows are not claimed again; the third is.
        let second = f.other.claim_deliveries("b", Due::Now, 10).await.unwrap();
        assert_eq!(second.iter().map(|c| c.row.id.as_str()).collect::<Vec<_>>(), ["q3"]);
        assert!(f.other.claim_deliveries("b", Due::Now, 10).await.unwrap().is_empty());
        assert_eq!(
            f.store.report(&first[0], &Attempt::Delivered).await.unwrap(),
            Settled::Delivered
        );
        // A report whose claim no longer stands changes nothing.
        assert_eq!(
            f.store.report(&first[0], &Attempt::Delivered).await.unwrap(),
            Settled::Stale
        );
        assert_eq!(f.other.queued().await.unwrap(), 2);
        assert_eq!(
            f.store.report(&first[1], &Attempt::Delivered).await.unwrap(),
            Settled::Delivered
        );
        assert_eq!(
            f.other.report(&second[0], &Attempt::Delivered).await.unwrap(),
            Settled::Delivered
        );
        assert_eq!(f.other.queued().await.unwrap(), 0);
    }

    /// A notification queued again under its key (a run recovered after a crash queues its
    /// tool call's events again, with another `operationId`) is not queued twice: the body
    /// first queued under the key is the one sent.
    pub async fn one_key_names_one_body(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let again = |id: &str, body: &str| Queued {
            id: id.into(),
            idempotency_key: "key-q1".into(),
            operation_id: Some("op-2".into()),
            body: body.into(),
            ..queued("q1", 8)
        };
        f.store.enqueue(&[queued("q1", 8)], Some(&l)).await.unwrap();
        f.store
            .enqueue(&[again("q1-b", r#"{"operationId":"op-2"}"#)], Some(&l))
            .await
            .unwrap();
        f.store
            .enqueue(&[again("q1-c", "{}"), queued("q2", 8), again("q1-d", "[]")], None)
            .await
            .unwrap();
        assert_eq!(f.other.queued().await.unwrap(), 2);
        let claimed = f.other.claim_deliveries("a", Due::Now, 10).await.unwrap();
        let rows: Vec<&Queued> = claimed.iter().map(|c| &c.row).collect();
        assert_eq!(rows, [&queued("q1", 8), &queued("q2", 8)]);
        // Queued twice in one batch, the first of the batch stands.
        f.store
            .enqueue(
                &[again("q3", "[1]"), again("q4", "[2]")].map(|row| Queued {
                    idempotency_key: "key-q3".into(),
                    ..row
                }),
                None,
            )
            .await
            .unwrap();
        let claimed = f.other.claim_deliveries("a", Due::Now, 10).await.unwrap();
        assert_eq!(claimed.iter().map(|c| c.row.body.as_str()).collect::<Vec<_>>(), ["[1]"]);
    }

    pub async fn failed_attempts_back_off_and_give_up_after_max_attempts(f: Fixture) {
        f.store.enqueue(&[queued("q1", 2)], None).await.unwrap();
        let failed = Attempt::Failed("Hook HTTP request failed: http_error (status 500)".into());
        let claimed = f.store.claim_deliveries("a", Due::Now, 10).await.unwrap();
        assert_eq!(
            f.store.report(&claimed[0], &failed).await.unwrap(),
            Settled::Retry(Duration::from_secs(1))
        );
        // Backing off: not due now.
        assert!(f.other.claim_deliveries("b", Due::Now, 10).await.unwrap().is_empty());
        assert_eq!(f.other.queued().await.unwrap(), 1);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let again = f.other.claim_deliveries("b", Due::Now, 10).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].attempts, 1);
        assert_eq!(f.other.report(&again[0], &failed).await.unwrap(), Settled::GaveUp);
        assert_eq!(f.store.queued().await.unwrap(), 0);
        assert!(f
            .store
            .claim_deliveries("a", Due::Drain("d"), 10)
            .await
            .unwrap()
            .is_empty());
    }

    pub async fn a_drain_tries_each_row_once_whatever_its_backoff(f: Fixture) {
        f.store
            .enqueue(&[queued("q1", 8), queued("q2", 8)], None)
            .await
            .unwrap();
        let failed = Attempt::Failed("Hook HTTP request failed: network_error".into());
        for claimed in f.store.claim_deliveries("a", Due::Now, 10).await.unwrap() {
            f.store.report(&claimed, &failed).await.unwrap();
        }
        let drained = f.other.claim_deliveries("b", Due::Drain("d1"), 1).await.unwrap();
        assert_eq!(drained[0].row.id, "q1");
        f.other.report(&drained[0], &failed).await.unwrap();
        let next = f.other.claim_deliveries("b", Due::Drain("d1"), 10).await.unwrap();
        assert_eq!(
            next.iter().map(|c| c.row.id.as_str()).collect::<Vec<_>>(),
            ["q2"],
            "q1 was tried by this drain"
        );
        f.other.report(&next[0], &Attempt::Delivered).await.unwrap();
        assert!(f
            .other
            .claim_deliveries("b", Due::Drain("d1"), 10)
            .await
            .unwrap()
            .is_empty());
        // Another drain tries it again.
        let other = f.store.claim_deliveries("a", Due::Drain("d2"), 10).await.unwrap();
        assert_eq!(
            other
                .iter()
                .map(|c| (c.row.id.as_str(), c.attempts))
                .collect::<Vec<_>>(),
            [("q1", 2)]
        );
    }

    pub async fn concurrent_deliverers_never_claim_one_row_twice(f: Fixture) {
        let rows: Vec<Queued> = (0..60).map(|n| queued(&format!("q{n:02}"), 8)).collect();
        f.store.enqueue(&rows, None).await.unwrap();
        let claimers = (0..6).map(|n| {
            let store = if n % 2 == 0 { f.store.clone() } else { f.other.clone() };
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let claimed = store.claim_deliveries(&format!("w{n}"), Due::Now, 4).await.unwrap();
                    if claimed.is_empty() {
                        return mine;
                    }
                    for claimed in claimed {
                        assert_eq!(
                            store.report(&claimed, &Attempt::Delivered).await.unwrap(),
                            Settled::Delivered
                        );
                        mine.push(claimed.row.id);
                    }
                }
            })
        });
        let mut all: Vec<String> = futures::future::join_all(claimers)
            .await
            .into_iter()
            .flat_map(|joined| joined.unwrap())
            .collect();
        all.sort();
        assert_eq!(all, rows.iter().map(|row| row.id.clone()).collect::<Vec<_>>());
        assert_eq!(f.store.queued().await.unwrap(), 0);
    }

    pub async fn a_run_that_lost_its_lease_queues_nothing(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        f.store.release(&l).await.unwrap();
        lost(f.store.enqueue(&[queued("q1", 8)], Some(&l)).await.unwrap_err());
        assert_eq!(f.other.queued().await.unwrap(), 0);
    }

    fn lost(error: StoreError) {
        assert_eq!(error.kind, StoreErrorKind::LeaseLost, "{error}");
        assert!(error.cause.contains("no longer live"), "{error}");
    }

    pub async fn a_live_lease_excludes_other_claims_and_fences_writes(f: Fixture) {
        assert_eq!(f.store.lease_state("s1").await.unwrap(), None);
        let ttl = Duration::from_secs(60);
        let Claim::Granted(first) = f.store.claim("s1", "worker-a", ttl).await.unwrap() else {
            panic!("the first claim is granted");
        };
        assert_eq!(
            f.other.lease_state("s1").await.unwrap().map(|state| state.live),
            Some(true)
        );
        match f.other.claim("s1", "worker-b", ttl).await.unwrap() {
            Claim::Held { owner, remaining_ms } => {
                assert_eq!(owner, "worker-a");
                assert!(remaining_ms > 50_000 && remaining_ms <= 60_000, "{remaining_ms}");
            }
            granted => panic!("a live lease was claimed again: {granted:?}"),
        }
        // Another session is not held.
        assert!(matches!(
            f.other.claim("s2", "worker-b", ttl).await.unwrap(),
            Claim::Granted(_)
        ));
        f.store.save(&record("s1", None), &[], &first).await.unwrap();
        assert!(f.store.renew(&first, ttl).await.unwrap());
        f.store.release(&first).await.unwrap();
        assert!(!f.other.lease_state("s1").await.unwrap().is_some_and(|state| state.live));
        // Released: renewing or writing with it is refused, nothing is written.
        assert!(!f.store.renew(&first, ttl).await.unwrap());
        lost(
            f.store
                .save(&record("s1", Some(json!({"late": true}))), &[], &first)
                .await
                .unwrap_err(),
        );
        lost(
            f.store
                .effect_started(&first, "c1", "rm", &Map::new(), "destructive")
                .await
                .unwrap_err(),
        );
        lost(
            f.store
                .effect_finished(&first, "c1", &ToolResult::new("x", false))
                .await
                .unwrap_err(),
        );
        assert_eq!(f.other.load("s1").await.unwrap().unwrap().0, record("s1", None));
        assert_eq!(f.other.effect("s1", "c1").await.unwrap(), None);
        // The next claim gets a greater token; the old one stays refused.
        let Claim::Granted(second) = f.other.claim("s1", "worker-b", ttl).await.unwrap() else {
            panic!("a released lease is claimed at once");
        };
        assert!(second.token > first.token, "{second:?} after {first:?}");
        lost(f.store.save(&record("s1", None), &[], &first).await.unwrap_err());
        f.other.save(&record("s1", None), &[], &second).await.unwrap();
        // Releasing a lost lease changes nothing.
        f.store.release(&first).await.unwrap();
        assert_eq!(
            f.store
                .lease_state("s1")
                .await
                .unwrap()
                .map(|state| (state.token, state.live)),
            Some((second.token, true))
        );
    }

    pub async fn concurrent_claims_have_one_winner(f: Fixture) {
        for round in 0..12 {
            let session = format!("race-{round}");
            let claims = (0..4).map(|n| {
                let store = if n % 2 == 0 { f.store.clone() } else { f.other.clone() };
                let session = session.clone();
                tokio::spawn(async move { store.claim(&session, &format!("w{n}"), Duration::from_secs(60)).await })
            });
            let outcomes: Vec<Claim> = futures::future::join_all(claims)
                .await
                .into_iter()
                .map(|joined| joined.unwrap().unwrap())
                .collect();
            let granted: Vec<&Claim> = outcomes
                .iter()
                .filter(|claim| matches!(claim, Claim::Granted(_)))
                .collect();
            assert_eq!(granted.len(), 1, "round {round}: {outcomes:?}");
        }
    }

    pub async fn an_expired_lease_is_taken_over_and_its_holder_refused(f: Fixture) {
        let Claim::Granted(dead) = f.store.claim("s1", "dead", Duration::from_millis(1000)).await.unwrap() else {
            panic!("granted");
        };
        f.store.save(&record("s1", None), &[], &dead).await.unwrap();
        assert!(matches!(
            f.other.claim("s1", "next", Duration::from_secs(60)).await.unwrap(),
            Claim::Held { .. }
        ));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(
            f.other.lease_state("s1").await.unwrap().map(|state| state.live),
            Some(false)
        );
        // Expired: its holder can neither renew nor write, even before anyone claims.
        assert!(!f.store.renew(&dead, Duration::from_secs(60)).await.unwrap());
        lost(
            f.store
                .effect_started(&dead, "c1", "rm", &Map::new(), "destructive")
                .await
                .unwrap_err(),
        );
        let Claim::Granted(next) = f.other.claim("s1", "next", Duration::from_secs(60)).await.unwrap() else {
            panic!("an expired lease is taken over");
        };
        assert_eq!(next.token, dead.token + 1, "one claim in between");
        lost(
            f.store
                .save(&record("s1", Some(json!({}))), &[], &dead)
                .await
                .unwrap_err(),
        );
        assert_eq!(f.other.load("s1").await.unwrap().unwrap().0, record("s1", None));
    }

    pub async fn a_call_saved_as_outcome_unknown_is_unknown_in_the_ledger(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        f.store
            .effect_started(&l, "c1", "rm", &Map::new(), "destructive")
            .await
            .unwrap();
        f.store
            .effect_started(&l, "c2", "mv", &Map::new(), "destructive")
            .await
            .unwrap();
        let calls = vec![pending("c1", "rm", json!({}), PendingReason::OutcomeUnknown, None)];
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
        assert_eq!(f.other.effect("s1", "c1").await.unwrap(), Some(Effect::Unknown));
        assert_eq!(f.other.effect("s1", "c2").await.unwrap(), Some(Effect::Started));
        let open: Vec<String> = f
            .other
            .open_effects("s1")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.tool_call_id)
            .collect();
        assert_eq!(open, ["c2"]);
        // Approved and run again: started again, then finished.
        f.store
            .effect_started(&l, "c1", "rm", &Map::new(), "destructive")
            .await
            .unwrap();
        assert_eq!(f.other.effect("s1", "c1").await.unwrap(), Some(Effect::Started));
        f.store
            .effect_finished(&l, "c1", &ToolResult::new("done", false))
            .await
            .unwrap();
        assert_eq!(
            f.other.effect("s1", "c1").await.unwrap(),
            Some(Effect::Finished(ToolResult::new("done", false)))
        );
    }

    pub async fn save_and_load_round_trip(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
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
                    token: Some("t".repeat(64)),
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
        f.store.save(&saved, &calls, &l).await.unwrap();

        let (loaded, loaded_calls) = f.other.load("s1").await.unwrap().expect("saved session");
        assert_eq!(loaded, saved);
        assert_eq!(loaded_calls, calls);
        assert!(matches!(loaded.messages[2], Message::Tool { is_error: true, .. }));
        // The reloaded input still has the fingerprint the call paused with.
        assert_eq!(fingerprint("rm", &loaded_calls[0].input), calls[0].fingerprint);
        assert!(f.store.load("s2").await.unwrap().is_none());
    }

    pub async fn the_sub_agents_at_work_are_replaced_alone_cleared_by_a_save_and_fenced(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let saved = record("s1", None);
        f.store.save(&saved, &[], &l).await.unwrap();
        let running = json!([{ "chain": ["task-1"], "turns": 1, "ratio": 0.1 }]);
        f.store.save_running("s1", &running, &l).await.unwrap();
        f.store
            .save_running("s1", &json!([{ "chain": ["task-1"], "turns": 2 }]), &l)
            .await
            .unwrap();
        let (loaded, _) = f.other.load("s1").await.unwrap().expect("saved session");
        // Only `running` changed, to the last value written.
        assert_eq!(loaded.messages, saved.messages);
        assert_eq!(loaded.running, Some(json!([{ "chain": ["task-1"], "turns": 2 }])));
        // The session's own save clears it.
        f.store.save(&saved, &[], &l).await.unwrap();
        assert_eq!(f.other.load("s1").await.unwrap().unwrap().0.running, None);
        // Fenced like every write of run state.
        f.store.release(&l).await.unwrap();
        lost(f.store.save_running("s1", &running, &l).await.unwrap_err());
        assert_eq!(f.other.load("s1").await.unwrap().unwrap().0.running, None);
    }

    pub async fn save_replaces_pending_calls_wholesale(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let calls = vec![
            pending("a", "t", json!({}), PendingReason::Ask, None),
            pending("b", "t", json!({}), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
        let mut later = record("s1", None);
        later.messages.truncate(1);
        let kept = vec![
            pending("c", "t", json!({ "x": 1 }), PendingReason::Ask, None),
            calls[1].clone(),
        ];
        f.store.save(&later, &kept, &l).await.unwrap();
        let (loaded, loaded_calls) = f.other.load("s1").await.unwrap().unwrap();
        assert_eq!(loaded, later);
        assert_eq!(loaded_calls, kept, "in saved order, the old set gone");
        f.store.save(&later, &[], &l).await.unwrap();
        assert!(f.other.load("s1").await.unwrap().unwrap().1.is_empty());
    }

    pub async fn decide_is_conditional(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let calls = vec![
            pending("c1", "rm", json!({ "path": "a" }), PendingReason::Ask, None),
            pending("c2", "rm", json!({ "path": "b" }), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
        let approve = Decision::Approve {
            updated_input: Some(object(json!({ "path": "a2" }))),
            token: None,
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
        let l = claim(&*f.store, "s1").await;
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
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
                true => Decision::Approve {
                    updated_input: None,
                    token: None,
                },
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

    /// `save_and_release`: the record, its pending calls (a deferred one's placeholder, an
    /// `outcome_unknown` one's ledger entry marked) and the release land together; a lost lease
    /// writes nothing and leaves its new holder's claim alone.
    pub async fn the_last_save_releases_the_lease_in_the_same_write(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        f.store
            .effect_started(&l, "c3", "deploy", &Map::new(), "non_idempotent")
            .await
            .unwrap();
        let calls = vec![
            pending("c2", "rm", json!({ "path": "/tmp/x" }), PendingReason::Ask, None),
            pending("c3", "deploy", json!({}), PendingReason::OutcomeUnknown, None),
            pending("c4", "mail", json!({}), PendingReason::Deferred, None),
        ];
        let saved = record("s1", Some(json!({ "operationId": "op_1" })));
        f.store.save_and_release(&saved, &calls, &l).await.unwrap();
        assert_eq!(f.other.load("s1").await.unwrap(), Some((saved.clone(), calls.clone())));
        // Released (the memory store forgets a released lease).
        let state = f.other.lease_state("s1").await.unwrap();
        assert!(state.is_none_or(|state| !state.live), "{state:?}");
        assert_eq!(f.other.effect("s1", "c3").await.unwrap(), Some(Effect::Unknown));
        assert_eq!(f.other.deferred("s1", "c4").await.unwrap(), Some(Deferred::Waiting));
        // Released: the next claim is granted at once, and the old lease writes nothing more.
        let next = claim(&*f.other, "s1").await;
        assert_eq!(next.token, l.token + 1);
        let error = f
            .store
            .save_and_release(&record("s1", None), &[], &l)
            .await
            .unwrap_err();
        assert_eq!(error.kind, StoreErrorKind::LeaseLost, "{error}");
        assert_eq!(f.other.load("s1").await.unwrap(), Some((saved, calls)));
        assert_eq!(
            f.other.lease_state("s1").await.unwrap(),
            Some(LeaseState {
                token: next.token,
                live: true
            })
        );
    }

    /// `save_and_start`: the turn and its call's start land together (the pending calls cleared,
    /// as a turn boundary clears them); a lost lease writes neither.
    pub async fn a_turn_and_its_first_call_start_are_kept_together(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let paused = vec![pending("c9", "rm", json!({}), PendingReason::Ask, None)];
        f.store.save(&record("s1", Some(json!({}))), &paused, &l).await.unwrap();
        let turn = record("s1", None);
        let input = object(json!({ "path": "/tmp/x" }));
        f.store
            .save_and_start(&turn, &l, ("c2", "rm", &input), "destructive")
            .await
            .unwrap();
        assert_eq!(f.other.load("s1").await.unwrap(), Some((turn.clone(), vec![])));
        assert_eq!(f.other.effect("s1", "c2").await.unwrap(), Some(Effect::Started));
        let open = f.other.open_effects("s1").await.unwrap();
        assert_eq!(
            open.iter()
                .map(|e| (e.tool_call_id.as_str(), e.side_effect.as_str()))
                .collect::<Vec<_>>(),
            [("c2", "destructive")]
        );
        // Taken over: neither the next turn nor its call's start is written.
        f.store.release(&l).await.unwrap();
        let next = claim(&*f.other, "s1").await;
        let mut later = turn.clone();
        later.messages.truncate(1);
        let error = f
            .store
            .save_and_start(&later, &l, ("c3", "ls", &Map::new()), "pure")
            .await
            .unwrap_err();
        assert_eq!(error.kind, StoreErrorKind::LeaseLost, "{error}");
        assert_eq!(f.other.load("s1").await.unwrap(), Some((turn, vec![])));
        assert_eq!(f.other.effect("s1", "c3").await.unwrap(), None);
        f.other.release(&next).await.unwrap();
    }

    /// `load_with_lease`: nothing for a session never saved; else the record, its pending calls
    /// in saved order, its last claim as `lease_state` tells it, and the ledger entries of its
    /// pending calls (not of other calls).
    pub async fn a_session_is_read_with_its_lease(f: Fixture) {
        assert_eq!(f.store.load_with_lease("s1").await.unwrap(), None);
        let l = claim(&*f.store, "s1").await;
        assert_eq!(f.store.load_with_lease("s1").await.unwrap(), None);
        let calls = vec![
            pending("c9", "rm", json!({}), PendingReason::Ask, None),
            pending(
                "c1",
                "ls",
                json!({}),
                PendingReason::Ask,
                Some(Decision::Approve {
                    updated_input: None,
                    token: None,
                }),
            ),
        ];
        let saved = record("s1", Some(json!({})));
        f.store.save(&saved, &calls, &l).await.unwrap();
        // c1 ran before (its result is known), c5 is no pending call: only c1's entry is read.
        for id in ["c1", "c5"] {
            f.store.effect_started(&l, id, "ls", &Map::new(), "pure").await.unwrap();
            f.store
                .effect_finished(&l, id, &ToolResult::new("listed", false))
                .await
                .unwrap();
        }
        let live = Some(LeaseState {
            token: l.token,
            live: true,
        });
        assert_eq!(
            f.other.load_with_lease("s1").await.unwrap(),
            Some(Loaded {
                record: saved.clone(),
                pending: calls,
                lease: live,
                pending_effects: vec![("c1".to_string(), Effect::Finished(ToolResult::new("listed", false)))],
            })
        );
        f.store.save(&record("s1", None), &[], &l).await.unwrap();
        f.store.release(&l).await.unwrap();
        // As `lease_state` tells it (the memory store forgets a released lease).
        let released = f.other.lease_state("s1").await.unwrap();
        assert!(released.is_none_or(|state| !state.live), "{released:?}");
        assert_eq!(
            f.other.load_with_lease("s1").await.unwrap(),
            Some(Loaded {
                record: record("s1", None),
                pending: vec![],
                lease: released,
                pending_effects: vec![],
            })
        );
    }

    /// `effects`: every asked call that was ever started, as `effect` tells it; none asked, none
    /// given.
    pub async fn the_ledger_is_read_for_many_calls_at_once(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        for id in ["c1", "c2"] {
            f.store
                .effect_started(&l, id, "rm", &Map::new(), "destructive")
                .await
                .unwrap();
        }
        f.store
            .effect_finished(&l, "c2", &ToolResult::new("gone\0", true))
            .await
            .unwrap();
        let asked: Vec<String> = ["c1", "c2", "c3"].map(String::from).to_vec();
        let mut found = f.other.effects("s1", &asked).await.unwrap();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            found,
            vec![
                ("c1".to_string(), Effect::Started),
                ("c2".to_string(), Effect::Finished(ToolResult::new("gone\0", true)))
            ]
        );
        assert_eq!(f.other.effects("s1", &[]).await.unwrap(), vec![]);
        assert_eq!(f.other.effects("s2", &asked).await.unwrap(), vec![]);
    }

    pub async fn effects_ledger(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let input = object(json!({ "path": "/tmp/x" }));
        assert_eq!(f.store.effect("s1", "c1").await.unwrap(), None);
        f.store
            .effect_started(&l, "c1", "rm", &input, "destructive")
            .await
            .unwrap();
        f.store
            .effect_started(&l, "c2", "ls", &Map::new(), "pure")
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
            .effect_finished(&l, "c1", &ToolResult::new("removed", false))
            .await
            .unwrap();
        f.store
            .effect_finished(&l, "c2", &ToolResult::new("boom", true))
            .await
            .unwrap();
        assert!(f.other.open_effects("s1").await.unwrap().is_empty());
        assert_eq!(
            f.other.effect("s1", "c2").await.unwrap(),
            Some(Effect::Finished(ToolResult::new("boom", true)))
        );

        // Starting again (an approved `outcome_unknown` call) opens it again, in its first place.
        f.store
            .effect_started(&l, "c3", "ls", &Map::new(), "pure")
            .await
            .unwrap();
        f.store
            .effect_started(&l, "c1", "rm", &input, "destructive")
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
            .effect_finished(&l, "never", &ToolResult::new("x", false))
            .await
            .unwrap();
        assert_eq!(f.other.effect("s1", "never").await.unwrap(), None);
        assert!(f.other.open_effects("s2").await.unwrap().is_empty());
    }

    pub async fn deferred_result_is_published_once(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let calls = vec![
            pending("d1", "mail", json!({ "to": "a" }), PendingReason::Deferred, None),
            pending("c1", "rm", json!({}), PendingReason::Ask, None),
        ];
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
        f.store
            .effect_started(&l, "d1", "mail", &calls[0].input, "destructive")
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
        f.store.save(&record("s1", None), &[], &l).await.unwrap();
        f.store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
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

    /// Text a tool or a model may produce, U+0000 included (which PostgreSQL text cannot hold:
    /// its store keeps results as JSON strings), goes in and out unchanged.
    pub async fn every_character_round_trips(f: Fixture) {
        let l = claim(&*f.store, "s1").await;
        let odd = "nul \u{0} tab \t quote \" backslash \\ emoji 🦀 bidi \u{202e} end";
        let input = object(json!({ "text": odd, odd: [odd] }));
        let mut saved = record("s1", Some(json!({ "note": odd })));
        saved.messages.push(Message::Tool {
            tool_call_id: "c9".into(),
            content: odd.into(),
            is_error: false,
        });
        let calls = vec![
            pending("d1", "t", Value::Object(input.clone()), PendingReason::Deferred, None),
            pending(
                "c1",
                "t",
                json!({}),
                PendingReason::Ask,
                Some(Decision::Reject {
                    reason: Some(odd.into()),
                    stop: false,
                }),
            ),
        ];
        f.store.save(&saved, &calls, &l).await.unwrap();
        assert_eq!(f.other.load("s1").await.unwrap(), Some((saved, calls)));

        f.store
            .effect_started(&l, "e1", "t", &input, "destructive")
            .await
            .unwrap();
        assert_eq!(f.other.open_effects("s1").await.unwrap()[0].input, input);
        let result = ToolResult::new(odd, true);
        f.store.effect_finished(&l, "e1", &result).await.unwrap();
        assert_eq!(
            f.other.effect("s1", "e1").await.unwrap(),
            Some(Effect::Finished(result.clone()))
        );
        assert_eq!(
            f.store.complete_deferred("s1", "d1", &result).await.unwrap(),
            DeferredOutcome::Published
        );
        assert_eq!(
            f.other.deferred("s1", "d1").await.unwrap(),
            Some(Deferred::Published(result))
        );
    }

    /// Ids of any content and length: kept alike (empty, emoji, 1024 bytes) or refused alike,
    /// before anything is written, naming the id and the rule (U+0000, which PostgreSQL text
    /// cannot hold; over 1024 bytes, which its index cannot).
    pub async fn ids_are_kept_or_refused_by_one_rule_on_every_back_end(f: Fixture) {
        let long = "é".repeat(512);
        for id in ["", "🦀 call ✓", long.as_str()] {
            let l = claim(&*f.store, id).await;
            let call = pending(id, "rm", json!({}), PendingReason::Ask, None);
            f.store
                .save(&record(id, None), std::slice::from_ref(&call), &l)
                .await
                .unwrap();
            assert_eq!(f.other.load(id).await.unwrap(), Some((record(id, None), vec![call])));
            assert!(f
                .other
                .decide(
                    id,
                    id,
                    &Decision::Approve {
                        updated_input: None,
                        token: None
                    }
                )
                .await
                .unwrap());
            f.store
                .effect_started(&l, id, "rm", &Map::new(), "destructive")
                .await
                .unwrap();
            assert_eq!(f.other.effect(id, id).await.unwrap(), Some(Effect::Started));
            let mut row = queued(&format!("q-{}", id.len()), 8);
            (row.session_id, row.hook_id) = (id.to_owned(), id.to_owned());
            f.store.enqueue(&[row], Some(&l)).await.unwrap();
            f.store.release(&l).await.unwrap();
        }
        assert_eq!(f.other.queued().await.unwrap(), 3);

        const RULE: &str = "must be at most 1024 bytes of UTF-8 without U+0000";
        let megabyte = "y".repeat(1 << 20);
        let over = "é".repeat(513);
        let refused = [
            ("call\0x", "the tool call id", "(got U+0000 at byte 4)"),
            (megabyte.as_str(), "the tool call id", "(got 1048576 bytes)"),
            (over.as_str(), "the tool call id", "(got 1026 bytes)"),
        ];
        let l = claim(&*f.store, "s1").await;
        for (id, name, got) in refused {
            let cause = format!("{name} {RULE} {got}");
            let call = pending(id, "rm", json!({}), PendingReason::Ask, None);
            let error = f.store.save(&record("s1", None), &[call], &l).await.unwrap_err();
            assert_eq!(error.to_string(), format!("store: save session s1 failed: {cause}"));
            let error = f
                .store
                .effect_started(&l, id, "rm", &Map::new(), "destructive")
                .await
                .unwrap_err();
            assert_eq!(error.cause, cause);
            let error = f
                .store
                .decide(
                    "s1",
                    id,
                    &Decision::Approve {
                        updated_input: None,
                        token: None,
                    },
                )
                .await
                .unwrap_err();
            assert_eq!(error.cause, cause);
            let as_session = format!("the session id {RULE} {got}");
            let error = f.store.claim(id, "worker", Duration::from_secs(60)).await.unwrap_err();
            assert_eq!(error.cause, as_session);
            assert_eq!(f.store.load(id).await.unwrap_err().cause, as_session);
            let mut row = queued("q-bad", 8);
            row.hook_id = id.to_owned();
            let error = f.store.enqueue(&[row], Some(&l)).await.unwrap_err();
            assert_eq!(error.cause, format!("the hook id {RULE} {got}"));
        }
        // Nothing of it was written.
        assert_eq!(f.other.load("s1").await.unwrap(), None);
        assert_eq!(f.other.open_effects("s1").await.unwrap(), Vec::new());
        assert_eq!(f.other.queued().await.unwrap(), 3);
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
    let l = claim(&*a, &session).await;
    a.save(&record(&session, None), &[], &l).await.unwrap();
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
    let l = claim(&store, "s1").await;
    store.save(&record("s1", None), &[], &l).await.unwrap();
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

/// Migration 0004 on a store that queued one key twice before it: the oldest row of each key
/// stays, and the unique index is made.
#[tokio::test]
async fn the_outbox_key_migration_keeps_the_oldest_row_of_each_key() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let older = dir.path().join("migrations-0003");
    std::fs::create_dir(&older).unwrap();
    for name in ["0001_sessions.sql", "0002_leases.sql", "0003_outbox.sql"] {
        std::fs::copy(Path::new("migrations/sqlite").join(name), older.join(name)).unwrap();
    }
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    let migrator = sqlx::migrate::Migrator::new(older.as_path()).await.unwrap();
    migrator.run(&pool).await.unwrap();
    for (id, key, body) in [("a", "k1", "first"), ("b", "k1", "second"), ("c", "k2", "other")] {
        sqlx::query(
            "INSERT INTO outbox (id, session_id, hook_id, event, idempotency_key, target, body, max_attempts, \
             claim_ms, critical, status, available_at, created_at) \
             VALUES (?, 's1', 'h', 'PreToolUse', ?, '{}', ?, 8, 1000, 0, 'queued', 0, 0)",
        )
        .bind(id)
        .bind(key)
        .bind(body)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    let store = SqliteStore::open(&path).await.unwrap();
    store.close().await;
    let pool = raw(&path).await;
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT id, body FROM outbox ORDER BY seq")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            ("a".to_string(), "first".to_string()),
            ("c".to_string(), "other".to_string())
        ]
    );
    let again = sqlx::query(
        "INSERT INTO outbox (id, session_id, hook_id, event, idempotency_key, target, body, max_attempts, \
         claim_ms, critical, status, available_at, created_at) \
         VALUES ('d', 's1', 'h', 'PreToolUse', 'k1', '{}', 'third', 8, 1000, 0, 'queued', 0, 0)",
    )
    .execute(&pool)
    .await;
    assert!(again.is_err(), "the key is unique now");
}

#[tokio::test]
async fn migrations_are_applied_once_and_data_survives_reopening() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = SqliteStore::open(&path).await.unwrap();
    let l = claim(&store, "s1").await;
    store.save(&record("s1", None), &[], &l).await.unwrap();
    store.close().await;
    let again = SqliteStore::open(&path).await.unwrap();
    assert_eq!(again.load("s1").await.unwrap().unwrap().0, record("s1", None));
    let pool = raw(&path).await;
    let applied: Vec<(i64, bool)> = sqlx::query_as("SELECT version, success FROM _sqlx_migrations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(applied, [(1, true), (2, true), (3, true), (4, true), (5, true)]);
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
        let l = claim(&a, "s1").await;
        a.save(&record("s1", None), &[], &l).await.unwrap();
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

/// Session `s1` paused on call `c1`, whose effect started: what the corruption checks spoil.
async fn paused_on_a_started_call(store: &dyn Store) {
    let calls = vec![pending("c1", "rm", json!({}), PendingReason::Ask, None)];
    let l = claim(store, "s1").await;
    store.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
    store
        .effect_started(&l, "c1", "rm", &Map::new(), "destructive")
        .await
        .unwrap();
}

#[tokio::test]
async fn unreadable_rows_are_errors_never_nothing_stored() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = SqliteStore::open(&path).await.unwrap();
    paused_on_a_started_call(&store).await;
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
    let l = claim(&store, "s1").await;
    store
        .save(&record("s1", Some(json!({ "stepIndex": 1 }))), &[], &l)
        .await
        .unwrap();
    let bytes = |suffix: &str| std::fs::read(format!("{}{suffix}", path.display())).unwrap_or_default();
    let written = [bytes(""), bytes("-wal")].concat();
    let contains = |needle: &str| written.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains("Bearer ${AUDIT_TOKEN}"), "the template is stored as given");
    assert!(!contains(SECRET), "the resolved value is not");
}

// ---- What only PostgreSQL has ----

/// A database of one's own on the test server, dropped with it.
mod pg {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::OnceLock;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use sqlx::postgres::PgConnection;
    use sqlx::{AssertSqlSafe, Connection};

    /// The server the PostgreSQL checks use (any database on it: the checks make their own).
    pub fn server_url() -> String {
        std::env::var("ARH_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    /// Whether the server answers; when it does not, says so once, past the harness's capture.
    async fn server() -> Option<PgConnection> {
        static SKIPPED: OnceLock<()> = OnceLock::new();
        let url = server_url();
        let problem = match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(&url)).await {
            Ok(Ok(conn)) => return Some(conn),
            Ok(Err(error)) => error.to_string(),
            Err(_) => "no answer in 5 s".to_string(),
        };
        SKIPPED.get_or_init(|| {
            let _ = writeln!(
                std::io::stderr(),
                "skipping PostgreSQL store tests: no server at {} ({problem}); set ARH_TEST_POSTGRES_URL to test against one",
                agent_runtime_hooks::model::display_url(&url)
            );
        });
        None
    }

    pub struct Database {
        /// The database's URL (the server's, with this database's name).
        pub url: String,
        pub name: String,
    }

    impl Database {
        /// A new, empty database; `None` when no server answers.
        pub async fn create() -> Option<Database> {
            static COUNT: AtomicUsize = AtomicUsize::new(0);
            let mut admin = server().await?;
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
            let name = format!(
                "arh_test_{}_{}_{nanos}",
                std::process::id(),
                COUNT.fetch_add(1, Ordering::Relaxed)
            );
            sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await
                .expect("create a test database");
            let _ = admin.close().await;
            let mut url = reqwest::Url::parse(&server_url()).unwrap();
            url.set_path(&name);
            Some(Database {
                url: url.to_string(),
                name,
            })
        }
    }

    /// Dropped whatever connections still use it (`WITH (FORCE)`), on a thread of its own: a
    /// test's runtime may be ending.
    impl Drop for Database {
        fn drop(&mut self) {
            let name = self.name.clone();
            let dropped = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let mut admin = PgConnection::connect(&server_url()).await?;
                    sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .execute(&mut admin)
                        .await?;
                    admin.close().await
                })
            })
            .join();
            if !matches!(dropped, Ok(Ok(()))) {
                let _ = writeln!(
                    std::io::stderr(),
                    "could not drop test database {}: {dropped:?}",
                    self.name
                );
            }
        }
    }
}

/// PgBouncer in front of the test server, one process per pooling mode, started on first use
/// with an ini of its own in a temporary directory and a free port. `[databases]` sends every
/// database name to the server (`* = host=... port=...`), so a database created there is reached
/// through the bouncer under its name. Settings are PgBouncer's standard ones
/// (`ignore_startup_parameters = extra_float_digits`), with trust auth as on the server.
mod bouncer {
    use std::io::{Read, Write};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    use tempfile::TempDir;

    use super::pg;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Mode {
        Session,
        Transaction,
    }

    impl Mode {
        fn pool_mode(self) -> &'static str {
            match self {
                Mode::Session => "session",
                Mode::Transaction => "transaction",
            }
        }
    }

    pub struct Bouncer {
        pub port: u16,
        mode: Mode,
        _dir: TempDir,
        _watch: Child,
        /// The watch's standard input: closed when this process ends, however it ends, which
        /// stops the bouncer (statics are never dropped, so a `Drop` would not run).
        _alive: ChildStdin,
    }

    impl Bouncer {
        /// The bouncer of `mode`, started on first use; `None` when pgbouncer cannot be found or
        /// started, which is said once on standard error, past the harness's capture.
        pub fn get(mode: Mode) -> Option<&'static Bouncer> {
            static SESSION: OnceLock<Option<Bouncer>> = OnceLock::new();
            static TRANSACTION: OnceLock<Option<Bouncer>> = OnceLock::new();
            let cell = match mode {
                Mode::Session => &SESSION,
                Mode::Transaction => &TRANSACTION,
            };
            cell.get_or_init(|| {
                Bouncer::start(mode)
                    .map_err(|why| {
                        let _ = writeln!(
                            std::io::stderr(),
                            "skipping PgBouncer ({} pooling) store tests: {why}",
                            mode.pool_mode()
                        );
                    })
                    .ok()
            })
            .as_ref()
        }

        /// `database` reached through this bouncer; in transaction pooling with the store's
        /// switch for it.
        pub fn url(&self, database: &pg::Database) -> String {
            let mut url = reqwest::Url::parse(&database.url).unwrap();
            url.set_host(Some("127.0.0.1")).unwrap();
            url.set_port(Some(self.port)).unwrap();
            if self.mode == Mode::Transaction {
                url.set_query(Some("pgbouncer=true"));
            }
            url.to_string()
        }

        /// `database` through this bouncer without the switch, as a user who did not know of it.
        pub fn url_without_switch(&self, database: &pg::Database) -> String {
            let mut url = reqwest::Url::parse(&self.url(database)).unwrap();
            url.set_query(None);
            url.to_string()
        }

        fn start(mode: Mode) -> Result<Bouncer, String> {
            // Debian installs it in /usr/sbin, which a user's PATH may not hold.
            let program = ["pgbouncer", "/usr/sbin/pgbouncer"]
                .into_iter()
                .find(|program| {
                    Command::new(program)
                        .arg("--version")
                        .output()
                        .is_ok_and(|out| out.status.success())
                })
                .ok_or("no pgbouncer on PATH or in /usr/sbin (apt-get install pgbouncer to test through it)")?;
            let server = reqwest::Url::parse(&pg::server_url()).map_err(|e| e.to_string())?;
            let (host, server_port) = (server.host_str().unwrap_or("127.0.0.1"), server.port().unwrap_or(5432));
            let user = match server.username() {
                "" => "postgres",
                user => user,
            };
            let dir = TempDir::new().map_err(|e| e.to_string())?;
            // Readable by the user the bouncer runs as (it refuses to run as root).
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(|e| e.to_string())?
                .port();
            // Transaction pooling gets few server connections, so the store's clients share them.
            let pool_size = match mode {
                Mode::Session => 60,
                Mode::Transaction => 4,
            };
            let ini = format!(
                "[databases]\n* = host={host} port={server_port}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {users}\n\
                 pool_mode = {pool_mode}\nignore_startup_parameters = extra_float_digits\n\
                 max_client_conn = 1000\ndefault_pool_size = {pool_size}\n",
                users = dir.path().join("users.txt").display(),
                pool_mode = mode.pool_mode(),
            );
            let ini_path = dir.path().join("pgbouncer.ini");
            let log_path = dir.path().join("pgbouncer.log");
            for (path, text) in [
                (&ini_path, ini),
                (&dir.path().join("users.txt"), format!("\"{user}\" \"\"\n")),
            ] {
                std::fs::write(path, text).map_err(|e| e.to_string())?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(|e| e.to_string())?;
            }
            let as_root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
            let run_as = if as_root { "-u postgres" } else { "" };
            // A watch: the bouncer runs until the watch's standard input closes.
            let script = format!(
                "{program} {run_as} \"$1\" >>\"$2\" 2>&1 & bouncer=$!; trap 'kill $bouncer 2>/dev/null; wait $bouncer' EXIT; \
                 read -r _; exit 0"
            );
            let mut watch = Command::new("sh")
                .args(["-c", &script, "sh"])
                .arg(&ini_path)
                .arg(&log_path)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run sh: {e}"))?;
            let alive = watch.stdin.take().unwrap();
            let started = Instant::now();
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                if started.elapsed() > Duration::from_secs(5) {
                    let mut log = String::new();
                    let _ = std::fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut log));
                    drop(alive);
                    let _ = watch.wait();
                    return Err(format!(
                        "pgbouncer did not listen on port {port} within 5 s: {}",
                        log.trim()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(Bouncer {
                port,
                mode,
                _dir: dir,
                _watch: watch,
                _alive: alive,
            })
        }
    }
}

/// A raw connection to a test database, as a tool outside the store would open it.
async fn pg_raw(database: &pg::Database) -> sqlx::PgPool {
    sqlx::PgPool::connect(&database.url).await.unwrap()
}

/// Eight stores open the new `database` at `url` at once; each migration ran once and what one
/// store saves another reads. Returns a plain pool on the database.
async fn eight_first_opens(database: &pg::Database, url: &str) -> sqlx::PgPool {
    let opens = futures::future::join_all((0..8).map(|_| {
        let url = url.to_string();
        tokio::spawn(async move { PostgresStore::open(&url).await })
    }))
    .await;
    let stores: Vec<_> = opens.into_iter().map(|open| open.unwrap().expect("opened")).collect();
    let l = claim(&stores[0], "s1").await;
    stores[0].save(&record("s1", None), &[], &l).await.unwrap();
    assert!(stores[7].load("s1").await.unwrap().is_some());
    let raw = pg_raw(database).await;
    let applied: Vec<(i64, bool)> = sqlx::query_as("SELECT version, success FROM agent_runtime_hooks._sqlx_migrations")
        .fetch_all(&raw)
        .await
        .unwrap();
    assert_eq!(applied, [(1, true), (2, true), (3, true), (4, true), (5, true)]);
    raw
}

#[tokio::test]
async fn a_bad_postgres_url_or_server_is_an_error_naming_the_operation_without_secrets() {
    const SECRET: &str = "pw-918273645";
    let cases = [
        // Nothing listens on port 1: refused at once.
        (
            format!("postgres://app:{SECRET}@127.0.0.1:1/agents?password={SECRET}"),
            "open postgres store postgres://127.0.0.1:1/agents",
            "refused",
        ),
        (
            format!("postgres://app:{SECRET}@127.0.0.1:99999/agents"),
            "open postgres store postgres://127.0.0.1:99999/agents",
            "invalid port number",
        ),
        (
            format!("postgres://app:{SECRET}@127.0.0.1/agents?sslmode={SECRET}"),
            "open postgres store postgres://127.0.0.1/agents",
            "unknown value \"***\" for `ssl_mode`",
        ),
    ];
    for (url, operation, cause) in cases {
        let error = store::open(&StoreConfig::Postgres(url.clone()))
            .await
            .err()
            .expect("cannot open");
        assert_names(&error, operation, cause);
        assert!(!error.to_string().contains(SECRET), "{error}");
    }
}

#[tokio::test]
async fn an_unknown_database_is_an_error_naming_it_not_an_empty_store() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let mut url = reqwest::Url::parse(&database.url).unwrap();
    url.set_path("arh_no_such_database");
    let _ = url.set_password(Some("pw-918273645"));
    let error = PostgresStore::open(url.as_str()).await.err().expect("no such database");
    assert_names(
        &error,
        "open postgres store postgres://127.0.0.1",
        "arh_no_such_database",
    );
    assert!(!error.to_string().contains("pw-918273645"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_opens_migrate_once() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    // Eight pools (as eight processes would) open a new database at once.
    let raw = eight_first_opens(&database, &database.url).await;
    // The store keeps to its own schema: the application's `public` has nothing of it.
    let public: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        .fetch_one(&raw)
        .await
        .unwrap();
    assert_eq!(public, 0);
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_version_is_refused_by_postgres() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    PostgresStore::open(&database.url).await.unwrap().close().await;
    sqlx::query(
        "INSERT INTO agent_runtime_hooks._sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', true, '\\x00', 0)",
    )
    .execute(&pg_raw(&database).await)
    .await
    .unwrap();
    let error = PostgresStore::open(&database.url).await.err().expect("refused");
    assert_names(&error, "open postgres store", "9999");
}

#[tokio::test]
async fn one_pool_per_url_within_a_process() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let config = StoreConfig::Postgres(database.url.clone());
    let a = store::open(&config).await.unwrap();
    let b = store::open(&config).await.unwrap();
    assert!(std::ptr::eq(Arc::as_ptr(&a) as *const (), Arc::as_ptr(&b) as *const ()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_decisions_at_once_over_two_pools_have_one_winner_each() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let a: Arc<dyn Store> = Arc::new(PostgresStore::open(&database.url).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::open(&database.url).await.unwrap());
    let ids: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    let calls: Vec<PendingCall> = ids
        .iter()
        .map(|id| pending(id, "t", json!({}), PendingReason::Ask, None))
        .collect();
    let l = claim(&*a, "s1").await;
    a.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
    // Every decision of every call at once: three deciders a call, over both pools.
    let decisions = futures::future::join_all(ids.iter().flat_map(|id| {
        [(a.clone(), 0), (b.clone(), 1), (a.clone(), 2)].map(|(store, who)| {
            let id = id.clone();
            tokio::spawn(async move {
                let decision = Decision::Reject {
                    reason: Some(format!("decider {who}")),
                    stop: false,
                };
                (id.clone(), who, store.decide("s1", &id, &decision).await.unwrap())
            })
        })
    }))
    .await;
    let (_, loaded) = b.load("s1").await.unwrap().unwrap();
    for call in loaded {
        let winners: Vec<usize> = decisions
            .iter()
            .map(|joined| joined.as_ref().unwrap())
            .filter(|(id, _, won)| *id == call.tool_call_id && *won)
            .map(|(_, who, _)| *who)
            .collect();
        assert_eq!(winners.len(), 1, "{}: one winner, got {winners:?}", call.tool_call_id);
        assert_eq!(
            call.decision,
            Some(Decision::Reject {
                reason: Some(format!("decider {}", winners[0])),
                stop: false
            }),
            "the winner's decision is the one stored"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_waiting_on_a_save_of_the_same_call_sees_the_saved_call() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let a: Arc<dyn Store> = Arc::new(PostgresStore::open(&database.url).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::open(&database.url).await.unwrap());
    let calls = vec![pending("c1", "t", json!({}), PendingReason::Ask, None)];
    let l = claim(&*a, "s1").await;
    a.save(&record("s1", Some(json!({}))), &calls, &l).await.unwrap();
    // Another transaction holds the call's row, so the save that comes next waits on it, and the
    // decision that comes after the save waits behind it.
    let raw = pg_raw(&database).await;
    let mut holder = raw.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM agent_runtime_hooks.pending_calls WHERE tool_call_id = 'c1' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let save = tokio::spawn({
        let (a, calls) = (a.clone(), calls.clone());
        async move {
            a.save(&record("s1", Some(json!({ "again": true }))), &calls, &l)
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let decide = tokio::spawn(async move {
        b.decide(
            "s1",
            "c1",
            &Decision::Approve {
                updated_input: None,
                token: None,
            },
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.rollback().await.unwrap();
    save.await.unwrap();
    // The save upserted the call in place: the decision finds it pending (a save that deleted
    // and reinserted the row would leave the decision looking at a deleted row: "not pending").
    assert!(decide.await.unwrap().unwrap(), "the saved call was pending");
    let (record, loaded) = a.load("s1").await.unwrap().unwrap();
    assert_eq!(record.paused, Some(json!({ "again": true })));
    assert_eq!(
        loaded[0].decision,
        Some(Decision::Approve {
            updated_input: None,
            token: None
        })
    );
}

#[tokio::test]
async fn connections_use_tls_with_rustls_when_the_server_offers_it() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let raw = pg_raw(&database).await;
    let ssl: String = sqlx::query_scalar("SHOW ssl").fetch_one(&raw).await.unwrap();
    if ssl != "on" {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the test PostgreSQL server has ssl off: TLS not checked\n",
        );
        return;
    }
    let store = PostgresStore::open(&format!("{}?sslmode=require", database.url))
        .await
        .unwrap();
    let l = claim(&store, "s1").await;
    store.save(&record("s1", None), &[], &l).await.unwrap();
    // The server's view of every connection of this database from the store: TLS, all of them.
    let tls: Vec<(bool, Option<String>)> = sqlx::query_as(
        "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = current_database() AND a.application_name = 'agent-runtime-hooks'",
    )
    .fetch_all(&raw)
    .await
    .unwrap();
    assert!(!tls.is_empty());
    assert!(
        tls.iter()
            .all(|(ssl, version)| *ssl && version.as_deref().is_some_and(|v| v.starts_with("TLS"))),
        "{tls:?}"
    );
    // verify-full checks the certificate: the server's self-signed one is refused.
    let error = PostgresStore::open(&format!("{}?sslmode=verify-full", database.url))
        .await
        .err()
        .expect("an unverifiable certificate is refused");
    assert_names(&error, "open postgres store", "");
}

#[tokio::test]
async fn unreadable_postgres_rows_are_errors_never_nothing_stored() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let store = PostgresStore::open(&database.url).await.unwrap();
    paused_on_a_started_call(&store).await;
    let raw = pg_raw(&database).await;
    let corrupt = |sql: &'static str| {
        let raw = raw.clone();
        async move { sqlx::query(sql).execute(&raw).await.unwrap() }
    };
    corrupt("UPDATE agent_runtime_hooks.pending_calls SET decision = '{\"action\":\"maybe\"}'").await;
    let error = store.load("s1").await.unwrap_err();
    assert_names(&error, "load session s1", "stored decision is unreadable");

    corrupt("UPDATE agent_runtime_hooks.effects SET status = 'finished', output = 'not json', is_error = false").await;
    let error = store.effect("s1", "c1").await.unwrap_err();
    assert_names(
        &error,
        "read effect of call c1 of session s1",
        "stored output is unreadable",
    );
}

#[tokio::test]
async fn only_what_is_given_is_written_to_postgres() {
    const SECRET: &str = "sk-live-4f2a-marker-never-stored";
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let store = PostgresStore::open(&database.url).await.unwrap();
    let l = claim(&store, "s1").await;
    store
        .save(&record("s1", Some(json!({ "stepIndex": 1 }))), &[], &l)
        .await
        .unwrap();
    let hooks: String = sqlx::query_scalar("SELECT hooks FROM agent_runtime_hooks.sessions")
        .fetch_one(&pg_raw(&database).await)
        .await
        .unwrap();
    assert!(
        hooks.contains("Bearer ${AUDIT_TOKEN}"),
        "the template is stored as given"
    );
    assert!(!hooks.contains(SECRET));
}

/// A file whose write lock another connection holds (`BEGIN IMMEDIATE`, as another process
/// writing): opening the store waits for it up to the busy timeout (5 s), as a write does —
/// served once the lock is let go, refused only after about 5 s, not at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_a_write_locked_file_waits_the_busy_timeout() {
    {
        // A new file, created and write-locked by another application's connection (rollback
        // journal: the store's switch to WAL needs the lock).
        for hold in [Duration::from_millis(1500), Duration::from_secs(8)] {
            let dir = TempDir::new().unwrap();
            let path = db_path(&dir);
            let holder = SqlitePool::connect_with(
                sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true),
            )
            .await
            .unwrap();
            let mut conn = holder.acquire().await.unwrap();
            sqlx::raw_sql(
                "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS other_app (x INTEGER); INSERT INTO other_app VALUES (1)",
            )
            .execute(&mut *conn)
            .await
            .unwrap();
            let started = std::time::Instant::now();
            let let_go = tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                sqlx::raw_sql("COMMIT").execute(&mut *conn).await.unwrap();
                drop(conn);
                holder.close().await;
            });
            let opened = SqliteStore::open(&path).await;
            let took = started.elapsed();
            let case = format!("lock held {hold:?}, open took {took:?}");
            if hold < store::DEADLINE / 3 {
                let store = opened.unwrap_or_else(|e| panic!("{case}: {e}"));
                assert!(took >= hold - Duration::from_millis(100), "{case}");
                store.close().await;
            } else {
                let error = opened.err().unwrap_or_else(|| panic!("{case}: opened"));
                assert!(error.cause.contains("database is locked"), "{case}: {error}");
                assert!(
                    took >= Duration::from_millis(4900) && took < Duration::from_millis(7000),
                    "{case}: {error}"
                );
            }
            let_go.await.unwrap();
        }
    }
}

#[tokio::test]
async fn an_in_memory_sqlite_database_is_refused_naming_what_to_use() {
    let error = SqliteStore::open(Path::new(":memory:")).await.err().expect("refused");
    assert_eq!(
        error.to_string(),
        "store: open sqlite store :memory: failed: the path must be a file path (got \":memory:\"): an in-memory SQLite database (\":memory:\", or its shared-cache form \"file::memory:?cache=shared\") cannot hold the store, which uses several connections; for sessions kept in memory leave advanced.store out"
    );
}

/// A TCP proxy in front of the PostgreSQL server that, once a client sends `trigger`, forwards
/// nothing more either way on any connection, and keeps every socket open: a database that went
/// silent mid-transaction (the server does not learn that the client is gone).
mod silent {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Notify;
    use tokio::task::JoinSet;

    pub struct Proxy {
        pub port: u16,
        pub silenced: Arc<Notify>,
        silent: Arc<AtomicBool>,
        _tasks: JoinSet<()>,
    }

    impl Proxy {
        pub async fn start(server: String, trigger: &'static [u8]) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (silent, silenced) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
            let mut tasks = JoinSet::new();
            let (flag, notify) = (silent.clone(), silenced.clone());
            tasks.spawn(async move {
                let mut pumps = JoinSet::new();
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    let upstream = TcpStream::connect(&server).await.unwrap();
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = upstream.into_split();
                    let (up_flag, up_notify) = (flag.clone(), notify.clone());
                    pumps.spawn(async move {
                        let mut buffer = vec![0u8; 64 * 1024];
                        while let Ok(n) = client_read.read(&mut buffer).await {
                            if n == 0 {
                                break;
                            }
                            let chunk = &buffer[..n];
                            if chunk.windows(trigger.len()).any(|w| w == trigger) {
                                up_flag.store(true, Ordering::SeqCst);
                                up_notify.notify_waiters();
                            }
                            if up_flag.load(Ordering::SeqCst) {
                                continue;
                            }
                            if server_write.write_all(chunk).await.is_err() {
                                break;
                            }
                        }
                        // Silent, not closed: the server keeps the session.
                        std::future::pending::<()>().await;
                        drop(server_write);
                    });
                    let down_flag = flag.clone();
                    pumps.spawn(async move {
                        let mut buffer = vec![0u8; 64 * 1024];
                        while let Ok(n) = server_read.read(&mut buffer).await {
                            if n == 0 {
                                break;
                            }
                            if down_flag.load(Ordering::SeqCst) {
                                continue;
                            }
                            if client_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        std::future::pending::<()>().await;
                        drop(client_write);
                    });
                }
            });
            Proxy {
                port,
                silenced,
                silent,
                _tasks: tasks,
            }
        }

        pub fn is_silent(&self) -> bool {
            self.silent.load(Ordering::SeqCst)
        }
    }
}

/// A fenced write whose connection goes silent as it is sent (every fenced write on PostgreSQL
/// is one statement, its fence a CTE): nothing of it holds the session on the server, so another
/// worker's claim, once the lease has expired, is granted within seconds instead of waiting for
/// a lock; the silent write itself fails at the store's deadline and lands nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_gone_silent_inside_a_fenced_write_holds_no_claim_forever() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let direct = reqwest::Url::parse(&database.url).unwrap();
    let server = format!("{}:{}", direct.host_str().unwrap(), direct.port().unwrap_or(5432));
    // A save's statement, past its fence.
    let proxy = silent::Proxy::start(
        server,
        b", saved AS (INSERT INTO sessions (session_id, messages, hooks, paused, running) SELECT",
    )
    .await;
    let mut through = direct.clone();
    through.set_host(Some("127.0.0.1")).unwrap();
    through.set_port(Some(proxy.port)).unwrap();
    through.set_query(Some("sslmode=disable"));
    let a = PostgresStore::shared(through.as_str()).await.unwrap();
    let b = guarded(PostgresStore::open(&database.url).await.unwrap(), Some(store::DEADLINE));

    let ttl = Duration::from_secs(3);
    let Claim::Granted(lease) = a.claim("s1", "worker-a", ttl).await.unwrap() else {
        panic!("granted")
    };
    let silenced = proxy.silenced.notified();
    let writer = a.clone();
    let save_started = std::time::Instant::now();
    let save = tokio::spawn(async move {
        let call = pending("c1", "rm", json!({}), PendingReason::Ask, None);
        let saved = writer.save(&record("s1", None), &[call], &lease).await;
        (saved, save_started.elapsed())
    });
    // Bounded: a save whose statement no longer reads as the trigger fails here, not hangs.
    tokio::time::timeout(Duration::from_secs(20), silenced)
        .await
        .expect("the save sent the statement the proxy silences");
    assert!(proxy.is_silent());
    // The lease expires (no renewal reaches the server), then another worker claims.
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let asked = std::time::Instant::now();
    let claimed = tokio::time::timeout(
        Duration::from_secs(20),
        b.claim("s1", "worker-b", Duration::from_secs(30)),
    )
    .await
    .expect("the claim of another worker answers");
    let waited = asked.elapsed();
    assert!(
        matches!(claimed, Ok(Claim::Granted(ref l)) if l.token == 2),
        "{claimed:?}"
    );
    assert!(waited < Duration::from_secs(5), "the claim waited {waited:?}");

    let (saved, took) = tokio::time::timeout(Duration::from_secs(30), save)
        .await
        .expect("the save ends")
        .unwrap();
    let error = saved.unwrap_err();
    assert_eq!(
        error.to_string(),
        "store: save session s1 failed: the store did not answer within 15000 ms"
    );
    assert!(
        took >= store::DEADLINE && took < store::DEADLINE + Duration::from_secs(2),
        "{took:?}"
    );
    // Nothing of the silent write landed.
    assert_eq!(b.load("s1").await.unwrap(), None);
}

// ---- Through PgBouncer ----

/// Behind PgBouncer's session pooling a URL asking for a startup parameter the pooler does not
/// keep track of (`options`) is refused by it: the error says so and what to do, with the URL's
/// password masked.
#[tokio::test]
async fn a_startup_parameter_a_pooler_refuses_is_an_error_naming_the_fix() {
    const SECRET: &str = "pw-918273645";
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let Some(bouncer) = bouncer::Bouncer::get(bouncer::Mode::Session) else {
        return;
    };
    let mut url = reqwest::Url::parse(&bouncer.url(&database)).unwrap();
    let _ = url.set_password(Some(SECRET));
    url.set_query(Some("options=-c%20geqo%3Doff"));
    let error = PostgresStore::open(url.as_str()).await.err().expect("refused");
    assert_names(
        &error,
        "open postgres store postgres://127.0.0.1",
        "unsupported startup parameter: options (a connection pooler refused a startup parameter the URL asks for: \
         leave `options` out of the URL",
    );
    assert!(!error.to_string().contains(SECRET), "{error}");
}

/// Behind PgBouncer's transaction pooling without `pgbouncer=true`, two stores' connections
/// share the one server connection the pooler gives them one after the other: the second to
/// prepare a statement under sqlx's first name finds the first's there, and the error names
/// the switch.
#[tokio::test]
async fn named_statements_behind_a_transaction_pooler_are_an_error_naming_the_switch() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let Some(bouncer) = bouncer::Bouncer::get(bouncer::Mode::Transaction) else {
        return;
    };
    let url = bouncer.url_without_switch(&database);
    // The migrations still run (in one transaction, their statements let go before it ends).
    let a = PostgresStore::open(&url).await.unwrap();
    let b = PostgresStore::open(&url).await.unwrap();
    let mut failed = None;
    for turn in 0..6 {
        let store = if turn % 2 == 0 { &a } else { &b };
        if let Err(error) = store.lease_state("s1").await {
            failed = Some(error);
            break;
        }
    }
    let error = failed.expect("a statement prepared under a name another client's connection used");
    assert_names(&error, "read the lease on session s1", "prepared statement \"sqlx_s_");
    assert!(
        error.cause.ends_with(
            "(the URL leads to a connection pooler in transaction mode, which hands each transaction another \
             server connection: add pgbouncer=true to the URL's query)"
        ),
        "{error}"
    );
}

/// Eight pools opening a new database at once through transaction pooling, which has fewer
/// server connections for it than that: the migrations' lock is the transaction's, so it ends
/// with it on whichever server connection took it, and each migration runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_opens_through_a_transaction_pooler_migrate_once() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let Some(bouncer) = bouncer::Bouncer::get(bouncer::Mode::Transaction) else {
        return;
    };
    let raw = eight_first_opens(&database, &bouncer.url(&database)).await;
    // No advisory lock outlived its transaction.
    let locks: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        .fetch_one(&raw)
        .await
        .unwrap();
    assert_eq!(locks, 0);
}

/// A TCP proxy that counts exchanges: each time a client sends after the server has answered
/// (or first), one more, on every connection through it.
mod exchanges {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinSet;

    pub struct Proxy {
        pub port: u16,
        count: Arc<AtomicUsize>,
        _tasks: JoinSet<()>,
    }

    impl Proxy {
        pub async fn start(server: String) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let count = Arc::new(AtomicUsize::new(0));
            let mut tasks = JoinSet::new();
            let counted = count.clone();
            tasks.spawn(async move {
                let mut pumps = JoinSet::new();
                while let Ok((client, _)) = listener.accept().await {
                    let upstream = TcpStream::connect(&server).await.unwrap();
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = upstream.into_split();
                    // Whether the server has answered since the client last sent.
                    let answered = Arc::new(AtomicBool::new(true));
                    let (up_answered, up_count) = (answered.clone(), counted.clone());
                    pumps.spawn(async move {
                        let mut buffer = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = client_read.read(&mut buffer).await {
                            if up_answered.swap(false, Ordering::SeqCst) {
                                up_count.fetch_add(1, Ordering::SeqCst);
                            }
                            if server_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                    pumps.spawn(async move {
                        let mut buffer = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = server_read.read(&mut buffer).await {
                            // Marked before the client can read it, so its next send counts.
                            answered.store(true, Ordering::SeqCst);
                            if client_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            Proxy {
                port,
                count,
                _tasks: tasks,
            }
        }

        /// The exchanges since the last call.
        pub fn take(&self) -> usize {
            self.count.swap(0, Ordering::SeqCst)
        }
    }
}

/// The exchanges (round trips) each kind of operation costs on a warm connection: the same
/// straight to the server and through PgBouncer's session pooling, one a statement; under
/// `pgbouncer=true` each operation is a transaction (one more exchange to begin it, with its
/// settings, and one to commit) and each statement two (prepared unnamed, then run: the pooler
/// keeps both on the transaction's server connection). Besides, the pool checks a connection
/// when it takes it back (one exchange), and when it hands it out only after a second idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operation_costs_the_exchanges_its_statements_need() {
    let Some(database) = pg::Database::create().await else {
        return;
    };
    let direct = reqwest::Url::parse(&database.url).unwrap();
    let server = format!("{}:{}", direct.host_str().unwrap(), direct.port().unwrap_or(5432));
    let mut routes = vec![("direct", server, "")];
    for (route, mode, switch) in [
        ("session", bouncer::Mode::Session, ""),
        ("transaction", bouncer::Mode::Transaction, "&pgbouncer=true"),
    ] {
        let Some(bouncer) = bouncer::Bouncer::get(mode) else {
            return;
        };
        routes.push((route, format!("127.0.0.1:{}", bouncer.port), switch));
    }
    // (operation, statements, exchanges straight or through session pooling, under pgbouncer=true)
    let expected = [
        ("claim", 1, 2, 5),
        // Renewals come seconds apart, each on a connection of its own pool idle since the last:
        // tested as it is handed out.
        ("renew", 1, 3, 6),
        ("save, no pending calls", 1, 2, 5),
        ("effect_started", 1, 2, 5),
        ("save, one pending call", 1, 2, 5),
        ("save and start a call", 1, 2, 5),
        ("load", 2, 5, 7),
        ("load with its lease", 1, 2, 5),
        ("save and release", 1, 2, 5),
        ("release", 1, 2, 5),
    ];
    let mut measured = Vec::new();
    for (route, to, switch) in routes {
        let proxy = exchanges::Proxy::start(to).await;
        let mut url = direct.clone();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(proxy.port)).unwrap();
        url.set_query(Some(&format!("sslmode=disable{switch}")));
        let store = PostgresStore::open(url.as_str()).await.unwrap();
        // The pool takes a connection back after the operation has returned: counted once it has.
        let counted = || async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            proxy.take()
        };
        // The fewest of three rounds: the first connects the pools and prepares the statements
        // (in session pooling they are kept prepared on the connection that ran them).
        let mut fewest = [usize::MAX; 10];
        for round in 0..3 {
            let session = format!("{route}-{round}");
            counted().await;
            let l = claim(&store, &session).await;
            let mut costs = vec![counted().await];
            assert!(store.renew(&l, Duration::from_secs(600)).await.unwrap());
            costs.push(counted().await);
            store.save(&record(&session, None), &[], &l).await.unwrap();
            costs.push(counted().await);
            store
                .effect_started(&l, "c1", "rm", &Map::new(), "non_idempotent")
                .await
                .unwrap();
            costs.push(counted().await);
            let calls = [pending("c2", "rm", json!({}), PendingReason::Ask, None)];
            store
                .save(&record(&session, Some(json!({}))), &calls, &l)
                .await
                .unwrap();
            costs.push(counted().await);
            store
                .save_and_start(&record(&session, None), &l, ("c3", "ls", &Map::new()), "pure")
                .await
                .unwrap();
            costs.push(counted().await);
            store.load(&session).await.unwrap().unwrap();
            costs.push(counted().await);
            store.load_with_lease(&session).await.unwrap().unwrap();
            costs.push(counted().await);
            store.save_and_release(&record(&session, None), &[], &l).await.unwrap();
            costs.push(counted().await);
            store.release(&l).await.unwrap();
            costs.push(counted().await);
            for (fewest, cost) in fewest.iter_mut().zip(costs) {
                *fewest = (*fewest).min(cost);
            }
        }
        store.close().await;
        measured.push((route, fewest));
    }
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "exchanges per operation (claim, renew, save, effect_started, save paused, save and start, load, load with lease, save and release, release): {measured:?}\n"
        )
        .as_bytes(),
    );
    for (route, fewest) in &measured {
        for (cost, (operation, _, session, transaction)) in fewest.iter().zip(expected) {
            let want = if *route == "transaction" { transaction } else { session };
            assert_eq!(*cost, want, "{route}: {operation}: {measured:?}");
        }
    }
}
