//! Heartbeats from outside collectors over MQTT: a [`HeartbeatBatch`] on
//! `{prefix}/heartbeat/post/{tenantId}`, signed as a downlink message is
//! (SEC-3: with the operator's key or a key of that tenant), taken like the
//! body of `POST /heartbeats` (STATE-8). A refusal is answered on the topic's
//! `/reply` with its reason; a signed message delivered again renews nothing twice.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use super::Leases;
use super::reported::{self, HeartbeatBatch, Owners, Sender};
use crate::clock::now_ms;
use crate::mqtt::Topics;
use crate::mqtt::limits::{MAX_PUSH_BYTES, MAX_REPLY_MESSAGE, clip};
use crate::mqtt::request_id_of;
use crate::store::Seen;
use crate::uplink::{Downlink, DownlinkGuard};
use crate::wal::Message;

/// What the heartbeat messages are checked against and applied to.
pub struct HeartbeatIntake {
    pub leases: Arc<Leases>,
    pub owners: Arc<dyn Owners + Send + Sync>,
    pub guard: Arc<DownlinkGuard>,
}

/// What became of one message.
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    Renewed(usize),
    /// A signed message handled before: nothing is renewed again.
    Repeat,
}

/// Takes the heartbeat messages, one after another, until the uplink ends;
/// each is acknowledged once handled (a refusal, once its answer is queued).
pub async fn serve(intake: HeartbeatIntake, mut messages: mpsc::UnboundedReceiver<Downlink>) {
    let intake = Arc::new(intake);
    while let Some(message) = messages.recv().await {
        let this = Arc::clone(&intake);
        let (topic, payload) = (message.topic.clone(), message.payload.clone());
        let taken =
            tokio::task::spawn_blocking(move || this.take(&topic, &payload, now_ms())).await;
        match taken {
            Ok(Ok(Taken::Renewed(count))) => {
                tracing::debug!(topic = %message.topic, count, "heartbeats renewed");
            }
            Ok(Ok(Taken::Repeat)) => {
                tracing::debug!(topic = %message.topic, "a heartbeat message delivered again");
            }
            Ok(Err(refusal)) => intake.refuse(&message, &refusal),
            Err(error) => {
                tracing::error!(topic = %message.topic, %error, "a heartbeat message was not handled");
                continue;
            }
        }
        message.acknowledge();
    }
}

impl HeartbeatIntake {
    fn take(&self, topic: &str, payload: &[u8], now: i64) -> Result<Taken, String> {
        let topics = self.leases.uplink.topics();
        let Some(tenant) = topics.heartbeat_tenant(topic) else {
            return Err("not a heartbeat topic (`heartbeat/post/{tenantId}`)".into());
        };
        if payload.len() > MAX_PUSH_BYTES {
            return Err(format!(
                "the payload is {} bytes; a heartbeat message takes at most {MAX_PUSH_BYTES}",
                payload.len()
            ));
        }
        let admitted = self
            .guard
            .admit(topic, payload, (tenant != 0).then_some(tenant), now)?;
        let internal = |e: crate::store::StoreError| format!("the engine's store failed: {e}");
        if self.guard.seen(topic, &admitted).map_err(internal)? != Seen::New {
            return Ok(Taken::Repeat);
        }
        let batch: HeartbeatBatch = serde_json::from_slice(&admitted.body)
            .map_err(|e| format!("the payload is not a heartbeat batch: {e}"))?;
        let sender = Sender {
            scope: admitted.authority.scope(),
            tenant,
            via: "mqtt",
        };
        let renewals = reported::renewals(&batch, sender, &*self.owners)
            .map_err(|refused| refused.message().to_owned())?;
        self.guard
            .remember(topic, &admitted, now)
            .map_err(internal)?;
        let count = renewals.len();
        for renewal in renewals {
            self.leases.renew(renewal);
        }
        Ok(Taken::Renewed(count))
    }

    /// Logs a refused message and answers it on its reply topic.
    fn refuse(&self, message: &Downlink, refusal: &str) {
        let refusal = clip(refusal, MAX_REPLY_MESSAGE);
        tracing::warn!(topic = %message.topic, error = %refusal, "heartbeats refused");
        let reply = json!({
            "requestId": request_id_of(&message.payload),
            "status": "REJECTED",
            "message": refusal,
            "ts": now_ms(),
        });
        self.leases.uplink.report(Message {
            device: String::new(),
            seq: 0,
            topic: Topics::heartbeat_reply(&message.topic),
            payload: reply.to_string().into_bytes().into(),
            retain: false,
        });
    }
}
