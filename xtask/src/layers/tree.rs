//! A module and its files, as far down as directories go, and the import graph
//! between the direct parts of each directory module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::lexer::tokens;
use super::scan::{Source, scan};

/// A module with files of its own: its root (`mod.rs`, or `x.rs` beside an `x/`)
/// and the submodules the root declares (test modules aside).
#[derive(Debug)]
pub struct Tree {
    /// The module's path from the crate root (`["store", "journal"]`).
    pub path: Vec<String>,
    pub root: Source,
    pub children: BTreeMap<String, Part>,
}

/// One submodule: a file, or a module with files of its own.
#[derive(Debug)]
pub enum Part {
    File(Source),
    Dir(Tree),
}

/// The import graph between a directory module's parts: `mod.rs`, `x.rs` for a
/// file, `x/` for a nested directory module (all its files together).
pub type Edges = BTreeMap<String, BTreeSet<String>>;

fn read(path: &Path, is_root: bool) -> Result<Source, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(scan(&tokens(&text), is_root))
}

/// The module at `file`: a file, or (when it declares submodules) a tree whose
/// children live in `dir`.
pub fn load(file: &Path, dir: &Path, path: Vec<String>) -> Result<Part, String> {
    let is_root = file.file_name().is_some_and(|n| n == "mod.rs");
    let source = read(file, is_root)?;
    if source.children.is_empty() {
        return Ok(Part::File(source));
    }
    let root = if is_root { source } else { read(file, true)? };
    let mut children = BTreeMap::new();
    for child in &root.children {
        let nested = dir.join(child);
        let mut child_path = path.clone();
        child_path.push(child.clone());
        let part = if nested.join("mod.rs").is_file() {
            load(&nested.join("mod.rs"), &nested, child_path)?
        } else {
            let file = dir.join(format!("{child}.rs"));
            if !file.is_file() {
                continue;
            }
            load(&file, &nested, child_path)?
        };
        children.insert(child.clone(), part);
    }
    Ok(Part::Dir(Tree {
        path,
        root,
        children,
    }))
}

/// A source file with the path of the module it is.
pub struct File<'t> {
    pub module: Vec<String>,
    pub source: &'t Source,
}

impl File<'_> {
    /// Every module path the file names, from the crate root.
    pub fn references(&self) -> Vec<Vec<String>> {
        let mut found: Vec<Vec<String>> = self.source.crate_refs.clone();
        for (depth, rest) in &self.source.super_refs {
            if let Some(keep) = self.module.len().checked_sub(*depth) {
                let mut path = self.module[..keep].to_vec();
                path.extend(rest.iter().cloned());
                found.push(path);
            }
        }
        for first in &self.source.local_refs {
            let mut path = self.module.clone();
            path.push(first.clone());
            found.push(path);
        }
        found
    }
}

impl Part {
    /// Every file of this part, with its module path (`path` is the part's own).
    pub fn files<'t>(&'t self, path: &[String], out: &mut Vec<File<'t>>) {
        match self {
            Part::File(source) => out.push(File {
                module: path.to_vec(),
                source,
            }),
            Part::Dir(tree) => tree.files(out),
        }
    }

    /// This part and every tree below it.
    pub fn trees<'t>(&'t self, out: &mut Vec<&'t Tree>) {
        if let Part::Dir(tree) = self {
            out.push(tree);
            for child in tree.children.values() {
                child.trees(out);
            }
        }
    }
}

