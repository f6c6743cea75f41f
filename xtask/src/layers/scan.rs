//! What one source file names: the paths it uses (`crate::`, `super::`, a child's
//! in a module root), what a module root declares and re-exports, and the items
//! it defines. Test code is left out.

use super::lexer::Token;

/// What one source file names.
#[derive(Debug, Default)]
pub struct Source {
    /// Paths after `crate::` (or `sluice::` in the binary's modules), one per
    /// leaf of a `{...}` group, identifiers only.
    pub crate_refs: Vec<Vec<String>>,
    /// Paths after `super::` (`super::super::` counts 2), identifiers only.
    pub super_refs: Vec<(usize, Vec<String>)>,
    /// In a module root: first segments of paths in code (`child::x`, `self::child`).
    pub local_refs: Vec<String>,
    /// In a module root: every name its code uses (a child's item it re-exports
    /// counts as naming that child).
    pub idents: Vec<String>,
    /// In a module root: `pub use child::{A, B}` re-exports, item -> child.
    pub reexports: Vec<(String, String)>,
    /// Items defined in the file (struct, enum, fn, trait, type, const, static).
    pub items: Vec<String>,
    /// Submodules declared (`mod x;`), and those declared only for tests.
    pub children: Vec<String>,
    pub test_children: Vec<String>,
}

/// What a file's tokens name, test code left out. `is_root`: the file is a
/// module root (`mod.rs`, `main.rs`, or a file with children of its own).
pub fn scan(tokens: &[Token], is_root: bool) -> Source {
    let mut source = Source::default();
    // Where the inline modules we are in end: `super` there means this file.
    let mut inline_until: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        inline_until.retain(|end| i < *end);
        if let Some(end) = test_item(tokens, i, &mut source) {
            i = end;
            continue;
        }
        match &tokens[i] {
            Token::Ident(word) if word == "mod" && !after_path(tokens, i) => {
                match (tokens.get(i + 1), tokens.get(i + 2)) {
                    (Some(Token::Ident(child)), Some(Token::Punct(';'))) => {
                        source.children.push(child.clone());
                        i += 3;
                        continue;
                    }
                    (Some(Token::Ident(_)), Some(Token::Punct('{'))) => {
                        if let Some(end) = close(tokens, i + 2, '{', '}') {
                            inline_until.push(end);
                        }
                    }
                    _ => {}
                }
            }
            Token::Ident(word) if is_root && word == "pub" => {
                if let Some(end) = reexport(tokens, i, &mut source) {
                    i = end;
                    continue;
                }
            }
            Token::Ident(word)
                if matches!(
                    word.as_str(),
                    "struct" | "enum" | "fn" | "trait" | "type" | "const" | "static" | "union"
                ) =>
            {
                if let Some(Token::Ident(item)) = tokens.get(i + 1) {
                    source.items.push(item.clone());
                }
            }
            Token::Ident(word)
                if (word == "crate" || word == "sluice")
                    && !after_path(tokens, i)
                    && tokens.get(i + 1) == Some(&Token::PathSep) =>
            {
                source.crate_refs.extend(paths(tokens, i + 2));
            }
            Token::Ident(word)
                if word == "super" && inline_until.is_empty() && !after_path(tokens, i) =>
            {
                let mut depth = 1;
                let mut j = i + 1;
                while tokens.get(j) == Some(&Token::PathSep)
                    && tokens.get(j + 1) == Some(&Token::Ident("super".to_owned()))
                {
                    depth += 1;
                    j += 2;
                }
                if tokens.get(j) == Some(&Token::PathSep) {
                    for path in paths(tokens, j + 1) {
                        source.super_refs.push((depth, path));
                    }
                }
                i = j;
                continue;
            }
            Token::Ident(word) if is_root && !after_path(tokens, i) => {
                // A method, a field or a definition of the same name is not the item.
                let named = i == 0
                    || !matches!(&tokens[i - 1], Token::Punct('.'))
                        && tokens[i - 1] != Token::Ident("fn".to_owned());
                if named {
                    source.idents.push(word.clone());
                }
                let start = if word == "self" && tokens.get(i + 1) == Some(&Token::PathSep) {
                    i + 2
                } else {
                    i
                };
                if let (Some(Token::Ident(first)), Some(Token::PathSep)) =
                    (tokens.get(start), tokens.get(start + 1))
                {
                    source.local_refs.push(first.clone());
                }
            }
            _ => {}
        }
        i += 1;
    }
    source
}

