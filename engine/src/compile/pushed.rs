//! Device configurations pushed by the platform (`config/push`), kept in the data
//! directory (`<wal.dir>/pushed/`, one JSON file per device, written via rename)
//! and laid over the configuration file's devices at every start and reload
//! (CMD-P1 to CMD-P4 of `docs/commands.md`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::config::{self, DeviceConfig, GatewayConfig};
use crate::model::Protocols;
use crate::yaml::{self, Diagnostics, Kind, Node, Pos};

/// Sub-directory of the data directory holding the pushed configurations.
pub const PUSHED_DIR: &str = "pushed";

/// Where a pushed configuration came from and when, as kept with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pushed {
    pub device_id: String,
    pub pushed_at: i64,
    pub request_id: Option<String>,
    /// `mqtt` or `http`.
    pub origin: String,
    /// The fingerprint of the file's entry the push replaced (none when the file
    /// had no entry for the device): a file entry that differs from it later is a
    /// conflict.
    pub replaces: Option<String>,
}

/// A pushed configuration as kept on disk.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    #[serde(flatten)]
    pushed: Pushed,
    /// The device as pushed (the JSON of a `devices` entry).
    device: Json,
}

/// How the file's entry of a pushed device changed since the push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileEdit {
    /// The file's entry says something else than the one the push replaced.
    Changed,
    /// The file has no entry for the device any more.
    Removed,
    /// The file has an entry now, where it had none.
    Added,
}

/// A pushed device whose file entry was edited after the push: the pushed
/// configuration stays in force (CMD-P3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub device_id: String,
    pub pushed_at: i64,
    pub file_edit: FileEdit,
}

/// The configuration file with the pushed devices laid over it.
#[derive(Debug, Clone, Default)]
pub struct Overlaid {
    pub config: GatewayConfig,
    /// The pushed devices in force.
    pub pushed: Vec<Pushed>,
    pub conflicts: Vec<Conflict>,
}

/// The pushed configurations of one data directory.
#[derive(Debug, Clone)]
pub struct PushedDevices {
    dir: PathBuf,
}

impl PushedDevices {
    /// Those of the data directory `config` names.
    pub fn of(config: &GatewayConfig) -> Self {
        Self {
            dir: config.collector.wal.dir.join(PUSHED_DIR),
        }
    }

