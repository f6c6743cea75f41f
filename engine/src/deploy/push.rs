//! Device configurations pushed by the platform: a device's `devices` entry as
//! JSON, on `{prefix}/{productId}/{deviceNum}/config/push` or with
//! `PUT /devices/{id}/config`. A push goes through the config compiler and the
//! live apply of a file reload for that one device (CMD-P1 of `docs/commands.md`), is
//! kept in the data directory before it takes effect (CMD-P2), wins over the file's
//! entry until it is withdrawn (CMD-P3), cannot move a device to another identity
//! or tenant (CMD-P4), and widens nothing unless the operator pushes it (CMD-P5,
//! `rights.rs`). A push over MQTT is let in by its signature first (see
//! `uplink::DownlinkGuard`).

use std::sync::Arc;

use serde_json::Value as Json;
use tokio::sync::{mpsc, watch};

use super::deployer::Deployer;
use super::rights::{PushRights, creation_refused, widenings};
use crate::collector::DeviceChanges;
use crate::compile::{Pushed, PushedDevices, put_device};
use crate::config::{self, DeviceConfig, GatewayConfig};
use crate::model::Scope;
use crate::mqtt::limits::{
    MAX_PUSH_BYTES, MAX_REPLY_MESSAGE, MAX_REPLY_PROBLEMS, MAX_REQUEST_ID, clip, echoed_request_id,
};
use crate::mqtt::{DeviceTopic, PushProblem, PushReply, PushStatus, request_id_of};
use crate::store::Seen;
use crate::sync::lock;
use crate::uplink::{Authority, Downlink, DownlinkGuard, Uplink};
use crate::yaml::{self, Diagnostics, Key, Kind, Node, Paths};

/// The device a push is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushTarget {
    /// The device of this productId and deviceNum (the topic's), or a new one.
    Identity {
        product_id: String,
        device_num: String,
    },
    /// The device with this deviceId, or a new one.
    Device(String),
}

/// One push: for which device, its payload, for whom, from where.
#[derive(Debug, Clone)]
pub struct Push<'a> {
    pub target: PushTarget,
    pub payload: &'a [u8],
    /// Whose devices the pusher may change.
    pub scope: Scope,
    /// What the pusher may change of them.
    pub rights: PushRights,
    /// `mqtt` or `http`.
    pub origin: &'a str,
}

/// What became of a push.
#[derive(Debug, Clone, PartialEq)]
pub struct PushOutcome {
    /// The `requestId` the payload carried, if any.
    pub request_id: Json,
    pub device_id: Option<String>,
    pub result: Result<DeviceChanges, Vec<PushProblem>>,
}

impl PushOutcome {
    /// The reply on `config/push/reply`.
    pub fn reply(&self, now: i64) -> Vec<u8> {
        let (status, changed, problems, message) = match &self.result {
            Ok(changes) => {
                let changed = !changes.added.is_empty()
                    || !changes.changed.is_empty()
                    || !changes.removed.is_empty();
                let message = if changed {
                    "applied"
                } else {
                    "already in force"
                };
                (PushStatus::Applied, changed, &[][..], message.to_owned())
            }
            Err(problems) => (
                PushStatus::Rejected,
                false,
                problems.as_slice(),
                format!(
                    "refused with {} problem(s); nothing changed",
                    problems.len()
                ),
            ),
        };
        let problems = bounded(problems);
        PushReply {
            request_id: echoed_request_id(&self.request_id),
            device_id: self.device_id.as_deref(),
            status,
            changed,
            problems: &problems,
            message: &message,
            ts: now,
        }
        .to_bytes()
    }
}

/// At most [`MAX_REPLY_PROBLEMS`] problems, each clipped, and a last one
/// counting those left out: a reply stays small whatever was pushed.
fn bounded(problems: &[PushProblem]) -> Vec<PushProblem> {
    let mut shown: Vec<PushProblem> = problems
        .iter()
        .take(MAX_REPLY_PROBLEMS)
        .map(|p| {
            PushProblem::new(
                &clip(&p.path, MAX_REPLY_MESSAGE),
                clip(&p.message, MAX_REPLY_MESSAGE),
            )
        })
        .collect();
    if problems.len() > MAX_REPLY_PROBLEMS {
        shown.push(PushProblem::new(
            "$",
            format!(
                "and {} more problem(s)",
                problems.len() - MAX_REPLY_PROBLEMS
            ),
        ));
    }
    shown
}

