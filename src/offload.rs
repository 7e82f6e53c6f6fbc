//! Runs I/O (model HTTP with SSE parsing, webhook delivery) on the tokio runtime's workers,
//! whatever thread awaits it: a run is polled on the JS thread, and that work must not be.
//! Dropping the returned future cancels the work.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::{JoinError, JoinHandle};

/// The spawned work; aborted if dropped before it finished.
pub struct Offloaded<T>(JoinHandle<T>);

impl<T> Future for Offloaded<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(context)
    }
}

impl<T> Drop for Offloaded<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawns `work` onto the current tokio runtime.
pub fn offload<F>(work: F) -> Offloaded<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Offloaded(tokio::spawn(work))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn work_runs_and_dropping_cancels_it() {
        assert_eq!(offload(async { 7 }).await.unwrap(), 7);
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let work = offload(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            flag.store(true, Ordering::SeqCst);
        });
        drop(work);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(!finished.load(Ordering::SeqCst));
    }
}
