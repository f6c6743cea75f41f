//! The prefixes of the invariants' IDs, one a design note, and where an ID belongs.

use super::Id;

/// A note's prefix: the note that defines its IDs, and the forms they take.
#[derive(Debug)]
pub struct Prefix {
    pub name: &'static str,
    pub note: &'static str,
    /// Whether `PREFIX-N` is a form (else only `PREFIX-XN`).
    pub plain: bool,
    /// The series letters `X` of `PREFIX-XN`.
    pub series: &'static str,
}

pub(super) const fn prefix(name: &'static str, note: &'static str) -> Prefix {
    Prefix {
        name,
        note,
        plain: true,
        series: "",
    }
}

/// The prefixes, one a note (`docs/architecture.md` lists them for readers).
pub const PREFIXES: &[Prefix] = &[
    prefix("ARCH", "architecture.md"),
    prefix("WAL", "wal.md"),
    Prefix {
        series: "S",
        ..prefix("STATE", "state.md")
    },
    Prefix {
        plain: false,
        series: "SWPC",
        ..prefix("CMD", "commands.md")
    },
    prefix("SPB", "sparkplug.md"),
    prefix("ALARM", "alarms.md"),
    prefix("LINE", "lines.md"),
    prefix("RELOAD", "reload.md"),
    prefix("SEC", "security.md"),
    prefix("COMP", "components.md"),
    prefix("FUZZ", "fuzzing.md"),
    prefix("PUSH", "push.md"),
];

/// Why `id`, defined in `path`, is not where it belongs, if it is not.
pub(super) fn misplaced(prefixes: &[Prefix], id: &Id, path: &str) -> Option<String> {
    let Some(prefix) = prefixes.iter().find(|p| p.name == id.prefix) else {
        let known: Vec<&str> = prefixes.iter().map(|p| p.name).collect();
        return Some(format!(
            "{id} has an unknown prefix (known: {})",
            known.join(", ")
        ));
    };
    let note = path.strip_prefix("docs/").unwrap_or(path);
    if prefix.note != note {
        return Some(format!(
            "{id} is defined in {path}, but {}- IDs belong to docs/{}",
            prefix.name, prefix.note
        ));
    }
    let fits = id
        .series
        .map_or(prefix.plain, |s| prefix.series.contains(s));
    (!fits).then(|| {
        let mut forms: Vec<String> = prefix
            .series
            .chars()
            .map(|s| format!("{}-{s}N", prefix.name))
            .collect();
        if prefix.plain {
            forms.insert(0, format!("{}-N", prefix.name));
        }
        format!("{id} is not an ID of docs/{note}: {}", forms.join(" or "))
    })
}
