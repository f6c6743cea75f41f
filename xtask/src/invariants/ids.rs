//! Invariant IDs in text: `PREFIX-N` or `PREFIX-XN` (one capital letter naming a
//! series), and the bullets of the design notes that define them.

use std::fmt;

/// An invariant's ID as written: `PREFIX-N`, or `PREFIX-XN` in a series `X`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    pub prefix: String,
    pub series: Option<char>,
    pub number: u32,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-", self.prefix)?;
        if let Some(series) = self.series {
            write!(f, "{series}")?;
        }
        write!(f, "{}", self.number)
    }
}

/// What a line of a design note defines.
#[derive(Debug, PartialEq, Eq)]
pub enum Definition {
    /// `- **PREFIX-N. ...` or `- **PREFIX-N: ...`, whatever the prefix.
    Id(Id),
    /// `- **L3. ...`: a letter and a number with no document prefix (the old style).
    Unprefixed(String),
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The ID whose prefix starts at `i` in `chars`, with the index after it: capitals,
/// `-`, an optional capital and digits, not inside a longer word.
fn id_at(chars: &[char], i: usize) -> Option<(Id, usize)> {
    if i > 0 && (is_word(chars[i - 1]) || chars[i - 1] == '-') {
        return None;
    }
    let mut j = i;
    while chars.get(j).is_some_and(char::is_ascii_uppercase) {
        j += 1;
    }
    if j == i || chars.get(j) != Some(&'-') {
        return None;
    }
    let prefix: String = chars[i..j].iter().collect();
    j += 1;
    let series = chars.get(j).copied().filter(char::is_ascii_uppercase);
    if series.is_some() {
        j += 1;
    }
    let digits = j;
    while chars.get(j).is_some_and(char::is_ascii_digit) {
        j += 1;
    }
    if j == digits || chars.get(j).is_some_and(|&c| is_word(c)) {
        return None;
    }
    let number = chars[digits..j].iter().collect::<String>().parse().ok()?;
    Some((
        Id {
            prefix,
            series,
            number,
        },
        j,
    ))
}

/// Every ID in `text` whose prefix `known` accepts, with its line (from 1).
pub fn find(text: &str, known: impl Fn(&str) -> bool) -> Vec<(usize, Id)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match id_at(&chars, i) {
                Some((id, end)) if known(id.prefix.as_str()) => {
                    found.push((n + 1, id));
                    i = end;
                }
                _ => i += 1,
            }
        }
    }
    found
}

/// What `line` of a design note defines: a bullet whose bold text starts with an
/// ID and `.` or `:`.
pub fn definition(line: &str) -> Option<Definition> {
    let chars: Vec<char> = line.trim_start().strip_prefix("- **")?.chars().collect();
    if let Some((id, end)) = id_at(&chars, 0) {
        return matches!(chars.get(end), Some('.' | ':')).then_some(Definition::Id(id));
    }
    let letters = chars.iter().take_while(|c| c.is_ascii_uppercase()).count();
    let digits = chars[letters..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let end = letters + digits;
    (letters > 0 && digits > 0 && matches!(chars.get(end), Some('.' | ':')))
        .then(|| Definition::Unprefixed(chars[..end].iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(prefix: &str, series: Option<char>, number: u32) -> Id {
        Id {
            prefix: prefix.to_owned(),
            series,
            number,
        }
    }

    #[test]
    fn ids_are_found_whole() {
        let text =
            "(TST-4), TST-S12 and\nTST-2: not XTST-3, TST-4a, TST-, TST-SS1, UTF-8 or a-TST-5";
        let found = find(text, |p| p == "TST");
        assert_eq!(
            found,
            [
                (1, id("TST", None, 4)),
                (1, id("TST", Some('S'), 12)),
                (2, id("TST", None, 2))
            ]
        );
        assert_eq!(found[1].1.to_string(), "TST-S12");
        assert!(find(text, |p| p == "UTF").len() == 1);
    }

    #[test]
    fn definitions_are_bullets_that_start_with_an_id() {
        assert_eq!(
            definition("- **TST-3. A rule.** Why."),
            Some(Definition::Id(id("TST", None, 3)))
        );
        assert_eq!(
            definition("  - **TST-C1: a rule.**"),
            Some(Definition::Id(id("TST", Some('C'), 1)))
        );
        assert_eq!(
            definition("- **L3. An old rule.**"),
            Some(Definition::Unprefixed("L3".to_owned()))
        );
        assert_eq!(definition("- **Outbox**: a part."), None);
        assert_eq!(definition("- **TST-3 is** not one."), None);
        assert_eq!(definition("See TST-3. for this."), None);
        assert_eq!(definition("1. **A numbered item.**"), None);
    }
}
