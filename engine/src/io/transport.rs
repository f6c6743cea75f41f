//! The byte streams links run over and how they are opened: TCP for devices on
//! Ethernet; an in-memory pipe in the link's own tests.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

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
/// coalesce them only adds latency.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tcp;

impl Dialer for Tcp {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> Dialing<'a> {
        Box::pin(async move {
            let stream = TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Connection)
        })
    }
}
