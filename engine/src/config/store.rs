//! `collector.store`: where the engine keeps its state (leases, alarms, commands,
//! write records and their audit trail). The default, an embedded redb file in
//! the data directory, needs no settings; `kind: postgres` shares the state with
//! every engine that points at the same database (docs/state.md).

use super::read::{at_least, choice, text_at};
use crate::yaml::{Diagnostics, Fields, Node};

/// Which database holds the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `redb`: one file in `wal.dir`, this engine's alone.
    Redb,
    /// `postgres`: a PostgreSQL database, shared by several engines.
    Postgres,
}

impl StoreKind {
    /// Names as the file writes them.
    pub const NAMES: &'static [(&'static str, StoreKind)] =
        &[("redb", StoreKind::Redb), ("postgres", StoreKind::Postgres)];
}

/// `collector.store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `kind`: `redb` (default) or `postgres`.
    pub kind: StoreKind,
    /// `url`: `postgresql://USER@HOST:PORT/DB`; required with `kind: postgres`,
    /// refused with `redb`.
    pub url: Option<String>,
    /// `pool`: connections kept open to PostgreSQL at most (at least 1; default 8).
    pub pool: usize,
    /// `ownershipLeaseMs`: how long an engine owns a device without renewing
    /// (PostgreSQL only; at least 1000; default 10000). An engine that dies loses
    /// its devices to the others after this long.
    pub ownership_lease_ms: u64,
    /// `cacheMb`: memory the engine's redb file may keep of its pages (at least
    /// 1; default 64). The WAL is in that file whatever `kind` says.
    pub cache_mb: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            kind: StoreKind::Redb,
            url: None,
            pool: 8,
            ownership_lease_ms: 10_000,
            cache_mb: 64,
        }
    }
}

/// Reads `collector.store`.
pub(super) fn read(node: &Node, errors: &mut Diagnostics) -> StoreConfig {
    let d = StoreConfig::default();
    let Some(mut f) = Fields::of(node, "collector.store", errors) else {
        return d;
    };
    let kind = choice(&mut f, "kind", StoreKind::NAMES, d.kind, errors);
    let url = text_at(&mut f, "url", errors);
    let pool = at_least(&mut f, "pool", 1, 8u32, errors) as usize;
    let ownership_lease_ms = at_least(
        &mut f,
        "ownershipLeaseMs",
        1000,
        d.ownership_lease_ms,
        errors,
    );
    let cache_mb = at_least(&mut f, "cacheMb", 1, d.cache_mb, errors);
    let url = match (kind, url) {
        (StoreKind::Postgres, None) => {
            errors.push(
                f.pos(),
                "`url`: required with `kind: postgres` (postgresql://USER@HOST:PORT/DB)",
            );
            None
        }
        (StoreKind::Postgres, Some((url, pos))) => match url.parse::<tokio_postgres::Config>() {
            Ok(_) => Some(url),
            Err(error) => {
                errors.push(pos, format!("`url`: not a PostgreSQL URL: {error}"));
                None
            }
        },
        (StoreKind::Redb, Some((_, pos))) => {
            errors.push(pos, "`url`: only `kind: postgres` takes a URL");
            None
        }
        (StoreKind::Redb, None) => None,
    };
    f.finish(errors);
    StoreConfig {
        kind,
        url,
        pool,
        ownership_lease_ms,
        cache_mb,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};
    use super::*;

    #[test]
    fn redb_is_the_default_and_needs_nothing() {
        assert_eq!(
            load_ok("devices: []\n").collector.store,
            StoreConfig::default()
        );
        assert_eq!(
            load_ok("collector: {store: {kind: redb}}\n")
                .collector
                .store,
            StoreConfig::default()
        );
    }

    #[test]
    fn postgres_with_its_settings() {
        let c = load_ok(
            "collector:
  store: {kind: postgres, url: 'postgresql://sluice@127.0.0.1:5432/plant', pool: 3, ownershipLeaseMs: 4000, cacheMb: 16}
",
        )
        .collector
        .store;
        assert_eq!(
            c,
            StoreConfig {
                kind: StoreKind::Postgres,
                url: Some("postgresql://sluice@127.0.0.1:5432/plant".to_owned()),
                pool: 3,
                ownership_lease_ms: 4000,
                cache_mb: 16,
            }
        );
    }

    #[test]
    fn wrong_store_settings_are_reported() {
        let cases = [
            (
                "collector: {store: {kind: postgres}}\n",
                "gw.yaml:1:20: `url`: required with `kind: postgres`",
            ),
            (
                "collector: {store: {kind: redb, url: 'postgresql://a@b/c'}}\n",
                "gw.yaml:1:38: `url`: only `kind: postgres` takes a URL",
            ),
            (
                "collector: {store: {kind: postgres, url: 'mysql:://x'}}\n",
                "gw.yaml:1:42: `url`: not a PostgreSQL URL",
            ),
            (
                "collector: {store: {kind: sqlite}}\n",
                "gw.yaml:1:27: `kind`: unknown value `sqlite`: expected redb | postgres",
            ),
            (
                "collector: {store: {pool: 0, ownershipLeaseMs: 10}}\n",
                "gw.yaml:1:27: `pool`: must be at least 1, found 0",
            ),
        ];
        for (yaml, want) in cases {
            let text = errors_of(yaml).to_string();
            assert!(text.starts_with(want), "{yaml}: got {text}\nwant {want}");
        }
        let text = errors_of("collector: {store: {cacheMb: 0}}\n").to_string();
        assert!(
            text.contains("`cacheMb`: must be at least 1, found 0"),
            "{text}"
        );
        let text = errors_of("collector: {store: {ownershipLeaseMs: 10}}\n").to_string();
        assert!(
            text.contains("`ownershipLeaseMs`: must be at least 1000, found 10"),
            "{text}"
        );
    }
}
