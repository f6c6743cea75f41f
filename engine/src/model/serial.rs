//! Serial lines: how a port is driven (`baudRate`, `parity`, `dataBits`,
//! `stopBits`) and the silence that separates Modbus RTU frames on it.

use std::time::Duration;

/// The parity bit of each character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parity {
    None,
    Even,
    Odd,
}

impl Parity {
    /// Names as the file writes them.
    pub const NAMES: &'static [(&'static str, Parity)] =
        &[("N", Parity::None), ("E", Parity::Even), ("O", Parity::Odd)];
}

/// How a serial port is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SerialLine {
    pub baud_rate: u32,
    pub parity: Parity,
    /// 7 or 8.
    pub data_bits: u8,
    /// 1 or 2.
    pub stop_bits: u8,
}

/// The fixed silence the Modbus specification sets above 19200 baud.
const FAST_LINE_SILENCE: Duration = Duration::from_micros(1750);

impl SerialLine {
    /// Bits one character takes on the line: start, data, parity and stop bits.
    pub fn char_bits(&self) -> u32 {
        let parity = u32::from(self.parity != Parity::None);
        1 + u32::from(self.data_bits) + parity + u32::from(self.stop_bits)
    }

    /// The silence that ends a frame: 3.5 characters, or 1.75 ms above 19200 baud.
    pub fn frame_silence(&self) -> Duration {
        if self.baud_rate > 19_200 {
            return FAST_LINE_SILENCE;
        }
        let micros = u64::from(self.char_bits()) * 3_500_000 / u64::from(self.baud_rate.max(1));
        Duration::from_micros(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_silence_is_three_and_a_half_characters_up_to_19200_baud() {
        let line = |baud_rate, parity| SerialLine {
            baud_rate,
            parity,
            data_bits: 8,
            stop_bits: 1,
        };
        // 11 bits a character at 9600 baud: 3.5 x 1.146 ms.
        assert_eq!(line(9600, Parity::Even).char_bits(), 11);
        assert_eq!(
            line(9600, Parity::Even).frame_silence(),
            Duration::from_micros(4010)
        );
        assert_eq!(
            line(19_200, Parity::None).frame_silence(),
            Duration::from_micros(1822)
        );
        assert_eq!(
            line(115_200, Parity::None).frame_silence(),
            FAST_LINE_SILENCE
        );
    }
}