    /// The file keeping device `device_id`'s push: named by a digest of the id, so
    /// any id makes a safe file name.
    fn file(&self, device_id: &str) -> PathBuf {
        let digest = Sha256::digest(device_id.as_bytes());
        let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// Keeps `device` (JSON) as pushed, replacing an earlier push of it (CMD-P2).
    ///
    /// # Errors
    /// The directory or the file cannot be written.
    pub fn keep(&self, pushed: &Pushed, device: &Json) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let kept = Kept {
            pushed: pushed.clone(),
            device: device.clone(),
        };
        let path = self.file(&pushed.device_id);
        let partial = path.with_extension("partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(&kept)?)?;
        std::fs::rename(&partial, &path)
    }

    /// Forgets device `device_id`'s push; whether there was one.
    ///
    /// # Errors
    /// The file cannot be removed.
    pub fn withdraw(&self, device_id: &str) -> std::io::Result<bool> {
        match std::fs::remove_file(self.file(device_id)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Lays the pushed devices over `file_config`: each replaces the file's entry
    /// with its `deviceId`, or is added after the file's devices (CMD-P3).
    ///
    /// # Errors
    /// Every problem of a kept file, at its position in that file.
    pub fn overlay(
        &self,
        file_config: GatewayConfig,
        protocols: &Protocols,
    ) -> Result<Overlaid, Diagnostics> {
        let mut errors = Diagnostics::new(self.dir.display().to_string());
        // Read against the file's configuration as it is, then laid over it in
        // place: the configuration (hundreds of bytes a tag) is never copied.
        let kept: Vec<_> = kept_files(&self.dir, &mut errors)
            .into_iter()
            .filter_map(|path| {
                let (pushed, device) = read_kept(&path, &file_config, protocols, &mut errors)?;
                let file_edit = edit_since(
                    pushed.replaces.as_deref(),
                    file_config.device(&pushed.device_id),
                );
                Some((path, pushed, device, file_edit))
            })
            .collect();
        let mut overlaid = Overlaid {
            config: file_config,
            ..Overlaid::default()
        };
        for (path, pushed, device, file_edit) in kept {
            if let Some(other) = overlaid.config.devices.iter().find(|d| {
                d.device_id != device.device_id
                    && d.product_id == device.product_id
                    && d.device_num == device.device_num
            }) {
                let message = format!(
                    "productId `{}` with deviceNum `{}` is already used by device `{}`: both would publish to the same MQTT topic",
                    device.product_id, device.device_num, other.device_id
                );
                errors.push_in(&path.display().to_string(), device.pos, message);
                continue;
            }
            if let Some(file_edit) = file_edit {
                overlaid.conflicts.push(Conflict {
                    device_id: pushed.device_id.clone(),
                    pushed_at: pushed.pushed_at,
                    file_edit,
                });
            }
            put_device(&mut overlaid.config, device);
            overlaid.pushed.push(pushed);
        }
        errors.into_result(overlaid)
    }

    /// Whether device `device_id` runs as pushed, and how it was.
    pub fn get(&self, device_id: &str) -> Option<Pushed> {
        let text = std::fs::read(self.file(device_id)).ok()?;
        serde_json::from_slice::<Kept>(&text)
            .ok()
            .map(|kept| kept.pushed)
    }
}

/// Puts `device` in place of the entry with its `deviceId`, or after the others.
pub fn put_device(config: &mut GatewayConfig, device: DeviceConfig) {
    match config
        .devices
        .iter_mut()
        .find(|d| d.device_id == device.device_id)
    {
        Some(entry) => *entry = device,
        None => config.devices.push(device),
    }
}

/// How the file's entry changed since a push replaced the one of fingerprint
/// `replaced`.
fn edit_since(replaced: Option<&str>, now: Option<&DeviceConfig>) -> Option<FileEdit> {
    match (replaced, now) {
        (Some(before), Some(now)) if now.fingerprint() != before => Some(FileEdit::Changed),
        (Some(_), None) => Some(FileEdit::Removed),
        (None, Some(_)) => Some(FileEdit::Added),
        _ => None,
    }
}

fn kept_files(dir: &Path, errors: &mut Diagnostics) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => {
            errors.push(
                Pos::default(),
                format!("cannot read the pushed configurations: {error}"),
            );
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// One kept push: what is kept with it, and the device read at its positions in
/// the file.
fn read_kept(
    path: &Path,
    context: &GatewayConfig,
    protocols: &Protocols,
    errors: &mut Diagnostics,
) -> Option<(Pushed, DeviceConfig)> {
    let file = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            errors.push_in(
                &file,
                Pos::default(),
                format!("cannot read the pushed configuration: {error}"),
            );
            return None;
        }
    };
    let kept = match serde_json::from_str::<Kept>(&text) {
        Ok(kept) => kept,
        Err(error) => {
            errors.push_in(
                &file,
                Pos::default(),
                format!("not a pushed configuration: {error}"),
            );
            return None;
        }
    };
    // Read again with positions, so problems point into the file.
    let root = match yaml::parse(&file, &text) {
        Ok(root) => root,
        Err(problems) => {
            errors.extend(problems);
            return None;
        }
    };
    let node = device_node(&root)?;
    match config::read_device(&file, node, context, protocols) {
        Ok(device) if device.device_id == kept.pushed.device_id => Some((kept.pushed, device)),
        Ok(device) => {
            let message = format!(
                "the pushed configuration of `{}` holds device `{}`",
                kept.pushed.device_id, device.device_id
            );
            errors.push_in(&file, node.pos, message);
            None
        }
        Err(problems) => {
            errors.extend(problems);
            None
        }
    }
}

fn device_node(root: &Node) -> Option<&Node> {
    match &root.kind {
        Kind::Map(entries) => entries
            .iter()
            .find(|(key, _)| key.name == "device")
            .map(|(_, node)| node),
        _ => None,
    }
}
