//! A small deterministic generator (xorshift64) and the mutations of a frame.

use alloc::vec::Vec;

use crate::numeric::Number;

/// xorshift64: deterministic, no dependencies.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed` (0, which xorshift cannot leave, is moved).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 for `n` 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// `base` with a few bytes changed, cut short, extended by up to 7 bytes or
    /// unchanged, or up to 80 random bytes instead.
    pub fn mutate(&mut self, base: &[u8]) -> Vec<u8> {
        let mut out = base.to_vec();
        match self.below(6) {
            0 => {
                let len = self.below(80);
                return self.bytes(len);
            }
            1 => out.truncate(self.below(base.len() + 1)),
            2 => {
                let extra = self.below(8);
                out.extend(self.bytes(extra));
            }
            3 => return out,
            _ => {}
        }
        for _ in 0..=self.below(4) {
            if !out.is_empty() {
                let at = self.below(out.len());
                out[at] = self.next_u64() as u8;
            }
        }
        out
    }

    /// A value to write: booleans, small and large integers, floats, text.
    pub fn number(&mut self) -> Number {
        match self.below(5) {
            0 => Number::Bool(self.next_u64().is_multiple_of(2)),
            1 => Number::Int(self.below(4) as i64 - 1),
            2 => Number::Int(self.next_u64() as i64 % 70_000),
            3 => Number::Float(self.next_u64() as f64),
            _ => Number::Text("abc".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn deterministic_and_bounded() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(a.bytes(16), b.bytes(16));
        assert_ne!(Rng::new(0).next_u64(), 0);
        let base = [1u8; 40];
        for _ in 0..1000 {
            assert!(a.mutate(&base).len() <= 80);
            assert!(a.below(3) < 3);
        }
        assert_eq!(a.below(0), 0);
    }
}
