//! Locks that outlive a panic, and values replaced whole.
//!
//! A thread that panicked while holding one of the engine's locks leaves data that
//! is still consistent (every critical section writes whole values), so the
//! engine goes on with it rather than spreading the panic: these helpers take the
//! guard of a poisoned lock too.

use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, poisoned or not.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read-locks `lock`, poisoned or not.
pub fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

/// Write-locks `lock`, poisoned or not.
pub fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

/// A value replaced as a whole; readers keep the one they took.
#[derive(Debug)]
pub struct Swappable<T>(RwLock<Arc<T>>);

impl<T> Swappable<T> {
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The current value.
    pub fn get(&self) -> Arc<T> {
        Arc::clone(&read(&self.0))
    }

    /// Replaces the value; whoever holds the old one finishes with it.
    pub fn set(&self, value: T) {
        *write(&self.0) = Arc::new(value);
    }
}
