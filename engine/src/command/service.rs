//! The command service: creating commands (HTTP, MQTT downlink) for the engine's
//! devices, claims and receipts of outside nodes, cancellation, and the replies
//! published when a command reaches its final status.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value as Json;
use tokio::sync::Notify;

use super::model::{Command, Delivery, NewCommand, Receipt, ReceiptOutcome};
use super::outcome::WriteRecord;
use super::store::{CommandError, CommandStore, Created};
use super::values::to_raw;
use super::write::WriteService;
use crate::alarm::{AlarmStore, Raise, Source};
use crate::clock::now_ms;
use crate::collector::Fleet;
use crate::model::Scope;
use crate::model::{Access, CommandKind};
use crate::model::{CommandStatus, result_code};
use crate::mqtt::limits::{MAX_COMMAND_BYTES, MAX_NAME, MAX_REPLY_MESSAGE, check_length, clip};
use crate::mqtt::{
    CommandReply, CommandRequest, CommandTarget, DeviceTopic, EXPECTED_SHAPE, ReplyStatus,
    request_id_of,
};
use crate::uplink::{DownlinkGuard, Uplink};
use crate::wal::{Message, Settled};

/// Why a command was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("no device `{0}`")]
    UnknownDevice(String),
    #[error("no device has productId `{product_id}` and deviceNum `{device_num}`")]
    UnknownIdentity {
        product_id: String,
        device_num: String,
    },
    #[error("{0}")]
    Invalid(String),
    /// A downlink message not let in: who sent it could not be established.
    #[error("{0}")]
    Unauthorized(String),
    #[error(transparent)]
    Store(#[from] CommandError),
}

/// The rule key of the alarm of a write that gave up.
pub const WRITE_FAILED_RULE: &str = "WRITE_FAILED";

/// The command service of one engine.
#[derive(Debug)]
pub struct Commands {
    store: Arc<CommandStore>,
    writes: Arc<WriteService>,
    fleet: Arc<Fleet>,
    uplink: Uplink,
    /// Who may send commands over MQTT.
    guard: Arc<DownlinkGuard>,
    /// This engine's node id, as it claims its own devices' commands.
    node_id: String,
    /// Where a write that gave up raises its alarm.
    alarms: Arc<AlarmStore>,
    wake: Notify,
}

/// What the command service is made of.
#[derive(Debug)]
pub struct CommandParts {
    pub store: Arc<CommandStore>,
    pub writes: Arc<WriteService>,
    pub fleet: Arc<Fleet>,
    pub uplink: Uplink,
    pub guard: Arc<DownlinkGuard>,
    /// This engine's node id, as it claims its own devices' commands.
    pub node_id: String,
    pub alarms: Arc<AlarmStore>,
}

impl Commands {
    pub fn new(parts: CommandParts) -> Arc<Self> {
        let CommandParts {
            store,
            writes,
            fleet,
            uplink,
            guard,
            node_id,
            alarms,
        } = parts;
        Arc::new(Self {
            store,
            writes,
            fleet,
            uplink,
            guard,
            node_id,
            alarms,
            wake: Notify::new(),
        })
    }

    pub fn store(&self) -> &Arc<CommandStore> {
        &self.store
    }

