//! Problems found while loading documents, each at a position of a file.

use std::fmt;
use std::sync::Arc;

use super::pos::Pos;

/// One problem at one place in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: Arc<str>,
    pub pos: Pos,
    pub message: String,
    /// Whose problem it is, when the place alone does not say it at a glance
    /// (`device `d`, channel `c``); empty otherwise.
    pub whose: String,
}

impl fmt::Display for Diagnostic {
    /// `FILE:LINE:COL: message (whose)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.pos, self.message)?;
        if !self.whose.is_empty() {
            write!(f, " ({})", self.whose)?;
        }
        Ok(())
    }
}

/// Every problem found, in file and document order. Problems pushed without a
/// file are in the list's own file; problems moved in from another list keep theirs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics {
    file: Arc<str>,
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty list for `file` (the name printed in front of each line).
    pub fn new(file: impl AsRef<str>) -> Self {
        Self {
            file: Arc::from(file.as_ref()),
            items: Vec::new(),
        }
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// A problem at `pos` of this list's file.
    pub fn push(&mut self, pos: Pos, message: impl Into<String>) {
        self.items.push(Diagnostic {
            file: Arc::clone(&self.file),
            pos,
            message: message.into(),
            whose: String::new(),
        });
    }

    /// A problem at `pos` of another file.
    pub fn push_in(&mut self, file: &str, pos: Pos, message: impl Into<String>) {
        self.items.push(Diagnostic {
            file: Arc::from(file),
            pos,
            message: message.into(),
            whose: String::new(),
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

    /// Names `whose` problems those found since the list was `mark` long are
    /// (a device, then its channel: `device `d`, channel `c``).
    pub fn name_since(&mut self, mark: usize, whose: &str) {
        for item in self.items.iter_mut().skip(mark) {
            item.whose = if item.whose.is_empty() {
                whose.to_owned()
            } else {
                format!("{whose}, {}", item.whose)
            };
        }
    }

    /// The same problems without saying whose: for tests of their words.
    #[cfg(test)]
    pub fn unnamed(mut self) -> Self {
        for item in &mut self.items {
            item.whose.clear();
        }
        self
    }

    /// Moves the problems of `other` (another file, or a nested check) into this
    /// list; each keeps its own file.
    pub fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
    }

    /// `Ok(value)` when nothing was found, the list otherwise (sorted).
    pub fn into_result<T>(self, value: T) -> Result<T, Diagnostics> {
        if self.items.is_empty() {
            Ok(value)
        } else {
            Err(self.sorted())
        }
    }

    /// The list by file, then position.
    pub fn sorted(mut self) -> Self {
        self.items.sort_by(|a, b| {
            (&a.file, a.pos.line, a.pos.column).cmp(&(&b.file, b.pos.line, b.pos.column))
        });
        self
    }
}

impl fmt::Display for Diagnostics {
    /// One `FILE:LINE:COL: message` line per problem.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
