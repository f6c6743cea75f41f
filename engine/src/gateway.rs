//! One gateway: its configuration compiled with the components it runs (the
//! built-in ones and those deployed into its data directory), and everything
//! `sluice run` starts, wired together.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use crate::alarm::{self, AlarmStore, Alarms, Delivery};
use crate::api::{self, ApiState, Tokens};
use crate::collector::{Collector, DeviceMetrics, Fleet, SampleSink, Services};
use crate::command::{self, CommandStore, Commands, Timings, WriteService};
use crate::compile::{self, Compiled, Pools, Sources};
use crate::config::{GatewayConfig, Protocol};
use crate::deploy::{Deployer, Shelf};
use crate::lease::{Announce, EntityType, Leases, RedbStateStore};
use crate::model::{CommandAction, CommandStatus, Transitions};
use crate::runtime::{LoadError, Registry, Runtime, RuntimeConfig};
use crate::store::{SeqAllocator, Store, StoreError};
use crate::telemetry::Metrics;
use crate::uplink::Uplink;
use crate::wal::{Outbox, WalError};
use crate::yaml::Diagnostics;

/// Sub-directory of the data directory holding precompiled components.
const COMPONENT_CACHE: &str = "component-cache";

/// What a compile is for: `sluice check` leaves the data directory as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Check,
    Run,
}

/// Why a gateway cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// What the configuration or a component says is wrong, at its positions.
    #[error("{0}")]
    Problems(Diagnostics),
    #[error(transparent)]
    Runtime(#[from] LoadError),
}

/// A gateway compiled and ready to start.
#[derive(Debug)]
pub struct Prepared {
    pub compiled: Compiled,
    pub registry: Arc<Registry>,
    pub shelf: Shelf,
}

/// Compiles the gateway `sources` describe, with the components it would run:
/// the built-in ones and those deployed into its data directory. `sluice check`
/// and `sluice run` both come here, so they refuse the same things in the same words.
///
/// # Errors
/// Every problem of the files or the components, or a runtime that cannot start.
pub fn compile(sources: &Sources, purpose: Purpose) -> Result<Prepared, Refusal> {
    let loaded = sources.load().map_err(Refusal::Problems)?;
    let data_dir = loaded.config.collector.wal.dir.clone();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: (purpose == Purpose::Run).then(|| data_dir.join(COMPONENT_CACHE)),
        ..RuntimeConfig::default()
    })?;
    let registry = Arc::new(Registry::with_builtins(runtime)?);
    // Components deployed while an earlier run was up come back, active as they were.
    let shelf = Shelf::new(&data_dir);
    for problem in shelf.restore(&registry) {
        tracing::error!(%problem, "a deployed component could not be restored");
    }
    let compiled = compile::build(loaded, &registry, &mut Pools::new(), &|_| true)
        .map_err(Refusal::Problems)?;
    Ok(Prepared {
        compiled,
        registry,
        shelf,
    })
}

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

type State = (Store, Arc<SeqAllocator>, Arc<Outbox>);

/// Opens the database, the sequence numbers and the outbox.
fn open_state(config: &GatewayConfig) -> Result<State, StateError> {
    let store = Store::open(&config.collector.wal.dir)?;
    let seq = SeqAllocator::open(&store, config.collector.wal.enabled)?;
    let outbox = Outbox::open(&config.collector.wal, &store)?;
    Ok((store, Arc::new(seq), outbox))
}

/// Where each device's and driver's state changes are announced.
fn announcements(config: &GatewayConfig) -> HashMap<(EntityType, String), Announce> {
    let devices = config.devices.iter().map(|device| {
        (
            (EntityType::Device, device.device_id.clone()),
            Announce::device(&device.product_id, &device.device_num),
        )
    });
    let drivers = Protocol::NAMES.iter().map(|protocol| {
        let driver = protocol.1.codec();
        (
            (EntityType::Driver, driver.to_owned()),
            Announce::device("driver", driver),
        )
    });
    devices.chain(drivers).collect()
}

/// The command service over the collector's devices.
fn commands(
    config: &GatewayConfig,
    store: &Store,
    whitelist: Transitions<CommandStatus, CommandAction>,
    fleet: &Arc<Fleet>,
    uplink: &Uplink,
) -> Arc<Commands> {
    let c = &config.collector.commands;
    let ms = |seconds: u64| i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let timings = Timings {
        lease_ms: ms(c.lease_sec),
        sent_timeout_ms: ms(c.sent_timeout_sec),
        expire_ms: ms(c.expire_sec),
        max_retries: c.max_retries,
        max_reclaims: c.max_reclaims,
        retry_base_ms: i64::try_from(c.retry_base_ms).unwrap_or(i64::MAX),
        retry_max_ms: i64::try_from(c.retry_max_ms).unwrap_or(i64::MAX),
    };
    let command_store = Arc::new(CommandStore::new(store, whitelist, timings));
    let writes = Arc::new(WriteService::new(
        Arc::clone(fleet),
        store,
        c.write_attempts,
    ));
    let node_id = c
        .node_id
        .clone()
        .unwrap_or_else(|| format!("engine-{}", config.collector.mqtt.client_id));
    Commands::new(
        command_store,
        writes,
        Arc::clone(fleet),
        uplink.clone(),
        node_id,
    )
}

