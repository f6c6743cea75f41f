//! Helpers shared by the engine's integration tests.

use std::path::PathBuf;

use sluice::alarm::{AlarmFilter, AlarmState, AlarmStore, Scope};
use sluice::command::{CommandKind, Delivery, NewCommand};
use sluice::model::Whitelist;
use sluice::model::{
    Access, Batch, ByteOrder, DataType, Quality, Sample, Setting, SettingValue, TagSpec, Value,
};
use sluice::runtime::BUILTIN;
use sluice::runtime::{ComponentKind, Limits, Runtime, RuntimeConfig};
use sluice::store::{DEFAULT_POOL_SIZE, Postgres, StateDatabase, Store};

pub const TS: i64 = 1_700_000_000_000;

/// xorshift64*: small and deterministic, so a failing seed replays.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 for `n` of 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// A fresh directory for one test's database (not created: `Store::open` does).
pub fn scratch(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    std::env::temp_dir().join(format!("sluice-{name}-{}-{nanos}", std::process::id()))
}

/// The variable that runs the store tests on PostgreSQL: the URL of a server
/// without a database (`postgresql://USER@HOST:PORT`), on which each test makes
/// a database of its own. `cargo xtask test` sets it for a second run of the
/// alarm and command tests; unset, they run on redb.
pub const POSTGRES_VAR: &str = "SLUICE_TEST_POSTGRES";

/// Where one test keeps its state: a redb file of its own, or a PostgreSQL
/// database of its own when [`POSTGRES_VAR`] is set.
#[derive(Debug, Clone)]
pub enum TestDatabase {
    Redb(PathBuf),
    Postgres(String),
}

impl TestDatabase {
    /// A new, empty one for the test `name`.
    pub fn new(name: &str) -> Self {
        let Ok(server) = std::env::var(POSTGRES_VAR) else {
            return TestDatabase::Redb(scratch(name));
        };
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let database = format!("t_{clean}_{}_{made}", std::process::id());
        let output = std::process::Command::new("/usr/lib/postgresql/15/bin/psql")
            .args([
                "-d",
                &format!("{server}/postgres"),
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
            ])
            .arg(format!("CREATE DATABASE {database}"))
            .output()
            .expect("psql");
        assert!(
            output.status.success(),
            "CREATE DATABASE {database}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        TestDatabase::Postgres(format!("{server}/{database}"))
    }

    /// Opens it (again, after a restart).
    pub fn open(&self) -> StateDatabase {
        match self {
            TestDatabase::Redb(dir) => StateDatabase::Redb(Store::open(dir).expect("store")),
            TestDatabase::Postgres(url) => {
                StateDatabase::Postgres(Postgres::open(url, DEFAULT_POOL_SIZE).expect("postgres"))
            }
        }
    }
}

pub fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

/// The whitelists of the built-in rules component, as the engine reads them at load.
pub fn whitelist() -> Whitelist {
    let runtime = runtime();
    let component = runtime
        .load(ComponentKind::Rules, "alarm_rules", &builtin("alarm_rules"))
        .expect("loads");
    runtime
        .rules_pool(&component, Limits::default())
        .expect("pool")
        .whitelist()
        .expect("whitelist")
}

/// A guest built for the tests from `components/testing`.
pub fn test_component(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bytes of the built-in component `name`.
pub fn builtin(name: &str) -> Vec<u8> {
    BUILTIN
        .iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("no built-in component `{name}`"))
        .wasm
        .inflate(name)
        .expect("the built-in copy inflates")
}

pub fn tag(key: &str, address: &str, data_type: DataType) -> TagSpec {
    TagSpec {
        key: key.into(),
        address: address.into(),
        data_type,
        length: 0,
        byte_order: ByteOrder::Abcd,
        factor: 1.0,
        offset: 0.0,
        deadband: 0.0,
        access: Access::ReadWrite,
        settings: Vec::new(),
    }
}

pub fn setting(key: &str, value: SettingValue) -> Setting {
    Setting {
        key: key.into(),
        value,
    }
}

/// A batch with one GOOD sample per value, tag i for value i.
pub fn batch(values: &[Value]) -> Batch {
    Batch {
        samples: values
            .iter()
            .enumerate()
            .map(|(i, value)| Sample {
                tag: i as u32,
                value: value.clone(),
                quality: Quality::Good,
                ts_ms: TS,
            })
            .collect(),
        bytes: Vec::new(),
    }
}

/// A command setting `valve` to 1 on `device`.
pub fn new_command(device: &str, delivery: Delivery, request: Option<&str>) -> NewCommand {
    NewCommand {
        tenant_id: 0,
        device_id: device.into(),
        kind: CommandKind::PropertySet,
        key: "valve".into(),
        value: serde_json::json!(1),
        request_id: request.map(str::to_owned),
        delivery,
        origin: "test".into(),
    }
}

/// After `raised` raises of one key, each of which opened an alarm: one alarm
/// holds the key and is NEW, every other one is SUPERSEDED.
pub fn assert_one_active(store: &AlarmStore, raised: usize) {
    let filter = AlarmFilter {
        limit: 100,
        ..Default::default()
    };
    let all = store.list(&filter, Scope::All).expect("list");
    assert_eq!(all.len(), raised);
    let active: Vec<_> = all.iter().filter(|a| a.active_key.is_some()).collect();
    assert_eq!(active.len(), 1, "one active alarm: {all:#?}");
    assert_eq!(active[0].state, AlarmState::New);
    let superseded = all
        .iter()
        .filter(|a| a.state == AlarmState::Superseded)
        .count();
    assert_eq!(superseded, raised - 1);
}
