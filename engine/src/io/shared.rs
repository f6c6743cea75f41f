//! A link as the channels using it hold it: the link under a lock (requests of the
//! devices sharing it are serialised) and its status beside the lock, so that a
//! reader of its state never waits for a round and never misses a busy link.

use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard, TryLockError};

use super::link::{Link, LinkState, LinkStatus};

#[derive(Debug)]
pub struct SharedLink {
    status: Arc<LinkStatus>,
    link: Mutex<Link>,
}

impl SharedLink {
    pub fn new(link: Link) -> Self {
        Self {
            status: link.status(),
            link: Mutex::new(link),
        }
    }

    /// The link, once the request that holds it (if any) is done.
    pub async fn lock(&self) -> MutexGuard<'_, Link> {
        self.link.lock().await
    }

    /// The link, blocking the thread until nothing holds it (outside the runtime
    /// only).
    pub fn blocking_lock(&self) -> MutexGuard<'_, Link> {
        self.link.blocking_lock()
    }

    /// The link if nothing holds it.
    ///
    /// # Errors
    /// A request holds it.
    pub fn try_lock(&self) -> Result<MutexGuard<'_, Link>, TryLockError> {
        self.link.try_lock()
    }

    /// Its state now, even while a request holds it.
    pub fn state(&self) -> LinkState {
        self.status.state()
    }

    /// Whether it reached FAILED and has not connected since, even while a
    /// request holds it.
    pub fn failing(&self) -> bool {
        self.status.failing()
    }

    /// Successful connects after the first, even while a request holds it.
    pub fn reconnects(&self) -> u64 {
        self.status.reconnects()
    }
}
