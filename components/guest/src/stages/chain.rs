//! `chain`: runs a sequence of built-in stages in one call, so a pipeline of
//! built-in stages crosses the component boundary once a round instead of once
//! a stage.
//!
//! Settings name the stages by position: `N.use` is the name of stage `N` (`0`,
//! `1`, ... in order, no gaps) and `N.KEY` is setting `KEY` of that stage. Every
//! issue a stage reports comes back with its key prefixed the same way (`N.KEY`,
//! or `N.FIELD` for a tag field), so the engine can point at the stage it is about.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Builtin, Issue, NAMES, Settings, Stage, Tag};
use crate::columns::Columns;
use crate::settings::SettingValue;

pub struct Chain {
    stages: Vec<Builtin>,
}

/// Stage settings of one position.
#[derive(Default)]
struct Position<'a> {
    name: Option<&'a str>,
    settings: Vec<(&'a str, SettingValue<'a>)>,
}

/// Splits `N.KEY` into `N` and `KEY`.
fn split(key: &str) -> Option<(usize, &str)> {
    let (index, rest) = key.split_once('.')?;
    let index = index.parse().ok()?;
    (!rest.is_empty()).then_some((index, rest))
}

fn positions<'a>(settings: &Settings<'a>, issues: &mut Vec<Issue>) -> Vec<Position<'a>> {
    let mut positions: Vec<Position<'a>> = Vec::new();
    for (key, value) in settings {
        // A position past this bound would be a gap: refused below anyway.
        let Some((index, rest)) = split(key).filter(|(i, _)| *i <= settings.len()) else {
            issues.push(Issue::new(
                None,
                key,
                format!(
                    "`{key}`: chain settings are `N.use` and `N.<setting>`, N the stage's position"
                ),
            ));
            continue;
        };
        if positions.len() <= index {
            positions.resize_with(index + 1, Position::default);
        }
        let position = &mut positions[index];
        match (rest, value) {
            ("use", SettingValue::Text(name)) => position.name = Some(name),
            ("use", other) => issues.push(Issue::new(
                None,
                key,
                format!("`{key}` must be a stage name, got {}", other.kind()),
            )),
            (rest, value) => position.settings.push((rest, value.clone())),
        }
    }
    positions
}

impl Stage for Chain {
    /// The stages the settings name, each configured for `tags`. Issues of the
    /// settings and of each stage have their keys prefixed with the position.
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut stages = Vec::new();
        for (index, position) in positions(settings, &mut issues).into_iter().enumerate() {
            let Some(name) = position.name else {
                issues.push(Issue::new(
                    None,
                    &format!("{index}.use"),
                    format!("stage {index} has no `{index}.use`"),
                ));
                continue;
            };
            match Builtin::create(name, &position.settings, tags) {
                Some(Ok(stage)) => stages.push(stage),
                Some(Err(found)) => issues.extend(found.into_iter().map(|issue| Issue {
                    key: prefixed(index, &issue.key),
                    ..issue
                })),
                None => issues.push(Issue::new(
                    None,
                    &format!("{index}.use"),
                    format!(
                        "`{name}` is not a built-in stage (known: {})",
                        NAMES.join(", ")
                    ),
                )),
            }
        }
        if issues.is_empty() {
            Ok(Self { stages })
        } else {
            Err(issues)
        }
    }

    fn process(&self, batch: &mut Columns) {
        for stage in &self.stages {
            stage.process(batch);
        }
    }

    fn reset(&self) {
        self.stages.iter().for_each(Builtin::reset);
    }
}

fn prefixed(index: usize, key: &str) -> String {
    if key.is_empty() {
        format!("{index}.")
    } else {
        format!("{index}.{key}")
    }
}