/// A push's document as the device reader takes it: the payload's mapping with
/// `requestId` taken out and the identity the target gives filled in.
struct Entry {
    node: Node,
    json: Json,
    paths: Paths,
    request_id: Json,
}

impl Deployer {
    /// Applies a pushed configuration of one device, or refuses it with every
    /// problem and changes nothing (CMD-P1). Blocking: compiles and rebuilds.
    pub fn push(&self, push: &Push<'_>, now: i64) -> PushOutcome {
        let _one = lock(&self.busy);
        let running = self.fleet.config();
        let mut outcome = PushOutcome {
            request_id: Json::Null,
            device_id: None,
            result: Ok(DeviceChanges::default()),
        };
        let entry = match parse(push.payload) {
            Ok(entry) => entry,
            Err(problems) => {
                outcome.result = Err(problems);
                return outcome;
            }
        };
        outcome.request_id = entry.request_id.clone();
        if let PushTarget::Device(id) = &push.target
            && running
                .device(id)
                .is_some_and(|d| !push.scope.sees(d.tenant_id))
        {
            let message = format!("no device `{id}` of this tenant");
            outcome.result = Err(vec![PushProblem::new("$.deviceId", message)]);
            return outcome;
        }
        let existing = match &push.target {
            PushTarget::Identity {
                product_id,
                device_num,
            } => running
                .devices
                .iter()
                .find(|d| &d.product_id == product_id && &d.device_num == device_num),
            PushTarget::Device(id) => running.device(id),
        };
        // CMD-P4: another tenant's device is none of the pusher's business.
        let existing = existing.filter(|d| push.scope.sees(d.tenant_id));
        outcome.device_id = existing.map(|d| d.device_id.clone());
        let (entry, mut problems) = with_identity(entry, &push.target, existing);
        if push.rights == PushRights::Limited && existing.is_none() {
            problems.push(creation_refused());
        }
        let file = format!("pushed configuration of {}", describe(&push.target));
        let device =
            match config::read_device(&file, &entry.node, &running, &self.registry.protocols()) {
                Ok(device) => Some(device),
                Err(found) => {
                    problems.extend(as_problems(&file, &entry.paths, &found));
                    None
                }
            };
        if let Some(device) = &device {
            outcome.device_id = Some(device.device_id.clone());
            problems.extend(ownership(device, existing, &running, push.scope));
            if let (PushRights::Limited, Some(before)) = (push.rights, existing) {
                let fenced = running
                    .tenant(device.tenant_id)
                    .is_some_and(|t| t.fence.is_some());
                problems.extend(widenings(before, device, fenced));
            }
        }
        let (Some(device), true) = (device, problems.is_empty()) else {
            outcome.result = Err(problems);
            return outcome;
        };
        let pushed = Pushed {
            device_id: device.device_id.clone(),
            pushed_at: now,
            request_id: entry.request_id.as_str().map(str::to_owned),
            origin: push.origin.to_owned(),
            replaces: self.replaced_entry(&device.device_id, existing),
        };
        let kept = PushedDevices::of(&running);
        let mut config = running.clone();
        put_device(&mut config, device);
        // CMD-P2: kept before it takes effect; one that cannot be kept changes nothing.
        let commit = || {
            kept.keep(&pushed, &entry.json).map_err(|error| {
                let mut problems = Diagnostics::new(&file);
                let message = format!(
                    "the pushed configuration cannot be kept in the data directory: {error}"
                );
                problems.push(entry.node.pos, message);
                problems
            })
        };
        outcome.result = self
            .apply_devices(&file, &config, commit)
            .map_err(|found| as_problems(&file, &entry.paths, &found));
        if outcome.result.is_ok() {
            tracing::info!(device = %pushed.device_id, origin = push.origin, "pushed configuration applied");
        }
        crate::memory::release_after_build();
        outcome
    }

