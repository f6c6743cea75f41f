//! Where a gateway's configuration comes from, and reading it: the device
//! configuration file and the pipeline files, every problem of both at once.

use std::path::PathBuf;

use super::pushed::{Conflict, Overlaid, PushedDevices};
use crate::config::{Document, GatewayConfig};
use crate::model::Protocols;
use crate::pipeline::{PipelineSet, files_in};
use crate::yaml::Diagnostics;

/// The files a gateway is made from.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The device configuration file; without it, a gateway with every default
    /// and no device.
    pub config_file: Option<PathBuf>,
    /// The pipeline files' directory (`--pipelines`); the built-in `default` is
    /// always there too.
    pub pipelines_dir: Option<PathBuf>,
    /// More pipeline files, loaded with the directory's as one set.
    pub pipeline_files: Vec<PathBuf>,
}

/// The files read and checked on their own, before any component sees them.
/// The configuration a parsed file (or none: every default) says.
fn config_of(
    document: Option<&Document>,
    protocols: &Protocols,
) -> Result<GatewayConfig, Diagnostics> {
    document.map_or_else(|| Ok(GatewayConfig::default()), |d| d.config(protocols))
}

#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration file's name, as diagnostics print it.
    pub file: String,
    /// The file's configuration with the pushed devices laid over it.
    pub config: GatewayConfig,
    pub pipelines: PipelineSet,
    /// Pushed devices whose file entry was edited since their push.
    pub conflicts: Vec<Conflict>,
}

impl Sources {
    /// The configuration file's name, as diagnostics print it.
    pub fn config_name(&self) -> String {
        self.config_file
            .as_ref()
            .map_or_else(|| "configuration".to_owned(), |f| f.display().to_string())
    }

    /// Reads and parses the device configuration file, if there is one: its
    /// `collector` section finds the gateway's components (their protocols)
    /// before the rest is checked.
    ///
    /// # Errors
    /// A file that cannot be read, or a YAML syntax error.
    pub fn document(&self) -> Result<Option<Document>, Diagnostics> {
        self.config_file.as_deref().map(Document::read).transpose()
    }

    /// Reads the device configuration file, whose channels may name `protocols`.
    ///
    /// # Errors
    /// Every problem of the file, at its position.
    pub fn load_config(&self, protocols: &Protocols) -> Result<GatewayConfig, Diagnostics> {
        config_of(self.document()?.as_ref(), protocols)
    }

    /// Reads the device configuration file and lays the devices pushed into its
    /// data directory over it: the configuration that runs.
    ///
    /// # Errors
    /// Every problem of the file, or of a kept push.
    pub fn load_running(&self, protocols: &Protocols) -> Result<Overlaid, Diagnostics> {
        self.running_of(self.document()?.as_ref(), protocols)
    }

    /// [`Sources::load_running`] of the file's `document`, parsed already.
    fn running_of(
        &self,
        document: Option<&Document>,
        protocols: &Protocols,
    ) -> Result<Overlaid, Diagnostics> {
        let file = config_of(document, protocols)?;
        PushedDevices::of(&file).overlay(file, protocols)
    }

    /// What the components are to be asked about when the configuration file
    /// (parsed: `document`) has problems: the parts of it that read well, with
    /// the pushed devices laid over them. None without a file, or when the
    /// pipeline files or the pushes have problems too.
    pub fn readable_part(
        &self,
        document: Option<&Document>,
        protocols: &Protocols,
    ) -> Option<Loaded> {
        let (file, _problems) = document?.config_and_problems(protocols);
        let overlaid = PushedDevices::of(&file).overlay(file, protocols).ok()?;
        Some(Loaded {
            file: self.config_name(),
            config: overlaid.config,
            pipelines: self.load_pipelines().ok()?,
            conflicts: Vec::new(),
        })
    }

    /// Reads the pipeline files (the directory's and the others) as one set.
    ///
    /// # Errors
    /// Every problem of every file.
    pub fn load_pipelines(&self) -> Result<PipelineSet, Diagnostics> {
        let mut files = match &self.pipelines_dir {
            Some(dir) => files_in(dir)?,
            None => Vec::new(),
        };
        files.extend(self.pipeline_files.iter().cloned());
        PipelineSet::load(&files)
    }

    /// Reads both.
    ///
    /// # Errors
    /// Every problem of every file.
    pub fn load(&self, protocols: &Protocols) -> Result<Loaded, Diagnostics> {
        self.load_document(self.document()?.as_ref(), protocols)
    }

    /// [`Sources::load`] with the configuration file's `document`, parsed already.
    ///
    /// # Errors
    /// Every problem of every file.
    pub fn load_document(
        &self,
        document: Option<&Document>,
        protocols: &Protocols,
    ) -> Result<Loaded, Diagnostics> {
        match (self.running_of(document, protocols), self.load_pipelines()) {
            (Ok(overlaid), Ok(pipelines)) => Ok(Loaded {
                file: self.config_name(),
                config: overlaid.config,
                pipelines,
                conflicts: overlaid.conflicts,
            }),
            (config, pipelines) => {
                let mut errors = Diagnostics::new(self.config_name());
                errors.extend(config.err().unwrap_or_default());
                errors.extend(pipelines.err().unwrap_or_default());
                Err(errors.sorted())
            }
        }
    }
}
