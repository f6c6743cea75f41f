//! YAML with positions: every node keeps the line and column it came from, so a
//! loader can check a whole document and report every mistake as `FILE:LINE:COL`.
//!
//! Loading is two passes: [`parse`] builds a [`Node`] tree (only syntax errors stop
//! it), then typed readers ([`Fields`]) convert the tree and collect every problem
//! into [`Diagnostics`] instead of stopping at the first.

mod diagnostics;
mod node;
mod paths;
mod pos;
mod read;

pub use diagnostics::{Diagnostic, Diagnostics};
pub use node::{Key, Kind, Node, parse};
pub use paths::Paths;
pub use pos::Pos;
pub use read::{Fields, FromNode, enum_value};
