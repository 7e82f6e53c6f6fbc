//! A root run's tree of sub-agents. Each sub-agent runs as a task of its own, polled side by
//! side with the root by the task that drives the root, never inside its parent's poll: nested,
//! every level of the tree added its parent's poll frames to the stack, and a deep tree
//! overflowed it and killed the process. The stack a tree takes is now the same at any depth.
//!
//! The tree also counts its `Task` calls against one budget, `advanced.maxSubagentCalls`, so a
//! model that keeps fanning out cannot grow it without end.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::channel::{mpsc, oneshot};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

type Task = BoxFuture<'static, ()>;

/// What every run of one tree shares: where its sub-agents are started, and its budget.
pub(crate) struct Tree {
    spawn: mpsc::UnboundedSender<Task>,
    started: AtomicU32,
    budget: u32,
}

/// The root's side of a tree: the sub-agents started and not yet ended, polled by
/// [`Nursery::alongside`]. In a `Mutex` only so that the run holding it stays `Sync`.
pub(crate) struct Nursery(Mutex<Parts>);

struct Parts {
    arrivals: mpsc::UnboundedReceiver<Task>,
    running: FuturesUnordered<Task>,
}

impl Tree {
    /// A new tree that may start `budget` sub-agents in all.
    pub fn new(budget: u32) -> (Arc<Tree>, Nursery) {
        let (spawn, arrivals) = mpsc::unbounded();
        let tree = Tree {
            spawn,
            started: AtomicU32::new(0),
            budget,
        };
        let parts = Parts {
            arrivals,
            running: FuturesUnordered::new(),
        };
        (Arc::new(tree), Nursery(Mutex::new(parts)))
    }

    /// Counts one more `Task` call against the budget; `false` (and nothing counted) once it
    /// is spent.
    pub fn claim(&self) -> bool {
        self.started
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |started| {
                (started < self.budget).then_some(started + 1)
            })
            .is_ok()
    }

    /// Runs `child` as a task of the tree, started when the returned future is first polled
    /// and joined by it: its outcome, or `None` when `stop` was cancelled first. From the
    /// moment `stop` is cancelled the child is not polled again, as a nested child was not once
    /// its parent's run let go of it; dropping the returned future cancels `stop`.
    pub fn run<T: Send + 'static>(
        &self,
        child: BoxFuture<'static, T>,
        stop: CancellationToken,
    ) -> impl Future<Output = Option<T>> + Send + 'static {
        let spawn = self.spawn.clone();
        async move {
            let (sender, outcome) = oneshot::channel();
            let stopped = stop.clone().drop_guard();
            let task: Task = Box::pin(async move {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => {}
                    done = child => {
                        let _ = sender.send(done);
                    }
                }
            });
            if let Err(refused) = spawn.unbounded_send(task) {
                // No root drives the tree (it always does while one of its runs works): in place.
                refused.into_inner().await;
            }
            let done = outcome.await.ok();
            if done.is_some() {
                stopped.disarm();
            }
            done
        }
    }
}

impl Nursery {
    /// Drives `root` and every sub-agent of the tree until `root` ends; what is left of the tree
    /// then is dropped.
    pub async fn alongside<T>(self, root: impl Future<Output = T>) -> T {
        let mut parts = self.0.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut root = std::pin::pin!(root);
        std::future::poll_fn(move |context| loop {
            if let Poll::Ready(done) = root.as_mut().poll(context) {
                return Poll::Ready(done);
            }
            // A sub-agent that ended may have woken the root (its parent): look at it again.
            if !parts.poll(context) {
                return Poll::Pending;
            }
        })
        .await
    }
}

impl Parts {
    /// Polls the sub-agents started since the last look and those woken; `true` when one ended.
    fn poll(&mut self, context: &mut Context<'_>) -> bool {
        let mut ended = false;
        self.admit(context);
        loop {
            match self.running.poll_next_unpin(context) {
                Poll::Ready(Some(())) => ended = true,
                // None left, or none ready (or a full round done): unless more were started
                // meanwhile, wait for a wake-up.
                Poll::Ready(None) | Poll::Pending => {
                    if !self.admit(context) {
                        return ended;
                    }
                }
            }
        }
    }

    /// Takes in the sub-agents started since the last look; `true` when there were any.
    fn admit(&mut self, context: &mut Context<'_>) -> bool {
        let mut arrived = false;
        while let Poll::Ready(Some(task)) = self.arrivals.poll_next_unpin(context) {
            self.running.push(task);
            arrived = true;
        }
        arrived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_claims_and_refuses_past_it() {
        let (tree, _nursery) = Tree::new(2);
        assert_eq!(
            [tree.claim(), tree.claim(), tree.claim(), tree.claim()],
            [true, true, false, false]
        );
    }

    #[tokio::test]
    async fn children_run_beside_the_root_and_a_stopped_one_is_not_polled_again() {
        let (tree, nursery) = Tree::new(10);
        let tree_for_root = tree.clone();
        let stop = CancellationToken::new();
        let polled = Arc::new(AtomicU32::new(0));
        let counter = polled.clone();
        let stop_child = stop.clone();
        let outcome = nursery
            .alongside(async move {
                let answered = tree_for_root.run(Box::pin(async { 7 }), CancellationToken::new()).await;
                // A child that never ends, stopped from outside: its join says so.
                let hanging = tree_for_root.run(
                    Box::pin(async move {
                        std::future::poll_fn(|_| {
                            counter.fetch_add(1, Ordering::SeqCst);
                            Poll::<()>::Pending
                        })
                        .await
                    }),
                    stop_child,
                );
                let stopper = async {
                    tokio::task::yield_now().await;
                    stop.cancel();
                };
                let (stopped, ()) = futures::join!(hanging, stopper);
                (answered, stopped)
            })
            .await;
        assert_eq!(outcome, (Some(7), None));
        assert_eq!(polled.load(Ordering::SeqCst), 1);
    }
}