    pub fn writes(&self) -> &Arc<WriteService> {
        &self.writes
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    pub(super) fn wake(&self) -> &Notify {
        &self.wake
    }

    /// Whether `device` is configured and this engine owns it now (it owns
    /// them all when it is alone).
    pub fn owns(&self, device: &str) -> bool {
        self.fleet.roster().get(device).is_some() && self.fleet.owns(device)
    }

    /// The devices this engine owns now (all of them when it is alone).
    pub fn own_devices(&self) -> HashSet<String> {
        self.fleet
            .roster()
            .devices()
            .iter()
            .filter(|d| self.fleet.owns(&d.id))
            .map(|d| d.id.clone())
            .collect()
    }

    /// The devices, to follow their changes.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Creates a command for a device `scope` sees, after checking the tag and
    /// value against the device's configuration.
    ///
    /// # Errors
    /// An unknown device (or another tenant's), a tag or value the device cannot
    /// take, or a storage failure.
    pub fn create(
        &self,
        scope: Scope,
        device_id: &str,
        request: &CommandRequest,
        origin: &str,
        actor: &str,
        now: i64,
    ) -> Result<Created, CreateError> {
        request.check_bounds().map_err(CreateError::Invalid)?;
        check_length("deviceId", device_id, MAX_NAME).map_err(CreateError::Invalid)?;
        let Some(device) = self.fleet.roster().get(device_id).cloned() else {
            return Err(CreateError::UnknownDevice(device_id.to_owned()));
        };
        if !scope.sees(device.tenant_id) {
            return Err(CreateError::UnknownDevice(device_id.to_owned()));
        }
        let Some(tag) = device.tag_index(&request.key) else {
            return Err(CreateError::Invalid(format!(
                "device `{device_id}` has no tag `{}`",
                request.key
            )));
        };
        let spec = &device.tags[tag as usize];
        if spec.access == Access::Read {
            return Err(CreateError::Invalid(format!(
                "tag `{}` is read-only (access R)",
                spec.key
            )));
        }
        to_raw(spec, &request.value).map_err(CreateError::Invalid)?;
        let new = NewCommand {
            tenant_id: device.tenant_id,
            device_id: device_id.to_owned(),
            kind: if request.function {
                CommandKind::FunctionInvoke
            } else {
                CommandKind::PropertySet
            },
            key: request.key.clone(),
            value: request.value.clone(),
            request_id: request.request_id.clone(),
            delivery: if request.realtime {
                Delivery::Realtime
            } else {
                Delivery::Deferrable
            },
            origin: origin.to_owned(),
        };
        let created = self.store.create(&new, actor, now)?;
        self.wake.notify_one();
        Ok(created)
    }

    /// Cancels a command for a user of `scope`, and publishes its reply.
    ///
    /// # Errors
    /// As for [`CommandStore::cancel`].
    pub fn cancel(
        self: &Arc<Self>,
        id: u64,
        scope: Scope,
        actor: &str,
        now: i64,
    ) -> Result<Command, CommandError> {
        let command = self
            .store
            .cancel(id, scope, actor, "cancelled by the user", now)?;
        self.reply(&command);
        Ok(command)
    }

    /// Cancels every unfinished command of a device that is no longer configured.
    pub fn cancel_orphans(self: &Arc<Self>, now: i64) {
        let own = self.own_devices();
        let orphans = match self.store.orphans(&own) {
            Ok(orphans) => orphans,
            Err(error) => {
                tracing::error!(%error, "cannot look for commands of removed devices");
                return;
            }
        };
        for id in orphans {
            match self
                .store
                .cancel(id, Scope::All, "engine", "the device was removed", now)
            {
                // No reply topic is left: this only settles the reply as due.
                Ok(command) => self.reply(&command),
                Err(error) => {
                    tracing::error!(command = id, %error, "cannot cancel a command of a removed device");
                }
            }
        }
    }

    /// Applies a node's receipt and publishes the reply when the command is final.
    ///
    /// # Errors
    /// As for [`CommandStore::receipt`].
    pub fn receipt(
        self: &Arc<Self>,
        id: u64,
        receipt: &Receipt,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        let outcome = self.store.receipt(id, receipt, now)?;
        self.received(&outcome);
        Ok(outcome)
    }

    /// Stores the outcome of the engine's own write of command `id` with its
    /// receipt (see [`CommandStore::finish_write`]), and publishes the reply when
    /// the command is final.
    ///
    /// # Errors
    /// As for [`CommandStore::finish_write`].
    pub fn finish_write(
        self: &Arc<Self>,
        id: u64,
        receipt: &Receipt,
        record: &WriteRecord,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        let outcome = self.store.finish_write(id, receipt, record, now)?;
        self.received(&outcome);
        Ok(outcome)
    }

    /// What follows an applied receipt: the reply of a final command, or another
    /// claim of one back in the queue.
    fn received(self: &Arc<Self>, outcome: &ReceiptOutcome) {
        if let ReceiptOutcome::Accepted(command) = outcome {
            self.watch_writes(command);
            if command.status.is_final() {
                self.reply(command);
            } else if command.status == CommandStatus::Pending {
                self.wake.notify_one();
            }
        }
    }

    /// Seed 003 §6.4: a write that gave up (`TIMEOUT`: its retries used up, or
    /// its expiry passed) raises `WRITE_FAILED` on its device, for a person; the
    /// device's next write that succeeds clears it. Blocks on the store.
    pub fn watch_writes(&self, command: &Command) {
        let now = now_ms();
        let changed = match command.status {
            CommandStatus::Timeout => {
                let raise = Raise {
                    tenant_id: command.tenant_id,
                    device_id: command.device_id.clone(),
                    rule_key: WRITE_FAILED_RULE.to_owned(),
                    source: Source::Engine,
                    message: format!(
                        "writing `{}` failed {} time(s); given up (command {})",
                        command.key, command.retry_count, command.id
                    ),
                    ts_ms: now,
                    event_id: None,
                };
                self.alarms.raise(&raise, now).map(drop)
            }
            CommandStatus::Acked => self
                .alarms
                .clear(&command.device_id, WRITE_FAILED_RULE, now, None, now)
                .map(drop),
            _ => Ok(()),
        };
        if let Err(error) = changed {
            tracing::error!(%error, command = command.id, "cannot change the write alarm");
        }
    }

    /// Publishes the command's outcome on its reply topic, through the outbox
    /// (durable, like reports), and records once it is safely there that the
    /// reply is no longer due (CMD-S3). A command of a device no longer
    /// configured has no reply topic: nothing is published.
    pub fn reply(self: &Arc<Self>, command: &Command) {
        let Some(target) = self.fleet.roster().get(&command.device_id).cloned() else {
            tracing::debug!(command = command.id, "no reply: the device is gone");
            self.replied(command.id);
            return;
        };
        let reply = CommandReply {
            request_id: Json::from(command.request_id.as_str()),
            command_id: Some(command.id),
            key: Some(&command.key),
            status: ReplyStatus::Command(command.status),
            result_code: command.result_code,
            message: command.message.as_deref(),
            ts: command.updated_at,
        };
        let topic = self.uplink.topics().device(
            &target.product_id,
            &target.device_num,
            DeviceTopic::Reply(command.kind),
        );
        let settled = self.publish_reply(topic, &reply);
        let (this, id) = (Arc::clone(self), command.id);
        tokio::spawn(async move {
            settled.wait().await;
            let _ = tokio::task::spawn_blocking(move || this.replied(id)).await;
        });
    }

    fn replied(&self, id: u64) {
        if let Err(error) = self.store.replied(id) {
            // Still due: published again at the next start (at least once).
            tracing::error!(command = id, %error, "cannot record that a reply went out");
        }
    }

    /// What a stop left behind: the claims this engine's node held go back to
    /// the queue (CMD-W4), and the replies not yet safely in the outbox go out (CMD-S3).
    pub fn after_restart(self: &Arc<Self>, now: i64) {
        match self.store.release_claims_of(&self.node_id, now) {
            Ok(released) if !released.is_empty() => {
                tracing::info!(commands = ?released, "claims held before the restart are claimed again");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::error!(%error, "cannot release the claims held before the restart")
            }
        }
        self.resend_due_replies();
    }

    /// Publishes the replies that a stop cut off before they were safely in the
    /// outbox (CMD-S3).
    fn resend_due_replies(self: &Arc<Self>) {
        match self.store.replies_due() {
            Ok(due) => {
                for command in due {
                    self.reply(&command);
                }
            }
            Err(error) => tracing::error!(%error, "cannot read the replies due"),
        }
    }

    fn publish_reply(&self, topic: String, reply: &CommandReply<'_>) -> Settled {
        self.uplink.report_settled(Message {
            device: String::new(),
            seq: 0,
            topic,
            payload: reply.to_bytes().into(),
            retain: false,
        })
    }

    /// Turns a downlink message into a command (CMD-S2: it may be
    /// acknowledged once this returns, after what it returns has settled). A
    /// message that cannot become one is answered on its reply topic with status
    /// `REJECTED`; the answer is what there is to wait for. A message the broker
    /// delivers again finds the command its `requestId` made the first time.
    ///
    /// # Errors
    /// The command could not be stored: the message must not be acknowledged, so
    /// the broker delivers it again.
    pub fn on_downlink(
        &self,
        topic: &str,
        payload: &[u8],
        now: i64,
    ) -> Result<Option<Settled>, CommandError> {
        if let Some(device_id) = self
            .uplink
            .sparkplug()
            .and_then(|t| t.command_device(topic))
        {
            return self
                .on_device_command(device_id, payload, now)
                .map(|()| None);
        }
        let Some(target) = self.uplink.topics().command_target(topic) else {
            tracing::warn!(%topic, "a message on no command topic; ignored");
            return Ok(None);
        };
        let refusal = match self.downlink_command(topic, &target, payload, now) {
            Ok(()) => return Ok(None),
            Err(CreateError::Store(error)) => return Err(error),
            Err(refusal) => refusal.to_string(),
        };
        let refusal = clip(&refusal, MAX_REPLY_MESSAGE);
        tracing::warn!(%topic, error = %refusal, "downlink refused");
        let reply = CommandReply {
            request_id: request_id_of(payload),
            command_id: None,
            key: None,
            status: ReplyStatus::Rejected,
            result_code: Some(result_code::INVALID_PARAMETER),
            message: Some(&refusal),
            ts: now,
        };
        let topic = self.uplink.topics().device(
            &target.product_id,
            &target.device_num,
            DeviceTopic::Reply(target.kind),
        );
        Ok(Some(self.publish_reply(topic, &reply)))
    }

    /// Stores the commands of a Sparkplug DCMD. A refusal is logged: a DCMD
    /// has no reply topic, the host sees the value read back (or not). A DCMD
    /// has no room for a signature: it is taken only from a broker the
    /// operator trusts (`trustedBroker`, or `requireSignature: false`).
    fn on_device_command(
        &self,
        device_id: &str,
        payload: &[u8],
        now: i64,
    ) -> Result<(), CommandError> {
        if !self.guard.takes_unsigned_sparkplug() {
            tracing::warn!(
                device = device_id,
                "a DCMD refused: Sparkplug commands carry no signature, and the broker is \
                 not trusted with them (collector.downlink.trustedBroker)"
            );
            return Ok(());
        }
        let Some(device) = self.fleet.roster().get(device_id).cloned() else {
            tracing::warn!(
                device = device_id,
                "a DCMD for no device of this engine; ignored"
            );
            return Ok(());
        };
        let requests = match super::sparkplug::requests(device_id, &device.tags, payload, now) {
            Ok(requests) => requests,
            Err(error) => {
                tracing::warn!(device = device_id, %error, "a DCMD refused");
                return Ok(());
            }
        };
        for request in requests {
            let refusal = match request {
                Ok(request) => match self.create(
                    Scope::All,
                    device_id,
                    &request,
                    "sparkplug",
                    "sparkplug",
                    now,
                ) {
                    Ok(_) => continue,
                    Err(CreateError::Store(error)) => return Err(error),
                    Err(refusal) => refusal.to_string(),
                },
                Err(refusal) => refusal,
            };
            tracing::warn!(device = device_id, error = %refusal, "a DCMD metric refused");
        }
        Ok(())
    }

    /// The command a downlink message asks for, stored: once the message is
    /// let in by who signed it, and within bounds.
    fn downlink_command(
        &self,
        topic: &str,
        target: &CommandTarget,
        payload: &[u8],
        now: i64,
    ) -> Result<(), CreateError> {
        if payload.len() > MAX_COMMAND_BYTES {
            return Err(CreateError::Invalid(format!(
                "the payload is {} bytes; a command takes at most {MAX_COMMAND_BYTES}",
                payload.len()
            )));
        }
        let device = self
            .fleet
            .roster()
            .by_identity(&target.product_id, &target.device_num)
            .map(|d| (d.id.clone(), d.tenant_id));
        // Who sent it first: nothing else is told to a stranger.
        let admitted = self
            .guard
            .admit(topic, payload, device.as_ref().map(|d| d.1), now)
            .map_err(CreateError::Unauthorized)?;
        let Some((device_id, _)) = device else {
            return Err(CreateError::UnknownIdentity {
                product_id: target.product_id.clone(),
                device_num: target.device_num.clone(),
            });
        };
        let mut request =
            serde_json::from_slice::<CommandRequest>(&admitted.body).map_err(|error| {
                CreateError::Invalid(format!("the payload must be {EXPECTED_SHAPE}: {error}"))
            })?;
        if request.request_id.is_none() {
            return Err(CreateError::Invalid(
                "`requestId` is required on MQTT: it is what keeps a message the broker delivers again from running twice".into(),
            ));
        }
        request.function = target.kind == CommandKind::FunctionInvoke;
        let authority = admitted.authority;
        let actor = authority.actor();
        self.create(authority.scope(), &device_id, &request, "mqtt", &actor, now)?;
        Ok(())
    }
}
