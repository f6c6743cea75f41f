//! The byte streams links run over and how they are opened: TCP for devices on
//! Ethernet, a serial port for a Modbus RTU line; an in-memory pipe in the
//! link's own tests.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::model::{Parity, SerialLine};

/// A connected byte stream to a device (or a gateway in front of several).
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync + Debug {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + Debug> Stream for T {}

/// An open connection.
pub type Connection = Box<dyn Stream>;

/// The future of a connection attempt.
pub type Dialing<'a> = Pin<Box<dyn Future<Output = io::Result<Connection>> + Send + 'a>>;

/// Opens connections; the link bounds each attempt with its connect timeout.
pub trait Dialer: Send + Sync + Debug {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> Dialing<'a>;
}

/// TCP, without Nagle's delay: request and answer frames are small, and waiting to
/// coalesce them only adds latency. With TCP keepalive (seed 003 §3.3): a
/// device that vanished without a FIN (a cable pulled, a PLC powered off) is
/// found by the kernel within [`KEEPALIVE_IDLE`] + [`KEEPALIVE_PROBES`] x
/// [`KEEPALIVE_INTERVAL`], also on a channel without `heartbeatMs` and
/// between slow rounds; the heartbeat stays the check that the device answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tcp;

/// Idle time before the first keepalive probe (Linux's default is two hours).
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Time between unanswered probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes after which the connection is dead.
pub const KEEPALIVE_PROBES: u32 = 3;

/// Turns on TCP keepalive with the engine's timings.
///
/// # Errors
/// The socket refused the options.
pub fn keep_alive(stream: &TcpStream) -> io::Result<()> {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
}

impl Dialer for Tcp {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> Dialing<'a> {
        Box::pin(async move {
            let stream = TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            keep_alive(&stream)?;
            Ok(Box::new(stream) as Connection)
        })
    }
}

/// A serial port, driven as `SerialLine` says; the "host" a link names is the
/// port's path (`/dev/ttyUSB0`), and there is no port number.
#[derive(Debug, Clone, Copy)]
pub struct Serial(pub SerialLine);

impl Dialer for Serial {
    fn dial<'a>(&'a self, host: &'a str, _port: u16) -> Dialing<'a> {
        let line = self.0;
        Box::pin(async move {
            let parity = match line.parity {
                Parity::None => tokio_serial::Parity::None,
                Parity::Even => tokio_serial::Parity::Even,
                Parity::Odd => tokio_serial::Parity::Odd,
            };
            let data_bits = if line.data_bits == 7 {
                tokio_serial::DataBits::Seven
            } else {
                tokio_serial::DataBits::Eight
            };
            let stop_bits = if line.stop_bits == 2 {
                tokio_serial::StopBits::Two
            } else {
                tokio_serial::StopBits::One
            };
            let port = tokio_serial::new(host, line.baud_rate)
                .parity(parity)
                .data_bits(data_bits)
                .stop_bits(stop_bits)
                .flow_control(tokio_serial::FlowControl::None);
            let stream = tokio_serial::SerialStream::open(&port).map_err(io::Error::from)?;
            Ok(Box::new(stream) as Connection)
        })
    }
}
