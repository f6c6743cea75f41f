//! SIGKILL of the engine at each point of the write path, against a real Modbus
//! peer (pymodbus) behind a proxy that stalls the write, and real Mosquitto: the
//! device is never written twice, and the command ends in the documented state
//! (`docs/commands.md`, CMD-W1 to CMD-W4).
//!
//! - after the intent is stored, before the device got the write: the proxy
//!   swallows the request; after the restart the tag reads the old value, so the
//!   outcome is unknown: FAILED, the device never written;
//! - after the device was written, before the outcome was stored: the proxy
//!   passes the request and swallows the answer; after the restart the tag reads
//!   the new value: ACKED, the device written once;
//! - after the outcome was stored (the command ACKED) while the broker is out of
//!   reach: after the restart the reply goes out, the device written once.
//!
//! And without a crash: a write whose answer is lost is read back, not sent again.

use std::time::{Duration, Instant};

use crate::support::downlink::{Lines, REPLY, Rig};
use crate::support::engine::Engine;
use crate::support::proxy::{Carries, Mode, Proxy};
use serde_json::{Value, json};

/// Waits until the proxy has stalled a write.
async fn until_stalled(proxy: &Proxy) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while proxy.stalled() == 0 {
        assert!(Instant::now() < deadline, "no write reached the proxy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The notes of a command's history, in order.
fn notes(command: &Value) -> Vec<String> {
    command["history"]
        .as_array()
        .map(|history| {
            history
                .iter()
                .filter_map(|h| h["note"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts an engine that reaches the device through `proxy`, creates a command
/// writing `value`, kills the engine once `proxy` stalled the write, and starts
/// it again with the proxy passing everything. Returns the new engine and the
/// command's id.
async fn kill_at_the_stall(rig: &Rig, proxy: &Proxy, mode: Mode, value: u16) -> (Engine, u64) {
    let lines = Lines {
        device: proxy.port(),
        ..rig.direct()
    };
    let mut engine = rig.engine(lines);
    rig.until_connected(true).await;
    rig.until_next_report().await;
    proxy.set(mode);
    let id = rig.create("stalled", value).await;
    until_stalled(proxy).await;
    let stuck = rig.command(id).await;
    assert!(
        stuck["intent"].is_object(),
        "the intent is stored before the write goes out: {stuck}"
    );
    engine.kill();
    proxy.set(Mode::Pass);
    (rig.engine(lines), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_intent_the_write_is_settled_as_unknown_and_never_made() {
    let rig = Rig::start("crash-intent").await;
    let proxy = Proxy::start(rig.device.port(), Carries::Modbus).await;
    let (engine, id) = kill_at_the_stall(&rig, &proxy, Mode::SwallowWrite, 42).await;

    let command = rig.until_final(id).await;
    assert_eq!(command["status"], "FAILED", "{command}\n{}", engine.log());
    let message = command["message"].as_str().unwrap_or("");
    assert!(message.contains("outcome unknown"), "{command}");
    assert!(message.contains("holds 0, not 42"), "{command}");
    assert_eq!(command["write"]["status"], "UNKNOWN", "{command}");
    assert!(
        command["intent"].is_null(),
        "the intent is settled: {command}"
    );
    assert!(
        notes(&command)
            .iter()
            .any(|n| n.contains("started again while it held the claim")),
        "{command}"
    );
    assert!(rig.writes().is_empty(), "the device was never written");
    let reply = rig.until_reply("stalled").await;
    assert_eq!(reply["status"], "FAILED", "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_device_was_written_the_write_is_found_done_and_not_made_again() {
    let rig = Rig::start("crash-written").await;
    let proxy = Proxy::start(rig.device.port(), Carries::Modbus).await;
    let (engine, id) = kill_at_the_stall(&rig, &proxy, Mode::SwallowWriteAnswer, 42).await;

    let command = rig.until_final(id).await;
    assert_eq!(command["status"], "ACKED", "{command}\n{}", engine.log());
    assert_eq!(command["resultCode"], 0, "{command}");
    assert!(
        command["message"]
            .as_str()
            .unwrap_or("")
            .contains("the device holds the value"),
        "{command}"
    );
    assert_eq!(command["write"]["after"], 42, "{command}");
    assert_eq!(rig.writes(), [json!([42])], "written exactly once");
    let reply = rig.until_reply("stalled").await;
    assert_eq!(
        (
            reply["status"].as_str(),
            rig.replies("stalled")[0].topic.as_str()
        ),
        (Some("ACKED"), REPLY),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_outcome_was_stored_the_reply_still_goes_out_and_nothing_is_written_again()
{
    let rig = Rig::start("crash-outcome").await;
    let line = Proxy::start(rig.broker.port(), Carries::Bytes).await;
    let lines = Lines {
        broker: line.port(),
        ..rig.direct()
    };
    let mut engine = rig.engine(lines);
    rig.until_connected(true).await;
    line.set(Mode::Cut);
    rig.until_connected(false).await;

    let id = rig.create("while-cut-off", 9).await;
    let done = rig.until_final(id).await;
    assert_eq!(done["status"], "ACKED", "{done}");
    engine.kill();
    assert!(
        rig.replies("while-cut-off").is_empty(),
        "no reply could go out yet"
    );

    line.set(Mode::Pass);
    let engine = rig.engine(lines);
    let reply = rig.until_reply("while-cut-off").await;
    assert_eq!(reply["status"], "ACKED", "{reply}\n{}", engine.log());
    rig.until_next_report().await;
    assert_eq!(rig.writes(), [json!([9])], "written exactly once");
    assert_eq!(rig.command(id).await["status"], "ACKED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_is_lost_is_read_back_and_not_sent_again() {
    let rig = Rig::start("lost-answer").await;
    let proxy = Proxy::start(rig.device.port(), Carries::Modbus).await;
    let lines = Lines {
        device: proxy.port(),
        ..rig.direct()
    };
    // Read-backs outlast the reconnect backoff (1 s base) that the lost answer starts.
    let engine = rig.engine_with(lines, 300, 12);
    rig.until_connected(true).await;
    rig.until_next_report().await;
    proxy.set(Mode::SwallowWriteAnswer);
    let id = rig.create("lost", 5).await;
    until_stalled(&proxy).await;
    proxy.set(Mode::Pass);

    let command = rig.until_final(id).await;
    assert_eq!(command["status"], "ACKED", "{command}\n{}", engine.log());
    let message = command["message"].as_str().unwrap_or("");
    assert!(message.contains("the write was sent but"), "{command}");
    assert!(message.contains("the device holds the value"), "{command}");
    assert_eq!(rig.writes(), [json!([5])], "written exactly once");
}
