//! The `sluice` binary as a user runs it.

use std::path::PathBuf;
use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String, String) {
    outcome(Command::new(env!("CARGO_BIN_EXE_sluice")).args(args))
}

/// Exit status, stdout and stderr of `command`.
fn outcome(command: &mut Command) -> (i32, String, String) {
    let output = command.output().expect("the command runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn project_file(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

#[test]
fn check_prints_every_mistake_with_line_and_column() {
    let config = scratch(
        "two-mistakes.yaml",
        "devices:\n  - deviceId: d1\n    productId: P1\n    deviceNum: N1\n    colour: red\n    channels:\n      - channelId: c1\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags:\n          - key: t\n            address: '40001'\n            dataType: FLOAT33\n",
    );
    let file = config.display().to_string();
    let (code, stdout, _) = sluice(&["check", &file]);
    assert_eq!(code, 1);
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(&format!("{file}:5:5: unknown key `colour`")),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with(&format!("{file}:13:23: ")) && lines[1].contains("FLOAT33"),
        "{stdout}"
    );
}

#[test]
fn check_reports_pipeline_mistakes_found_by_the_components() {
    let pipeline = scratch(
        "pipeline.yaml",
        "stages:\n  - use: scale\n    settings:\n      decimals: 99\n  - use: nosuch\n",
    );
    let file = pipeline.display().to_string();
    let (code, stdout, _) = sluice(&["check", &file]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains(&format!(
            "{file}:4:7: stage `scale`: setting `decimals` must be from 0 to 12"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{file}:5:5: unknown component `nosuch`")),
        "{stdout}"
    );
}

/// A process with too little address space for the components' guard regions
/// (under `ulimit -v`) is told so and runs them bounds-checked: the same check
/// finds the same mistakes through the components.
#[cfg(target_arch = "x86_64")]
#[test]
fn components_run_bounds_checked_without_room_for_guard_regions() {
    const WARNING: &str = "no address space for the components' guard regions";
    let pipeline = scratch(
        "bounds-checked.yaml",
        "stages:\n  - use: scale\n    settings:\n      decimals: 99\n",
    );
    let file = pipeline.display().to_string();
    let (code, unlimited, stderr) = sluice(&["check", &file]);
    assert_eq!(code, 1, "{unlimited}{stderr}");
    assert!(unlimited.contains("must be from 0 to 12"), "{unlimited}");
    assert!(!stderr.contains(WARNING), "{stderr}");
    // 300 GiB: room for the bounds-checked pool (250 GiB), not for the
    // guarded one (4 GiB and a guard region for each of 1,000 instances).
    let (code, limited, stderr) = outcome(Command::new("sh").args([
        "-c",
        "ulimit -v 314572800 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_sluice"),
        "check",
        &file,
    ]));
    assert_eq!(code, 1, "{limited}{stderr}");
    assert_eq!(limited, unlimited);
    assert!(stderr.contains(WARNING), "{stderr}");
}

#[test]
fn check_follows_pipelines_that_include_pipelines() {
    let inner = scratch(
        "inner.yaml",
        "stages:\n  - use: scale\n    settings:\n      decimals: 99\n",
    );
    let outer = scratch(
        "outer.yaml",
        "stages:\n  - use: swap_bytes\n  - pipeline: inner\n  - pipeline: default\n",
    );
    let looping = scratch("looping.yaml", "stages:\n  - pipeline: looping\n");
    let dangling = scratch("dangling.yaml", "stages:\n  - pipeline: nowhere\n");
    let [inner, outer, looping, dangling] =
        [inner, outer, looping, dangling].map(|p| p.display().to_string());
    let (code, stdout, _) = sluice(&["check", &inner, &outer, &looping, &dangling]);
    assert_eq!(code, 1);
    for expected in [
        format!("{inner}:4:7: stage `scale`: setting `decimals` must be from 0 to 12"),
        format!(
            "{outer}:3:5: in pipeline `inner` at {inner}:4:7: stage `scale`: setting `decimals`"
        ),
        format!("{looping}:2:5: a cycle: looping -> looping"),
        format!("{dangling}:2:5: unknown pipeline `nowhere`"),
    ] {
        assert!(stdout.contains(&expected), "{expected}\n{stdout}");
    }
}

#[test]
fn the_shipped_config_and_pipelines_are_valid() {
    let (code, stdout, stderr) = sluice(&[
        "check",
        &project_file("config/collector-devices.yaml"),
        &project_file("pipelines/default.yaml"),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout.matches(": ok").count(), 2, "{stdout}");
}

/// `RUST_LOG` is read as `target=level` directives: `off` silences the log; a
/// value it cannot read is named in a warning and the default level kept.
#[test]
fn the_log_filter_is_followed_and_one_it_cannot_read_is_named() {
    let config = project_file("config/collector-devices.yaml");
    let check = |filter: &str| {
        outcome(
            Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(["check", &config])
                .env("RUST_LOG", filter),
        )
    };
    let (code, _, stderr) = check("sluice=loud");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("WARN") && stderr.contains("RUST_LOG=\"sluice=loud\""),
        "{stderr}"
    );
    assert!(stderr.contains("not understood"), "{stderr}");
    let (code, _, stderr) = check("off");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "", "nothing is logged");
}

#[test]
fn demo_runs_a_gateway_against_its_simulator_and_broker() {
    let (code, stdout, stderr) = sluice(&["demo", "--reports", "3"]);
    assert_eq!(code, 0, "{stderr}");
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("DEMO/METER01/property/post "))
        .map(|payload| serde_json::from_str(payload).expect("each report is JSON"))
        .collect();
    assert_eq!(reports.len(), 3, "{stdout}");
    let seqs: Vec<_> = reports
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let keys: Vec<&str> = reports
        .iter()
        .flat_map(|r| r["values"].as_array().expect("values"))
        .map(|v| v["key"].as_str().expect("key"))
        .collect();
    for key in ["running", "flow"] {
        assert!(keys.contains(&key), "{key} in {stdout}");
    }
    let flow = reports
        .iter()
        .flat_map(|r| r["values"].as_array().expect("values"))
        .find(|v| v["key"] == "flow")
        .expect("flow");
    let flow = flow["value"].as_f64().expect("a number");
    assert!(
        (10.0..15.0).contains(&flow),
        "flow in m3/h from hundredths: {flow}"
    );
    assert!(
        stdout.contains(
            "DEMO/METER01/status/post {\"collector\":\"sluice-demo\",\"status\":\"online\""
        ),
        "{stdout}"
    );
}

