//! Runs I/O (model HTTP with SSE parsing, webhook delivery) on the tokio runtime's workers,
//! whatever thread awaits it: a run is polled on the JS thread, and that work must not be.
//! Dropping the returned future cancels the work.

use std::future::Future;

use tokio_util::task::AbortOnDropHandle;

/// Spawns `work` onto the current tokio runtime; dropping the returned future cancels it.
pub fn offload<F>(work: F) -> AbortOnDropHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    AbortOnDropHandle::new(tokio::spawn(work))
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
