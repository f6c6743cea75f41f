//! The invariants of the design notes, cross-checked with the code that keeps them.
//!
//! Every invariant has one ID, `PREFIX-N` (or `PREFIX-XN` in a note with several
//! series), the prefix naming the note that defines it ([`PREFIXES`]). A note
//! defines an ID in a bullet that starts with it in bold, followed by `.` or `:`.
//! The check fails on an ID defined twice, in the wrong note, with an unknown
//! prefix or series, or without a prefix; on an ID cited in a `.rs` or `.md` file
//! and defined nowhere; on an ID no `.rs` file cites; and on a citation in the old
//! style in a Rust comment (see `old`). The files are those git knows (tracked, or
//! new and not ignored).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::process::Command;

mod ids;
mod old;
mod prefixes;

use ids::{Definition, Id};
pub use prefixes::{PREFIXES, Prefix};

/// One problem, where it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// What the check counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub defined: usize,
    pub notes: usize,
    pub citations: usize,
    pub in_code: usize,
}

/// Checks the checkout at `root`.
///
/// # Errors
/// Every problem found, sorted, one line each; or why the files could not be read.
pub fn check(root: &Path) -> Result<Summary, Vec<String>> {
    let files = files(root).map_err(|e| vec![e])?;
    let (summary, problems) = analyse(PREFIXES, &files);
    if problems.is_empty() {
        Ok(summary)
    } else {
        Err(problems.iter().map(ToString::to_string).collect())
    }
}

/// The `.rs` and `.md` files git knows under `root`, as (path, text).
fn files(root: &Path) -> Result<Vec<(String, String)>, String> {
    let output = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .args(["--", "*.rs", "*.md"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git ls-files failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let paths: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let mut files = Vec::new();
    for path in paths {
        match std::fs::read_to_string(root.join(&path)) {
            Ok(text) => files.push((path, text)),
            // Deleted in the work tree, not yet in the index.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {path}: {e}")),
        }
    }
    Ok(files)
}

/// A design note: `docs/NAME.md`.
fn is_note(path: &str) -> bool {
    path.strip_prefix("docs/")
        .is_some_and(|name| !name.contains('/') && name.ends_with(".md"))
}

/// Checks `files` (path, text): the notes' definitions, and every citation.
pub fn analyse(prefixes: &[Prefix], files: &[(String, String)]) -> (Summary, Vec<Problem>) {
    let known = |p: &str| prefixes.iter().any(|x| x.name == p);
    let mut problems = Vec::new();
    let mut defined: BTreeMap<Id, (String, usize)> = BTreeMap::new();
    for (path, text) in files.iter().filter(|(path, _)| is_note(path)) {
        for (n, line) in text.lines().enumerate() {
            let at = |message| Problem {
                file: path.clone(),
                line: n + 1,
                message,
            };
            match ids::definition(line) {
                None => {}
                Some(Definition::Unprefixed(old)) => problems.push(at(format!(
                    "{old} is defined without its note's prefix: name it PREFIX-N \
                     (docs/architecture.md)"
                ))),
                Some(Definition::Id(id)) => {
                    if let Some(problem) = prefixes::misplaced(prefixes, &id, path) {
                        problems.push(at(problem));
                    }
                    if let Some((first, first_line)) = defined.get(&id) {
                        problems.push(at(format!(
                            "{id} is defined twice: here and at {first}:{first_line}"
                        )));
                    } else if known(&id.prefix) {
                        defined.insert(id, (path.clone(), n + 1));
                    }
                }
            }
        }
    }
    let mut summary = Summary {
        defined: defined.len(),
        notes: defined
            .values()
            .map(|(p, _)| p)
            .collect::<BTreeSet<_>>()
            .len(),
        ..Summary::default()
    };
    let mut cited_by_code = BTreeSet::new();
    for (path, text) in files {
        let rust = path.ends_with(".rs");
        if !rust && !path.ends_with(".md") {
            continue;
        }
        for (line, id) in ids::find(text, known) {
            let place = defined.get(&id);
            if place.is_some_and(|(p, l)| p == path && *l == line) {
                continue;
            }
            summary.citations += 1;
            if rust {
                summary.in_code += 1;
                cited_by_code.insert(id.clone());
            }
            if place.is_none() {
                problems.push(Problem {
                    file: path.clone(),
                    line,
                    message: format!("{id} is cited but defined nowhere"),
                });
            }
        }
        if rust {
            for (line, text) in old::find(text) {
                problems.push(Problem {
                    file: path.clone(),
                    line,
                    message: format!(
                        "old-style citation `{text}`: cite the invariant by its ID, \
                         PREFIX-N (docs/architecture.md)"
                    ),
                });
            }
        }
    }
    for (id, (path, line)) in &defined {
        if !cited_by_code.contains(id) {
            problems.push(Problem {
                file: path.clone(),
                line: *line,
                message: format!("{id} is defined in {path} but cited by no code (no .rs file)"),
            });
        }
    }
    problems.sort();
    problems.dedup();
    (summary, problems)
}

#[cfg(test)]
mod tests;
