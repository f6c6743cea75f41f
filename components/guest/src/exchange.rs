//! Bookkeeping every codec shares: which read is in flight.

use alloc::format;
use alloc::string::String;

/// The state kept with the read in flight, if `request` is the one in flight.
///
/// # Errors
/// No read in flight, or another request is.
pub fn answered_read<T>(pending: Option<(u32, T)>, request: u32) -> Result<T, String> {
    let Some((pending, state)) = pending else {
        return Err("a response arrived with no read in flight".into());
    };
    if pending != request {
        return Err(format!(
            "response for request {request}, but {pending} is in flight"
        ));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::answered_read;

    #[test]
    fn only_the_read_in_flight_is_answered() {
        assert_eq!(answered_read(Some((3, 'x')), 3), Ok('x'));
        assert!(answered_read(Some((3, 'x')), 4).is_err());
        assert!(answered_read::<char>(None, 3).is_err());
    }
}
