//! One physical connection to a device (or to a gateway serving several devices)
//! and its state machine:
//!
//! ```text
//! IDLE -> CONNECTING -> ONLINE -> OFFLINE -> RECOVERING -> CONNECTING ...
//!                                                 \-> FAILED (after too many attempts;
//!                                                     reconnects continue at the capped delay)
//! ```
//!
//! A link is used under a lock, so requests of the devices sharing it are
//! serialised. Each exchange writes a request frame and reads the answer in two
//! phases: the codec's header length, then the size the codec reads from the
//! header (bounded by [`MAX_FRAME`] before anything is buffered). Any I/O error,
//! timeout or malformed frame drops the socket: the byte stream can no longer be
//! trusted. A round cancelled mid-exchange (per-device timeout) leaves the link
//! marked, and the socket is dropped before its next use.

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::backoff::{Jitter, delay};
use super::budget::{Budget, BudgetExceeded, Permit};
use crate::config::BackoffConfig;
use crate::model::FrameError;
use crate::runtime::{CallError, CodecSession};

/// The largest frame a link accepts; a header announcing more is malformed.
pub const MAX_FRAME: u32 = 64 * 1024;
/// Handshake steps a codec may ask for before the link gives up.
const MAX_HANDSHAKE_STEPS: u32 = 8;

/// State of a link, as the connection state machine names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkState {
    Idle,
    Connecting,
    Online,
    Offline,
    Recovering,
    Failed,
}

impl LinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Idle => "IDLE",
            LinkState::Connecting => "CONNECTING",
            LinkState::Online => "ONLINE",
            LinkState::Offline => "OFFLINE",
            LinkState::Recovering => "RECOVERING",
            LinkState::Failed => "FAILED",
        }
    }

    pub const ALL: [LinkState; 6] = [
        LinkState::Idle,
        LinkState::Connecting,
        LinkState::Online,
        LinkState::Offline,
        LinkState::Recovering,
        LinkState::Failed,
    ];
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a link could not carry a request.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    #[error("waiting {retry_in:?} before reconnecting (last error: {last})")]
    Backoff { retry_in: Duration, last: String },
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    #[error("connecting to {address} failed: {detail}")]
    Connect { address: String, detail: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connection lost: {0}")]
    Io(String),
    #[error("{0}")]
    Frame(FrameError),
    #[error("codec failed: {0}")]
    Codec(#[from] CallError),
}

/// Where and how to connect.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSettings {
    pub host: String,
    pub port: u16,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub backoff: BackoffConfig,
    /// Failed connection attempts in a row after which the link is FAILED.
    pub failed_after: u32,
}

impl LinkSettings {
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A connection and its state.
#[derive(Debug)]
pub struct Link {
    settings: LinkSettings,
    budget: Budget,
    state: LinkState,
    stream: Option<TcpStream>,
    permit: Option<Permit>,
    /// Connection attempts that failed in a row.
    attempts: u32,
    retry_at: Option<Instant>,
    /// Bumped at each successful connect; devices reset their codec sessions and
    /// pipelines when it changes.
    epoch: u64,
    /// An exchange started and did not finish: the stream may hold half a frame.
    interrupted: bool,
    /// A heartbeat timed out: a late answer may still arrive and must be discarded.
    stale: bool,
    /// Heartbeats that failed in a row.
    heartbeat_failures: u32,
    last_error: String,
    last_success: Option<Instant>,
    reconnects: u64,
    jitter: Jitter,
}

impl Link {
    pub fn new(settings: LinkSettings, budget: Budget, seed: u64) -> Self {
        Self {
            settings,
            budget,
            state: LinkState::Idle,
            stream: None,
            permit: None,
            attempts: 0,
            retry_at: None,
            epoch: 0,
            interrupted: false,
            stale: false,
            heartbeat_failures: 0,
            last_error: String::new(),
            last_success: None,
            reconnects: 0,
            jitter: Jitter::new(seed),
        }
    }

    pub fn state(&self) -> LinkState {
        self.state
    }

    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// Successful connects after the first.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    pub fn last_error(&self) -> &str {
        &self.last_error
    }

