//! The alarm service: runs each device's rules (its tenant's component) over
//! samples, lease events and device events, and applies their signals to the store.
//!
//! Samples and lease events arrive on the engine's hot paths, so their signals are
//! queued and applied by [`Alarms::run`]; a posted device event is applied before
//! its request is answered. A rule that fails (trap, CPU or memory limit) fails for
//! its own tenant only: the failure is counted per tenant, logged, and raises a
//! `RULE_FAILURE` alarm on the device, cleared when its rules run again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};

use tokio::sync::{Notify, mpsc, watch};

use super::model::{Alarm, Source};
use super::store::{AlarmError, AlarmStore, Raise, Raised};
use crate::clock::now_ms;
use crate::collector::SampleSink;
use crate::compile::{Compiled, DeviceRules, TenantRules};
use crate::model::{EntityType, Sample, Scope, Signal, SignalKind, Transition};
use crate::runtime::{CallError, RulesPool};
use crate::sync::{lock, read, write};
use crate::telemetry::{
    Collector, DescriptorEncoder, EncodeLabelSet, Metrics, counters, encode_scraped,
};

/// The rule key of the alarm a failing rule component raises.
pub const RULE_FAILURE: &str = "RULE_FAILURE";

/// A device's rules and the build of the device they were made for (0: any).
#[derive(Debug)]
struct Attached {
    build: u64,
    rules: Arc<DeviceRules>,
}

/// Signals waiting to be applied.
#[derive(Debug)]
struct Queued {
    tenant_id: u32,
    device_id: String,
    source: Source,
    signals: Vec<Signal>,
}

/// What one signal did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Raised(Raised),
    /// The open alarm it cleared, or `None` when none of its key was open.
    Cleared {
        rule_key: String,
        alarm: Option<Box<Alarm>>,
    },
}

/// Why a posted device event was not applied.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("no device `{0}`")]
    UnknownDevice(String),
    #[error("no rule of device `{device}` knows the event type `{kind}`")]
    NoRule { device: String, kind: String },
    #[error("the device's rules failed: {0}")]
    Rules(CallError),
    #[error(transparent)]
    Store(#[from] AlarmError),
    #[error("the alarm worker stopped")]
    Stopped,
}

/// The alarm service.
#[derive(Debug)]
pub struct Alarms {
    store: Arc<AlarmStore>,
    devices: RwLock<HashMap<String, Attached>>,
    /// Per tenant: the pool (sandbox) its rules run in, for devices added later,
    /// and the rules that see its drivers' lease events.
    tenants: RwLock<HashMap<u32, TenantRules>>,
    queue: mpsc::UnboundedSender<Queued>,
    queued: Mutex<Option<mpsc::UnboundedReceiver<Queued>>>,
    /// Devices whose rules failed on their last call.
    failing: Mutex<HashSet<String>>,
    /// Rule failures per tenant.
    failures: Mutex<BTreeMap<u32, u64>>,
    /// Told when an alarm was opened, so delivery need not wait for its timer.
    opened: Arc<Notify>,
}

impl Alarms {
    /// The service over devices' and each tenant's rules (its sandbox, where
    /// devices attached later get theirs, and its drivers' rules).
    pub fn new(
        store: Arc<AlarmStore>,
        devices: HashMap<String, DeviceRules>,
        tenants: HashMap<u32, TenantRules>,
    ) -> Arc<Self> {
        let (queue, queued) = mpsc::unbounded_channel();
        let devices = devices
            .into_iter()
            .map(|(id, rules)| {
                let attached = Attached {
                    build: 0,
                    rules: Arc::new(rules),
                };
                (id, attached)
            })
            .collect();
        Arc::new(Self {
            store,
            devices: RwLock::new(devices),
            tenants: RwLock::new(tenants),
            queue,
            queued: Mutex::new(Some(queued)),
            failing: Mutex::default(),
            failures: Mutex::default(),
            opened: Arc::new(Notify::new()),
        })
    }

    pub fn store(&self) -> &Arc<AlarmStore> {
        &self.store
    }

    /// Notified whenever an alarm is opened.
    pub fn opened(&self) -> &Arc<Notify> {
        &self.opened
    }