    /// Withdraws the push of device `device_id`: its file entry is applied again
    /// (or, without one, the device is removed). Blocking.
    ///
    /// # Errors
    /// No such pushed device (or another tenant's), problems of the file, or a
    /// push that cannot be forgotten; nothing changed.
    pub fn withdraw_push(
        &self,
        device_id: &str,
        scope: Scope,
    ) -> Result<DeviceChanges, Diagnostics> {
        let _one = lock(&self.busy);
        let running = self.fleet.config();
        let name = format!("pushed configuration of device `{device_id}`");
        let mut refusal = Diagnostics::new(&name);
        let visible = running
            .device(device_id)
            .is_some_and(|d| scope.sees(d.tenant_id));
        let kept = PushedDevices::of(&running);
        if !visible || kept.get(device_id).is_none() {
            refusal.push(
                yaml::Pos::default(),
                format!("device `{device_id}` runs with no pushed configuration"),
            );
            return Err(refusal);
        }
        let mut config = running.clone();
        let file_config = self.sources.load_config(&self.registry.protocols())?;
        match file_config.device(device_id) {
            Some(entry) => put_device(&mut config, entry.clone()),
            None => config.devices.retain(|d| d.device_id != device_id),
        }
        let commit = || {
            kept.withdraw(device_id).map(drop).map_err(|error| {
                let mut problems = Diagnostics::new(&name);
                problems.push(
                    yaml::Pos::default(),
                    format!("the push cannot be forgotten: {error}"),
                );
                problems
            })
        };
        let changes = self.apply_devices(&self.sources.config_name(), &config, commit)?;
        let mut conflicts = self.conflicts();
        conflicts.retain(|c| c.device_id != device_id);
        *lock(&self.conflicts) = conflicts;
        tracing::info!(device = device_id, "pushed configuration withdrawn");
        crate::memory::release_after_build();
        Ok(changes)
    }

    /// How device `device_id` was pushed, when it runs as pushed.
    pub fn pushed(&self, device_id: &str) -> Option<Pushed> {
        self.fleet.read_config(PushedDevices::of).get(device_id)
    }

    /// The fingerprint of the file's entry a push of `device_id` replaces: the one
    /// an earlier push replaced, or the running entry (from the file), if any.
    fn replaced_entry(&self, device_id: &str, running: Option<&DeviceConfig>) -> Option<String> {
        match self.pushed(device_id) {
            Some(earlier) => earlier.replaces,
            None => running.map(DeviceConfig::fingerprint),
        }
    }
}

fn describe(target: &PushTarget) -> String {
    match target {
        PushTarget::Identity {
            product_id,
            device_num,
        } => format!("{product_id}/{device_num}"),
        PushTarget::Device(id) => format!("device `{id}`"),
    }
}

/// The problems found in the pushed document at their JSON paths; those found in
/// another file (a pipeline file the device uses) at their `FILE:LINE:COL`.
fn as_problems(file: &str, paths: &Paths, found: &Diagnostics) -> Vec<PushProblem> {
    found
        .items()
        .iter()
        .map(|d| {
            if &*d.file == file {
                PushProblem::new(paths.at(d.pos), d.message.clone())
            } else {
                PushProblem::new("$", format!("{}:{}: {}", d.file, d.pos, d.message))
            }
        })
        .collect()
}

/// The payload as a device entry: JSON text holding an object.
fn parse(payload: &[u8]) -> Result<Entry, Vec<PushProblem>> {
    if payload.len() > MAX_PUSH_BYTES {
        return Err(vec![PushProblem::new(
            "$",
            format!(
                "the payload is {} bytes; a pushed configuration takes at most {MAX_PUSH_BYTES}",
                payload.len()
            ),
        )]);
    }
    let Ok(text) = std::str::from_utf8(payload) else {
        return Err(vec![PushProblem::new("$", "the payload is not UTF-8 text")]);
    };
    let mut json = match serde_json::from_str::<Json>(text) {
        Ok(json) => json,
        Err(error) => {
            return Err(vec![PushProblem::new(
                "$",
                format!("the payload is not JSON: {error}"),
            )]);
        }
    };
    let Some(object) = json.as_object_mut() else {
        return Err(vec![PushProblem::new(
            "$",
            "expected a device's configuration: a JSON object",
        )]);
    };
    let request_id = object.remove("requestId").unwrap_or(Json::Null);
    // When it was signed: the downlink's, not the device's.
    object.remove("ts");
    if echoed_request_id(&request_id) != request_id {
        return Err(vec![PushProblem::new(
            "$.requestId",
            format!("a request id is a string of at most {MAX_REQUEST_ID} bytes, or a number"),
        )]);
    }
    let mut node = match yaml::parse("push", text) {
        Ok(node) => node,
        Err(error) => return Err(vec![PushProblem::new("$", error.to_string())]),
    };
    let paths = Paths::of(&node);
    if let Kind::Map(entries) = &mut node.kind {
        entries.retain(|(key, _)| key.name != "requestId" && key.name != "ts");
    }
    Ok(Entry {
        node,
        json,
        paths,
        request_id,
    })
}

