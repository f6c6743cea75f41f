//! A refused call in the kit's types: the WIT `frame-error`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::plans::Planned;

/// Why a frame could not be used or a value not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The bytes are not a valid answer: the stream can no longer be trusted.
    Malformed(String),
    /// The device answered with an error code; `retry` holds smaller requests
    /// to try instead, empty when the failure is final.
    Device {
        code: u32,
        message: String,
        retry: Vec<Planned>,
    },
}

impl Failure {
    /// A final device error.
    pub fn device(code: u32, message: String) -> Self {
        Failure::Device {
            code,
            message,
            retry: Vec::new(),
        }
    }

    /// A value the codec cannot write to a tag (code 0). The engine puts the
    /// tag's key before the message, so a session need not keep the keys.
    pub fn unwritable(message: String) -> Self {
        Failure::device(0, message)
    }

    /// What the failure says.
    pub fn message(&self) -> &str {
        match self {
            Failure::Malformed(message) | Failure::Device { message, .. } => message,
        }
    }
}

/// Tag `tag` of a session's `tags`.
///
/// # Errors
/// The session has no such tag: malformed, as the engine never asks for one.
pub fn tag_at<T>(tags: &[T], tag: u32) -> Result<&T, Failure> {
    tags.get(tag as usize)
        .ok_or_else(|| Failure::Malformed(format!("unknown tag {tag}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let failure = Failure::unwritable("read-only".into());
        assert_eq!(failure, Failure::device(0, "read-only".into()));
        assert_eq!(failure.message(), "read-only");
        assert_eq!(tag_at(&[7], 0), Ok(&7));
        assert_eq!(
            tag_at(&[7], 1).map_err(|f| String::from(f.message())),
            Err("unknown tag 1".into())
        );
    }
}
