//! Citations in the style the IDs replaced, found in the comments of a Rust file:
//! the word invariant and a bare number, `I-` and a number, and a capital of the
//! old series (L, S, P, W, C, A) with one digit where a citation goes: after the
//! word invariant, before a closing parenthesis or a `,`, `;`, `:` or full stop,
//! as one end of a range or list of such tokens, or before `of` and a note's
//! name. Elsewhere a capital and a digit is prose (`S7 PDU`, `S7-200`); nothing in
//! backticks counts, since that is code.

use crate::layers::lexer::{self, Comment};

/// The capitals the old series were numbered under.
const LETTERS: &[char] = &['L', 'S', 'P', 'W', 'C', 'A'];

/// Every old-style citation in the comments of `source`: its line and its text.
pub fn find(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for block in blocks(&lexer::comments(source)) {
        block.scan(&mut found);
    }
    found
}

/// Comments on consecutive lines, read as one text.
struct Block {
    line: usize,
    chars: Vec<char>,
    /// Whether each char is in backticks.
    code: Vec<bool>,
}

fn blocks(comments: &[Comment]) -> Vec<Block> {
    let mut joined: Vec<(usize, usize, String)> = Vec::new();
    for comment in comments {
        let last = comment.line + comment.text.matches('\n').count();
        match joined.last_mut() {
            Some((_, end, text)) if comment.line <= *end + 1 => {
                text.push(if comment.line > *end { '\n' } else { ' ' });
                text.push_str(&comment.text);
                *end = last;
            }
            _ => joined.push((comment.line, last, comment.text.clone())),
        }
    }
    joined
        .into_iter()
        .map(|(line, _, text)| {
            let mut chars = Vec::with_capacity(text.len());
            let mut code = Vec::with_capacity(text.len());
            let mut inside = false;
            for (n, line) in text.split('\n').enumerate() {
                if n > 0 {
                    chars.push('\n');
                    code.push(inside);
                }
                // As in Markdown, a code span may go on over lines, not paragraphs.
                inside &= !line.trim().is_empty();
                for c in line.chars() {
                    if c == '`' {
                        inside = !inside;
                    }
                    chars.push(c);
                    code.push(inside || c == '`');
                }
            }
            Block { line, chars, code }
        })
        .collect()
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Block {
    fn scan(&self, found: &mut Vec<(usize, String)>) {
        let chars = &self.chars;
        let mut i = 0;
        while i < chars.len() {
            let starts_word = i == 0 || !(is_word(chars[i - 1]) || chars[i - 1] == '-');
            let end = (!self.code[i] && starts_word)
                .then(|| {
                    letter(chars, i)
                        .filter(|_| self.cited(i))
                        .or_else(|| i_number(chars, i))
                        .or_else(|| bare_invariant(chars, i))
                })
                .flatten();
            if let Some(end) = end {
                let text: String = chars[i..end].iter().collect();
                let line = self.line + chars[..i].iter().filter(|&&c| c == '\n').count();
                found.push((line, text.split_whitespace().collect::<Vec<_>>().join(" ")));
                i = end;
            } else {
                i += 1;
            }
        }
    }

    /// Whether the letter token at `i` stands where a citation goes.
    fn cited(&self, i: usize) -> bool {
        let chars = &self.chars;
        let before: String = chars[..i]
            .iter()
            .rev()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphabetic())
            .collect();
        if matches!(before.to_lowercase().as_str(), "tnairavni" | "stnairavni") {
            return true;
        }
        let k = skip_space(chars, i + 2);
        match chars.get(k) {
            Some(')' | ',' | ';' | ':') => true,
            Some('.') => chars.get(k + 1).is_none_or(|c| c.is_whitespace()),
            Some('-') => letter(chars, skip_space(chars, k + 1)).is_some(),
            _ => {
                let word: String = chars[k..].iter().take_while(|&&c| is_word(c)).collect();
                let after = skip_space(chars, k + word.len());
                match word.as_str() {
                    "and" | "or" | "to" => letter(chars, after).is_some(),
                    "of" => {
                        let name: String = chars[after..]
                            .iter()
                            .take_while(|c| !c.is_whitespace())
                            .collect();
                        name.contains(".md")
                    }
                    _ => false,
                }
            }
        }
    }
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// `L5`, `S2`, ...: one of the old capitals and one digit, a word of its own.
fn letter(chars: &[char], i: usize) -> Option<usize> {
    let old = chars.get(i).is_some_and(|c| LETTERS.contains(c))
        && chars.get(i + 1).is_some_and(|c| ('1'..='9').contains(c))
        && !chars.get(i + 2).is_some_and(|&c| is_word(c));
    old.then_some(i + 2)
}

/// `I-05`: numbers no note defined.
fn i_number(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'I') || chars.get(i + 1) != Some(&'-') {
        return None;
    }
    let end = i
        + 2
        + chars[i + 2..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
    (end > i + 2 && !chars.get(end).is_some_and(|&c| is_word(c))).then_some(end)
}

/// `invariant 4`, `Invariants 1 and 2`: the word and a number.
fn bare_invariant(chars: &[char], i: usize) -> Option<usize> {
    let word: String = chars[i..].iter().take_while(|&&c| is_word(c)).collect();
    if !matches!(word.to_lowercase().as_str(), "invariant" | "invariants") {
        return None;
    }
    let k = skip_space(chars, i + word.len());
    let digits = chars[k..].iter().take_while(|c| c.is_ascii_digit()).count();
    (k > i + word.len() && digits > 0).then_some(k + digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str) -> Vec<(usize, String)> {
        find(source)
    }

    fn old(pairs: &[(usize, &str)]) -> Vec<(usize, String)> {
        pairs.iter().map(|(l, t)| (*l, (*t).to_owned())).collect()
    }

    #[test]
    fn citations_in_the_old_style_are_found() {
        let source = "fn a() {} // the row (L5)\n\
                      /// settled (W2, W3).\n\
                      //! invariants A1-A5 and C1 of `docs/commands.md`\n\
                      // P4: a push cannot move a device; S7 of docs/state.md\n\
                      // claims (I-18; node token), S2-S3, `a\n\
                      // b` (I-05)\n\
                      //\n\
                      // `unclosed (L1)\n\
                      //\n\
                      // kept (invariant\n\
                      // 4 of the note), Invariant 9: set aside; invariant S2 holds\n";
        assert_eq!(
            texts(source),
            old(&[
                (1, "L5"),
                (2, "W2"),
                (2, "W3"),
                (3, "A1"),
                (3, "C1"),
                (4, "P4"),
                (4, "S7"),
                (5, "I-18"),
                (5, "S2"),
                (6, "I-05"),
                (10, "invariant 4"),
                (11, "Invariant 9"),
                (11, "S2")
            ])
        );
    }

    #[test]
    fn prose_code_and_new_ids_are_not_citations() {
        let source = "// An S7 PDU, the S7-200 and S7's header; S7 and MC codecs\n\
                      // (S7 has no `unitId`), `T100` and `C5`/`CN5`, parameter `0xC1`\n\
                      // (TST-4, TST-S1, TST-C2) and TST-P3: an invariant; invariants\n\
                      // all codecs keep; W10 and S12, A0\n\
                      let s = \"// (L5) and invariant 3\"; // x\n";
        assert_eq!(texts(source), []);
    }
}
