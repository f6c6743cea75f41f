//! The exchanges in flight: fresh ids for the frames a session sends (Modbus
//! transaction ids, MC serial numbers, S7 PDU references) and the read and the
//! write waiting for their answers.

use alloc::format;
use alloc::string::String;

/// The last id handed out, and the read and the write in flight. `W` is what a
/// codec checks the answer to its write against.
#[derive(Debug)]
pub struct InFlight<W = ()> {
    last_id: u16,
    /// Request and id of the read in flight.
    read: Option<(u32, u16)>,
    /// Id and state of the write in flight.
    write: Option<(u16, W)>,
}

impl<W> Default for InFlight<W> {
    fn default() -> Self {
        InFlight {
            last_id: 0,
            read: None,
            write: None,
        }
    }
}

impl<W> InFlight<W> {
    /// A fresh id: 1, 2, ... and on past 65535 to 0.
    pub fn next_id(&mut self) -> u16 {
        self.last_id = self.last_id.wrapping_add(1);
        self.last_id
    }

    /// A fresh id for a read of `request`, now the read in flight.
    pub fn send_read(&mut self, request: u32) -> u16 {
        let id = self.next_id();
        self.read = Some((request, id));
        id
    }

    /// A fresh id for a write, now the write in flight with `state`.
    pub fn send_write(&mut self, state: W) -> u16 {
        let id = self.next_id();
        self.write = Some((id, state));
        id
    }

    /// The id of the read in flight, which an answer to `request` ends.
    ///
    /// # Errors
    /// No read in flight, or one of another request (it is forgotten all the same).
    pub fn answered_read(&mut self, request: u32) -> Result<u16, String> {
        let Some((pending, id)) = self.read.take() else {
            return Err("a response arrived with no read in flight".into());
        };
        if pending != request {
            return Err(format!(
                "response for request {request}, but {pending} is in flight"
            ));
        }
        Ok(id)
    }

    /// The id and state of the write in flight, which an answer ends.
    ///
    /// # Errors
    /// No write in flight.
    pub fn answered_write(&mut self) -> Result<(u16, W), String> {
        self.write
            .take()
            .ok_or_else(|| "a write response arrived with no write in flight".into())
    }

    /// The request of the read in flight, if any (for a protocol whose
    /// answers say their size only with the request they answer).
    pub fn read_in_flight(&self) -> Option<u32> {
        self.read.map(|(request, _)| request)
    }

    /// The state of the write in flight, if any.
    pub fn write_in_flight(&self) -> Option<&W> {
        self.write.as_ref().map(|(_, state)| state)
    }

    /// Forgets the read and the write in flight (the ids go on).
    pub fn reset(&mut self) {
        self.read = None;
        self.write = None;
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;

    #[test]
    fn only_the_read_in_flight_is_answered() {
        let mut flight = InFlight::<()>::default();
        assert_eq!(flight.read_in_flight(), None);
        assert_eq!(flight.send_read(3), 1);
        assert_eq!(flight.read_in_flight(), Some(3));
        assert_eq!(flight.answered_read(3), Ok(1));
        assert_eq!(flight.read_in_flight(), None);
        assert!(flight.answered_read(3).is_err(), "answered already");
        assert_eq!(flight.send_read(3), 2);
        assert!(flight.answered_read(4).is_err());
        assert!(
            flight.answered_read(3).is_err(),
            "a wrong answer ends the read"
        );
    }

    #[test]
    fn writes_keep_their_state_and_ids_wrap() {
        let mut flight = InFlight::<char>::default();
        assert!(flight.answered_write().is_err());
        assert_eq!(flight.send_write('x'), 1);
        assert_eq!(flight.write_in_flight(), Some(&'x'));
        assert_eq!(flight.answered_write(), Ok((1, 'x')));
        flight.send_write('y');
        flight.send_read(0);
        flight.reset();
        assert!(flight.answered_write().is_err() && flight.answered_read(0).is_err());
        while flight.next_id() != u16::MAX - 1 {}
        assert_eq!((flight.next_id(), flight.next_id()), (u16::MAX, 0));
    }
}