    /// Every tenant's rules sandbox.
    pub fn sandboxes(&self) -> Vec<(u32, Arc<RulesPool>)> {
        read(&self.tenants)
            .iter()
            .map(|(tenant, rules)| (*tenant, Arc::clone(&rules.pool)))
            .collect()
    }

    /// The tenants whose rules run component `name`.
    pub fn tenants_running(&self, name: &str) -> Vec<u32> {
        read(&self.tenants)
            .iter()
            .filter(|(_, t)| t.pool.name() == name)
            .map(|(tenant, _)| *tenant)
            .collect()
    }

    /// Puts a tenant's new rules in place at once: its sandbox, its drivers' rules
    /// and the rules of its devices (those not listed keep theirs).
    pub fn replace_tenant(
        &self,
        tenant: u32,
        rules: TenantRules,
        devices: Vec<(String, DeviceRules)>,
    ) {
        let mut all = write(&self.devices);
        for (id, device_rules) in devices {
            let build = all.get(&id).map_or(0, |a| a.build);
            let attached = Attached {
                build,
                rules: Arc::new(device_rules),
            };
            all.insert(id, attached);
        }
        write(&self.tenants).insert(tenant, rules);
    }

    /// Takes the rules out of `compiled` and puts them in place, at once for each
    /// tenant: its sandbox, its drivers' rules and its devices' rules. With a
    /// component `name`, only for the tenants whose rules run it (a new version of
    /// it was deployed); without, for every tenant (the pipelines, and so their
    /// `alarms:`, were reloaded). Returns how many devices got new rules.
    pub fn replace_rules(&self, compiled: &mut Compiled, name: Option<&str>) -> usize {
        let running: HashSet<u32> = match name {
            Some(name) => self.tenants_running(name).into_iter().collect(),
            None => compiled.tenants.keys().copied().collect(),
        };
        let mut devices: HashMap<u32, Vec<(String, DeviceRules)>> = HashMap::new();
        for device in &mut compiled.devices {
            if let Some(rules) = device
                .rules
                .take_if(|rules| running.contains(&rules.tenant_id))
            {
                devices
                    .entry(rules.tenant_id)
                    .or_default()
                    .push((device.config.device_id.clone(), rules));
            }
        }
        let mut swapped = 0;
        for tenant in running {
            if let Some(rules) = compiled.tenants.remove(&tenant) {
                let devices = devices.remove(&tenant).unwrap_or_default();
                swapped += devices.len();
                self.replace_tenant(tenant, rules, devices);
            }
        }
        swapped
    }

    /// Runs `rules` for build `build` of the device from now on (0: whatever
    /// build), replacing earlier ones: samples of other builds are not judged.
    pub fn attach(&self, device_id: &str, build: u64, rules: DeviceRules) {
        let attached = Attached {
            build,
            rules: Arc::new(rules),
        };
        write(&self.devices).insert(device_id.to_owned(), attached);
    }

    /// Stops running the device's rules (it was removed or is rebuilt). A
    /// `RULE_FAILURE` it has open is cleared once rules of it run well again.
    pub fn detach(&self, device_id: &str) {
        write(&self.devices).remove(device_id);
    }

    fn rules(&self, device_id: &str) -> Option<Arc<DeviceRules>> {
        read(&self.devices)
            .get(device_id)
            .map(|a| Arc::clone(&a.rules))
    }

    /// The tenant of a device that has rules.
    pub fn tenant_of(&self, device_id: &str) -> Option<u32> {
        self.rules(device_id).map(|d| d.tenant_id)
    }

    /// How the pools of every device's rules are doing, with the device's tenant.
    pub fn component_health(&self) -> Vec<(u32, crate::runtime::PoolHealth)> {
        read(&self.devices)
            .values()
            .map(|a| (a.rules.tenant_id, a.rules.evaluator.health()))
            .collect()
    }

    /// Rule failures so far, per tenant.
    pub fn rule_failures(&self) -> BTreeMap<u32, u64> {
        lock(&self.failures).clone()
    }

    /// Registers the service's metrics: its store's, and rule failures per tenant.
    pub fn register_metrics(self: &Arc<Self>, metrics: &Metrics) {
        self.store.register_metrics(metrics);
        metrics.collect(RuleFailures(Arc::downgrade(self)));
    }

