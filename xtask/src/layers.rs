//! The engine's layers, checked from its sources: which top-level module of
//! `engine/src` names which (`crate::x`, or `sluice::x` in the binary's modules),
//! and which file of a module names which of its siblings (`super::x`,
//! `crate::module::x`, `child::x` in `mod.rs`). Fails on a module naming a module
//! of a higher layer, on any cycle between top-level modules, on any cycle between
//! the files of one module, and on a module missing from [`LAYERS`].
//!
//! Test code is left out: inline `#[cfg(test)]` items and files declared as
//! `#[cfg(test)] mod name;`. The layers are described in `docs/architecture.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod lexer;

use lexer::{Token, tokens};

/// The layers, lowest first: a module may name modules of its own layer or below.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &["model", "clock", "sync", "memory", "yaml", "telemetry"],
    ),
    ("platform", &["config", "runtime", "store", "mqtt"]),
    (
        "mechanisms",
        &["io", "scheduler", "pipeline", "wal", "uplink"],
    ),
    ("compiler", &["compile"]),
    (
        "domain",
        &[
            "lease",
            "collector",
            "alarm",
            "command",
            "watchdog",
            "deploy",
        ],
    ),
    ("wiring", &["gateway", "api", "console"]),
    ("tools", &["cli", "sim", "broker"]),
];

/// Modules the wasm runtime must never name: it knows components, not the domain.
const RUNTIME_MUST_NOT_NAME: &[&str] = &[
    "alarm",
    "command",
    "collector",
    "lease",
    "uplink",
    "wal",
    "api",
    "deploy",
    "gateway",
    "scheduler",
    "watchdog",
    "compile",
    "pipeline",
    "io",
];

/// What the check found: the import graph of the top-level modules.
#[derive(Debug, Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// Checks the sources under `src`.
///
/// # Errors
/// Every violation found, one line each; or a file that cannot be read.
pub fn check(src: &Path) -> Result<Graph, Vec<String>> {
    let modules = top_level(src).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    let mut graph = Graph::default();
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    for (name, module) in &modules {
        let mut targets = BTreeSet::new();
        for file in &module.files {
            for reference in &file.crate_refs {
                if names.contains(&reference.module) && reference.module != *name {
                    targets.insert(reference.module.clone());
                }
            }
        }
        graph.edges.insert(name.clone(), targets);
        if let Some(inner) = &module.inner {
            for cycle in cycles(inner) {
                problems.push(format!(
                    "files of `{name}` import each other in a cycle: {}",
                    cycle.join(", ")
                ));
            }
        }
    }
    let rank = |module: &str| {
        LAYERS
            .iter()
            .position(|(_, members)| members.contains(&module))
    };
    for (module, targets) in &graph.edges {
        let Some(own) = rank(module) else {
            problems.push(format!(
                "module `{module}` is in no layer: add it to LAYERS and docs/architecture.md"
            ));
            continue;
        };
        for target in targets {
            if rank(target).is_some_and(|theirs| theirs > own) {
                problems.push(format!(
                    "`{module}` ({}) names `{target}` ({}), a higher layer",
                    LAYERS[own].0,
                    rank(target).map_or("?", |r| LAYERS[r].0)
                ));
            }
        }
    }
    if let Some(named) = graph.edges.get("runtime") {
        for target in named.intersection(
            &RUNTIME_MUST_NOT_NAME
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        ) {
            problems.push(format!(
                "`runtime` names `{target}`: the runtime must know no domain module"
            ));
        }
    }
    for cycle in cycles(&graph.edges) {
        problems.push(format!(
            "top-level modules import each other in a cycle: {}",
            cycle.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(graph)
    } else {
        Err(problems)
    }
}

/// A reference to `crate::module` (and the name after it, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CrateRef {
    module: String,
    next: Option<String>,
}

/// What one source file names.
#[derive(Debug, Default)]
struct Source {
    crate_refs: Vec<CrateRef>,
    /// Names after `super::` (the first segment, or each of a `{...}` group).
    super_refs: Vec<String>,
    /// In a `mod.rs`: first segments of paths in code (`child::x`, `self::child`).
    local_refs: Vec<String>,
    /// In a `mod.rs`: every name its code uses (a child's item it re-exports
    /// counts as naming that child).
    idents: Vec<String>,
    /// In a `mod.rs`: `pub use child::{A, B}` re-exports, item -> child.
    reexports: Vec<(String, String)>,
    /// Items defined in the file (struct, enum, fn, trait, type, const, static).
    items: Vec<String>,
    /// Submodules declared (`mod x;`), and those declared only for tests.
    children: Vec<String>,
    test_children: Vec<String>,
}

#[derive(Debug)]
struct Module {
    files: Vec<Source>,
    /// For a directory module: the import graph between its files.
    inner: Option<BTreeMap<String, BTreeSet<String>>>,
}

fn read(path: &Path) -> Result<Source, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let is_root = path
        .file_name()
        .is_some_and(|n| n == "mod.rs" || n == "main.rs");
    Ok(scan(&tokens(&text), is_root))
}

