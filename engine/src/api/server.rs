//! The HTTP server (SEC-7 of `docs/security.md`): connections accepted up to a cap (the rest are closed at
//! once, so a flood of sockets never takes the file descriptors the engine
//! needs), a deadline for a request's headers, and an idle deadline: a
//! connection that moves no byte either way for that long is closed, a
//! half-sent body included. The console's stream writes a keep-alive comment
//! every 15 s, so it is never idle.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// How a server treats its connections (`collector.http`).
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a connection may move no byte.
    pub idle_timeout: Duration,
}

/// A wait after a failed accept (the process is out of descriptors, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` within `limits` (over TLS with `tls`) until
/// `shutdown` turns true; connections still open then finish their request
/// in progress.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    if let Ok(address) = listener.local_addr() {
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(%address, scheme, max_connections = limits.max_connections, "HTTP API listening");
    }
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Refused connections in a row, for a bounded log.
    let mut refused: u64 = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => if *shutdown.borrow() { return } else { continue },
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "cannot accept an HTTP connection");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    refused,
                    max = limits.max_connections,
                    "HTTP connections refused: as many as `collector.http.maxConnections` are open"
                );
            }
            drop(stream);
            continue;
        };
        refused = 0;
        let (app, shutdown, tls) = (app.clone(), shutdown.clone(), tls.clone());
        tokio::spawn(async move {
            let Some(tls) = tls else {
                return connection(stream, app, limits, permit, shutdown).await;
            };
            // The handshake within the time a client has for its headers.
            match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
                Ok(Ok(stream)) => connection(stream, app, limits, permit, shutdown).await,
                Ok(Err(error)) => tracing::debug!(%error, "HTTPS handshake failed"),
                Err(_) => tracing::debug!("HTTPS handshake not done in time"),
            }
        });
    }
}

/// Serves one connection until it ends, goes idle past its deadline, or the
/// engine stops (then after the request in progress); holds `_permit`, its
/// place among `maxConnections`, until then.
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    app: Router,
    limits: ServerLimits,
    _permit: OwnedSemaphorePermit,
    mut shutdown: watch::Receiver<bool>,
) {
    let started = Instant::now();
    let moved = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        inner: stream,
        started,
        moved: Arc::clone(&moved),
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut served = pin!(http.serve_connection(io, TowerToHyperService::new(app)));
    let mut stopping = false;
    loop {
        let last = started + Duration::from_millis(moved.load(Ordering::Relaxed));
        let deadline = last + limits.idle_timeout;
        tokio::select! {
            _ = served.as_mut() => return,
            () = tokio::time::sleep_until(deadline) => {
                let last = started + Duration::from_millis(moved.load(Ordering::Relaxed));
                if last + limits.idle_timeout <= Instant::now() {
                    // Dropped: the socket closes.
                    return;
                }
            }
            _ = shutdown.changed(), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A connection that notes when it last moved a byte (ms after `started`).
struct Watched<S> {
    inner: S,
    started: Instant,
    moved: Arc<AtomicU64>,
}

impl<S> Watched<S> {
    fn moved(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.moved.store(ms, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
