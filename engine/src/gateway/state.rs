//! The gateway's durable state: the database, the sequence numbers and the
//! outbox, with a damaged file set aside rather than stopping the gateway.

use std::sync::Arc;

use crate::config::GatewayConfig;
use crate::store::{RedbStateStore, SeqAllocator, StateStore, Store, StoreError};
use crate::wal::{Outbox, WalError};

/// Why the durable state could not be opened.
#[derive(Debug, thiserror::Error)]
enum StateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Wal(#[from] WalError),
}

impl StateError {
    /// A damaged file is set aside and the gateway starts afresh; anything else
    /// (a lock held by another engine, a newer WAL format) stops it.
    fn is_damaged(&self) -> bool {
        match self {
            StateError::Store(error) | StateError::Wal(WalError::Store(error)) => {
                error.is_damaged()
            }
            StateError::Wal(_) => false,
        }
    }
}

/// What the gateway keeps on disk, opened.
pub(super) struct State {
    pub store: Store,
    pub seq: Arc<SeqAllocator>,
    pub outbox: Arc<Outbox>,
    pub leases: Arc<dyn StateStore>,
}

/// Opens the database, the sequence numbers, the outbox and the lease table.
fn open_state(config: &GatewayConfig) -> Result<State, StateError> {
    let store = Store::open(&config.collector.wal.dir)?;
    let seq = SeqAllocator::open(&store, config.collector.wal.enabled)?;
    let outbox = Outbox::open(&config.collector.wal, &store)?;
    let leases = Arc::new(RedbStateStore::open(&store)?);
    Ok(State {
        store,
        seq: Arc::new(seq),
        outbox,
        leases,
    })
}

/// Opens the state, setting a damaged file aside and starting afresh (invariant 5
/// of `docs/wal.md`: a damaged file never stops the gateway; it is kept aside).
///
/// # Errors
/// A state that cannot be opened for another reason (another engine holds the
/// file, a newer WAL format), or a damaged file that cannot be moved.
pub(super) fn open(config: &GatewayConfig) -> anyhow::Result<State> {
    match open_state(config) {
        Ok(state) => Ok(state),
        Err(error) if error.is_damaged() => {
            let aside = Store::set_aside(&config.collector.wal.dir)?;
            tracing::error!(
                %error,
                aside = %aside.display(),
                "the database was damaged and has been set aside; starting with an empty one"
            );
            Ok(open_state(config)?)
        }
        Err(error) => Err(error.into()),
    }
}