    /// When an answer last arrived.
    pub fn last_success(&self) -> Option<Instant> {
        self.last_success
    }

    fn enter(&mut self, state: LinkState) {
        if self.state != state {
            tracing::debug!(address = %self.settings.address(), from = %self.state, to = %state, "link state");
            self.state = state;
        }
    }

    /// Drops the socket after a failure and schedules the reconnect.
    pub fn mark_offline(&mut self, reason: &str) {
        if self.stream.is_some() {
            tracing::warn!(address = %self.settings.address(), reason, "connection dropped");
        }
        self.stream = None;
        self.permit = None;
        self.interrupted = false;
        self.stale = false;
        self.heartbeat_failures = 0;
        self.last_error = reason.to_owned();
        self.enter(LinkState::Offline);
        self.schedule_retry();
    }

    /// Closes the connection on purpose (a new codec version must start with its
    /// own handshake): the next round connects again at once, without a backoff
    /// and without counting a failure.
    pub fn restart(&mut self, reason: &str) {
        tracing::info!(address = %self.settings.address(), reason, "reconnecting");
        self.stream = None;
        self.permit = None;
        self.interrupted = false;
        self.stale = false;
        self.heartbeat_failures = 0;
        self.retry_at = None;
        self.enter(LinkState::Idle);
    }

    fn schedule_retry(&mut self) {
        self.attempts = self.attempts.saturating_add(1);
        let wait = delay(&self.settings.backoff, self.attempts, self.jitter.sample());
        self.retry_at = Some(Instant::now() + wait);
        self.enter(if self.attempts > self.settings.failed_after {
            LinkState::Failed
        } else {
            LinkState::Recovering
        });
    }