/// The top-level modules of `src` (directories and files, `lib.rs`/`main.rs` aside).
fn top_level(src: &Path) -> Result<BTreeMap<String, Module>, String> {
    let mut modules = BTreeMap::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(src)
        .map_err(|e| format!("cannot read {}: {e}", src.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if path.is_dir() {
            if path.join("mod.rs").is_file() || stem == "cli" {
                modules.insert(stem.clone(), directory(&path, &stem)?);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "lib" && stem != "main" {
            let files = vec![read(&path)?];
            modules.insert(stem, Module { files, inner: None });
        }
    }
    Ok(modules)
}

/// A directory module: its `mod.rs` and the files it declares (test files aside).
fn directory(dir: &Path, name: &str) -> Result<Module, String> {
    let root = dir.join("mod.rs");
    let root_source = if root.is_file() {
        read(&root)?
    } else {
        Source::default()
    };
    let mut children = BTreeMap::new();
    for child in &root_source.children {
        let file = dir.join(format!("{child}.rs"));
        if file.is_file() {
            children.insert(child.clone(), read(&file)?);
        }
    }
    let mut inner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let node = |child: &str| format!("{child}.rs");
    let owner = |item: &str| -> Option<String> {
        if root_source.children.contains(&item.to_owned()) {
            return Some(node(item));
        }
        if let Some((_, child)) = root_source.reexports.iter().find(|(i, _)| i == item) {
            return Some(node(child));
        }
        root_source
            .items
            .iter()
            .any(|i| i == item)
            .then(|| "mod.rs".to_owned())
    };
    let mut root_edges = BTreeSet::new();
    for local in &root_source.local_refs {
        if children.contains_key(local) {
            root_edges.insert(node(local));
        }
    }
    for name in &root_source.idents {
        if let Some((_, child)) = root_source.reexports.iter().find(|(item, _)| item == name)
            && children.contains_key(child)
        {
            root_edges.insert(node(child));
        }
    }
    inner.insert("mod.rs".to_owned(), root_edges);
    for (child, source) in &children {
        let own = node(child);
        let mut edges = BTreeSet::new();
        let named = source.super_refs.iter().cloned().chain(
            source
                .crate_refs
                .iter()
                .filter(|r| r.module == name)
                .filter_map(|r| r.next.clone()),
        );
        for item in named {
            if let Some(target) = owner(&item)
                && target != own
            {
                edges.insert(target);
            }
        }
        inner.insert(own, edges);
    }
    let mut files = vec![root_source];
    files.extend(children.into_values());
    Ok(Module {
        files,
        inner: Some(inner),
    })
}

/// What a file's tokens name, test code left out.
fn scan(tokens: &[Token], is_root: bool) -> Source {
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
                for (module, next) in segments(tokens, i + 2) {
                    source.crate_refs.push(CrateRef { module, next });
                }
            }
            Token::Ident(word)
                if word == "super"
                    && inline_until.is_empty()
                    && !after_path(tokens, i)
                    && tokens.get(i + 1) == Some(&Token::PathSep) =>
            {
                source
                    .super_refs
                    .extend(segments(tokens, i + 2).into_iter().map(|(first, _)| first));
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

/// The first segment of the path (or of each path of a `{...}` group) starting at
/// `i`, with the segment after it.
fn segments(tokens: &[Token], i: usize) -> Vec<(String, Option<String>)> {
    let next_after = |j: usize| match (tokens.get(j + 1), tokens.get(j + 2)) {
        (Some(Token::PathSep), Some(Token::Ident(next))) => Some(next.clone()),
        _ => None,
    };
    match tokens.get(i) {
        // `first::{a, b}`: `first` with each of the names after it.
        Some(Token::Ident(first))
            if tokens.get(i + 1) == Some(&Token::PathSep)
                && tokens.get(i + 2) == Some(&Token::Punct('{')) =>
        {
            let nested = segments(tokens, i + 2);
            if nested.is_empty() {
                return vec![(first.clone(), None)];
            }
            nested
                .into_iter()
                .map(|(next, _)| (first.clone(), Some(next)))
                .collect()
        }
        Some(Token::Ident(first)) => vec![(first.clone(), next_after(i))],
        Some(Token::Punct('{')) => {
            let mut found = Vec::new();
            let mut depth = 0;
            let mut expect_name = true;
            for (j, token) in tokens.iter().enumerate().skip(i) {
                match token {
                    Token::Punct('{') => {
                        depth += 1;
                        expect_name = depth == 1;
                    }
                    Token::Punct('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Token::Punct(',') if depth == 1 => expect_name = true,
                    Token::Ident(name) if depth == 1 && expect_name => {
                        found.push((name.clone(), next_after(j)));
                        expect_name = false;
                    }
                    _ => {}
                }
            }
            found
        }
        _ => Vec::new(),
    }
}

/// A `pub use child::...;` at `i` in a `mod.rs`: records what it re-exports and
/// returns the index after it.
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

/// Skips a `#[cfg(test)]` item at `i`: returns the index after it. A test module
/// declared as a file is recorded so that file is left out.
fn test_item(tokens: &[Token], i: usize, source: &mut Source) -> Option<usize> {
    let attribute = [
        Token::Punct('#'),
        Token::Punct('['),
        Token::Ident("cfg".to_owned()),
        Token::Punct('('),
        Token::Ident("test".to_owned()),
        Token::Punct(')'),
        Token::Punct(']'),
    ];
    if tokens.get(i..i + attribute.len()) != Some(&attribute[..]) {
        return None;
    }
    let mut j = i + attribute.len();
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

/// Every cycle of `graph` (its strongly connected components of more than one node).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let at = self.index.len();
            self.index.insert(v, at);
            self.low.insert(v, at);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.graph.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v.as_str()) {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str, root: bool) -> Source {
        scan(&tokens(text), root)
    }

    #[test]
    fn crate_paths_and_groups_are_found() {
        let s = source(
            "use crate::a::B;\nuse crate::{c::D, e, f::{g, h}};\nfn x() { crate::i::j(); }",
            false,
        );
        let modules: Vec<_> = s.crate_refs.iter().map(|r| r.module.as_str()).collect();
        assert_eq!(modules, ["a", "c", "e", "f", "i"]);
        assert_eq!(s.crate_refs[0].next.as_deref(), Some("B"));
    }

    #[test]
    fn test_code_comments_and_strings_are_left_out() {
        let s = source(
            "// crate::a\n/* crate::b */\nconst S: &str = \"crate::c\";\n#[cfg(test)]\nmod tests { use crate::d; }\n#[cfg(test)]\nmod more;\nfn f<'a>(x: &'a str) -> char { 'x' }\nuse crate::e;",
            true,
        );
        let modules: Vec<_> = s.crate_refs.iter().map(|r| r.module.as_str()).collect();
        assert_eq!(modules, ["e"]);
        assert_eq!(s.test_children, ["more"]);
        assert!(s.children.is_empty());
    }

    #[test]
    fn a_mod_rs_records_children_reexports_and_local_paths() {
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
    fn a_re_export_from_another_module_is_an_edge() {
        let s = source("pub use crate::model::{A, B};\npub use super::x::C;", true);
        let modules: Vec<_> = s.crate_refs.iter().map(|r| r.module.as_str()).collect();
        assert_eq!(modules, ["model", "model"]);
        assert_eq!(s.super_refs, ["x"]);
        assert!(s.reexports.is_empty());
    }

    #[test]
    fn super_inside_an_inline_module_is_the_file_itself() {
        let s = source("mod a { use super::b::X; }\nuse super::c::Y;", false);
        assert_eq!(s.super_refs, ["c"]);
    }

    #[test]
    fn a_mod_rs_using_a_name_it_re_exports_names_that_child() {
        let s = source("mod a;\npub use a::Log;\nfn open() -> Log { todo() }", true);
        assert!(s.idents.contains(&"Log".to_owned()));
        let grouped = source("use crate::m::{a::X, b};", false);
        let nexts: Vec<_> = grouped
            .crate_refs
            .iter()
            .map(|r| (r.module.as_str(), r.next.as_deref()))
            .collect();
        assert_eq!(nexts, [("m", Some("a")), ("m", Some("b"))]);
    }

    #[test]
    fn cycles_are_found() {
        let mut graph = BTreeMap::new();
        let edge = |g: &mut BTreeMap<String, BTreeSet<String>>, a: &str, b: &str| {
            g.entry(a.to_owned()).or_default().insert(b.to_owned());
            g.entry(b.to_owned()).or_default();
        };
        edge(&mut graph, "a", "b");
        edge(&mut graph, "b", "c");
        edge(&mut graph, "c", "a");
        edge(&mut graph, "c", "d");
        assert_eq!(cycles(&graph), [vec!["a", "b", "c"]]);
        graph.get_mut("c").map(|e| e.remove("a"));
        assert!(cycles(&graph).is_empty());
    }
}
