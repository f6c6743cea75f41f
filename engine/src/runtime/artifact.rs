//! Compiling components, with precompiled artifacts cached on disk by content hash.
//!
//! The cache file name joins the SHA-256 of the component's bytes with a hash of
//! the engine's compilation settings, so a new engine build never loads an
//! artifact compiled for another one. A cache file that cannot be read or
//! deserialized is recompiled and rewritten; the cache is an optimisation only.
//!
//! Each compilation runs in an engine of its own, on the calling thread, dropped
//! once the component is compiled: wasmtime keeps its compiler's working memory
//! for the engine's life, about 20 MiB after the built-in components, which a
//! gateway would otherwise carry for months to compile nothing more
//! (docs/performance.md).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use super::LoadError;

/// The first four bytes of every WebAssembly binary.
const WASM_MAGIC: &[u8] = b"\0asm";

/// SHA-256 of `bytes` as lowercase hex.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Compiles `bytes` for `engine` in an engine made from `compiler` (the same
/// compilation settings), or loads the artifact cached for them. Returns the
/// component and its content hash.
pub(super) fn compile(
    engine: &Engine,
    compiler: &Config,
    cache_dir: Option<&Path>,
    name: &str,
    bytes: &[u8],
) -> Result<(Component, String), LoadError> {
    let hash = content_hash(bytes);
    let cached = cache_dir.map(|dir| artifact_path(engine, dir, &hash));
    if let Some(path) = &cached
        && let Some(component) = load_cached(engine, path)
    {
        return Ok((component, hash));
    }
    if !bytes.starts_with(WASM_MAGIC) {
        let first: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(LoadError::Invalid {
            name: name.to_owned(),
            detail: format!(
                "not a .wasm file: it starts with [{}], a WebAssembly binary with `\\0asm` \
                 (00 61 73 6d)",
                first.join(" ")
            ),
        });
    }
    let invalid = |e: wasmtime::Error| LoadError::Invalid {
        name: name.to_owned(),
        detail: format!("{e:#}"),
    };
    let artifact = Engine::new(compiler)
        .map_err(|e| LoadError::Engine(format!("{e:#}")))?
        .precompile_component(bytes)
        .map_err(invalid)?;
    let component = load_compiled(engine, &artifact).map_err(invalid)?;
    if let Some(path) = &cached {
        store_cached(&artifact, path);
    }
    Ok((component, hash))
}

#[allow(unsafe_code)]
fn load_compiled(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `artifact` is what `precompile_component` returned a moment ago,
    // from an engine with this one's compilation settings; nothing else wrote it.
    unsafe { Component::deserialize(engine, artifact) }
}

fn artifact_path(engine: &Engine, dir: &Path, hash: &str) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    dir.join(format!("{hash}-{:016x}.cwasm", hasher.finish()))
}

#[allow(unsafe_code)]
fn load_cached(engine: &Engine, path: &Path) -> Option<Component> {
    if !path.is_file() {
        return None;
    }
    // SAFETY: files in the cache directory are written only by `store_cached`, from
    // this engine's own compiler output, under a name bound to this engine's
    // settings; the directory belongs to the engine and is not an input.
    match unsafe { Component::deserialize_file(engine, path) } {
        Ok(component) => Some(component),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "unusable cached artifact; recompiling");
            None
        }
    }
}

fn store_cached(artifact: &[u8], path: &Path) {
    let written = (|| {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // Write beside, then rename: a reader never sees a half-written artifact
        // (and engines sharing the directory never write into one another's).
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let partial = path.with_extension(format!(
            "partial-{}-{}",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&partial, artifact)?;
        std::fs::rename(&partial, path)
    })();
    if let Err(error) = written {
        tracing::warn!(path = %path.display(), %error, "could not cache compiled component");
    }
}
