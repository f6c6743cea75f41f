//! The engine as a node: it claims the commands of its own devices through the
//! same guarded path as any node, executes them with the write service, and
//! reports each outcome as a receipt. Also runs the command timers and turns
//! downlink messages into commands.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::model::Command;
use super::outcome::{WriteRequest, WriteStatus};
use super::service::Commands;
use super::store::Swept;
use crate::alarm::{AlarmStore, Raise, Source};
use crate::clock::now_ms;
use crate::uplink::Downlink;

/// How often the timers run and claims are made when nothing wakes the node.
const PASS_EVERY: Duration = Duration::from_millis(500);
/// Commands claimed per pass.
const CLAIM_BATCH: usize = 16;
/// How long a re-execution waits for the write of an earlier claim to finish.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(60);
const IN_FLIGHT_POLL: Duration = Duration::from_millis(100);
/// The rule key of the alarm for a command reclaimed too often.
pub const RECLAIMS_RULE: &str = "COMMAND_RECLAIMS";

/// Runs the timers, the downlink and (when `execute_own`) the node until `shutdown`.
pub async fn run(
    commands: Arc<Commands>,
    alarms: Arc<AlarmStore>,
    execute_own: bool,
    mut downlink: mpsc::UnboundedReceiver<Downlink>,
    mut shutdown: watch::Receiver<bool>,
) {
    let restart = Arc::clone(&commands);
    let _ = tokio::task::spawn_blocking(move || restart.after_restart(now_ms())).await;
    let mut devices = commands.fleet().subscribe();
    // Commands of devices no longer configured are cancelled at the start and
    // whenever the devices change.
    devices.mark_changed();
    let mut timer = tokio::time::interval(PASS_EVERY);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = timer.tick() => {}
            () = commands.wake().notified() => {}
            Ok(()) = devices.changed() => {
                let commands = Arc::clone(&commands);
                let _ = tokio::task::spawn_blocking(move || commands.cancel_orphans(now_ms())).await;
                continue;
            }
            Some(message) = downlink.recv() => handle_downlink(&commands, message).await,
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
        pass(&commands, &alarms, execute_own).await;
    }
}

/// Stores the command a downlink message carries (or queues its refusal), then
/// acknowledges the message once that is durable (CMD-S2). One at a time,
/// so acknowledgements go out in the order the messages came.
async fn handle_downlink(commands: &Arc<Commands>, message: Downlink) {
    let (topic, payload) = (message.topic.clone(), message.payload.clone());
    let service = Arc::clone(commands);
    let handled =
        tokio::task::spawn_blocking(move || service.on_downlink(&topic, &payload, now_ms())).await;
    match handled {
        Ok(Ok(answer)) => {
            if let Some(answer) = answer {
                answer.wait().await;
            }
            message.acknowledge();
        }
        Ok(Err(error)) => {
            tracing::error!(topic = %message.topic, %error, "a downlink message could not be stored; the broker delivers it again after the next reconnect");
        }
        Err(error) => {
            tracing::error!(topic = %message.topic, %error, "a downlink message was not handled")
        }
    }
}

/// One pass: the timers, then claims of the engine's own devices' commands.
async fn pass(commands: &Arc<Commands>, alarms: &Arc<AlarmStore>, execute_own: bool) {
    let now = now_ms();
    let store = Arc::clone(commands.store());
    match tokio::task::spawn_blocking(move || store.sweep(now)).await {
        Ok(Ok(swept)) => after_sweep(commands, alarms, swept, now).await,
        Ok(Err(error)) => tracing::error!(%error, "command timers failed"),
        Err(error) => tracing::error!(%error, "command timers failed"),
    }
    if !execute_own {
        return;
    }
    let store = Arc::clone(commands.store());
    let node = commands.node_id().to_owned();
    // Asked per pending command: no set of every device built twice a second.
    let owner = Arc::clone(commands);
    let claimed = tokio::task::spawn_blocking(move || {
        let own = |device: &str| owner.owns(device);
        store.claim(&node, CLAIM_BATCH, Some(&own), now)
    })
    .await;
    match claimed {
        Ok(Ok(claimed)) => {
            for command in claimed {
                tokio::spawn(execute(Arc::clone(commands), command));
            }
        }
        Ok(Err(error)) => tracing::error!(%error, "claiming commands failed"),
        Err(error) => tracing::error!(%error, "claiming commands failed"),
    }
}

/// Replies for commands the timers finished; an alarm for each command
/// reclaimed too often (its node keeps taking it and going silent).
async fn after_sweep(commands: &Arc<Commands>, alarms: &Arc<AlarmStore>, swept: Swept, now: i64) {
    for id in swept.unanswered.iter().chain(&swept.expired) {
        if let Ok(Some(command)) = commands.store().get(*id, crate::model::Scope::All) {
            let watched = Arc::clone(commands);
            let finished = command.clone();
            let _ = tokio::task::spawn_blocking(move || watched.watch_writes(&finished)).await;
            commands.reply(&command);
        }
    }
    for command in swept.too_many_reclaims {
        let raise = reclaim_alarm(&command, now);
        let alarms = Arc::clone(alarms);
        let raised = tokio::task::spawn_blocking(move || alarms.raise(&raise, now)).await;
        if !matches!(raised, Ok(Ok(_))) {
            tracing::error!(command = command.id, "cannot raise the reclaim alarm");
        }
    }
}

/// The alarm for a person when a command was reclaimed too often: some node keeps
/// claiming it and going silent.
pub fn reclaim_alarm(command: &Command, now: i64) -> Raise {
    Raise {
        tenant_id: command.tenant_id,
        device_id: command.device_id.clone(),
        rule_key: RECLAIMS_RULE.to_owned(),
        source: Source::Engine,
        message: format!(
            "command {} was claimed and dropped {} times (last node `{}`)",
            command.id,
            command.reclaim_count,
            command.claimed_node_id.as_deref().unwrap_or("?")
        ),
        ts_ms: now,
        // One alarm per command, however often the sweep sees it.
        event_id: Some(format!("command-{}-reclaims", command.id)),
    }
}

/// Writes one claimed command and stores the outcome with its receipt (CMD-W3).
async fn execute(commands: Arc<Commands>, command: Command) {
    let request = WriteRequest {
        command_id: command.id,
        claim_generation: command.claim_generation,
        tenant_id: command.tenant_id,
        request_id: command.request_id.clone(),
        device_id: command.device_id.clone(),
        key: command.key.clone(),
        value: command.value.clone(),
        actor: format!("node:{}", commands.node_id()),
    };
    let mut written = commands.writes().write(&request).await;
    // Reclaimed while the first execution still writes: wait for that write's
    // outcome rather than write again (or report a busy failure).
    let deadline = tokio::time::Instant::now() + IN_FLIGHT_WAIT;
    while written.record.status == WriteStatus::InFlight && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(IN_FLIGHT_POLL).await;
        written = commands.writes().write(&request).await;
    }
    let receipt = written
        .record
        .receipt(commands.node_id(), command.claim_generation);
    let (id, record) = (command.id, written.record.clone());
    let service = Arc::clone(&commands);
    let finished =
        tokio::task::spawn_blocking(move || service.finish_write(id, &receipt, &record, now_ms()))
            .await;
    // Only now may another execution of the request look at its intent.
    drop(written);
    match finished {
        Ok(Ok(outcome)) => tracing::debug!(command = id, ?outcome, "command executed"),
        Ok(Err(error)) => {
            tracing::error!(command = id, %error, "the outcome of the command's write was not stored; its intent stays in doubt");
        }
        Err(error) => tracing::error!(command = id, %error, "the command's receipt failed"),
    }
}
