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
//! serialised. [`Link::request`] is the whole exchange with a device: the request
//! frame out, the answer in (framed by the codec, see [`super::exchange`]), and the
//! answer classified: data, a device's refusal (an exception or end code: the
//! connection is fine), or a failure. Any I/O error, timeout or malformed answer
//! drops the connection: the byte stream can no longer be trusted. A round
//! cancelled mid-exchange (per-device timeout) leaves the link marked, and the
//! connection is dropped before its next use.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::backoff::{Jitter, delay};
use super::budget::{Budget, Permit};
use super::error::LinkError;
use super::exchange::{discard_pending, transact};
use super::framer::Framer;
use super::transport::{Connection, Dialer, Serial, Tcp};
use crate::config::BackoffConfig;
use crate::model::SerialLine;
use crate::model::{DeviceError, FrameError};

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

/// What a link shows of itself to readers that must not wait for it (`/metrics`,
/// `/health`, the console) while a round holds it: its state and reconnects,
/// written by the link as they change.
#[derive(Debug)]
pub struct LinkStatus {
    state: AtomicU8,
    reconnects: AtomicU64,
    /// Reached FAILED and not connected since (its reconnects in between
    /// pass through CONNECTING).
    failing: AtomicBool,
}

impl LinkStatus {
    fn new() -> Self {
        Self {
            state: AtomicU8::new(0),
            reconnects: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        }
    }

    /// Whether the link reached FAILED and has not connected since.
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    pub fn state(&self) -> LinkState {
        let code = usize::from(self.state.load(Ordering::Relaxed));
        LinkState::ALL.get(code).copied().unwrap_or(LinkState::Idle)
    }

    /// Successful connects after the first.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    fn set_state(&self, state: LinkState) {
        match state {
            LinkState::Failed => self.failing.store(true, Ordering::Relaxed),
            LinkState::Online => self.failing.store(false, Ordering::Relaxed),
            _ => {}
        }
        let code = LinkState::ALL.iter().position(|s| *s == state).unwrap_or(0);
        self.state
            .store(u8::try_from(code).unwrap_or(0), Ordering::Relaxed);
    }
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// For a line (Modbus RTU, on a serial port or tunnelled), the silence that
    /// separates frames: each request waits for it (LINE-1), and an answer that
    /// timed out or was malformed leaves the line to be drained until it falls
    /// silent (LINE-2: the connection stays; the next unit on the line is not made
    /// to wait for a reconnect). `None` for a stream protocol, whose broken answer drops the
    /// connection.
    pub line: Option<Duration>,
    /// For a serial line: how the port is driven (the link opens the port, not
    /// a TCP connection).
    pub serial: Option<SerialLine>,
}

impl LinkSettings {
    pub fn address(&self) -> String {
        if self.serial.is_some() {
            return self.host.clone();
        }
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
    /// The state and reconnects, readable without the link's lock.
    status: Arc<LinkStatus>,
    dialer: Arc<dyn Dialer>,
    stream: Option<Connection>,
    permit: Option<Permit>,
    /// Connection attempts that failed in a row.
    attempts: u32,
    retry_at: Option<Instant>,
    /// Bumped at each successful connect; devices reset their codec sessions and
    /// pipelines when it changes.
    epoch: u64,
    /// An exchange started and did not finish: the stream may hold half a frame.
    interrupted: bool,
    /// A heartbeat timed out (or, on a line, any answer was lost or broken): a late
    /// answer may still arrive and must be discarded.
    stale: bool,
    /// On a line: when the last frame ended, for the silence before the next.
    line_quiet_since: Option<Instant>,
    /// Heartbeats that failed in a row.
    heartbeat_failures: u32,
    last_error: String,
    last_success: Option<Instant>,
    jitter: Jitter,
}

impl Link {
    /// A link over TCP, or over the serial port its settings name.
    pub fn new(settings: LinkSettings, budget: Budget, seed: u64) -> Self {
        let dialer: Arc<dyn Dialer> = match settings.serial {
            Some(line) => Arc::new(Serial(line)),
            None => Arc::new(Tcp),
        };
        Self::with_dialer(settings, budget, seed, dialer)
    }

    /// A link whose connections `dialer` opens.
    pub fn with_dialer(
        settings: LinkSettings,
        budget: Budget,
        seed: u64,
        dialer: Arc<dyn Dialer>,
    ) -> Self {
        Self {
            settings,
            budget,
            status: Arc::new(LinkStatus::new()),
            dialer,
            stream: None,
            permit: None,
            attempts: 0,
            retry_at: None,
            epoch: 0,
            interrupted: false,
            stale: false,
            line_quiet_since: None,
            heartbeat_failures: 0,
            last_error: String::new(),
            last_success: None,
            jitter: Jitter::new(seed),
        }
    }

    pub fn state(&self) -> LinkState {
        self.status.state()
    }

    /// The link's state and reconnects, for readers that must not wait for it.
    pub fn status(&self) -> Arc<LinkStatus> {
        Arc::clone(&self.status)
    }

    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// Successful connects after the first.
    pub fn reconnects(&self) -> u64 {
        self.status.reconnects()
    }

