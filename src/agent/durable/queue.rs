//! Outbox glue: a run's queued webhook notifications go to its store's outbox under its claim,
//! others unfenced; `drainOutbox` tries every queued one once now.

use std::sync::Arc;

use super::{on_workers, Durable};
use crate::error::Result;
use crate::offload::offload;
use crate::store::delivery;
use crate::store::outbox::{Enqueue, Queued};
use crate::store::{self, Lease, Store, StoreConfig, StoreError};
use crate::sync::lock;

/// A run's queued notifications go to its store's outbox under its claim (a run that lost the
/// session queues nothing); outside a run (SessionStart, SessionEnd), unfenced. This process's
/// deliverer is told at once.
#[async_trait::async_trait]
impl Enqueue for Durable {
    async fn enqueue(&self, rows: Vec<Queued>) -> std::result::Result<(), StoreError> {
        let store = self
            .store()
            .await
            .map_err(|error| StoreError::new("open the store", error.message))?;
        let lease = lock(&self.lease).clone();
        let deliverer = self.deliverer.get().cloned();
        queue_rows(store, rows, lease, deliverer).await
    }
}

/// Writes `rows` to `store`'s outbox on the tokio workers (fenced by `lease` when given), then
/// tells this process's deliverer (`deliverer`, or the store's, looked up).
async fn queue_rows(
    store: Arc<dyn Store>,
    rows: Vec<Queued>,
    lease: Option<Lease>,
    deliverer: Option<Arc<delivery::Deliverer>>,
) -> std::result::Result<(), StoreError> {
    let queue = store.clone();
    match offload(async move { queue.enqueue(&rows, lease.as_ref()).await }).await {
        Ok(written) => written?,
        Err(error) => return Err(StoreError::new("queue webhook notifications", error)),
    }
    deliverer.unwrap_or_else(|| delivery::attach(&store)).wake();
    Ok(())
}

/// Queues to a store's outbox outside any run (a deferred call's publication).
#[derive(Debug)]
pub struct Unfenced(pub StoreConfig);

#[async_trait::async_trait]
impl Enqueue for Unfenced {
    async fn enqueue(&self, rows: Vec<Queued>) -> std::result::Result<(), StoreError> {
        let config = self.0.clone();
        let store = match offload(async move { store::open(&config).await }).await {
            Ok(opened) => opened?,
            Err(error) => return Err(StoreError::new("open the store", error)),
        };
        queue_rows(store, rows, None, None).await
    }
}

/// `drainOutbox`: every queued notification of `config`'s store tried once now, with the header
/// templates resolved from `environment` (this process's, as the caller read it).
pub async fn drain_outbox(
    config: &StoreConfig,
    environment: &crate::webhook::Environment,
) -> Result<delivery::Drained> {
    let (config, environment) = (config.clone(), environment.clone());
    on_workers("drain the outbox", async move {
        let store = store::open(&config).await?;
        delivery::attach(&store).remember_environment(&environment);
        delivery::drain(&store).await
    })
    .await
}