/// What a first-time user sees: a quiet log (no error, no colour codes in a
/// file), the engine online from its first message, the alarm within the
/// minute, the lines that say where things are; and nothing left behind
/// after a SIGTERM (the directory holds the console's token).
#[test]
fn the_demo_is_quiet_shows_an_alarm_and_leaves_nothing_behind() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("sluice-cli-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("demo.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("demo")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("the demo starts");
    let stdout = child.stdout.take().expect("stdout");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("a line");
        let alarmed = line.starts_with("alarm/post ");
        lines.push(line);
        if alarmed || std::time::Instant::now() > deadline {
            break;
        }
    }
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(stopped);
    let status = child.wait().expect("the demo ends");
    let stderr = std::fs::read_to_string(&log).expect("the log");
    assert!(status.success(), "{stderr}");
    let alarm = lines.last().expect("messages");
    assert!(
        alarm.starts_with("alarm/post ") && alarm.contains("TEMPERATURE_HIGH"),
        "the threshold alarm within the minute:\n{}",
        lines.join("\n")
    );
    assert!(
        lines[0].contains("\"status\":\"online\""),
        "the first message says online: {}",
        lines[0]
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "no colour codes in a file: {stderr}"
    );
    for said in [
        "#token=",
        "/commands",
        "\"key\":\"setpoint\"",
        "TEMPERATURE_HIGH",
    ] {
        assert!(stderr.contains(said), "{said} in {stderr}");
    }
    let config = stderr
        .split("configuration in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the configuration's path");
    let config = PathBuf::from(config);
    assert!(config.ends_with("demo.yaml"), "{}", config.display());
    assert!(
        !config.parent().expect("its directory").exists(),
        "{} removed",
        config.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_and_version() {
    let (code, stdout, _) = sluice(&["--version"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("sluice "));
    let (code, stdout, _) = sluice(&["--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("check") && stdout.contains("demo"));
}

#[test]
fn component_add_keeps_a_checked_component_for_the_next_start() {
    let config = scratch(
        "component-add.yaml",
        "collector:\n  wal:\n    dir: ./component-data\n",
    );
    let dir = config.parent().expect("dir").to_path_buf();
    let wasm = PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm");
    let run = |file: &PathBuf, kind: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["component", "add"])
            .arg(file)
            .args([
                "--name",
                "scale",
                "--version",
                "9.0.0",
                "--kind",
                kind,
                "--config",
            ])
            .arg(&config)
            .current_dir(&dir)
            .output()
            .expect("sluice runs");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&wasm, "stage");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sha256"), "{out}");
    let manifest = dir.join("component-data/components/scale/manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).expect("manifest")).expect("json");
    assert_eq!(
        (manifest["active"].as_str(), manifest["kind"].as_str()),
        (Some("9.0.0"), Some("stage"))
    );
    // A stage given as a codec does not fit the codec world: refused, nothing kept.
    let (code, _, err) = run(&wasm, "codec");
    assert_ne!(code, 0);
    assert!(err.contains("does not fit the `codec` world"), "{err}");
}

/// `sluice check` knows the protocols of the codecs kept in the gateway's data
/// directory, and names those there are when a channel names another;
/// `sluice component check` prints a codec's declaration.
#[test]
fn check_speaks_the_protocols_of_the_codecs_kept_in_the_data_directory() {
    let device = |mode: &str| {
        format!(
            "collector:\n  wal:\n    dir: ./protocol-data\ndevices:\n  - deviceId: h\n    productId: P\n    deviceNum: H\n    channels:\n      - channelId: c\n        protocol: hostile\n        host: 127.0.0.1\n        mode: {mode}\n        tags: [ {{ key: x, address: '1', dataType: UINT16 }} ]\n"
        )
    };
    let config = scratch("protocol-check.yaml", &device("calm"));
    let dir = config.parent().expect("dir").to_path_buf();
    let in_dir = |args: &[&str]| {
        outcome(
            Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(args)
                .current_dir(&dir),
        )
    };
    let file = config.display().to_string();
    let (code, out, _) = in_dir(&["check", &file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "protocol-check.yaml:10:19: `protocol`: unknown protocol `hostile`: this gateway speaks mc | modbus-rtu | modbus-rtu-over-tcp | modbus-tcp | s7"
        ),
        "{out}"
    );
    let wasm = PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("hostile_codec.wasm");
    let wasm = wasm.display().to_string();
    let (code, out, err) = in_dir(&["component", "check", &wasm]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "  protocol hostile: on a TCP connection (`host`); port 1 by default",
        "    mode: calm | trap | loop | memory, default calm: how the codec misbehaves when a channel is checked",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    let add = [
        "component",
        "add",
        &wasm,
        "--name",
        "hostile",
        "--version",
        "1.0.0",
        "--kind",
        "codec",
        "--config",
        &file,
    ];
    let (code, out, err) = in_dir(&add);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = in_dir(&["check", &file]);
    assert_eq!(code, 0, "{out}{err}");
    // Its settings are checked as the codec declares them.
    std::fs::write(&config, device("wild")).expect("write");
    let (code, out, _) = in_dir(&["check", &file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "protocol-check.yaml:12:15: `mode`: unknown value `wild`: expected calm | trap | loop | memory (how the codec misbehaves when a channel is checked)"
        ),
        "{out}"
    );
}

#[test]
fn test_runs_pipeline_cases_and_points_at_failed_expectations() {
    let (code, out, err) = sluice(&["test", &project_file("pipelines/default.yaml")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("5 test(s) passed"), "{out}");
    let failing = scratch(
        "failing-cases.yaml",
        "name: f\nstages:\n  - use: swap_bytes\n  - use: decode\ntests:\n  - name: wrong on purpose\n    tags: [ { key: t, dataType: UINT16 } ]\n    input: [ { tag: t, raw: \"0007\" } ]\n    expect: [ { tag: t, value: 8 } ]\n",
    );
    let (code, out, _) = sluice(&["test", &failing.display().to_string()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("failing-cases.yaml:9:15: test `wrong on purpose` round 1: tag `t`: expected Int(8) Good, got Int(7) Good"),
        "{out}"
    );
    let unknown = scratch(
        "unknown-tag.yaml",
        "name: u\nstages:\n  - use: decode\ntests:\n  - name: unknown tag\n    tags: [ { key: t, dataType: UINT16 } ]\n    input: [ { tag: x, raw: \"0007\" } ]\n",
    );
    let (code, out, _) = sluice(&["test", &unknown.display().to_string()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("unknown-tag.yaml:7:14: no tag `x` in this test's `tags`"),
        "{out}"
    );
    assert!(!out.contains("no `rounds`"), "{out}");
}
