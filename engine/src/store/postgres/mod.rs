//! The shared store on PostgreSQL: a pool of connections (tokio-postgres under
//! deadpool) on a small runtime of its own, the schema created and migrated at
//! open, and the lease table behind [`crate::store::StateStore`]
//! (docs/state.md, "On PostgreSQL").
//!
//! The store interfaces are synchronous (the redb ones block on the disk the
//! same way); each call here hands its query to the store's runtime and waits
//! for the answer, so it works from any thread, async or not.

mod leases;
mod owners;
mod records;
mod schema;
mod seq_blocks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

pub use leases::PgStateStore;
pub use owners::{DeviceOwner, Owned};
pub(crate) use records::{Op, OpAnswer, Transaction};
pub use seq_blocks::GivenBack;

use super::error::{Shared, StoreError, pg};

/// Connections a store keeps open at most, unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An open PostgreSQL store: the pool and the runtime its connections live on.
#[derive(Debug, Clone)]
pub struct Postgres {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Postgres {
    /// Connects to `url` (`postgresql://USER@HOST:PORT/DB`) with at most
    /// `pool_size` connections, and creates or migrates the schema.
    ///
    /// # Errors
    /// A URL that does not parse, a server that cannot be reached, or a schema
    /// newer than this engine knows.
    pub fn open(url: &str, pool_size: usize) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Postgres(Shared::new(e)))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("sluice");
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Postgres(Shared::new(e)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sluice-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Postgres(Shared::new(e)))?;
        let this = Self {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                pool,
            }),
        };
        this.run(schema::migrate)?;
        Ok(this)
    }

    /// Runs `query` on a pooled connection on the store's runtime and waits.
    pub(crate) fn run<R, F>(
        &self,
        query: impl FnOnce(deadpool_postgres::Object) -> F + Send + 'static,
    ) -> Result<R, StoreError>
    where
        F: Future<Output = Result<R, StoreError>> + Send + 'static,
        R: Send + 'static,
    {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.spawn(move |client| async move {
            let _ = answer.send(query(client).await);
        })?;
        answered
            .recv()
            .map_err(|_| StoreError::Postgres(Shared::message("the query was abandoned")))?
    }

    /// Starts `task` on a pooled connection on the store's runtime. A
    /// connection that cannot be had is answered through `task`'s caller: the
    /// task is then not run and its channel closes.
    pub(crate) fn spawn<F>(
        &self,
        task: impl FnOnce(deadpool_postgres::Object) -> F + Send + 'static,
    ) -> Result<(), StoreError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(runtime) = &self.inner.runtime else {
            return Err(StoreError::Postgres(Shared::message("the store is closed")));
        };
        let pool = self.inner.pool.clone();
        let (failure, failed) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            match pool.get().await {
                Ok(client) => {
                    drop(failure);
                    task(client).await;
                }
                Err(deadpool_postgres::PoolError::Backend(error)) => {
                    let _ = failure.send(pg(error));
                }
                Err(error) => {
                    let _ = failure.send(StoreError::Postgres(Shared::new(error)));
                }
            }
        });
        match failed.recv() {
            Ok(error) => Err(error),
            Err(_) => Ok(()),
        }
    }
}
