//! Everything `sluice run` starts, wired together: the durable state, the
//! uplink, leases, alarms, the collector, commands, deployments and the API,
//! each a task that ends when `shutdown` turns true.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::admin_token::admin_token;
use super::compile::Prepared;
use super::state;
use super::{identity, systemd};
use crate::alarm::{self, AlarmStore, Alarms, Delivery};
use crate::api::{self, AccessTable, AllowedHosts, ApiState, ServerLimits, Tokens};
use crate::collector::{
    Collector, DeviceMetrics, Fleet, FleetBirths, Ownership, SampleSink, Services, keep_ownership,
};
use crate::command::{self, CommandParts, CommandStore, Commands, Timings, WriteService};
use crate::compile::{Compiled, Sources};
use crate::config::GatewayConfig;
use crate::deploy::{Deployer, DeployerParts};
use crate::lease::reported::Owners;
use crate::lease::reported_mqtt::HeartbeatIntake;
use crate::lease::{Announce, EntityKey, Leases, StateStore};
use crate::model::{CommandAction, CommandStatus, Transitions};
use crate::mqtt::Topics;
use crate::store::{SeenRequests, SeqAllocator, StateDatabase};
use crate::telemetry::Metrics;
use crate::tls::ReloadingCertificate;
use crate::uplink::{Downlink, DownlinkGuard, DownlinkRoute, Uplink, UplinkIdentity};
use crate::wal::Outbox;

/// Where each device's and driver's state changes are announced.
fn announcements(config: &GatewayConfig) -> HashMap<EntityKey, Announce> {
    let devices = config.devices.iter().map(|device| {
        (
            EntityKey::device(device.tenant_id, &device.device_id),
            Announce::device(&device.product_id, &device.device_num),
        )
    });
    // The codecs each tenant's devices speak through; those of devices added
    // later are announced as they come (`Fleet`).
    let drivers = config.devices.iter().flat_map(|device| {
        device.channels.iter().map(|channel| {
            let driver = channel.protocol.codec();
            (
                EntityKey::driver(device.tenant_id, driver),
                Announce::driver(device.tenant_id, driver),
            )
        })
    });
    devices.chain(drivers).collect()
}

/// The command service over the collector's devices.
fn commands(
    config: &GatewayConfig,
    node_id: &str,
    db: &StateDatabase,
    whitelist: Transitions<CommandStatus, CommandAction>,
    fleet: &Arc<Fleet>,
    engine: &Engine,
    guard: &Arc<DownlinkGuard>,
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
    let command_store = Arc::new(CommandStore::new(db, whitelist, timings));
    let writes = Arc::new(WriteService::new(
        Arc::clone(fleet),
        Arc::clone(&command_store),
        c.write_attempts,
    ));
    Commands::new(CommandParts {
        store: command_store,
        writes,
        fleet: Arc::clone(fleet),
        uplink: engine.uplink.clone(),
        guard: Arc::clone(guard),
        node_id: node_id.to_owned(),
        alarms: Arc::clone(engine.alarms.store()),
    })
}

/// Who handles the downlink messages, by topic.
struct DownlinkHandlers {
    /// The command service.
    commands: mpsc::UnboundedSender<Downlink>,
    /// The deployer, for configuration pushes.
    pushes: mpsc::UnboundedSender<Downlink>,
    /// The leases, for heartbeats from outside collectors.
    heartbeats: mpsc::UnboundedSender<Downlink>,
}

/// Hands each downlink message to whoever handles its topic: configuration pushes
/// to the deployer, heartbeats to the leases, commands to the command service.
/// Ends with the uplink.
async fn route_downlink(
    mut messages: mpsc::UnboundedReceiver<Downlink>,
    topics: Topics,
    handlers: DownlinkHandlers,
) {
    while let Some(message) = messages.recv().await {
        let to = if topics.push_target(&message.topic).is_some() {
            &handlers.pushes
        } else if topics.heartbeat_tenant(&message.topic).is_some() {
            &handlers.heartbeats
        } else {
            &handlers.commands
        };
        // Each handler runs as long as the engine; an unhandled message is
        // delivered again after the next start.
        let _ = to.send(message);
    }
}