    /// Makes sure the link is connected (and handshaken with `session`'s codec),
    /// returning its epoch. Does not wait out a backoff: it fails at once instead,
    /// so a round of a device that is down costs nothing.
    ///
    /// # Errors
    /// Backoff not elapsed, budget exhausted, or the connect/handshake failed.
    pub async fn ensure_online(&mut self, session: &CodecSession) -> Result<u64, LinkError> {
        if self.interrupted {
            self.mark_offline("an exchange was cancelled mid-frame");
        }
        if self.state == LinkState::Online && self.stream.is_some() {
            return Ok(self.epoch);
        }
        if let Some(at) = self.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(LinkError::Backoff {
                    retry_in: at - now,
                    last: self.last_error.clone(),
                });
            }
        }
        self.enter(LinkState::Connecting);
        match self.connect(session).await {
            Ok(()) => {
                if self.epoch > 0 {
                    self.reconnects += 1;
                }
                self.epoch += 1;
                self.attempts = 0;
                self.retry_at = None;
                self.last_success = Some(Instant::now());
                self.enter(LinkState::Online);
                tracing::info!(address = %self.settings.address(), epoch = self.epoch, "connected");
                Ok(self.epoch)
            }
            Err(error) => {
                self.stream = None;
                self.permit = None;
                self.last_error = error.to_string();
                self.schedule_retry();
                Err(error)
            }
        }
    }

    async fn connect(&mut self, session: &CodecSession) -> Result<(), LinkError> {
        let permit = self.budget.acquire(&self.settings.host)?;
        let address = self.settings.address();
        let stream =
            match timeout(self.settings.connect_timeout, TcpStream::connect(&address)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    return Err(LinkError::Connect {
                        address,
                        detail: error.to_string(),
                    });
                }
                Err(_) => {
                    return Err(LinkError::Connect {
                        address,
                        detail: format!("no answer within {:?}", self.settings.connect_timeout),
                    });
                }
            };
        // Small request/response frames: waiting to coalesce them only adds latency.
        stream
            .set_nodelay(true)
            .map_err(|e| LinkError::Io(e.to_string()))?;
        self.stream = Some(stream);
        self.permit = Some(permit);
        session.reset()?;
        for step in 0..MAX_HANDSHAKE_STEPS {
            let Some(frame) = session.handshake(step)? else {
                return Ok(());
            };
            let answer = self.exchange(session, &frame).await?;
            session
                .check_handshake(step, &answer)?
                .map_err(LinkError::Frame)?;
        }
        Err(LinkError::Frame(FrameError::Malformed(format!(
            "the codec asked for more than {MAX_HANDSHAKE_STEPS} handshake steps"
        ))))
    }

    /// Sends `frame` and reads the answer, framed by `session`'s codec. A failure
    /// drops the connection.
    ///
    /// # Errors
    /// Not connected, I/O error, timeout, or a header the codec rejects.
    pub async fn exchange(
        &mut self,
        session: &CodecSession,
        frame: &[u8],
    ) -> Result<Vec<u8>, LinkError> {
        let result = self.try_exchange(session, frame).await;
        if let Err(error) = &result {
            self.mark_offline(&error.to_string());
        }
        result
    }

    /// A heartbeat: an exchange whose timeout alone does not drop the connection;
    /// `failures_allowed` heartbeats failing in a row do.
    ///
    /// # Errors
    /// As for [`Link::exchange`]; the link is OFFLINE afterwards only if the
    /// failure was not a timeout, or the timeouts reached `failures_allowed`.
    pub async fn heartbeat(
        &mut self,
        session: &CodecSession,
        frame: &[u8],
        failures_allowed: u32,
    ) -> Result<Vec<u8>, LinkError> {
        let result = self.try_exchange(session, frame).await;
        match &result {
            Ok(_) => self.heartbeat_failures = 0,
            Err(LinkError::Timeout(_)) => {
                self.heartbeat_failures += 1;
                self.stale = true;
                if self.heartbeat_failures >= failures_allowed {
                    let reason = format!(
                        "{} heartbeats in a row went unanswered",
                        self.heartbeat_failures
                    );
                    self.mark_offline(&reason);
                }
            }
            Err(error) => self.mark_offline(&error.to_string()),
        }
        result
    }

    async fn try_exchange(
        &mut self,
        session: &CodecSession,
        frame: &[u8],
    ) -> Result<Vec<u8>, LinkError> {
        let read_timeout = self.settings.read_timeout;
        let Some(stream) = self.stream.as_mut() else {
            return Err(LinkError::Io("not connected".into()));
        };
        if self.stale {
            discard_pending(stream)?;
            self.stale = false;
        }
        self.interrupted = true;
        let result = match timeout(read_timeout, transact(stream, session, frame)).await {
            Ok(result) => result,
            Err(_) => Err(LinkError::Timeout(read_timeout)),
        };
        self.interrupted = false;
        if result.is_ok() {
            self.last_success = Some(Instant::now());
        }
        result
    }
}

/// Reads and drops whatever already arrived (a late answer to a timed-out heartbeat).
fn discard_pending(stream: &mut TcpStream) -> Result<(), LinkError> {
    let mut scratch = [0u8; 512];
    loop {
        match stream.try_read(&mut scratch) {
            Ok(0) => return Err(LinkError::Io("closed by the peer".into())),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(LinkError::Io(e.to_string())),
        }
    }
}

/// One request and its answer on `stream`.
async fn transact(
    stream: &mut TcpStream,
    session: &CodecSession,
    frame: &[u8],
) -> Result<Vec<u8>, LinkError> {
    let io = |e: std::io::Error| LinkError::Io(e.to_string());
    stream.write_all(frame).await.map_err(io)?;
    let head_len = session.header_len()?;
    if head_len == 0 || head_len > MAX_FRAME {
        return Err(LinkError::Frame(FrameError::Malformed(format!(
            "header length {head_len}"
        ))));
    }
    let mut answer = vec![0u8; head_len as usize];
    stream.read_exact(&mut answer).await.map_err(io)?;
    let total = session.frame_length(&answer)?.map_err(LinkError::Frame)?;
    if total < head_len || total > MAX_FRAME {
        return Err(LinkError::Frame(FrameError::Malformed(format!(
            "a frame of {total} bytes (header {head_len}, limit {MAX_FRAME})"
        ))));
    }
    answer.resize(total as usize, 0);
    stream
        .read_exact(&mut answer[head_len as usize..])
        .await
        .map_err(io)?;
    Ok(answer)
}