    /// Runs a device's rules over one round's samples of its build `build`; the
    /// signals are applied in the background. Never blocks the round on storage.
    pub fn on_samples(&self, device_id: &str, build: u64, samples: &[Sample]) {
        let rules = {
            let devices = read(&self.devices);
            let Some(attached) = devices.get(device_id) else {
                return;
            };
            let current = attached.build == 0 || attached.build == build;
            // Most rounds carry no tag the rules look at: nothing to call.
            if !current || !attached.rules.evaluator.watches_any(samples) {
                return;
            }
            Arc::clone(&attached.rules)
        };
        let result = rules.evaluator.on_samples(samples);
        if let Some(signals) = self.checked(rules.tenant_id, device_id, result) {
            self.enqueue(rules.tenant_id, device_id, Source::Rule, signals);
        }
    }

    /// Runs the rules over a lease state change (`device-offline`, ...).
    pub fn on_lease(&self, transition: &Transition) {
        let row = &transition.row;
        let event = transition.event();
        let now = now_ms();
        let (tenant_id, result) = match row.entity_type {
            EntityType::Device if row.reported_by().is_none() => match self.rules(&row.entity_id) {
                Some(rules) => (rules.tenant_id, rules.evaluator.on_event(&event, now, None)),
                None => return,
            },
            // Drivers, and devices whose heartbeats come from outside
            // (STATE-8), are judged by their tenant's rules of entities.
            EntityType::Device | EntityType::Driver => match read(&self.tenants)
                .get(&row.tenant_id)
                .and_then(|t| t.drivers.clone())
            {
                Some(evaluator) => (row.tenant_id, evaluator.on_event(&event, now, None)),
                None => return,
            },
        };
        if let Some(signals) = self.checked(tenant_id, &row.entity_id, result) {
            self.enqueue(tenant_id, &row.entity_id, Source::Lease, signals);
        }
    }

    /// Applies a device event posted by a caller with `scope`, before answering.
    ///
    /// # Errors
    /// An unknown device (or another tenant's), an event type no rule knows, a
    /// failing rule component, or a store failure (nothing applied).
    pub async fn post_event(
        self: &Arc<Self>,
        scope: Scope,
        device_id: &str,
        kind: &str,
        ts_ms: i64,
        event_id: Option<&str>,
    ) -> Result<Vec<Applied>, EventError> {
        let rules = self
            .rules(device_id)
            .filter(|rules| scope.sees(rules.tenant_id))
            .ok_or_else(|| EventError::UnknownDevice(device_id.to_owned()))?;
        let result = rules.evaluator.on_event(kind, ts_ms, event_id);
        if let Err(error) = &result {
            let error = error.clone();
            self.checked(rules.tenant_id, device_id, result);
            return Err(EventError::Rules(error));
        }
        let signals = self
            .checked(rules.tenant_id, device_id, result)
            .unwrap_or_default();
        if signals.is_empty() {
            return Err(EventError::NoRule {
                device: device_id.to_owned(),
                kind: kind.to_owned(),
            });
        }
        let queued = Queued {
            tenant_id: rules.tenant_id,
            device_id: device_id.to_owned(),
            source: Source::Event,
            signals,
        };
        let this = Arc::clone(self);
        let applied = tokio::task::spawn_blocking(move || this.apply(&queued, now_ms()))
            .await
            .map_err(|_| EventError::Stopped)?;
        applied
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(EventError::Store)
    }

    /// The signals of a successful call; on a failure, counts and logs it and
    /// queues the device's `RULE_FAILURE` alarm. A device whose rules work again
    /// gets that alarm cleared.
    fn checked(
        &self,
        tenant_id: u32,
        device_id: &str,
        result: Result<Vec<Signal>, CallError>,
    ) -> Option<Vec<Signal>> {
        let now = now_ms();
        match result {
            Ok(signals) => {
                // Looked up only while some device's rules are failing: this
                // runs for every round of every device.
                let recovered = {
                    let mut failing = lock(&self.failing);
                    !failing.is_empty() && failing.remove(device_id)
                };
                if recovered {
                    let clear = engine_signal(SignalKind::Clear, "rules run again".into(), now);
                    self.enqueue(tenant_id, device_id, Source::Engine, vec![clear]);
                }
                Some(signals)
            }
            Err(error) => {
                *lock(&self.failures).entry(tenant_id).or_default() += 1;
                tracing::warn!(tenant = tenant_id, device = device_id, %error, "alarm rules failed");
                lock(&self.failing).insert(device_id.to_owned());
                let raise = engine_signal(SignalKind::Raise, error.to_string(), now);
                self.enqueue(tenant_id, device_id, Source::Engine, vec![raise]);
                None
            }
        }
    }