/// The background tasks, awaited at shutdown.
#[derive(Default)]
struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    fn spawn<T: Send + 'static>(&mut self, task: impl Future<Output = T> + Send + 'static) {
        self.0.push(tokio::spawn(async move {
            let _ = task.await;
        }));
    }

    async fn join(self) {
        for task in self.0 {
            let _ = task.await;
        }
    }
}

/// What the collector's devices report to, and the alarm service, running.
struct Engine {
    uplink: Uplink,
    leases: Arc<Leases>,
    alarms: Arc<Alarms>,
    downlink: mpsc::UnboundedReceiver<Downlink>,
}

/// What the engine's services start from.
struct EngineInputs<'a> {
    /// The configuration without its devices.
    config: &'a GatewayConfig,
    /// Who the engine is on the broker.
    identity: UplinkIdentity<'a>,
    /// The compiled gateway; the alarm service takes its tenants.
    compiled: &'a mut Compiled,
    /// The durable state: the database, the outbox and the lease store.
    db: &'a StateDatabase,
    outbox: &'a Arc<Outbox>,
    lease_store: Arc<dyn StateStore>,
}

/// Starts the uplink, the leases and the alarm service (its delivery included).
fn start_engine(
    inputs: EngineInputs<'_>,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Engine {
    let EngineInputs {
        config,
        identity,
        compiled,
        db,
        outbox,
        lease_store,
    } = inputs;
    let alarm_store = AlarmStore::new(db, compiled.whitelist.alarms.clone());
    let tenants = std::mem::take(&mut compiled.tenants);
    let alarms = Alarms::new(Arc::new(alarm_store), HashMap::new(), tenants);
    let (downlink, downlink_messages) = mpsc::unbounded_channel();
    let route = DownlinkRoute {
        to: downlink,
        node_commands: config.collector.downlink.takes_unsigned_sparkplug(),
    };
    let (uplink, publisher) = Uplink::start(
        &config.collector.mqtt,
        identity,
        Arc::clone(outbox),
        Some(route),
        shutdown.clone(),
    );
    tasks.spawn(publisher);
    let (lease_changes, lease_events) = mpsc::unbounded_channel();
    let leases = Leases::new(
        lease_store,
        Duration::from_millis(config.collector.lease.scan_interval_ms),
        announcements(&compiled.config),
        uplink.clone(),
        Some(lease_changes),
    );
    // STATE-7: what an earlier run left retained is put right before any
    // report (with a shared state, each device when this engine takes it).
    if identity.sole {
        leases.restate_all();
    }
    tasks.spawn(Arc::clone(&leases).run(shutdown.clone()));
    tasks.spawn(Arc::clone(&alarms).run(lease_events, shutdown.clone()));
    let delivery = Delivery::new(
        Arc::clone(alarms.store()),
        Arc::new(uplink.clone()),
        alarm::delivery_settings(config, &uplink),
    );
    tasks.spawn(delivery.run(Arc::clone(alarms.opened()), shutdown.clone()));
    Engine {
        uplink,
        leases,
        alarms,
        downlink: downlink_messages,
    }
}

