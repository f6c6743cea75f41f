//! The pipelines a gateway can use, by name: the built-in `default` and the
//! pipeline files, loaded as one set so they may include each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::include::{builtin, load_set};
use super::spec::PipelineSpec;
use crate::yaml::{Diagnostics, Pos};

/// Pipelines by name: the built-in `default` plus any loaded from files.
#[derive(Debug, Clone)]
pub struct PipelineSet {
    specs: HashMap<String, PipelineSpec>,
}

impl PipelineSet {
    /// Only the built-in default pipeline.
    ///
    /// # Errors
    /// Never for a correct build (the embedded file is checked by the tests).
    pub fn builtin() -> Result<Self, Diagnostics> {
        let spec = builtin()?;
        Ok(Self {
            specs: HashMap::from([(spec.name.clone(), spec)]),
        })
    }

    /// The built-in default plus the pipelines of `files` (a file may replace
    /// `default`), loaded as one set so they may include each other.
    ///
    /// # Errors
    /// Every problem of every file.
    pub fn load(files: &[PathBuf]) -> Result<Self, Diagnostics> {
        let mut set = Self::builtin()?;
        let mut errors = Diagnostics::default();
        for loaded in load_set(files) {
            match loaded {
                Ok(spec) => {
                    set.specs.insert(spec.name.clone(), spec);
                }
                Err(problems) => errors.extend(problems),
            }
        }
        errors.into_result(set)
    }

    pub fn get(&self, name: &str) -> Option<&PipelineSpec> {
        self.specs.get(name)
    }
}

/// The pipeline files in `dir`, by name.
///
/// # Errors
/// The directory cannot be read.
pub fn files_in(dir: &Path) -> Result<Vec<PathBuf>, Diagnostics> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        let mut errors = Diagnostics::new(dir.display().to_string());
        errors.push(
            Pos::default(),
            format!("cannot read the pipelines directory: {e}"),
        );
        errors
    })?;
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    Ok(files)
}
