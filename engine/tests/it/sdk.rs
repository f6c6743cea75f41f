//! The component SDK as an author uses it, away from any Sluice checkout:
//! `sluice component new` writes a crate into a fresh directory, cargo builds it
//! there, `sluice component check` says it fits, and the engine runs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use std::time::Duration;

use crate::common::{TS, batch, runtime, setting, tag};
use crate::support::engine::scratch_dir;
use crate::support::peers::{Dlt645Meter, project_root};
use serde_json::json;
use sluice::config::{BackoffConfig, ConnectionLimits};
use sluice::io::{Budget, Link, LinkSettings};
use sluice::model::{DataType, FrameError, FrameSize, Quality, SettingValue, Value};
use sluice::runtime::{CallError, CodecSession, ComponentKind, Limits, LoadedComponent, Runtime};

fn sluice(args: &[&str], path: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg(path)
        .output()
        .expect("sluice runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A `kind` crate named `name`, written by the SDK into a fresh directory (its
/// `src/lib.rs` replaced by `source`, if given) and built there as an author
/// would; the component, loaded, and the crate's directory (removed by the
/// caller when all went well).
pub(crate) fn author(
    kind: ComponentKind,
    name: &str,
    source: Option<&Path>,
) -> (Runtime, Arc<LoadedComponent>, PathBuf) {
    let dir = scratch_dir("sdk").join(name);
    let (made, said) = sluice(&["component", "new", kind.as_str(), name], &dir);
    assert!(made, "{said}");
    let (again, said) = sluice(&["component", "new", kind.as_str(), name], &dir);
    assert!(!again && said.contains("is not empty"), "{said}");
    if let Some(source) = source {
        std::fs::copy(source, dir.join("src/lib.rs")).expect("the author's source");
    }

    // No path of the crate leads back into this checkout, and the build runs
    // from the crate's own directory. The target directory is the tests' own,
    // so a second run of the suite builds little.
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("manifest");
    assert!(!manifest.contains(".."), "{manifest}");
    let target = sdk_target();
    let built = Command::new(env!("CARGO"))
        .current_dir(&dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wasm = builds().join(format!("{name}.wasm"));
    let (fits, said) = sluice(&["component", "check"], &wasm);
    let expected = format!("a {kind} component for sluice:dataflow@0.7.0");
    assert!(fits && said.contains(&expected), "{said}");

    let runtime = runtime();
    let bytes = std::fs::read(&wasm).expect("built");
    let component = runtime.load(kind, name, &bytes).expect("loads");
    (runtime, component, dir)
}

/// Where the tests' builds of the SDK's crates go (kept between runs).
fn sdk_target() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-target")
}

/// The directory of those builds' `.wasm` files.
pub(crate) fn builds() -> PathBuf {
    sdk_target().join("wasm32-wasip2/release")
}

/// A codec test file's text with its `codec` (the crate's own build) pointed
/// at the tests' build.
fn at_our_build(cases: &str) -> String {
    cases.replace(
        "../target/wasm32-wasip2/release",
        &builds().display().to_string(),
    )
}

fn clean_up(dir: &Path) {
    if let Some(scratch) = dir.parent() {
        std::fs::remove_dir_all(scratch).expect("cleaned up");
    }
}

#[test]
fn a_stage_written_by_the_sdk_builds_outside_the_repository_and_runs() {
    let (runtime, component, dir) = author(ComponentKind::Stage, "add_offset", None);
    let (fits, said) = sluice(&["component", "check"], &dir.join("Cargo.toml"));
    assert!(!fits && said.contains("fits no world"), "{said}");
    let pool = runtime
        .stage_pool(&component, Limits::default())
        .expect("pool");
    let tags = Arc::from(&[tag("t", "40001", DataType::Float32)][..]);
    let refused = pool
        .processor(
            &[setting("ad", SettingValue::Float(1.0))],
            Arc::clone(&tags),
        )
        .expect_err("an unknown setting");
    assert!(refused.to_string().contains("`ad`"), "{refused}");
    let processor = pool
        .processor(&[setting("add", SettingValue::Float(1.5))], tags)
        .expect("processor");
    let out = processor
        .process(batch(&[Value::Float(20.0)]))
        .expect("process");
    assert_eq!(out.samples[0].value, Value::Float(21.5));
    assert_eq!(out.samples[0].quality, Quality::Good);
    clean_up(&dir);
}

#[test]
fn a_codec_written_by_the_sdk_builds_outside_the_repository_and_frames_its_answers() {
    let (runtime, component, dir) = author(ComponentKind::Codec, "registers", None);
    // The template's own cases, as written, name the crate's build.
    let cases = dir.join("tests/cases.yaml");
    let text = std::fs::read_to_string(&cases).expect("the template's cases");
    std::fs::write(&cases, at_our_build(&text)).expect("written");
    let (passed, said) = sluice(&["test"], &cases);
    assert!(passed && said.contains("2 test(s) passed"), "{said}");
    let pool = runtime
        .codec_pool(&component, Limits::default())
        .expect("pool");
    let unit = [setting("unit", SettingValue::Int(7))];
    let refused = pool
        .session(&unit, Arc::from(&[tag("t", "x", DataType::Uint16)][..]))
        .expect_err("not a register number");
    match refused {
        CallError::Config { issues, .. } => {
            assert!(format!("{issues:?}").contains("not a register number"));
        }
        other => panic!("{other:?}"),
    }
    let session = pool
        .session(&unit, Arc::from(&[tag("t", "17", DataType::Uint16)][..]))
        .expect("session");
    let plan = session.plan(&[0]).expect("plan");
    assert_eq!(plan.len(), 1);
    let sent = session
        .encode_read(plan[0].id)
        .expect("call")
        .expect("frame");
    assert_eq!(sent, [0xA5, 7, 0, 17]);
    let size = |head: &[u8]| session.frame_length(head).expect("call").expect("sized");
    assert_eq!(size(&[0xFE, 0xFE, 0xA5, 7, 0, 17]), FrameSize::Skip(2));
    let answer = [0xA5, 7, 0, 17, 0, 2, 0x12, 0x34];
    assert_eq!(size(&answer[..6]), FrameSize::Length(8));
    let batch = session
        .parse_read(plan[0].id, &answer, TS)
        .expect("call")
        .expect("parsed");
    let Value::Raw(span) = batch.samples[0].value else {
        panic!("{:?}", batch.samples[0]);
    };
    assert_eq!(batch.raw(span), Some(&[0x12, 0x34][..]));

    session
        .encode_read(plan[0].id)
        .expect("call")
        .expect("frame");
    let refusal = session
        .parse_read(plan[0].id, &[0xA5, 7, 0, 17, 3, 0], TS)
        .expect("call");
    assert!(
        matches!(&refusal, Err(FrameError::Device(e)) if e.code == 3),
        "{refusal:?}"
    );
    clean_up(&dir);
}

/// The example's codec test cases pass with `sluice test`; a wrong expectation
/// fails at its line and column.
fn codec_cases_run(dir: &Path) {
    let cases = project_root().join("examples/codecs/dlt645/tests/cases.yaml");
    let text = std::fs::read_to_string(&cases).expect("the example's cases");
    // The cases name the build relative to the crate; this build went elsewhere.
    let text = at_our_build(&text);
    let file = dir.join("cases.yaml");
    std::fs::write(&file, &text).expect("written");
    let (passed, said) = sluice(&["test"], &file);
    assert!(passed && said.contains("2 test(s) passed"), "{said}");
    std::fs::write(&file, text.replace("value: 229.7", "value: 229.8")).expect("written");
    let (passed, said) = sluice(&["test"], &file);
    let line = text
        .lines()
        .position(|l| l.contains("value: 229.7"))
        .expect("line")
        + 1;
    assert!(
        !passed
            && said.contains(&format!("cases.yaml:{line}:"))
            && said.contains("expected Float(229.8)"),
        "{said}"
    );
    std::fs::write(&file, "codec: nosuch\ncases: []\n").expect("written");
    let (passed, said) = sluice(&["test"], &file);
    assert!(
        !passed && said.contains("cases.yaml:1:8: no built-in codec `nosuch`"),
        "{said}"
    );
}

/// One read of tag `tag` through `link`: its value, or the meter's refusal.
async fn read(link: &mut Link, session: &CodecSession, tag: u32) -> Result<Value, String> {
    let frame = session.encode_read(tag).expect("call").expect("frame");
    let answer = link
        .request(session, &frame, |answer| {
            session.parse_read(tag, answer, TS)
        })
        .await
        .expect("an exchange");
    answer
        .map(|batch| batch.samples[0].value.clone())
        .map_err(|refusal| format!("{} {}", refusal.code, refusal.message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dlt645_example_reads_a_meter_over_tcp_through_the_engines_link() {
    let example = project_root().join("examples/codecs/dlt645/src/lib.rs");
    let (runtime, component, dir) = author(ComponentKind::Codec, "dlt645", Some(&example));
    codec_cases_run(&dir);
    let meter = Dlt645Meter::start(&json!({
        "address": "000000000001",
        "values": {"02010100": 229.7, "00000000": 45678.91, "02020100": 1.234, "02030000": -2.5},
    }));
    let pool = runtime
        .codec_pool(&component, Limits::default())
        .expect("pool");
    let tags: Arc<[_]> = ["02010100", "00000000", "02020100", "02030000"]
        .iter()
        .map(|id| tag(id, id, DataType::Float64))
        .collect();
    let address = |digits: &str| [setting("meterAddress", SettingValue::Text(digits.into()))];
    let refused = pool
        .session(
            &address("12345"),
            Arc::from(&[tag("x", "2010100", DataType::Int16)][..]),
        )
        .expect_err("three problems");
    let said = format!("{refused:?}");
    for words in ["12 digits", "8 hex digits", "FLOAT64"] {
        assert!(said.contains(words), "{words}: {said}");
    }
    let session = pool
        .session(&address("000000000001"), Arc::clone(&tags))
        .expect("session");
    let settings = LinkSettings {
        host: "127.0.0.1".into(),
        port: meter.port(),
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
        backoff: BackoffConfig {
            base_ms: 100,
            max_ms: 1000,
            jitter: 0.0,
        },
        failed_after: 3,
        line: None,
        serial: None,
    };
    let budget = Budget::new(&ConnectionLimits {
        max_total: 2,
        max_per_host: 2,
    });
    let mut link = Link::new(settings, budget, 1);
    link.ensure_online(&session).await.expect("connected");
    // The meter's four FE wake-up bytes are skipped; the values carry the
    // standard's decimals and signs.
    for (tag, expected) in [(0, 229.7), (1, 45_678.91), (2, 1.234), (3, -2.5)] {
        let value = read(&mut link, &session, tag).await;
        match value {
            Ok(Value::Float(v)) => assert!((v - expected).abs() < 1e-9, "{tag}: {v}"),
            other => panic!("{tag}: {other:?}"),
        }
    }
    // Another meter's address on the same connection: this meter refuses it.
    let other = pool
        .session(&address("000000000002"), tags)
        .expect("session");
    let refusal = read(&mut link, &other, 0).await.expect_err("refused");
    assert!(
        refusal.starts_with("1 ") && refusal.contains("other error"),
        "{refusal}"
    );
    clean_up(&dir);
}

#[test]
fn a_decoder_written_by_the_sdk_builds_outside_the_repository_and_its_cases_run() {
    let (runtime, component, dir) = author(ComponentKind::Decoder, "kv_lines", None);
    let cases = dir.join("tests/cases.yaml");
    let text = at_our_build(&std::fs::read_to_string(&cases).expect("the template's cases"));
    std::fs::write(&cases, &text).expect("written");
    let (passed, said) = sluice(&["test"], &cases);
    assert!(passed && said.contains("3 test(s) passed"), "{said}");
    // A wrong expectation fails at its place.
    std::fs::write(
        &cases,
        text.replace("value: 21.5 }, { tag: rh", "value: 22.5 }, { tag: rh"),
    )
    .expect("written");
    let (passed, said) = sluice(&["test"], &cases);
    assert!(
        !passed && said.contains("cases.yaml:11:") && said.contains("case `a whole message`"),
        "{said}"
    );
    let pool = runtime
        .decoder_pool(&component, Limits::default())
        .expect("pool");
    let refused = pool
        .decoder(
            &[],
            Arc::from(&[tag("t", "a=b", DataType::Uint16)][..]),
            true,
        )
        .expect_err("not a key");
    assert!(refused.to_string().contains("is not a key"), "{refused}");
    clean_up(&dir);
}
