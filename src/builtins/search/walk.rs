//! What Glob and Grep share: the walker, configured as ripgrep configures its own, and running
//! the search off the async workers.

use std::path::Path;

use ignore::WalkBuilder;
use tokio_util::sync::CancellationToken;

use crate::builtins::Answer;

/// Threads walking (and, for Grep, searching) one folder: the machine's two cores.
const WALK_THREADS: usize = 2;

/// A walk of `root` as `rg` walks it: `.gitignore`, `.ignore` and git's excludes honoured even
/// outside a git repository, hidden entries skipped, symlinks not followed (a link may point out
/// of the roots).
pub(super) fn walker(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .threads(WALK_THREADS)
        .hidden(true)
        .require_git(false)
        .follow_links(false);
    builder
}

/// Runs `work` on a blocking thread. A cancelled call answers `aborted` at once; the work
/// notices the same token and stops soon after.
pub(super) async fn off_the_workers<F>(cancel: &CancellationToken, aborted: &'static str, work: F) -> Answer
where
    F: FnOnce() -> Answer + Send + 'static,
{
    if cancel.is_cancelled() {
        return Answer::error(aborted);
    }
    let task = tokio::task::spawn_blocking(work);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Answer::error(aborted),
        joined = task => match joined {
            Ok(answer) => answer,
            Err(error) => Answer::error(format!("Search failed: {error}")),
        },
    }
}
