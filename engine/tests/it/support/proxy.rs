//! A TCP proxy on loopback between the engine and a real peer, which a test can
//! cut (a network outage: every connection closed, new ones closed at once) and,
//! for Modbus TCP, make stall at a write: swallow the write request (it never
//! reaches the device) or pass it and swallow the device's answer (the device
//! carried it out; the engine never hears so).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with what passes through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything passes.
    Pass,
    /// Every connection is closed; new ones are closed at once.
    Cut,
    /// Modbus: the next write request is swallowed, and nothing passes on that
    /// connection after it.
    SwallowWrite,
    /// Modbus: the next write request passes, its answer is swallowed, and
    /// nothing passes on that connection after it.
    SwallowWriteAnswer,
}

/// What the proxy carries: bytes it does not look into, or Modbus TCP frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    Bytes,
    Modbus,
}

/// A proxy listening on a free loopback port; it stops when dropped.
pub struct Proxy {
    port: u16,
    mode: watch::Sender<Mode>,
    stalled: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Modbus function codes that write.
const WRITES: [u8; 4] = [5, 6, 15, 16];

impl Proxy {
    /// A proxy to `127.0.0.1:target`; the two stalls need [`Carries::Modbus`].
    pub async fn start(target: u16, carries: Carries) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (mode, modes) = watch::channel(Mode::Pass);
        let stalled = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&stalled);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if *modes.borrow() == Mode::Cut {
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                let modes = modes.clone();
                tokio::spawn(relay(client, server, carries, modes, Arc::clone(&counter)));
            }
        });
        Self {
            port,
            mode,
            stalled,
            task,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// How many writes the proxy has stalled at so far.
    pub fn stalled(&self) -> usize {
        self.stalled.load(Ordering::SeqCst)
    }
}

/// Carries one connection both ways until either side closes or the proxy is cut.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    carries: Carries,
    modes: watch::Receiver<Mode>,
    stalled: Arc<AtomicUsize>,
) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let (up, down) = if carries == Carries::Bytes {
        (
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
            }),
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
            }),
        )
    } else {
        // The transaction id of a write whose answer is to be swallowed.
        let (held, held_rx) = watch::channel(None::<u16>);
        let stall = (modes.clone(), Arc::clone(&stalled));
        (
            tokio::spawn(requests(from_client, to_server, stall, held)),
            tokio::spawn(answers(from_server, to_client, stalled, held_rx)),
        )
    };
    let mut cut = modes;
    let _ = cut.wait_for(|mode| *mode == Mode::Cut).await;
    up.abort();
    down.abort();
}

/// Reads one whole Modbus TCP frame (MBAP header and PDU), or `None` at the end.
async fn frame(from: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let mut header = [0u8; 6];
    from.read_exact(&mut header).await.ok()?;
    let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
    let mut frame = header.to_vec();
    frame.resize(6 + length, 0);
    from.read_exact(&mut frame[6..]).await.ok()?;
    Some(frame)
}

fn is_write(frame: &[u8]) -> bool {
    frame.get(7).is_some_and(|fc| WRITES.contains(fc))
}

async fn requests(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    (modes, stalled): (watch::Receiver<Mode>, Arc<AtomicUsize>),
    held: watch::Sender<Option<u16>>,
) {
    while let Some(frame) = frame(&mut from).await {
        let mode = *modes.borrow();
        if is_write(&frame) && mode == Mode::SwallowWrite {
            stalled.fetch_add(1, Ordering::SeqCst);
            // Keep the connection open and silent: the engine waits for an answer.
            std::future::pending::<()>().await;
        }
        if is_write(&frame) && mode == Mode::SwallowWriteAnswer {
            held.send_replace(Some(u16::from_be_bytes([frame[0], frame[1]])));
        }
        if to.write_all(&frame).await.is_err() {
            return;
        }
    }
}

async fn answers(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    stalled: Arc<AtomicUsize>,
    held: watch::Receiver<Option<u16>>,
) {
    while let Some(frame) = frame(&mut from).await {
        let transaction = u16::from_be_bytes([frame[0], frame[1]]);
        if *held.borrow() == Some(transaction) {
            stalled.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if to.write_all(&frame).await.is_err() {
            return;
        }
    }
}
