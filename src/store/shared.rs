//! One store (one connection pool) per database per process, while any handle to it lives: each
//! `resumeAgent` need not open and migrate again, and the pool goes with the last handle.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use super::StoreError;

/// The stores a process has open, by key (a SQLite file's absolute path, a PostgreSQL URL).
pub(super) struct OpenStores<K, S> {
    open: Mutex<Vec<(K, Weak<S>)>>,
    /// Opens take turns: callers that arrive while a database is being opened (and migrated)
    /// wait for that store instead of opening pools of their own (on SQLite they would contend
    /// for the file's lock: "database is locked").
    opening: tokio::sync::Mutex<()>,
}

impl<K: PartialEq, S> OpenStores<K, S> {
    pub const fn new() -> Self {
        OpenStores {
            open: Mutex::new(Vec::new()),
            opening: tokio::sync::Mutex::const_new(()),
        }
    }

    fn live(&self, key: &K) -> Option<Arc<S>> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, store)| store.upgrade())
    }

    /// The live store for `key`, or the one `open` makes (kept while handles to it live).
    pub async fn get_or_open<F, Fut>(&self, key: K, open: F) -> Result<Arc<S>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<S, StoreError>>,
    {
        if let Some(store) = self.live(&key) {
            return Ok(store);
        }
        let _turn = self.opening.lock().await;
        if let Some(store) = self.live(&key) {
            return Ok(store);
        }
        let store = Arc::new(open().await?);
        let mut map = self.open.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|(_, store)| store.strong_count() > 0);
        map.push((key, Arc::downgrade(&store)));
        Ok(store)
    }
}
