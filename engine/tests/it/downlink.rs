//! The downlink against real Mosquitto and a real Modbus peer (pymodbus): a
//! command published while the engine is stopped, or while its broker
//! connection is down, is executed exactly once after it is back; a message that
//! cannot become a command is answered, and not handed to the engine again.

use std::time::Duration;

use crate::support::downlink::{Lines, REPLY, Rig, SET};
use crate::support::mqtt::Message;
use crate::support::proxy::{Carries, Mode, Proxy};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_published_while_the_engine_is_stopped_runs_once_after_it_starts() {
    let rig = Rig::start("downlink-stopped").await;
    let mut engine = rig.engine(rig.direct());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    engine.kill();

    rig.send(
        SET,
        &json!({ "requestId": "while-away", "key": "sp", "value": 42 }),
    )
    .await;
    let client_id = std::fs::read_to_string(rig.dir.join("data/client-id")).expect("kept id");
    assert!(client_id.starts_with("sluice-"), "{client_id}");

    let mut engine = rig.engine(rig.direct());
    let reply = rig.until_reply("while-away").await;
    assert_eq!(rig.replies("while-away")[0].topic, REPLY);
    assert_eq!(
        (reply["status"].as_str(), reply["resultCode"].as_u64()),
        (Some("ACKED"), Some(0)),
        "{reply}"
    );
    assert_eq!(rig.writes(), [json!([42])], "the device was written once");
    assert_eq!(
        std::fs::read_to_string(rig.dir.join("data/client-id")).expect("kept id"),
        client_id,
        "the same client id across restarts"
    );

    // Acknowledged once stored: another restart gets nothing again.
    engine.kill();
    let _engine = rig.engine(rig.direct());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    rig.until_next_report().await;
    assert_eq!(rig.writes(), [json!([42])], "{}", _engine.log());
    // The reply may come again from the WAL (published, killed before its
    // release was stored: at least once), never with another outcome.
    assert!(
        rig.replies("while-away")
            .iter()
            .all(|r| r.json()["status"] == "ACKED")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_published_while_the_broker_connection_is_down_runs_once_it_is_back() {
    let rig = Rig::start("downlink-outage").await;
    let line = Proxy::start(rig.broker.port(), Carries::Bytes).await;
    let lines = Lines {
        broker: line.port(),
        ..rig.direct()
    };
    let engine = rig.engine(lines);
    rig.until_connected(true).await;

    line.set(Mode::Cut);
    rig.until_connected(false).await;
    rig.send(
        SET,
        &json!({ "requestId": "in-outage", "key": "sp", "value": 7 }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rig.writes().is_empty(), "nothing reached the engine yet");

    line.set(Mode::Pass);
    let reply = rig.until_reply("in-outage").await;
    assert_eq!(reply["status"], "ACKED", "{reply}\n{}", engine.log());
    assert_eq!(rig.writes(), [json!([7])]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_no_command_is_answered_once_and_not_delivered_again() {
    let rig = Rig::start("downlink-refused").await;
    let mut engine = rig.engine(rig.direct());
    rig.until_connected(true).await;
    let refused = [
        (
            SET,
            json!({ "key": "sp", "value": 1 }),
            None,
            "needs a `requestId`",
        ),
        (
            SET,
            json!({ "requestId": "no-tag", "key": "nope", "value": 1 }),
            Some("no-tag"),
            "no tag `nope`",
        ),
        (
            "P/ELSEWHERE/property/set",
            json!({ "requestId": "no-device", "key": "sp", "value": 1 }),
            Some("no-device"),
            "no device has productId `P` and deviceNum `ELSEWHERE`",
        ),
        (
            "P/plc/function/invoke",
            json!({ "requestId": "incomplete" }),
            Some("incomplete"),
            "the payload must be",
        ),
    ];
    for (topic, payload, _, _) in &refused {
        rig.send(topic, payload).await;
    }
    let answers = rig
        .platform
        .wait_until(Duration::from_secs(20), "four refusals", |m| {
            m.iter()
                .filter(|m| m.json()["status"] == "REJECTED")
                .count()
                >= 4
        })
        .await;
    let rejected: Vec<Value> = answers
        .iter()
        .filter(|m| m.json()["status"] == "REJECTED")
        .map(Message::json)
        .collect();
    for (_, _, request_id, says) in &refused {
        let answer = rejected
            .iter()
            .find(|r| r["requestId"].as_str() == *request_id)
            .unwrap_or_else(|| panic!("no refusal for {request_id:?}: {rejected:?}"));
        assert_eq!(answer["resultCode"], 2, "{answer}");
        assert!(
            answer["message"].as_str().unwrap_or("").contains(says),
            "{answer}"
        );
    }
    let topics: Vec<&str> = answers
        .iter()
        .filter(|m| m.json()["status"] == "REJECTED")
        .map(|m| m.topic.as_str())
        .collect();
    assert!(
        topics.contains(&"P/ELSEWHERE/property/set/reply"),
        "{topics:?}"
    );
    assert!(
        topics.contains(&"P/plc/function/invoke/reply"),
        "{topics:?}"
    );

    // Each was acknowledged once its answer was safe: the answer goes out at
    // once and is safe on its PUBACK, so the platform may see it a moment
    // before the acknowledgement leaves. A report after the answers means the
    // engine has moved on; a restart is then not handed them again.
    rig.until_next_report().await;
    engine.kill();
    let _engine = rig.engine(rig.direct());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    rig.until_next_report().await;
    assert!(
        !_engine.log().contains("downlink refused"),
        "handed again: {}",
        _engine.log()
    );
    assert!(rig.writes().is_empty());
}
