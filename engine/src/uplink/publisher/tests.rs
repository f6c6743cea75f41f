//! The publisher against a broker played by the test on loopback.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{MqttConfig, OverflowPolicy};
use crate::model::EntityState;
use crate::uplink::{Uplink, UplinkIdentity};
use crate::wal::{MemoryLog, Outbox};

/// A broker that answers each CONNECT after `delay` and then only reads:
/// counts the connections it accepted.
async fn slow_broker(delay: Duration) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                if socket.read(&mut buffer).await.unwrap_or(0) == 0 {
                    return;
                }
                tokio::time::sleep(delay).await;
                // CONNACK: session not present, accepted.
                if socket.write_all(&[0x20, 0x02, 0x00, 0x00]).await.is_err() {
                    return;
                }
                while socket.read(&mut buffer).await.unwrap_or(0) > 0 {}
            });
        }
    });
    (port, accepted)
}

/// Statuses handed over while the connect waits for its CONNACK are kept for
/// the connection; the connect is not given up for them (a socket closed after
/// its CONNECT would have the broker publish the engine's will, `offline`).
#[tokio::test]
async fn statuses_handed_over_during_a_slow_connect_do_not_restart_it() {
    let (port, accepted) = slow_broker(Duration::from_millis(300)).await;
    let config = MqttConfig {
        broker_port: port,
        client_id: Some("slow-connect".into()),
        ..MqttConfig::default()
    };
    let outbox = Outbox::with_log(
        Arc::new(MemoryLog::new(100)),
        OverflowPolicy::DropNewest,
        100,
        Duration::ZERO,
    );
    let dir = std::env::temp_dir();
    let identity = UplinkIdentity {
        client_id: "slow-connect",
        edge_node_id: "slow-connect",
        data_dir: &dir,
        sole: true,
    };
    let (stop, stopped) = watch::channel(false);
    let (uplink, publisher) = Uplink::start(&config, identity, outbox, None, stopped);
    for n in 0..15 {
        uplink.status(format!("P/d{n}/status/post"), EntityState::Online, n);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..100 {
        if uplink.stats().connected() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(uplink.stats().connected(), "connected at last");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection");
    stop.send(true).expect("the publisher listens");
    let _ = tokio::time::timeout(Duration::from_secs(5), publisher).await;
}