/// Every metric family, each registered by the module that counts it.
fn metrics(
    collector: &Collector,
    engine: &Engine,
    outbox: &Arc<Outbox>,
    seq: &SeqAllocator,
    commands: &Commands,
    deployer: &Arc<Deployer>,
) -> Arc<Metrics> {
    let metrics = Arc::new(Metrics::default());
    collector.register_metrics(&metrics);
    outbox.register_metrics(&metrics);
    seq.register_metrics(&metrics);
    engine.uplink.stats().register(&metrics);
    engine.alarms.register_metrics(&metrics);
    commands.store().register_metrics(&metrics);
    deployer.register_metrics(&metrics);
    crate::watchdog::register_metrics(collector.fleet(), &engine.alarms, &metrics);
    metrics
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
    node_flag: Option<String>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let Prepared {
        mut compiled,
        registry,
        shelf,
        conflicts,
    } = prepared;
    // Opened with the devices, so one write reserves every device's first
    // block of sequence numbers.
    let state::State {
        store,
        seq,
        outbox,
        db,
        leases,
    } = state::open(&compiled.config)?;
    // The collector keeps the devices' configuration; the services need the rest.
    let config = compiled.config.without_devices();
    let node_id = identity::node_id(&config, node_flag.as_deref());
    let client_id = identity::client_id(&config, &node_id)?;
    let edge_node_id = identity::edge_node_id(&config, &node_id);
    let uplink_identity = UplinkIdentity {
        client_id: &client_id,
        edge_node_id: &edge_node_id,
        data_dir: std::path::Path::new(&config.collector.wal.dir),
        sole: db.shared().is_none(),
    };
    let mut tasks = Tasks::default();
    // The committer stops after the collector's last round, not with the
    // rest: the reports of the rounds in flight at a stop are written too
    // (WAL-10: their numbers are used).
    let (rounds_over, committer_stop) = watch::channel(false);
    tasks.spawn(Arc::clone(&outbox).run_committer(committer_stop));
    let engine = start_engine(
        EngineInputs {
            config: &config,
            identity: uplink_identity,
            compiled: &mut compiled,
            db: &db,
            outbox: &outbox,
            lease_store: leases,
        },
        &shutdown,
        &mut tasks,
    );
    let whitelist = compiled.whitelist.clone();
    let pipelines = compiled.pipelines.clone();
    let ownership = Arc::new(match db.shared() {
        Some(postgres) => Ownership::shared(
            &node_id,
            postgres.clone(),
            Duration::from_millis(config.collector.store.ownership_lease_ms),
            Duration::from_millis(config.collector.per_device_timeout_ms),
        ),
        None => Ownership::alone(&node_id),
    });
    let services = Services {
        uplink: engine.uplink.clone(),
        seq: Arc::clone(&seq),
        ownership,
        leases: Arc::clone(&engine.leases),
        sink: Some(Arc::clone(&engine.alarms) as Arc<dyn SampleSink>),
        metrics: DeviceMetrics::default(),
        rounds_done: Arc::default(),
        device_brokers: Arc::default(),
    };
    let mut collector = Collector::new(compiled, services);
    let fleet = Arc::clone(collector.fleet());
    engine
        .uplink
        .set_births(Arc::new(FleetBirths(Arc::clone(&fleet))));
    tasks.spawn(keep_ownership(
        Arc::clone(&fleet),
        Arc::clone(&seq),
        shutdown.clone(),
    ));
    tasks.spawn(Arc::clone(&seq).keep_marks(shutdown.clone()));
    // Who may send commands and configurations over MQTT.
    let guard = Arc::new(DownlinkGuard::new(&config, Some(SeenRequests::new(&store))));
    guard.announce();
    let commands = commands(
        &config,
        &node_id,
        &db,
        whitelist.commands.clone(),
        &fleet,
        &engine,
        &guard,
    );
    let deployer = Arc::new(Deployer::new(DeployerParts {
        registry,
        fleet: Arc::clone(&fleet),
        alarms: Some(Arc::clone(&engine.alarms)),
        pipelines,
        sources,
        whitelist,
        shelf,
        conflicts,
    }));
    tasks.spawn(crate::watchdog::watch(
        Arc::clone(&fleet),
        Arc::clone(&engine.alarms),
        shutdown.clone(),
    ));
    tasks.spawn(crate::deploy::watch_sources(
        Arc::clone(&deployer),
        shutdown.clone(),
    ));
    let metrics = metrics(&collector, &engine, &outbox, &seq, &commands, &deployer);
    let Engine {
        uplink,
        leases,
        alarms,
        downlink,
    } = engine;
    let (to_commands, command_messages) = mpsc::unbounded_channel();
    let (to_deployer, push_messages) = mpsc::unbounded_channel();
    let (to_leases, heartbeat_messages) = mpsc::unbounded_channel();
    let topics = uplink.topics().clone();
    let handlers = DownlinkHandlers {
        commands: to_commands,
        pushes: to_deployer,
        heartbeats: to_leases,
    };
    tasks.spawn(crate::lease::reported_mqtt::serve(
        HeartbeatIntake {
            leases: Arc::clone(&leases),
            owners: Arc::clone(&fleet) as Arc<dyn Owners + Send + Sync>,
            guard: Arc::clone(&guard),
        },
        heartbeat_messages,
    ));
    tasks.spawn(route_downlink(downlink, topics, handlers));
    tasks.spawn(command::node::run(
        Arc::clone(&commands),
        Arc::clone(alarms.store()),
        config.collector.commands.execute_own,
        command_messages,
        shutdown.clone(),
    ));
    tasks.spawn(crate::deploy::serve_pushes(
        Arc::clone(&deployer),
        guard,
        uplink.clone(),
        push_messages,
        shutdown.clone(),
    ));
    tracing::info!(
        devices = fleet.roster().devices().len(),
        connections = fleet.roster().links().len(),
        database = %store.path().display(),
        node = %node_id,
        shared = db.shared().is_some(),
        "collector started"
    );
    if let Some(http) = &config.collector.http {
        let state = ApiState {
            fleet,
            uplink: Arc::clone(uplink.stats()),
            outbox,
            leases,
            alarms,
            commands,
            deployer,
            metrics,
            tokens: Arc::new(Tokens::of(&config, admin_token(&config)?)),
            access: Arc::new(AccessTable::of(&[api::API_ACCESS, crate::console::ACCESS])),
            hosts: Arc::new(AllowedHosts::new(&http.allowed_hosts)),
            utc_offset_min: config.collector.alarms.utc_offset_min,
            started: Instant::now(),
            shutdown: shutdown.clone(),
        };
        let listener = tokio::net::TcpListener::bind(http.listen)
            .await
            .with_context(|| format!("cannot listen on {}", http.listen))?;
        let app = api::app(api::routes().merge(crate::console::routes()), state);
        let limits = ServerLimits {
            max_connections: http.max_connections as usize,
            header_timeout: Duration::from_millis(http.header_timeout_ms),
            idle_timeout: Duration::from_millis(http.idle_timeout_ms),
        };
        // HTTPS: the certificate follows its files (read again when they change).
        let tls = match &http.tls {
            Some(files) => {
                let certificate = ReloadingCertificate::new(&files.cert_file, &files.key_file)
                    .map_err(|problem| anyhow::anyhow!("collector.http.tls: {problem}"))?;
                let config = Arc::new(certificate)
                    .server_config()
                    .map_err(|problem| anyhow::anyhow!(problem))?;
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
            }
            None => None,
        };
        tasks.spawn(api::serve(listener, app, limits, tls, shutdown.clone()));
    }
    crate::memory::release_after_build();
    systemd::notify("READY=1");
    tasks.spawn(systemd::keep_watchdog(shutdown.clone()));
    collector.run(shutdown).await;
    systemd::notify("STOPPING=1");
    let _ = rounds_over.send(true);
    // WAL-10: no report is made any more, so the next start numbers on from here.
    let closed = tokio::task::spawn_blocking(move || seq.close()).await;
    if let Err(error) = closed
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        tracing::warn!(%error, "cannot give back the unused report numbers; the next start announces them");
    }
    // Reports of the last rounds are committed before the process ends (they are
    // published at the next start if the broker does not take them now).
    tasks.join().await;
    Ok(())
}
