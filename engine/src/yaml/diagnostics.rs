//! Errors found while loading a YAML document, each at a position.

use std::fmt;

use super::Pos;

/// One problem at one place in a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub pos: Pos,
    pub message: String,
}

/// Every problem found in one file, in document order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics {
    file: String,
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty list for `file` (the name printed in front of each line).
    pub fn new(file: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            items: Vec::new(),
        }
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn push(&mut self, pos: Pos, message: impl Into<String>) {
        self.items.push(Diagnostic {
            pos,
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn items(&self) -> &[Diagnostic] {
        &self.items
    }

    /// Moves the problems of `other` (another file, or a nested check) into this list,
    /// keeping their own file name when it differs.
    pub fn extend(&mut self, other: Diagnostics) {
        if other.file == self.file || other.file.is_empty() {
            self.items.extend(other.items);
        } else {
            for item in other.items {
                self.items.push(Diagnostic {
                    pos: item.pos,
                    message: format!("{}:{}: {}", other.file, item.pos, item.message),
                });
            }
        }
    }

    /// `Ok(value)` when nothing was found, the list otherwise.
    pub fn into_result<T>(mut self, value: T) -> Result<T, Diagnostics> {
        if self.items.is_empty() {
            Ok(value)
        } else {
            self.items.sort_by_key(|d| (d.pos.line, d.pos.column));
            Err(self)
        }
    }
}

impl fmt::Display for Diagnostics {
    /// One `FILE:LINE:COL: message` line per problem.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}: {}", self.file, item.pos, item.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
