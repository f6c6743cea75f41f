//! Values an engine makes once for its data directory and keeps there (its
//! MQTT client id, an admin token): read back at every start, written whole
//! (via rename) and readable by the engine's own user only.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;

/// The value kept at `path`, or `make()`'s, kept there now; true when it was
/// made.
///
/// # Errors
/// The kept value cannot be read, or a new one cannot be written.
pub(super) fn kept(
    path: &Path,
    make: impl FnOnce() -> anyhow::Result<String>,
) -> anyhow::Result<(String, bool)> {
    match std::fs::read_to_string(path) {
        Ok(kept) if !kept.trim().is_empty() => return Ok((kept.trim().to_owned(), false)),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    }
    let made = make()?;
    let partial = path.with_extension("partial");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut file| {
            // A file left by an earlier attempt may have other rights.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            file.write_all(made.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&partial, path))
        .with_context(|| format!("cannot keep {}", path.display()))?;
    Ok((made, true))
}

/// `bytes` random bytes from the system, in hex.
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub(super) fn random_hex(bytes: usize) -> anyhow::Result<String> {
    let mut random = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut source| source.read_exact(&mut random))
        .context("cannot read /dev/urandom")?;
    Ok(random.iter().map(|b| format!("{b:02x}")).collect())
}
