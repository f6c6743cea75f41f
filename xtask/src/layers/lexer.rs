//! Just enough of a Rust lexer to find paths: identifiers, `::` and punctuation,
//! with comments, string, byte-string and char literals and lifetimes dropped; and
//! the comments alone, for the invariant check (`crate::invariants`).

/// One token of a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

/// The tokens of `text`.
pub fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = block_comment(&chars, i);
        } else if c == '"' {
            i = string(&chars, i + 1);
        } else if (c == 'r' || c == 'b') && raw_or_byte_string(&chars, i).is_some() {
            i = raw_or_byte_string(&chars, i).unwrap_or(chars.len());
        } else if c == '\'' {
            i = quote(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

/// A comment of a source file: the line it starts on (from 1) and its text, without
/// the `//`, `///` or `//!` before it, or the `/*` and `*/` around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub line: usize,
    pub text: String,
}

/// The comments of `text`, in order; what looks like one inside a literal is not.
pub fn comments(text: &str) -> Vec<Comment> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let end = if c == '/' && next == Some('/') {
            let mut end = i;
            while end < chars.len() && chars[end] != '\n' {
                end += 1;
            }
            let body = &chars[i + 2..end];
            let body = match body.first() {
                Some('/' | '!') => &body[1..],
                _ => body,
            };
            out.push(Comment {
                line,
                text: body.iter().collect(),
            });
            end
        } else if c == '/' && next == Some('*') {
            let end = block_comment(&chars, i);
            let inner = chars.get(i + 2..end.saturating_sub(2)).unwrap_or_default();
            out.push(Comment {
                line,
                text: inner.iter().collect(),
            });
            end
        } else if c == '"' {
            string(&chars, i + 1)
        } else if (c == 'r' || c == 'b') && raw_or_byte_string(&chars, i).is_some() {
            raw_or_byte_string(&chars, i).unwrap_or(chars.len())
        } else if c == '\'' {
            quote(&chars, i)
        } else if c.is_alphanumeric() || c == '_' {
            let mut end = i;
            while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
                end += 1;
            }
            end
        } else {
            i + 1
        };
        let end = end.min(chars.len());
        line += chars[i..end].iter().filter(|&&c| c == '\n').count();
        i = end;
    }
    out
}

/// The index after a (nested) block comment starting at `i`.
fn block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth = depth.saturating_sub(1);
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// The index after a string whose body starts at `i` (after its `"`).
fn string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// For `r"..."`, `r#"..."#`, `b"..."`, `br#"..."#` or `b'x'` at `i`: the index after it.
fn raw_or_byte_string(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    let byte = chars[j] == 'b';
    if byte {
        j += 1;
        if chars.get(j) == Some(&'\'') {
            return Some(quote(chars, j));
        }
    }
    let raw = chars.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    if !byte && !raw {
        return None;
    }
    let mut hashes = 0;
    while raw && chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    if !raw {
        return Some(string(chars, j + 1));
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// A char literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`) at `i`.
fn quote(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    // A lifetime: skip the quote, the name is an identifier of no interest.
    let mut j = i + 1;
    while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(text: &str) -> Vec<String> {
        tokens(text)
            .into_iter()
            .filter_map(|t| match t {
                Token::Ident(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn literals_and_comments_vanish() {
        assert_eq!(
            idents(
                "a /* b /* c */ d */ e // f\n g \"h \\\" i\" r#\"j \"# k b\"l\" m 'n' '\\'' o<'p> q"
            ),
            ["a", "e", "g", "k", "m", "o", "q"]
        );
    }

    #[test]
    fn comments_are_found_outside_literals() {
        let found = comments(
            "a // one\n/// two\n//! three\nlet s = \"// no\"; 'x'; r#\"/* no */\"#;\n/* four\n five */ b",
        );
        let texts: Vec<(usize, &str)> = found.iter().map(|c| (c.line, c.text.as_str())).collect();
        assert_eq!(
            texts,
            [
                (1, " one"),
                (2, " two"),
                (3, " three"),
                (5, " four\n five ")
            ]
        );
    }

    #[test]
    fn paths_keep_their_separators() {
        assert_eq!(
            tokens("crate::a"),
            [
                Token::Ident("crate".into()),
                Token::PathSep,
                Token::Ident("a".into())
            ]
        );
    }
}