/// Fills in the identity the target gives (CMD-P4: a push cannot change it), and
/// the problems of a payload that names another.
fn with_identity(
    mut entry: Entry,
    target: &PushTarget,
    existing: Option<&DeviceConfig>,
) -> (Entry, Vec<PushProblem>) {
    let mut problems = Vec::new();
    let mut wanted: Vec<(&str, String)> = Vec::new();
    match target {
        PushTarget::Identity {
            product_id,
            device_num,
        } => {
            wanted.push(("productId", product_id.clone()));
            wanted.push(("deviceNum", device_num.clone()));
            if let Some(device) = existing {
                wanted.push(("deviceId", device.device_id.clone()));
            }
        }
        PushTarget::Device(id) => {
            wanted.push(("deviceId", id.clone()));
            if let Some(device) = existing {
                wanted.push(("productId", device.product_id.clone()));
                wanted.push(("deviceNum", device.device_num.clone()));
            }
        }
    }
    let pos = entry.node.pos;
    let Kind::Map(entries) = &mut entry.node.kind else {
        return (entry, problems);
    };
    // A device keeps its tenant: a push that leaves `tenantId` out means it
    // (one that names another is refused by `ownership`).
    if let Some(device) = existing
        && !entries.iter().any(|(k, _)| k.name == "tenantId")
    {
        entries.push((
            Key {
                pos,
                name: "tenantId".to_owned(),
            },
            Node {
                pos,
                kind: Kind::Int(i64::from(device.tenant_id)),
            },
        ));
        if let Some(object) = entry.json.as_object_mut() {
            object.insert("tenantId".to_owned(), Json::from(device.tenant_id));
        }
    }
    for (key, value) in wanted {
        match entries.iter().find(|(k, _)| k.name == key) {
            Some((k, node)) if node.kind != Kind::Str(value.clone()) => {
                problems.push(PushProblem::new(
                    entry.paths.at(k.pos),
                    format!("`{key}` is `{value}` for this device: a push cannot change it"),
                ))
            }
            Some(_) => {}
            None => {
                entries.push((
                    Key {
                        pos,
                        name: key.to_owned(),
                    },
                    Node {
                        pos,
                        kind: Kind::Str(value.clone()),
                    },
                ));
                if let Some(object) = entry.json.as_object_mut() {
                    object.insert(key.to_owned(), Json::from(value));
                }
            }
        }
    }
    (entry, problems)
}

/// CMD-P4: a push keeps a device with its tenant, and a tenant pushes only its own
/// devices; a new device takes a free deviceId and identity.
fn ownership(
    device: &DeviceConfig,
    existing: Option<&DeviceConfig>,
    running: &GatewayConfig,
    scope: Scope,
) -> Vec<PushProblem> {
    let mut problems = Vec::new();
    match existing {
        Some(before) if device.tenant_id != before.tenant_id => problems.push(PushProblem::new(
            "$.tenantId",
            format!(
                "the device belongs to tenant {}: a push cannot move it to another",
                before.tenant_id
            ),
        )),
        Some(_) => {}
        None => {
            if !scope.sees(device.tenant_id) {
                problems.push(PushProblem::new(
                    "$.tenantId",
                    "a tenant pushes only devices of its own",
                ));
            }
            if running.device(&device.device_id).is_some() {
                problems.push(PushProblem::new(
                    "$.deviceId",
                    format!("deviceId `{}` is taken by another device", device.device_id),
                ));
            }
            if running
                .devices
                .iter()
                .any(|d| d.product_id == device.product_id && d.device_num == device.device_num)
            {
                problems.push(PushProblem::new(
                    "$.deviceNum",
                    format!(
                        "productId `{}` with deviceNum `{}` is another device",
                        device.product_id, device.device_num
                    ),
                ));
            }
        }
    }
    problems
}

