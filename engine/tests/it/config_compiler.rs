//! `sluice check` and `sluice run` compile configurations along one path: fed the
//! same broken files, both refuse them with the same `FILE:LINE:COL` lines, every
//! problem at once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `sluice run` may take to refuse a configuration.
const REFUSAL_WITHIN: Duration = Duration::from_secs(60);

/// A scratch directory with the given files in it.
fn folder(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-compiler-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("pipelines")).expect("scratch dir");
    for (file, text) in files {
        let text = text.replace("DATA", &dir.join("data").display().to_string());
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

/// Runs the binary; kills it (and fails) if it does not end in time.
fn sluice(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > REFUSAL_WITHIN {
            let _ = child.kill();
            panic!(
                "`sluice {}` did not refuse its configuration",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `FILE:LINE:COL: message` lines about files under `dir`, sorted.
fn diagnostics(output: &str, dir: &Path) -> Vec<String> {
    let prefix = dir.display().to_string();
    let mut lines: Vec<String> = output
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// `FILE:LINE:COL:` of the first `needle` on line `line` (1-based) of `file` in `dir`.
fn at(dir: &Path, file: &str, line: usize, needle: &str) -> String {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).expect("read back");
    let row = text.lines().nth(line - 1).expect("line");
    let column = row
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` on line {line}: {row}"))
        + 1;
    format!("{}:{line}:{column}:", path.display())
}

/// Compiles `config` with `check` and with `run`, expects both to refuse it with
/// exactly the same lines, and returns those lines.
fn refused_alike(dir: &Path, config: &str) -> Vec<String> {
    let file = dir.join(config).display().to_string();
    let pipelines = dir.join("pipelines").display().to_string();
    let (checked, out, _) = sluice(&["check", &file, "--pipelines", &pipelines]);
    let (ran, _, err) = sluice(&["run", "--config", &file, "--pipelines", &pipelines]);
    assert_eq!(checked, 1, "check refuses:\n{out}");
    assert_eq!(ran, 1, "run refuses:\n{err}");
    let from_check = diagnostics(&out, dir);
    let from_run = diagnostics(&err, dir);
    assert!(!from_check.is_empty(), "{out}");
    assert_eq!(from_check, from_run, "check and run say the same");
    from_check
}

fn expect(lines: &[String], place: &str, words: &str) {
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(place) && l.contains(words)),
        "expected `{place} ... {words}` in:\n{}",
        lines.join("\n")
    );
}

const ADDRESSES: &str = "collector:
  wal: { dir: DATA }
devices:
  - deviceId: mb
    productId: P
    deviceNum: MB1
    channels:
      - channelId: c
        protocol: modbus-tcp
        host: 127.0.0.1
        tags:
          - { key: big, address: '99999', dataType: INT16 }
          - { key: s7ish, address: 'DB1.0', dataType: INT16 }
          - { key: fine, address: '40001', dataType: INT16 }
  - deviceId: s7
    productId: P
    deviceNum: S71
    channels:
      - channelId: c
        protocol: s7
        host: 127.0.0.1
        plcType: S1200
        tags:
          - { key: modbusish, address: '40001', dataType: INT16 }
          - { key: nodb, address: 'DB.1', dataType: INT16 }
  - deviceId: mc
    productId: P
    deviceNum: MC1
    channels:
      - channelId: c
        protocol: mc
        host: 127.0.0.1
        port: 5000
        series: A
        tags:
          - { key: s7ish, address: 'DB1.0', dataType: INT16 }
          - { key: fine, address: 'D100', dataType: INT16 }
";

#[test]
fn bad_addresses_of_every_protocol_are_refused_by_check_and_run_alike() {
    let dir = folder("addresses", &[("gw.yaml", ADDRESSES)]);
    let lines = refused_alike(&dir, "gw.yaml");
    expect(&lines, &at(&dir, "gw.yaml", 12, "'99999'"), "tag `big`");
    expect(&lines, &at(&dir, "gw.yaml", 13, "'DB1.0'"), "tag `s7ish`");
    expect(
        &lines,
        &at(&dir, "gw.yaml", 24, "'40001'"),
        "tag `modbusish`",
    );
    expect(&lines, &at(&dir, "gw.yaml", 25, "'DB.1'"), "tag `nodb`");
    expect(&lines, &at(&dir, "gw.yaml", 36, "'DB1.0'"), "tag `s7ish`");
    // A setting the codec refuses in its own words, at the setting's value.
    expect(
        &lines,
        &at(&dir, "gw.yaml", 34, "A"),
        "`series`: mc: series A speaks only the 1E frame",
    );
    assert_eq!(
        lines.len(),
        6,
        "nothing about the good tags:\n{}",
        lines.join("\n")
    );
}

const FIVE_MISTAKES: &str = "collector:
  wal: { dir: DATA }
devices:
  - deviceId: meter
    productId: P
    deviceNum: M1
    channels:
      - channelId: c1
        protocol: modbus-tcp
        port: 502
        tags:
          - { key: a, address: '40001', dataType: UINT16, colour: red }
          - { key: b, address: '4x0001', dataType: UINT16 }
          - { key: c, address: '40003', dataType: UINT17 }
          - { key: d, address: '40004', dataType: FLOAT32, byteOrder: XYZW }
          - { key: e, address: '40006', dataType: BOOL }
          - { key: f, address: '40007', dataType: UINT16 }
";

#[test]
fn one_pass_names_every_mistake_with_its_device_and_channel_codec_ones_included() {
    let dir = folder("five", &[("gw.yaml", FIVE_MISTAKES)]);
    let lines = refused_alike(&dir, "gw.yaml");
    expect(
        &lines,
        &at(&dir, "gw.yaml", 8, "channelId"),
        "missing required key `host`",
    );
    expect(
        &lines,
        &at(&dir, "gw.yaml", 12, "colour"),
        "unknown key `colour`",
    );
    // The codec's view of the channel, though the file has problems of its own.
    expect(
        &lines,
        &at(&dir, "gw.yaml", 13, "'4x0001'"),
        "modbus_tcp: `4x0001` is not a Modbus address",
    );
    expect(&lines, &at(&dir, "gw.yaml", 14, "UINT17"), "UINT17");
    expect(&lines, &at(&dir, "gw.yaml", 15, "XYZW"), "XYZW");
    // A BOOL is a bit: of a whole register, the bit to name is suggested.
    expect(
        &lines,
        &at(&dir, "gw.yaml", 16, "{ key: e"),
        "`40006.0` is the least significant",
    );
    assert_eq!(lines.len(), 6, "{}", lines.join("\n"));
    for line in &lines {
        assert!(
            line.contains("(device `meter`, channel `c1`"),
            "whose it is: {line}"
        );
    }
}

const VALUES: &str = "collector:
  wal: { dir: DATA }
  reportMode: SOMETIMES
devices:
  - deviceId: d
    productId: P
    deviceNum: D1
    colour: red
    channels:
      - channelId: c
        protocol: modbus-tcp
        host: 127.0.0.1
        port: 70000
        tags:
          - { key: t, address: '40001', dataType: FLOAT33, periodMs: 5 }
";

#[test]
fn bad_values_and_unknown_keys_are_refused_by_check_and_run_alike() {
    let dir = folder("values", &[("gw.yaml", VALUES)]);
    let lines = refused_alike(&dir, "gw.yaml");
    expect(&lines, &at(&dir, "gw.yaml", 3, "SOMETIMES"), "reportMode");
    expect(
        &lines,
        &at(&dir, "gw.yaml", 8, "colour"),
        "unknown key `colour`",
    );
    expect(&lines, &at(&dir, "gw.yaml", 13, "70000"), "port");
    expect(&lines, &at(&dir, "gw.yaml", 15, "FLOAT33"), "FLOAT33");
    expect(&lines, &at(&dir, "gw.yaml", 15, "5 }"), "periodMs");
    assert_eq!(lines.len(), 5, "{}", lines.join("\n"));
}

const PIPELINES: &str = "collector:
  wal: { dir: DATA }
devices:
  - deviceId: scaled
    productId: P
    deviceNum: A
    pipeline: broken
    channels:
      - { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: t, address: '40001', dataType: INT16 } ] }
  - deviceId: watched
    productId: P
    deviceNum: B
    pipeline: alarming
    channels:
      - { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: temp, address: '40001', dataType: INT16 } ] }
  - deviceId: lost
    productId: P
    deviceNum: C
    pipeline: nowhere
    channels:
      - { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: t, address: '40001', dataType: INT16 } ] }
";

const BROKEN: &str = "name: broken
stages:
  - use: decode
  - use: scale
    settings:
      decimals: 99
  - use: nosuch
";

const ALARMING: &str = "name: alarming
stages:
  - use: decode
alarms:
  thresholds:
    - { tag: nosuch, above: 90, clearAt: 80 }
";

#[test]
fn broken_pipelines_and_alarm_rules_are_refused_by_check_and_run_alike() {
    let dir = folder(
        "pipelines",
        &[
            ("gw.yaml", PIPELINES),
            ("pipelines/broken.yaml", BROKEN),
            ("pipelines/alarming.yaml", ALARMING),
        ],
    );
    let lines = refused_alike(&dir, "gw.yaml");
    let broken = "pipelines/broken.yaml";
    expect(
        &lines,
        &at(&dir, broken, 6, "decimals"),
        "must be from 0 to 12",
    );
    expect(
        &lines,
        &at(&dir, broken, 7, "use"),
        "unknown component `nosuch`",
    );
    expect(
        &lines,
        &at(&dir, "pipelines/alarming.yaml", 6, "tag:"),
        "no tag `nosuch` on this device",
    );
    expect(
        &lines,
        &at(&dir, "gw.yaml", 16, "deviceId"),
        "unknown pipeline `nowhere`",
    );
    assert_eq!(lines.len(), 4, "{}", lines.join("\n"));
}

#[test]
fn pipeline_include_cycles_are_refused_by_check_and_run_alike() {
    let config = "collector:\n  wal: { dir: DATA }\ndevices:\n  - deviceId: d\n    productId: P\n    deviceNum: D\n    pipeline: a\n    channels:\n      - { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: t, address: '40001', dataType: INT16 } ] }\n";
    let dir = folder(
        "includes",
        &[
            ("gw.yaml", config),
            ("pipelines/a.yaml", "name: a\nstages:\n  - pipeline: b\n"),
            ("pipelines/b.yaml", "name: b\nstages:\n  - pipeline: a\n"),
        ],
    );
    let lines = refused_alike(&dir, "gw.yaml");
    expect(
        &lines,
        &at(&dir, "pipelines/a.yaml", 3, "pipeline"),
        "a cycle",
    );
    expect(
        &lines,
        &at(&dir, "pipelines/b.yaml", 3, "pipeline"),
        "a cycle",
    );
}
