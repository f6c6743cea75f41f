//! systemd's service notifications (`Type=notify`, `WatchdogSec=`): `READY=1`
//! once the gateway runs, `WATCHDOG=1` at half the watchdog interval while the
//! runtime is alive, `STOPPING=1` at shutdown. Without `NOTIFY_SOCKET` (not
//! started by systemd) nothing is sent.

use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use tokio::sync::watch;

/// Sends `state` to systemd, if it listens.
pub(super) fn notify(state: &str) {
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET")
        && let Err(error) = send(&socket, state)
    {
        tracing::warn!(%error, state, "cannot notify systemd");
    }
}

/// Sends `state` to the datagram socket `socket` (a path, or `@name` for an
/// abstract socket).
fn send(socket: &OsStr, state: &str) -> std::io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    match socket.as_encoded_bytes().strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sender.send_to_addr(state.as_bytes(), &address)?;
        }
        None => {
            sender.send_to(state.as_bytes(), socket)?;
        }
    }
    Ok(())
}

/// The watchdog interval of `WATCHDOG_USEC`, when `WATCHDOG_PID` (if set)
/// names `own_pid`.
fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if pid.is_some_and(|pid| pid.parse::<u32>().ok() != Some(own_pid)) {
        return None;
    }
    let usec: u64 = usec?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Pings the watchdog at half its interval until `shutdown`: a runtime that
/// stops turning stops the pings, and systemd restarts the service.
pub(super) async fn keep_watchdog(mut shutdown: watch::Receiver<bool>) {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    let Some(interval) = watchdog_interval(usec.as_deref(), pid.as_deref(), std::process::id())
    else {
        return;
    };
    let mut ticks = tokio::time::interval(interval / 2);
    loop {
        tokio::select! {
            _ = ticks.tick() => notify("WATCHDOG=1"),
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_a_path_socket_and_an_abstract_one() {
        let dir = std::env::temp_dir().join(format!("sluice-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let listener = UnixDatagram::bind(&path).expect("bind");
        send(path.as_os_str(), "READY=1").expect("sent");
        let mut buffer = [0u8; 64];
        let n = listener.recv(&mut buffer).expect("received");
        assert_eq!(&buffer[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("sluice-notify-{}", std::process::id());
        let address =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let abstract_listener = UnixDatagram::bind_addr(&address).expect("bind abstract");
        send(OsStr::new(&format!("@{name}")), "WATCHDOG=1").expect("sent");
        let n = abstract_listener.recv(&mut buffer).expect("received");
        assert_eq!(&buffer[..n], b"WATCHDOG=1");
        assert!(send(dir.join("nobody").as_os_str(), "READY=1").is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_watchdog_interval_is_for_this_process_only() {
        assert_eq!(
            watchdog_interval(Some("60000000"), None, 7),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            watchdog_interval(Some("60000000"), Some("7"), 7),
            Some(Duration::from_secs(60))
        );
        assert_eq!(watchdog_interval(Some("60000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(None, None, 7), None);
        assert_eq!(watchdog_interval(Some("soon"), None, 7), None);
    }
}
