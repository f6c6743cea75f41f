//! What a codec says of a round's requests and of the frames it is given.

/// One read request of a round, as a codec planned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRead {
    pub id: u32,
    /// The tags it reads (indexes into the device's tags).
    pub tags: Vec<u32>,
}

/// What the first bytes of an answer tell a codec of its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// A frame starts at the first byte and has this many bytes in all.
    Length(u32),
    /// This many bytes come before a frame (a preamble, or garbage): drop them
    /// and ask again with what follows.
    Skip(u32),
    /// The codec must see this many bytes before it can tell.
    Need(u32),
}

/// The device answered with an exception or end code: it is there and the
/// connection is fine, it just refused this request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("device error {code}: {message}")]
pub struct DeviceError {
    pub code: u32,
    pub message: String,
    /// Smaller requests to try instead, when splitting may isolate the bad tags.
    pub retry: Vec<PlannedRead>,
}

/// Why a codec could not use a frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not a valid answer: the stream can no longer be trusted; reconnect.
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error(transparent)]
    Device(DeviceError),
}