impl Deployer {
    /// Applies a push that came over MQTT on `topic`: let in by who signed it
    /// (its rights follow), bounded, and applied once however often it comes
    /// (a signed push handled before is answered, not applied again). Blocking.
    fn push_downlink(
        &self,
        guard: &DownlinkGuard,
        topic: &str,
        payload: &[u8],
        target: PushTarget,
        now: i64,
    ) -> PushOutcome {
        let refused = |message: String| PushOutcome {
            request_id: request_id_of(payload),
            device_id: None,
            result: Err(vec![PushProblem::new("$", message)]),
        };
        if payload.len() > MAX_PUSH_BYTES {
            return refused(format!(
                "the payload is {} bytes; a pushed configuration takes at most {MAX_PUSH_BYTES}",
                payload.len()
            ));
        }
        let tenant = match &target {
            PushTarget::Identity {
                product_id,
                device_num,
            } => self.fleet.read_config(|config| {
                config
                    .devices
                    .iter()
                    .find(|d| &d.product_id == product_id && &d.device_num == device_num)
                    .map(|d| d.tenant_id)
            }),
            PushTarget::Device(id) => self
                .fleet
                .read_config(|c| c.device(id).map(|d| d.tenant_id)),
        };
        let admitted = match guard.admit(topic, payload, tenant, now) {
            Ok(admitted) => admitted,
            Err(refusal) => return refused(refusal),
        };
        let request_id = admitted.request_id.clone().map_or(Json::Null, Json::from);
        match guard.seen(topic, &admitted) {
            Ok(Seen::New) => {}
            Ok(Seen::Same) => {
                // The broker's repeat, or a captured copy: handled once already.
                return PushOutcome {
                    request_id,
                    device_id: None,
                    result: Ok(DeviceChanges::default()),
                };
            }
            Ok(Seen::Other) => {
                return refused(
                    "this requestId was used before by another push: a request id names one message"
                        .to_owned(),
                );
            }
            Err(error) => return refused(format!("cannot read the pushes handled: {error}")),
        }
        let authority = admitted.authority;
        let push = Push {
            target,
            payload: &admitted.body,
            scope: authority.scope(),
            rights: if authority == Authority::Operator {
                PushRights::Operator
            } else {
                PushRights::Limited
            },
            origin: "mqtt",
        };
        let outcome = self.push(&push, now);
        if let Err(error) = guard.remember(topic, &admitted, now) {
            // Applied all the same; a copy sent again would be applied again.
            tracing::error!(%error, %topic, "cannot remember a handled push");
        }
        outcome
    }
}

/// Applies the configuration pushes that arrive on `config/push` one at a time,
/// answers each on `config/push/reply` and acknowledges it once the answer is
/// durable (CMD-S2), until `shutdown`.
pub async fn serve_pushes(
    deployer: Arc<Deployer>,
    guard: Arc<DownlinkGuard>,
    uplink: Uplink,
    mut pushes: mpsc::UnboundedReceiver<Downlink>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let message = tokio::select! {
            Some(message) = pushes.recv() => message,
            _ = shutdown.changed() => return,
        };
        let Some((product_id, device_num)) = uplink.topics().push_target(&message.topic) else {
            message.acknowledge();
            continue;
        };
        let (push_deployer, push_guard) = (Arc::clone(&deployer), Arc::clone(&guard));
        let (topic, payload, target) = (
            message.topic.clone(),
            message.payload.clone(),
            PushTarget::Identity {
                product_id: product_id.clone(),
                device_num: device_num.clone(),
            },
        );
        let now = crate::clock::now_ms();
        let applied = tokio::task::spawn_blocking(move || {
            push_deployer.push_downlink(&push_guard, &topic, &payload, target, now)
        })
        .await;
        let Ok(outcome) = applied else {
            tracing::error!(topic = %message.topic, "a configuration push was not handled");
            continue;
        };
        if let Err(problems) = &outcome.result {
            tracing::warn!(topic = %message.topic, problems = problems.len(), "configuration push refused");
        }
        let topic = uplink
            .topics()
            .device(&product_id, &device_num, DeviceTopic::ConfigPushReply);
        let settled = uplink.report_settled(crate::wal::Message {
            device: String::new(),
            seq: 0,
            topic,
            payload: outcome.reply(now).into(),
            retain: false,
        });
        settled.wait().await;
        message.acknowledge();
    }
}
