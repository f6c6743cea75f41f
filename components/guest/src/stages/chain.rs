//! `chain`: runs a sequence of built-in stages in one call, so a pipeline of
//! built-in stages crosses the component boundary once a round instead of once
//! a stage.
//!
//! Settings name the stages by position: `N.use` is the name of stage `N` (`0`,
//! `1`, ... in order, no gaps) and `N.KEY` is setting `KEY` of that stage. Every
//! issue a stage reports comes back with its key prefixed the same way (`N.KEY`,
//! or `N.FIELD` for a tag field), so the engine can point at the stage it is about.
//!
//! One position may hold a [`Plug`]: a stage from outside the component, which the
//! `chain_socket` component imports (the engine composes an operator's stage into
//! it). That position's settings are the plug's own; the chain does not read them.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Builtin, Issue, NAMES, Settings, Stage, Tag};
use crate::columns::Columns;
use crate::settings::SettingValue;

/// A stage the chain calls at one position, built outside it.
pub trait Plug {
    /// Processes the batch in place; it may come back misaligned (a faulty plug).
    fn process(&self, batch: &mut Columns);
    fn reset(&self);
}

/// No plug: the plain `chain`.
pub enum Unplugged {}

impl Plug for Unplugged {
    fn process(&self, _: &mut Columns) {
        match *self {}
    }

    fn reset(&self) {
        match *self {}
    }
}

pub(super) enum Step<P> {
    Builtin(Builtin),
    Plugged(P),
}

pub struct Chain<P: Plug = Unplugged> {
    pub(super) steps: Vec<Step<P>>,
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

impl<P: Plug> Chain<P> {
    /// The stages the settings name, each configured for `tags`, with `plug` at
    /// its position (whose settings are left to it). Issues of the settings and of
    /// each stage have their keys prefixed with the position.
    ///
    /// # Errors
    /// Every issue found.
    pub fn with_plug(
        settings: &Settings<'_>,
        tags: &[Tag<'_>],
        plug: Option<(usize, P)>,
    ) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut steps = Vec::new();
        let (plug_at, mut plug) = match plug {
            Some((at, plug)) => (Some(at), Some(plug)),
            None => (None, None),
        };
        for (index, position) in positions(settings, &mut issues).into_iter().enumerate() {
            if Some(index) == plug_at {
                steps.extend(plug.take().map(Step::Plugged));
                continue;
            }
            let Some(name) = position.name else {
                issues.push(Issue::new(
                    None,
                    &format!("{index}.use"),
                    format!("stage {index} has no `{index}.use`"),
                ));
                continue;
            };
            match Builtin::create(name, &position.settings, tags) {
                Some(Ok(stage)) => steps.push(Step::Builtin(stage)),
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
        if let Some(at) = plug_at.filter(|_| plug.is_some()) {
            issues.push(Issue::new(
                None,
                &format!("{at}.use"),
                format!("the plugged stage's position {at} is past the chain's stages"),
            ));
        }
        if issues.is_empty() {
            Ok(Self { steps })
        } else {
            Err(issues)
        }
    }
}

impl<P: Plug> Stage for Chain<P> {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        Self::with_plug(settings, tags, None)
    }

    fn process(&self, batch: &mut Columns) {
        for step in &self.steps {
            match step {
                Step::Builtin(stage) => stage.process(batch),
                Step::Plugged(plug) => {
                    plug.process(batch);
                    // A faulty plug's output goes back as it is, for the engine to refuse.
                    if !batch.is_aligned() {
                        return;
                    }
                }
            }
        }
    }

    fn reset(&self) {
        for step in &self.steps {
            match step {
                Step::Builtin(stage) => stage.reset(),
                Step::Plugged(plug) => plug.reset(),
            }
        }
    }
}

fn prefixed(index: usize, key: &str) -> String {
    if key.is_empty() {
        format!("{index}.")
    } else {
        format!("{index}.{key}")
    }
}
