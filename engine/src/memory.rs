//! Hands memory a build used back to the operating system.
//!
//! Building a gateway (reading the configuration, compiling every device, opening
//! its component sessions) allocates and frees several times what the running
//! engine keeps. glibc's allocator keeps freed pages between live allocations
//! mapped, so without a trim the process's resident size stays at the build's
//! peak: on a 1,000-device configuration about 30 MiB more (docs/performance.md).
//! Other allocators (musl's) return such pages on their own; there the trims are
//! no-ops.
//!
//! A build also runs code the rounds never do: the component compiler, the YAML
//! reader, the configuration compiler. Its pages stay resident until the kernel
//! needs memory, about 10 MiB of the engine's own executable at 1,000 devices;
//! after a build they are handed back at once, and the pages the running engine
//! uses come back from the page cache as it runs them.

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

/// Returns what a build used and the running engine does not need: the
/// allocator's free pages, and the resident pages of the engine's own code and
/// read-only data. Call it after a build of the gateway or of reloaded devices,
/// not on the hot path: it walks the heap and the process's mappings.
pub fn release_after_build() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases pages the allocator holds free; it
        // takes the allocator's own locks and touches no memory of ours.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
    #[cfg(target_os = "linux")]
    match page_out_own_code() {
        Ok(bytes) => tracing::debug!(bytes, "code pages of the build handed back"),
        // Kernels before 5.4 have no MADV_PAGEOUT: the pages stay until needed.
        Err(error) => tracing::debug!(%error, "code pages of the build kept"),
    }
}

/// Advises the kernel to reclaim the resident pages of every read-only mapping
/// of the engine's executable; returns the bytes advised.
#[cfg(target_os = "linux")]
fn page_out_own_code() -> std::io::Result<usize> {
    // The path the kernel prints in the maps too (with " (deleted)" once the
    // file was replaced), whatever the filesystem.
    let exe = std::fs::read_link("/proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut advised = 0;
    for (start, end) in read_only_mappings(&maps, &exe.to_string_lossy()) {
        // SAFETY: the range is a whole mapping of the executable file that is
        // never written; MADV_PAGEOUT drops its pages from the resident set and
        // the next access reads them back from the file, so no contents change.
        #[allow(unsafe_code)]
        let status =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT) };
        if status != 0 {
            return Err(std::io::Error::last_os_error());
        }
        advised += end - start;
    }
    Ok(advised)
}

/// The address ranges of the mappings in `maps` (the format of
/// `/proc/self/maps`: range, permissions, offset, device, inode, then the path
/// after padding) of the file at `path` that are not writable.
#[cfg(target_os = "linux")]
fn read_only_mappings(maps: &str, path: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (range, perms) = (fields.next()?, fields.next()?);
            if fields.nth(3)?.trim_start() != path || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn read_only_mappings_of_the_executable_only() {
        let maps = "\
55d0c4a00000-55d0c4b00000 r--p 00000000 fd:01 4242 /opt/sluice/bin/sluice
55d0c4b00000-55d0c5f00000 r-xp 00100000 fd:01 4242 /opt/sluice/bin/sluice
55d0c5f00000-55d0c5f80000 r--p 01500000 fd:01 4242 /opt/sluice/bin/sluice
55d0c5f80000-55d0c5f90000 rw-p 01580000 fd:01 4242 /opt/sluice/bin/sluice
55d0c6000000-55d0c9000000 rw-p 00000000 00:00 0 [heap]
7f1a00000000-7f1a00200000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a00300000-7f1a00301000 r-xp 00000000 fd:01 4242                       /opt/sluice/bin/sluice (deleted)
7f1a00400000-7f1a00401000 r-xp 00000000 fd:01 4243 /opt/sluice/bin/sluice-old
garbage line
";
        let bin = "/opt/sluice/bin/sluice";
        assert_eq!(
            read_only_mappings(maps, bin),
            vec![
                (0x55d0_c4a0_0000, 0x55d0_c4b0_0000),
                (0x55d0_c4b0_0000, 0x55d0_c5f0_0000),
                (0x55d0_c5f0_0000, 0x55d0_c5f8_0000),
            ]
        );
        // Once the file is replaced, the kernel names the running one so.
        assert_eq!(
            read_only_mappings(maps, "/opt/sluice/bin/sluice (deleted)"),
            vec![(0x7f1a_0030_0000, 0x7f1a_0030_1000)]
        );
        assert!(read_only_mappings(maps, "/usr/bin/other").is_empty());
    }

    #[test]
    fn paging_out_the_code_keeps_the_process_running() {
        // The test binary's own code: every page advised away comes back as it runs.
        let advised = page_out_own_code().expect("MADV_PAGEOUT on the test binary");
        assert!(advised > 0);
        let sum: u64 = (1..=1000u64).sum();
        assert_eq!(sum, 500_500);
        release_after_build();
    }
}
