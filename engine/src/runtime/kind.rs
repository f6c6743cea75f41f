//! The three kinds of component.

use std::fmt;

/// The three kinds of component, one WIT world each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComponentKind {
    Codec,
    Stage,
    Rules,
}

impl ComponentKind {
    pub const ALL: [ComponentKind; 3] = [Self::Codec, Self::Stage, Self::Rules];

    /// `codec`, `stage` or `rules`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Codec => "codec",
            ComponentKind::Stage => "stage",
            ComponentKind::Rules => "rules",
        }
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
