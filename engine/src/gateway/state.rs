//! The gateway's durable state: the database, the sequence numbers and the
//! outbox, with a damaged file set aside rather than stopping the gateway.

use std::sync::Arc;

use crate::config::{GatewayConfig, StoreKind};
use crate::store::{Postgres, SeqAllocator, StateDatabase, StateStore, Store, StoreError};
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
    /// Where the leases, alarms, commands and write records live.
    pub db: StateDatabase,
    pub leases: Arc<dyn StateStore>,
}

/// PostgreSQL, when `collector.store` names it: connected, its schema created
/// or migrated.
fn shared_database(config: &GatewayConfig) -> Result<Option<Postgres>, StoreError> {
    let c = &config.collector.store;
    match (c.kind, &c.url) {
        (StoreKind::Postgres, Some(url)) => Ok(Some(Postgres::open(url, c.pool)?)),
        _ => Ok(None),
    }
}

/// Opens the database, the sequence numbers, the outbox and the lease table.
fn open_state(config: &GatewayConfig, shared: Option<&Postgres>) -> Result<State, StateError> {
    let cache_bytes = config.collector.store.cache_mb.saturating_mul(1 << 20);
    let cache = usize::try_from(cache_bytes).unwrap_or(usize::MAX);
    let store = Store::open_with_cache(&config.collector.wal.dir, cache)?;
    let db = match shared {
        Some(postgres) => StateDatabase::Postgres(postgres.clone()),
        None => StateDatabase::Redb(store.clone()),
    };
    let devices = config.devices.iter().filter(|d| d.enabled);
    let seq = SeqAllocator::open(
        &store,
        shared.cloned(),
        devices.map(|d| d.device_id.as_str()),
    )?;
    let outbox = Outbox::open(&config.collector.wal, &store)?;
    let leases = db.leases()?;
    Ok(State {
        store,
        seq: Arc::new(seq),
        outbox,
        db,
        leases,
    })
}

/// Opens the state, setting a damaged file aside and starting afresh (WAL-5
/// of `docs/wal.md`: a damaged file never stops the gateway; it is kept aside).
///
/// # Errors
/// A state that cannot be opened for another reason (another engine holds the
/// file, a newer WAL format), or a damaged file that cannot be moved.
pub(super) fn open(config: &GatewayConfig) -> anyhow::Result<State> {
    // Opened first: a PostgreSQL that refuses is never taken for a damaged file.
    let shared = shared_database(config)?;
    match open_state(config, shared.as_ref()) {
        Ok(state) => Ok(state),
        Err(error) if error.is_damaged() => {
            let aside = Store::set_aside(&config.collector.wal.dir)?;
            tracing::error!(
                %error,
                aside = %aside.display(),
                "the database was damaged and has been set aside; starting with an empty one"
            );
            Ok(open_state(config, shared.as_ref())?)
        }
        Err(error) => Err(error.into()),
    }
}
