//! The four kinds of component.

use std::fmt;

/// The four kinds of component, one WIT world each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComponentKind {
    Codec,
    Stage,
    Rules,
    /// Payloads devices push (MQTT) into samples, and writes into payloads.
    Decoder,
}

impl ComponentKind {
    pub const ALL: [ComponentKind; 4] = [Self::Codec, Self::Stage, Self::Rules, Self::Decoder];

    /// `codec`, `stage`, `rules` or `decoder`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Codec => "codec",
            ComponentKind::Stage => "stage",
            ComponentKind::Rules => "rules",
            ComponentKind::Decoder => "decoder",
        }
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