    pub fn last_error(&self) -> &str {
        &self.last_error
    }

    /// When an answer last arrived.
    pub fn last_success(&self) -> Option<Instant> {
        self.last_success
    }

    fn enter(&mut self, state: LinkState) {
        let from = self.state();
        if from != state {
            tracing::debug!(address = %self.settings.address(), %from, to = %state, "link state");
            self.status.set_state(state);
        }
    }

    /// Drops the connection after a failure and schedules the reconnect.
    fn mark_offline(&mut self, reason: &str) {
        if self.stream.is_some() {
            tracing::warn!(address = %self.settings.address(), reason, "connection dropped");
        }
        self.drop_connection();
        self.last_error = reason.to_owned();
        self.enter(LinkState::Offline);
        self.schedule_retry();
    }

    fn drop_connection(&mut self) {
        self.stream = None;
        self.permit = None;
        self.interrupted = false;
        self.stale = false;
        self.heartbeat_failures = 0;
    }

    /// Closes the connection on purpose (a new codec version must start with its
    /// own handshake): the next round connects again at once, without a backoff
    /// and without counting a failure.
    pub fn restart(&mut self, reason: &str) {
        tracing::info!(address = %self.settings.address(), reason, "reconnecting");
        self.drop_connection();
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

    /// Makes sure the link is connected (and handshaken with `framer`'s codec),
    /// returning its epoch. Does not wait out a backoff: it fails at once instead,
    /// so a round of a device that is down costs nothing.
    ///
    /// # Errors
    /// Backoff not elapsed, budget exhausted, or the connect/handshake failed.
    pub async fn ensure_online<F: Framer>(&mut self, framer: &F) -> Result<u64, LinkError> {
        if self.interrupted {
            self.interrupted = false;
            if self.settings.line.is_some() {
                // Half a frame on a line is drained, not a reason to reopen it.
                self.stale = true;
            } else {
                self.mark_offline("an exchange was cancelled mid-frame");
            }
        }
        if self.state() == LinkState::Online && self.stream.is_some() {
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
        match self.connect(framer).await {
            Ok(()) => {
                if self.epoch > 0 {
                    self.status.reconnects.fetch_add(1, Ordering::Relaxed);
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
                self.drop_connection();
                self.last_error = error.to_string();
                self.schedule_retry();
                Err(error)
            }
        }
    }

    async fn connect<F: Framer>(&mut self, framer: &F) -> Result<(), LinkError> {
        let permit = self.budget.acquire(&self.settings.host)?;
        let address = self.settings.address();
        let dialing = self.dialer.dial(&self.settings.host, self.settings.port);
        let stream = match timeout(self.settings.connect_timeout, dialing).await {
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
        self.stream = Some(stream);
        self.permit = Some(permit);
        framer.reset().map_err(LinkError::codec)?;
        for step in 0..MAX_HANDSHAKE_STEPS {
            let Some(frame) = framer.handshake(step).map_err(LinkError::codec)? else {
                return Ok(());
            };
            let answer = self
                .try_exchange(framer, &frame, self.settings.read_timeout)
                .await?;
            match framer
                .check_handshake(step, &answer)
                .map_err(LinkError::codec)?
            {
                Ok(()) => {}
                Err(FrameError::Malformed(message)) => return Err(LinkError::Malformed(message)),
                Err(FrameError::Device(refusal)) => return Err(LinkError::Refused(refusal)),
            }
        }
        Err(LinkError::Malformed(format!(
            "the codec asked for more than {MAX_HANDSHAKE_STEPS} handshake steps"
        )))
    }

    /// Sends `frame` and reads the answer, which `read` decodes: the whole exchange
    /// with the device. A device's refusal (an exception or end code) is the inner
    /// error: the connection is fine. An I/O error, a timeout or a malformed
    /// answer drops the connection (on a line: drains it); a failed codec call
    /// does not.
    ///
    /// # Errors
    /// Not connected, I/O error, timeout, a malformed answer, or a failed codec call.
    pub async fn request<F: Framer, T>(
        &mut self,
        framer: &F,
        frame: &[u8],
        read: impl FnOnce(&[u8]) -> Result<Result<T, FrameError>, F::Failure>,
    ) -> Result<Result<T, DeviceError>, LinkError> {
        let within = self.settings.read_timeout;
        self.request_within(framer, frame, within, read).await
    }

    /// [`Link::request`] waiting at most `within` for the answer: the read
    /// timeout of the channel asking, when devices with timeouts of their own
    /// share the link (units on one line, LINE-1).
    ///
    /// # Errors
    /// As for [`Link::request`].
    pub async fn request_within<F: Framer, T>(
        &mut self,
        framer: &F,
        frame: &[u8],
        within: Duration,
        read: impl FnOnce(&[u8]) -> Result<Result<T, FrameError>, F::Failure>,
    ) -> Result<Result<T, DeviceError>, LinkError> {
        let result = match self.try_exchange(framer, frame, within).await {
            Ok(answer) => decode(&answer, read),
            Err(error) => Err(error),
        };
        if let Err(error) = &result {
            if self.settings.line.is_some() && resyncs_line(error) {
                // The answer was lost or broken: drain the line before the next
                // request, and keep it (LINE-2).
                self.stale = true;
                self.last_error = error.to_string();
            } else if drops_connection(error) {
                self.mark_offline(&error.to_string());
            }
        }
        result
    }

    /// A heartbeat: a request whose timeout alone does not drop the connection;
    /// `failures_allowed` heartbeats timing out in a row do. Any well-formed answer,
    /// a refusal included, proves the device is there.
    ///
    /// # Errors
    /// As for [`Link::request`]; the link is OFFLINE afterwards only if the
    /// failure was not a timeout, or the timeouts reached `failures_allowed`.
    pub async fn heartbeat<F: Framer, T>(
        &mut self,
        framer: &F,
        frame: &[u8],
        failures_allowed: u32,
        read: impl FnOnce(&[u8]) -> Result<Result<T, FrameError>, F::Failure>,
    ) -> Result<Result<T, DeviceError>, LinkError> {
        let within = self.settings.read_timeout;
        let result = match self.try_exchange(framer, frame, within).await {
            Ok(answer) => decode(&answer, read),
            Err(error) => Err(error),
        };
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
            Err(error) if drops_connection(error) => self.mark_offline(&error.to_string()),
            Err(_) => {}
        }
        result
    }

    async fn try_exchange<F: Framer>(
        &mut self,
        framer: &F,
        frame: &[u8],
        read_timeout: Duration,
    ) -> Result<Vec<u8>, LinkError> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(LinkError::Io("not connected".into()));
        };
        match self.settings.line {
            Some(silence) => {
                if self.stale {
                    drain_line(stream.as_mut(), silence, read_timeout).await?;
                    self.stale = false;
                } else if let Some(quiet) = self.line_quiet_since {
                    tokio::time::sleep_until(quiet + silence).await;
                }
            }
            None if self.stale => {
                discard_pending(stream.as_mut())?;
                self.stale = false;
            }
            None => {}
        }
        self.interrupted = true;
        let result = match timeout(read_timeout, transact(stream.as_mut(), framer, frame)).await {
            Ok(result) => result,
            Err(_) => Err(LinkError::Timeout(read_timeout)),
        };
        self.interrupted = false;
        self.line_quiet_since = Some(Instant::now());
        if result.is_ok() {
            self.last_success = Some(Instant::now());
        }
        result
    }
}

/// What the codec read of an answer: data, a device's refusal, or a failure.
fn decode<T, E: std::error::Error + Send + Sync + 'static>(
    answer: &[u8],
    read: impl FnOnce(&[u8]) -> Result<Result<T, FrameError>, E>,
) -> Result<Result<T, DeviceError>, LinkError> {
    match read(answer).map_err(LinkError::codec)? {
        Ok(value) => Ok(Ok(value)),
        Err(FrameError::Device(refusal)) => Ok(Err(refusal)),
        Err(FrameError::Malformed(message)) => Err(LinkError::Malformed(message)),
    }
}

/// Whether a failed exchange leaves the byte stream untrustworthy.
fn drops_connection(error: &LinkError) -> bool {
    !matches!(error, LinkError::Codec(_) | LinkError::Backoff { .. })
}

/// Whether a failed exchange on a line is mended by letting the line fall silent:
/// a unit that did not answer in time, or an answer that was broken (bad CRC,
/// truncated, another unit's). The port itself failing is not.
fn resyncs_line(error: &LinkError) -> bool {
    matches!(error, LinkError::Timeout(_) | LinkError::Malformed(_))
}

/// The longest a line is drained before a request goes out anyway.
const MAX_DRAIN: Duration = Duration::from_millis(500);

/// Reads and drops what arrives on a line until it stays silent for `silence`
/// (at least [`MIN_QUIET`]): a late or broken answer is gone before the next
/// request. Bounded by `read_timeout` and [`MAX_DRAIN`].
async fn drain_line(
    stream: &mut dyn super::transport::Stream,
    silence: Duration,
    read_timeout: Duration,
) -> Result<(), LinkError> {
    use tokio::io::AsyncReadExt;
    let quiet = silence.max(MIN_QUIET);
    let deadline = Instant::now() + read_timeout.min(MAX_DRAIN);
    let mut scratch = [0u8; 256];
    while Instant::now() < deadline {
        match timeout(quiet, stream.read(&mut scratch)).await {
            Err(_) => return Ok(()),
            Ok(Ok(0)) => return Err(LinkError::Io("closed by the peer".into())),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(LinkError::Io(e.to_string())),
        }
    }
    Ok(())
}

/// The shortest silence that counts as a drained line: a tunnel (RTU over TCP)
/// has no character timing of its own, and a late answer may trickle in.
const MIN_QUIET: Duration = Duration::from_millis(20);
