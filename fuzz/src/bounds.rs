//! What one input may allocate (FUZZ-3): a counting allocator over the system's.
//!
//! The process's global allocator counts, per thread, the bytes live and their
//! peak; [`measure`] reports both for a closure. A reader that trusts a length
//! field (`Vec::with_capacity(n)` from the input) shows as a peak far beyond
//! the input's size; one that keeps something per input, as bytes retained.
#![allow(unsafe_code)] // A global allocator is an unsafe trait; this one only forwards and counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting.
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: a thread being torn down may still free memory.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to `System` with the caller's arguments
// unchanged; the counting touches only thread-local integers and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// What a closure allocated on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The most bytes live at once, above those live before.
    pub peak: usize,
    /// Bytes still live afterwards, above those live before (negative when it
    /// freed older memory).
    pub retained: isize,
}

/// Runs `f`, counting what it allocates.
pub fn measure(f: impl FnOnce()) -> Usage {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    f();
    let peak = PEAK.with(Cell::get);
    let end = LIVE.with(Cell::get);
    Usage {
        peak: (peak - start).max(0) as usize,
        retained: end - start,
    }
}

/// The most a target may allocate at once: `fixed` plus `per_byte` for each
/// byte of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub fixed: usize,
    pub per_byte: usize,
}

impl Budget {
    pub fn allowed(&self, input_len: usize) -> usize {
        self.fixed
            .saturating_add(self.per_byte.saturating_mul(input_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closure_s_peak_and_what_it_keeps_are_counted() {
        let mut kept = Vec::new();
        let usage = measure(|| {
            let big = vec![0u8; 100_000];
            assert_eq!(big.len(), 100_000);
            kept = vec![1u8; 1_000];
        });
        assert!(usage.peak >= 101_000, "{usage:?}");
        assert_eq!(usage.retained, 1_000);
        drop(kept);
    }
}
