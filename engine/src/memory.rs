//! Hands memory freed in bulk back to the operating system.
//!
//! Building a gateway (reading the configuration, compiling every device, opening
//! its component sessions) allocates and frees several times what the running
//! engine keeps. glibc's allocator keeps freed pages between live allocations
//! mapped, so without a trim the process's resident size stays at the build's
//! peak: on a 1,000-device configuration about 30 MiB more (docs/performance.md).
//! Other allocators (musl's) return such pages on their own; there this is a no-op.

/// The heap's top is handed back to the system once 128 KiB of it are free, for
/// the life of the process. glibc starts there but raises the threshold to twice
/// any large block it had mapped on its own and then freed (up to 64 MiB), as the
/// build does; the running engine then kept ~20 MiB of freed heap resident at
/// 1,000 devices, which its rounds' short-lived allocations kept touching
/// (docs/performance.md).
/// Setting it fixes blocks of 128 KiB and more to their own mappings too. Call
/// it first thing, before the allocations it should govern.
pub fn keep_heap_small() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes the allocator's thresholds, under its lock.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        }
    }
}

/// Returns the allocator's free pages to the system. Call it after a build of
/// the gateway or of reloaded devices, not on the hot path: it walks the heap.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases pages the allocator holds free; it
        // takes the allocator's own locks and touches no memory of ours.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
