//! The connection's bookkeeping against a real outbox on a redb log, with the
//! client played by the test: it takes what was queued, numbers the QoS 1
//! publishes as rumqttc does, and hands PUBACKs back. Times are chosen by the
//! test.

use std::sync::Arc;
use std::time::Duration;

use rumqttc::{QoS, Request};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::*;
use crate::config::OverflowPolicy;
use crate::store::Store;
use crate::wal::{Message, RedbLog};

/// An outbox on a redb log in a directory of its own, holding `reports`
/// records (seq 1 to `reports`) written to the log.
async fn outbox(name: &str, reports: u64) -> Arc<Outbox> {
    let dir = std::env::temp_dir().join(format!("sluice-connection-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    let log = RedbLog::open(&store, 1 << 30).expect("log");
    let outbox = Outbox::with_log(
        Arc::new(log),
        OverflowPolicy::DropNewest,
        10_000,
        Duration::ZERO,
    );
    for seq in 1..=reports {
        outbox.push(Message {
            device: "d1".into(),
            seq,
            topic: "site/P1/d1/property/post".into(),
            payload: bytes::Bytes::from(seq.to_string()),
            retain: false,
        });
    }
    // The committer writes everything unacknowledged when it stops.
    let (stop, stopped) = watch::channel(false);
    let committer = tokio::spawn(Arc::clone(&outbox).run_committer(stopped));
    stop.send(true).expect("the committer listens");
    committer.await.expect("the committer ends");
    assert_eq!(outbox.log().size().0, reports, "all in the log");
    outbox
}

fn route(outbox: &Arc<Outbox>, qos: QoS) -> Route {
    Route {
        outbox: Arc::clone(outbox),
        stats: Arc::default(),
        qos,
    }
}

/// Connection `number`, up, with what it carries from the last one.
fn connected(number: u64, route: &Route, carried: Carried) -> Connection {
    let mut connection =
        Connection::new(number, Outbound::new(1000, 1 << 20), route.clone(), carried);
    connection.up(Instant::now());
    connection
}

/// The client's side: packet ids it gave out and has not seen acknowledged.
#[derive(Default)]
struct Client {
    next_pkid: u16,
}

/// A publish the client wrote: its packet id (0 for QoS 0), topic, payload.
type Written = (u16, String, String);

impl Client {
    /// Writes everything queued, numbering each QoS 1 publish, and tells the
    /// connection as rumqttc's events would.
    fn write(&mut self, connection: &mut Connection, at: Instant) -> Vec<Written> {
        let mut written = Vec::new();
        while let Some(request) = connection.outbound().next(true) {
            let Request::Publish(publish) = request else {
                continue;
            };
            let pkid = if publish.qos == QoS::AtMostOnce {
                0
            } else {
                self.next_pkid += 1;
                self.next_pkid
            };
            connection.published(pkid, at);
            let payload = String::from_utf8(publish.payload.to_vec()).expect("utf-8");
            written.push((pkid, publish.topic, payload));
        }
        written
    }
}

/// The payloads of the records among `written` (reports are numbered).
fn seqs(written: &[Written]) -> Vec<u64> {
    written
        .iter()
        .filter_map(|(_, _, payload)| payload.parse().ok())
        .collect()
}

fn unreleased(outbox: &Outbox) -> Vec<u64> {
    outbox
        .read_after(None, 1000)
        .expect("read")
        .into_iter()
        .map(|record| record.message.seq)
        .collect()
}

#[tokio::test]
async fn the_window_fills_to_ninety_and_each_puback_tops_it_up() {
    let outbox = outbox("window", 200).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let mut connection = connected(1, &route, Carried::default());
    let mut client = Client::default();
    let now = Instant::now();
    connection.fill();
    let first = client.write(&mut connection, now);
    assert_eq!(seqs(&first), (1..=90).collect::<Vec<_>>(), "in log order");
    connection.fill();
    assert!(
        client.write(&mut connection, now).is_empty(),
        "the window is full"
    );
    connection.puback(1);
    connection.puback(2);
    assert_eq!(seqs(&client.write(&mut connection, now)), [91, 92]);
    assert_eq!(connection.take_release().acked, [1, 2]);
}

#[tokio::test]
async fn a_puback_settles_what_its_packet_carried() {
    let outbox = outbox("settle", 1).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let mut connection = connected(1, &route, Carried::default());
    let mut client = Client::default();
    let now = Instant::now();
    connection.queue_status("site/collector/c1/status/post".into(), b"up".to_vec());
    let (done, delivered) = oneshot::channel();
    connection.queue_tracked("site/alarm".into(), b"raised".to_vec(), done);
    connection.fill();
    let written = client.write(&mut connection, now);
    let pkids: Vec<_> = written
        .iter()
        .map(|(pkid, _, payload)| (*pkid, payload.as_str()))
        .collect();
    assert_eq!(pkids, [(1, "up"), (2, "raised"), (3, "1")]);
    connection.puback(1);
    assert!(
        connection.take_release().acked.is_empty(),
        "a status is no record"
    );
    connection.puback(2);
    delivered.await.expect("the tracked sender is told");
    connection.puback(3);
    assert_eq!(connection.take_release().acked, [1]);
    connection.puback(3);
    assert!(
        connection.take_release().acked.is_empty(),
        "a PUBACK counts once"
    );
}

#[tokio::test]
async fn with_qos_0_a_record_is_done_once_written_and_tracked_messages_wait_for_a_connection() {
    let outbox = outbox("qos0", 2).await;
    let route = route(&outbox, QoS::AtMostOnce);
    let mut down = Connection::new(
        1,
        Outbound::new(10, 1 << 20),
        route.clone(),
        Carried::default(),
    );
    let (done, delivered) = oneshot::channel();
    down.queue_tracked("site/alarm".into(), b"raised".to_vec(), done);
    assert!(delivered.await.is_err(), "not connected: not delivered");
    down.fill();
    assert!(
        down.outbound().is_empty(),
        "nothing queued before the CONNACK"
    );
    let mut connection = connected(2, &route, down.end(true, Instant::now()).carried);
    connection.fill();
    let written = Client::default().write(&mut connection, Instant::now());
    assert_eq!(seqs(&written), [1, 2]);
    assert!(written.iter().all(|(pkid, _, _)| *pkid == 0));
    assert_eq!(connection.take_release().acked, [1, 2]);
}

#[tokio::test]
async fn every_connection_starts_from_the_oldest_record_not_released() {
    let outbox = outbox("reconnect", 5).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let now = Instant::now();
    let mut first = connected(1, &route, Carried::default());
    let mut client = Client::default();
    first.fill();
    assert_eq!(seqs(&client.write(&mut first, now)), [1, 2, 3, 4, 5]);
    first.puback(1);
    first.puback(2);
    let ended = first.end(true, now + Duration::from_secs(60));
    assert!(ended.came_up.is_some());
    assert!(
        ended.release.set_aside.is_empty(),
        "a late drop accuses nothing"
    );
    ended.release.apply(&outbox).await;
    assert_eq!(unreleased(&outbox), [3, 4, 5]);
    let mut second = connected(2, &route, ended.carried);
    second.fill();
    assert_eq!(seqs(&Client::default().write(&mut second, now)), [3, 4, 5]);
}

#[tokio::test]
async fn a_release_that_comes_after_the_next_connection_began_loses_nothing() {
    let outbox = outbox("race", 4).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let now = Instant::now();
    let mut first = connected(1, &route, Carried::default());
    first.fill();
    let _ = Client::default().write(&mut first, now);
    first.puback(1);
    first.puback(2);
    // The connection drops before its release is written.
    let ended = first.end(true, now + Duration::from_secs(60));
    let mut second = connected(2, &route, ended.carried);
    second.fill();
    let mut client = Client::default();
    let written = client.write(&mut second, now);
    assert_eq!(
        seqs(&written),
        [1, 2, 3, 4],
        "sent again: duplicates, no loss"
    );
    ended.release.apply(&outbox).await;
    assert_eq!(unreleased(&outbox), [3, 4]);
    for (pkid, _, _) in written {
        second.puback(pkid);
    }
    second.take_release().apply(&outbox).await;
    assert!(unreleased(&outbox).is_empty(), "released twice is released");
    assert_eq!(outbox.log().size().0, 0);
}

#[tokio::test]
async fn three_quick_drops_on_one_record_set_it_aside_and_the_rest_goes_on() {
    let outbox = outbox("refused", 3).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let start = Instant::now();
    let mut carried = Carried::default();
    let mut windows = Vec::new();
    for attempt in 0..3 {
        let sent = start + Duration::from_secs(attempt);
        let mut connection = connected(attempt + 1, &route, carried);
        connection.fill();
        windows.push(seqs(&Client::default().write(&mut connection, sent)));
        let ended = connection.end(true, sent + Duration::from_millis(10));
        ended.release.apply(&outbox).await;
        carried = ended.carried;
    }
    assert_eq!(
        windows,
        [vec![1, 2, 3], vec![1], vec![1]],
        "a suspect goes out alone, so the next drop names it"
    );
    assert_eq!(unreleased(&outbox), [2, 3]);
    let dead = outbox.dead_letters().expect("dead letters");
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].reason.contains("closed the connection 3 times"),
        "{}",
        dead[0].reason
    );
    let mut connection = connected(4, &route, carried);
    connection.fill();
    assert_eq!(
        seqs(&Client::default().write(&mut connection, start)),
        [2, 3]
    );
}

#[tokio::test]
async fn a_record_above_the_broker_limit_is_set_aside_unsent() {
    let outbox = outbox("too-large", 2).await;
    let route = route(&outbox, QoS::AtLeastOnce);
    let mut connection = Connection::new(
        1,
        Outbound::new(1000, 30),
        route.clone(),
        Carried::default(),
    );
    connection.up(Instant::now());
    connection.fill();
    let written = Client::default().write(&mut connection, Instant::now());
    assert!(written.is_empty(), "{written:?}");
    let release = connection.take_release();
    assert_eq!(release.set_aside.len(), 2);
    assert!(
        release.set_aside[0]
            .1
            .contains("bigger than the broker takes")
    );
    release.apply(&outbox).await;
    assert!(unreleased(&outbox).is_empty());
    assert_eq!(outbox.dead_letters().expect("dead letters").len(), 2);
}
