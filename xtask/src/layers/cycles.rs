//! Cycles of a directed graph (Tarjan's strongly connected components).

use std::collections::{BTreeMap, BTreeSet};

/// Every cycle of `graph` (its strongly connected components of more than one node).
pub fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
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