impl Tree {
    /// Every file of the tree, its root first.
    pub fn files<'t>(&'t self, out: &mut Vec<File<'t>>) {
        out.push(File {
            module: self.path.clone(),
            source: &self.root,
        });
        for (name, child) in &self.children {
            let mut path = self.path.clone();
            path.push(name.clone());
            child.files(&path, out);
        }
    }

    fn node(&self, child: &str) -> String {
        match self.children.get(child) {
            Some(Part::Dir(_)) => format!("{child}/"),
            _ => format!("{child}.rs"),
        }
    }

    /// The part of this module that defines `name`, a name right under it.
    fn owner(&self, name: &str) -> Option<String> {
        if self.children.contains_key(name) {
            return Some(self.node(name));
        }
        if let Some((_, child)) = self.root.reexports.iter().find(|(item, _)| item == name)
            && self.children.contains_key(child)
        {
            return Some(self.node(child));
        }
        self.root
            .items
            .iter()
            .any(|item| item == name)
            .then(|| "mod.rs".to_owned())
    }

    /// Which part of this module names which other part.
    pub fn edges(&self) -> Edges {
        let depth = self.path.len();
        let mut edges: Edges = BTreeMap::new();
        edges.insert("mod.rs".to_owned(), BTreeSet::new());
        for child in self.children.keys() {
            edges.insert(self.node(child), BTreeSet::new());
        }
        let mut files = Vec::new();
        self.files(&mut files);
        for file in &files {
            let from = match file.module.get(depth) {
                Some(child) => self.node(child),
                None => "mod.rs".to_owned(),
            };
            let mut targets = BTreeSet::new();
            for path in file.references() {
                if path.len() > depth
                    && path[..depth] == self.path[..]
                    && let Some(to) = self.owner(&path[depth])
                    && to != from
                {
                    targets.insert(to);
                }
            }
            edges.entry(from).or_default().extend(targets);
        }
        // The root's own uses of the names it re-exports.
        for name in &self.root.idents {
            if let Some((_, child)) = self.root.reexports.iter().find(|(item, _)| item == name)
                && self.children.contains_key(child)
            {
                let to = self.node(child);
                edges.entry("mod.rs".to_owned()).or_default().insert(to);
            }
        }
        edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str, root: bool) -> Source {
        scan(&tokens(text), root)
    }

    /// `store/` with `journal/` (mod.rs, redb.rs) and `faults.rs`.
    fn store(journal_root: &str, redb: &str) -> Tree {
        let journal = Tree {
            path: vec!["store".into(), "journal".into()],
            root: file(journal_root, true),
            children: BTreeMap::from([("redb".to_owned(), Part::File(file(redb, false)))]),
        };
        Tree {
            path: vec!["store".into()],
            root: file("mod journal;\nmod faults;\npub use faults::Faults;", true),
            children: BTreeMap::from([
                ("journal".to_owned(), Part::Dir(journal)),
                (
                    "faults".to_owned(),
                    Part::File(file("pub struct Faults;", false)),
                ),
            ]),
        }
    }

    #[test]
    fn a_nested_directory_is_one_part_of_its_parent_and_a_graph_of_its_own() {
        let tree = store(
            "mod redb;\npub use redb::Journal;\npub struct Entry;",
            "use super::Entry;\nuse super::super::Faults;\npub struct Journal;",
        );
        let outer = tree.edges();
        assert_eq!(outer["journal/"], BTreeSet::from(["faults.rs".to_owned()]));
        let Some(Part::Dir(journal)) = tree.children.get("journal") else {
            panic!("journal is a directory");
        };
        let inner = journal.edges();
        assert_eq!(inner["redb.rs"], BTreeSet::from(["mod.rs".to_owned()]));
        assert!(inner["mod.rs"].is_empty());
    }

    #[test]
    fn a_root_and_a_child_naming_each_other_make_a_cycle() {
        let tree = store(
            "mod redb;\npub use redb::Journal;\npub struct Entry;\nfn open() -> Journal { todo!() }",
            "use crate::store::journal::Entry;\npub struct Journal;",
        );
        let Some(Part::Dir(journal)) = tree.children.get("journal") else {
            panic!("journal is a directory");
        };
        let inner = journal.edges();
        assert_eq!(inner["mod.rs"], BTreeSet::from(["redb.rs".to_owned()]));
        assert_eq!(inner["redb.rs"], BTreeSet::from(["mod.rs".to_owned()]));
    }
}