/// Runs the compiled gateway until `shutdown` turns true; `sources` are watched
/// and reloaded while it runs.
///
/// # Errors
/// Anything that stops it from starting: an unusable data directory, an HTTP
/// address in use.
pub async fn run(
    prepared: Prepared,
    sources: Sources,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let Prepared {
        mut compiled,
        registry,
        shelf,
    } = prepared;
    let config = compiled.config.clone();
    let data_dir: &Path = &config.collector.wal.dir;
    let (store, seq, outbox) = match open_state(&config) {
        Ok(state) => state,
        Err(error) if error.is_damaged() => {
            // Invariant 5: a damaged file never stops the gateway; it is kept aside.
            let aside = Store::set_aside(data_dir)?;
            tracing::error!(
                %error,
                aside = %aside.display(),
                "the database was damaged and has been set aside; starting with an empty one"
            );
            open_state(&config)?
        }
        Err(error) => return Err(error.into()),
    };
    let alarm_store = AlarmStore::new(&store, compiled.whitelist.alarms.clone());
    let alarms = Alarms::new(
        Arc::new(alarm_store),
        HashMap::new(),
        std::mem::take(&mut compiled.tenants),
    );
    let committer = tokio::spawn(Arc::clone(&outbox).run_committer(shutdown.clone()));
    let (downlink, downlink_messages) = mpsc::unbounded_channel();
    let (uplink, publisher) = Uplink::start(
        &config.collector.mqtt,
        Arc::clone(&outbox),
        Some(downlink),
        shutdown.clone(),
    );
    let (lease_changes, lease_events) = mpsc::unbounded_channel();
    let leases = Leases::new(
        Arc::new(RedbStateStore::new(&store)),
        Duration::from_millis(config.collector.lease.scan_interval_ms),
        announcements(&config),
        uplink.clone(),
        Some(lease_changes),
    );
    let lease_task = tokio::spawn(Arc::clone(&leases).run(shutdown.clone()));
    let alarm_task = tokio::spawn(Arc::clone(&alarms).run(lease_events, shutdown.clone()));
    let delivery = Delivery::new(
        Arc::clone(alarms.store()),
        Arc::new(uplink.clone()),
        alarm::delivery_plan(&config, &uplink),
    );
    let delivery_task = tokio::spawn(delivery.run(Arc::clone(alarms.opened()), shutdown.clone()));
    let command_whitelist = compiled.whitelist.commands.clone();
    let pipelines = compiled.pipelines.clone();
    let mut collector = Collector::new(
        compiled,
        Services {
            uplink: uplink.clone(),
            seq,
            leases: Arc::clone(&leases),
            sink: Some(Arc::clone(&alarms) as Arc<dyn SampleSink>),
            metrics: DeviceMetrics::default(),
        },
    );
    let fleet = Arc::clone(collector.fleet());
    let commands = commands(&config, &store, command_whitelist, &fleet, &uplink);
    let deployer = Arc::new(Deployer::new(
        (
            Arc::clone(&registry),
            Arc::clone(&fleet),
            Some(Arc::clone(&alarms)),
        ),
        (pipelines, sources),
        shelf,
    ));
    let watchdog_task = tokio::spawn(crate::watchdog::watch(
        Arc::clone(&fleet),
        Arc::clone(&alarms),
        shutdown.clone(),
    ));
    let watch_task = tokio::spawn(crate::deploy::watch_sources(
        Arc::clone(&deployer),
        shutdown.clone(),
    ));
    let node_task = tokio::spawn(command::node::run(
        Arc::clone(&commands),
        Arc::clone(alarms.store()),
        config.collector.commands.execute_own,
        downlink_messages,
        shutdown.clone(),
    ));
    tracing::info!(
        devices = fleet.roster().devices().len(),
        connections = fleet.roster().links().len(),
        database = %store.path().display(),
        "collector started"
    );
    let metrics = Arc::new(Metrics::default());
    collector.register_metrics(&metrics);
    outbox.register_metrics(&metrics);
    uplink.stats().register(&metrics);
    alarms.register_metrics(&metrics);
    deployer.register_metrics(&metrics);
    crate::watchdog::register_metrics(&fleet, &alarms, &metrics);
    let api_task = match &config.collector.http {
        Some(http) => {
            let state = ApiState {
                fleet: Arc::clone(&fleet),
                uplink: Arc::clone(uplink.stats()),
                outbox: Arc::clone(&outbox),
                leases: Arc::clone(&leases),
                alarms: Arc::clone(&alarms),
                commands: Arc::clone(&commands),
                deployer: Arc::clone(&deployer),
                metrics,
                tokens: Arc::new(Tokens::of(&config)),
                utc_offset_min: config.collector.alarms.utc_offset_min,
                started: Instant::now(),
            };
            let listener = tokio::net::TcpListener::bind(http.listen)
                .await
                .with_context(|| format!("cannot listen on {}", http.listen))?;
            Some(tokio::spawn(api::serve(listener, state, shutdown.clone())))
        }
        None => None,
    };
    collector.run(shutdown).await;
    // Reports of the last rounds are committed before the process ends (they are
    // published at the next start if the broker does not take them now).
    let _ = lease_task.await;
    let _ = alarm_task.await;
    let _ = delivery_task.await;
    let _ = node_task.await;
    let _ = watch_task.await;
    let _ = watchdog_task.await;
    let _ = committer.await;
    let _ = publisher.await;
    if let Some(task) = api_task {
        let _ = task.await;
    }
    Ok(())
}