/// Whether token `i` continues a path (`a::i`), rather than starting one.
fn after_path(tokens: &[Token], i: usize) -> bool {
    i > 0 && tokens[i - 1] == Token::PathSep
}

/// The paths of the use tree (or the code path) starting at `i`: one per leaf
/// of its `{...}` groups, identifiers only (`a::b::{c, d::e}` gives `a::b::c` and
/// `a::b::d::e`; `a::{self}` and `a::*` give `a`).
pub fn paths(tokens: &[Token], i: usize) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    use_tree(tokens, i, &mut Vec::new(), &mut found);
    found
}

/// Walks one use tree at `i` under `prefix`; returns the index after it.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    prefix: &mut Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    let base = prefix.len();
    let mut names_prefix = false;
    loop {
        match tokens.get(i) {
            Some(Token::Ident(word)) if word == "self" => {
                names_prefix = true;
                i += 1;
                break;
            }
            Some(Token::Ident(word)) => {
                prefix.push(word.clone());
                i += 1;
                if tokens.get(i) == Some(&Token::PathSep) {
                    i += 1;
                } else {
                    break;
                }
            }
            Some(Token::Punct('{')) => {
                i += 1;
                loop {
                    i = use_tree(tokens, i, prefix, found);
                    // Past an `as name` to the next `,` or the closing `}`.
                    while let Some(token) = tokens.get(i) {
                        if matches!(token, Token::Punct(',' | '}')) {
                            break;
                        }
                        i += 1;
                    }
                    match tokens.get(i) {
                        Some(Token::Punct(',')) => i += 1,
                        Some(Token::Punct('}')) => {
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(i) == Some(&Token::Punct('}')) {
                        i += 1;
                        break;
                    }
                }
                prefix.truncate(base);
                return i;
            }
            // `*`, generics, the end of the path.
            _ => {
                names_prefix = true;
                break;
            }
        }
    }
    if (names_prefix || prefix.len() > base) && !prefix.is_empty() {
        found.push(prefix.clone());
    }
    prefix.truncate(base);
    i
}

/// A `pub use child::...;` at `i` in a module root: records what it re-exports
/// and returns the index after it.
fn reexport(tokens: &[Token], i: usize, source: &mut Source) -> Option<usize> {
    let mut j = i + 1;
    if tokens.get(j) == Some(&Token::Punct('(')) {
        j = close(tokens, j, '(', ')')?;
    }
    if tokens.get(j) != Some(&Token::Ident("use".to_owned())) {
        return None;
    }
    let end = (j..tokens.len()).find(|k| tokens[*k] == Token::Punct(';'))?;
    // A re-export of another module's items names that module: scanned as code.
    let (Some(Token::Ident(child)), Some(Token::PathSep)) = (tokens.get(j + 1), tokens.get(j + 2))
    else {
        return None;
    };
    if matches!(child.as_str(), "crate" | "sluice" | "super" | "self") {
        return None;
    }
    for token in &tokens[j + 3..end] {
        if let Token::Ident(item) = token
            && item != "self"
            && item != "as"
        {
            source.reexports.push((item.clone(), child.clone()));
        }
    }
    Some(end + 1)
}

/// Skips a `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) item at `i`: returns
/// the index after it. A test module declared as a file is recorded so that
/// file is left out.
fn test_item(tokens: &[Token], i: usize, source: &mut Source) -> Option<usize> {
    let cfg = [
        Token::Punct('#'),
        Token::Punct('['),
        Token::Ident("cfg".to_owned()),
        Token::Punct('('),
    ];
    if tokens.get(i..i + cfg.len()) != Some(&cfg[..]) {
        return None;
    }
    let test = Token::Ident("test".to_owned());
    let condition = &tokens[i + cfg.len()..];
    let test_only = match condition {
        [first, Token::Punct(')'), ..] => *first == test,
        [
            Token::Ident(all),
            Token::Punct('('),
            first,
            Token::Punct(','),
            ..,
        ] => all == "all" && *first == test,
        _ => false,
    };
    if !test_only {
        return None;
    }
    let mut j = close(tokens, i + 1, '[', ']')?;
    // Further attributes of the same item.
    while tokens.get(j) == Some(&Token::Punct('#')) && tokens.get(j + 1) == Some(&Token::Punct('['))
    {
        j = close(tokens, j + 1, '[', ']')?;
    }
    for (k, token) in tokens.iter().enumerate().skip(j) {
        match token {
            Token::Punct(';') => {
                if let (Some(Token::Ident(word)), Some(Token::Ident(name))) =
                    (tokens.get(k.wrapping_sub(2)), tokens.get(k - 1))
                    && word == "mod"
                {
                    source.test_children.push(name.clone());
                    source.children.retain(|c| c != name);
                }
                return Some(k + 1);
            }
            Token::Punct('{') => return close(tokens, k, '{', '}'),
            _ => {}
        }
    }
    Some(tokens.len())
}

/// The index after the bracket that closes the one at `open_at`.
fn close(tokens: &[Token], open_at: usize, open: char, shut: char) -> Option<usize> {
    let mut depth = 0usize;
    for (k, token) in tokens.iter().enumerate().skip(open_at) {
        if *token == Token::Punct(open) {
            depth += 1;
        } else if *token == Token::Punct(shut) {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(k + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokens;
    use super::*;

    fn source(text: &str, root: bool) -> Source {
        scan(&tokens(text), root)
    }

    fn joined(paths: &[Vec<String>]) -> Vec<String> {
        paths.iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn crate_paths_and_groups_are_found() {
        let s = source(
            "use crate::a::B;\nuse crate::{c::D, e, f::{g, h as k}, m::{self, *}};\nfn x() { crate::i::j::<u8>(); }",
            false,
        );
        assert_eq!(
            joined(&s.crate_refs),
            ["a::B", "c::D", "e", "f::g", "f::h", "m", "m", "i::j"]
        );
    }

    #[test]
    fn super_paths_count_their_depth() {
        let s = source(
            "use super::a::{B, c::D};\nuse super::super::e::F;\nfn x() { super::g(); }",
            false,
        );
        let found: Vec<_> = s
            .super_refs
            .iter()
            .map(|(depth, path)| (*depth, path.join("::")))
            .collect();
        assert_eq!(
            found,
            [
                (1, "a::B".to_owned()),
                (1, "a::c::D".to_owned()),
                (2, "e::F".to_owned()),
                (1, "g".to_owned())
            ]
        );
    }

    #[test]
    fn test_code_comments_and_strings_are_left_out() {
        let s = source(
            "// crate::a\n/* crate::b */\nconst S: &str = \"crate::c\";\n#[cfg(test)]\nmod tests { use crate::d; }\n#[cfg(all(test, feature = \"x\"))]\nmod more;\nfn f<'a>(x: &'a str) -> char { 'x' }\nuse crate::e;",
            true,
        );
        assert_eq!(joined(&s.crate_refs), ["e"]);
        assert_eq!(s.test_children, ["more"]);
        assert!(s.children.is_empty());
    }

    #[test]
    fn a_module_root_records_children_reexports_and_local_paths() {
        let s = source(
            "mod a;\nmod b;\npub use a::{X, Y as Z};\npub(crate) use b::W;\nuse a::Helper;\nstruct Own;\nfn f() { b::go(); self::a::go(); }",
            true,
        );
        assert_eq!(s.children, ["a", "b"]);
        assert_eq!(
            s.reexports,
            [
                ("X".to_owned(), "a".to_owned()),
                ("Y".to_owned(), "a".to_owned()),
                ("Z".to_owned(), "a".to_owned()),
                ("W".to_owned(), "b".to_owned())
            ]
        );
        assert_eq!(s.local_refs, ["a", "b", "a"]);
        assert_eq!(s.items, ["Own", "f"]);
    }

    #[test]
    fn a_re_export_from_another_module_is_a_reference() {
        let s = source("pub use crate::model::{A, B};\npub use super::x::C;", true);
        assert_eq!(joined(&s.crate_refs), ["model::A", "model::B"]);
        assert_eq!(s.super_refs, [(1, vec!["x".to_owned(), "C".to_owned()])]);
        assert!(s.reexports.is_empty());
    }

    #[test]
    fn super_inside_an_inline_module_is_the_file_itself() {
        let s = source("mod a { use super::b::X; }\nuse super::c::Y;", false);
        assert_eq!(s.super_refs, [(1, vec!["c".to_owned(), "Y".to_owned()])]);
    }

    #[test]
    fn a_module_root_using_a_name_it_re_exports_names_it() {
        let s = source("mod a;\npub use a::Log;\nfn open() -> Log { todo() }", true);
        assert!(s.idents.contains(&"Log".to_owned()));
    }
}