    fn enqueue(&self, tenant_id: u32, device_id: &str, source: Source, signals: Vec<Signal>) {
        if signals.is_empty() {
            return;
        }
        // The receiver lives as long as the engine; after shutdown nothing is applied.
        let _ = self.queue.send(Queued {
            tenant_id,
            device_id: device_id.to_owned(),
            source,
            signals,
        });
    }

    /// Applies queued signals (and lease changes) until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        mut lease_changes: mpsc::UnboundedReceiver<Transition>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let Some(mut queued) = lock(&self.queued).take() else {
            return;
        };
        loop {
            tokio::select! {
                Some(next) = queued.recv() => {
                    let this = Arc::clone(&self);
                    let applied = tokio::task::spawn_blocking(move || this.apply(&next, now_ms())).await;
                    if let Err(error) = applied {
                        tracing::error!(%error, "applying alarm signals failed");
                    }
                }
                Some(change) = lease_changes.recv() => self.on_lease(&change),
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
            }
        }
    }

    /// Applies one device's signals in order; each signal is its own transaction.
    fn apply(&self, queued: &Queued, now: i64) -> Vec<Result<Applied, AlarmError>> {
        let mut results = Vec::with_capacity(queued.signals.len());
        for signal in &queued.signals {
            let result = match signal.kind {
                SignalKind::Raise => {
                    let raise = Raise {
                        tenant_id: queued.tenant_id,
                        device_id: queued.device_id.clone(),
                        rule_key: signal.rule_key.clone(),
                        source: queued.source,
                        message: signal.message.clone(),
                        ts_ms: signal.ts_ms,
                        event_id: signal.event_id.clone(),
                    };
                    self.store.raise(&raise, now).map(|raised| {
                        if matches!(raised, Raised::Opened { .. }) {
                            self.opened.notify_one();
                        }
                        Applied::Raised(raised)
                    })
                }
                SignalKind::Clear => self
                    .store
                    .clear(
                        &queued.device_id,
                        &signal.rule_key,
                        signal.ts_ms,
                        signal.event_id.as_deref(),
                        now,
                    )
                    .map(|alarm| Applied::Cleared {
                        rule_key: signal.rule_key.clone(),
                        alarm: alarm.map(Box::new),
                    }),
            };
            if let Err(error) = &result {
                tracing::error!(device = %queued.device_id, rule = %signal.rule_key, %error, "alarm signal not applied");
            }
            results.push(result);
        }
        results
    }
}

/// Rule failures per tenant, read at each scrape.
#[derive(Debug)]
struct RuleFailures(Weak<Alarms>);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: u32,
}

impl Collector for RuleFailures {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(alarms) = self.0.upgrade() else {
            return Ok(());
        };
        let failures = alarms
            .rule_failures()
            .into_iter()
            .map(|(tenant, count)| (TenantLabel { tenant }, count));
        encode_scraped(
            &mut encoder,
            "sluice_alarm_rule_failures",
            "Failed calls of a tenant's alarm rules component (traps, limits).",
            &counters(failures),
        )
    }
}

impl SampleSink for Alarms {
    fn on_samples(&self, device_id: &str, build: u64, samples: &[Sample]) {
        Alarms::on_samples(self, device_id, build, samples);
    }

    fn devices_built(&self, gone: &[String], built: Vec<(String, u64, DeviceRules)>) {
        for id in gone {
            self.detach(id);
        }
        for (id, build, rules) in built {
            self.attach(&id, build, rules);
        }
    }
}

fn engine_signal(kind: SignalKind, message: String, ts_ms: i64) -> Signal {
    Signal {
        kind,
        rule_key: RULE_FAILURE.to_owned(),
        ts_ms,
        message,
        event_id: None,
    }
}
