//! The gateway builds of `cargo xtask dist --check` (ignored otherwise: they
//! need `target/packages`, named by `SLUICE_DIST`): each static binary runs a
//! gateway against pymodbus and Mosquitto (the aarch64 one under
//! `qemu-aarch64-static`), refuses the demo it leaves out, and prints its size
//! and its cold start to the first publish, and the x86_64 one runs an
//! uploaded stage on its sandbox threads below the engine's priority (what
//! musl's wrappers decide, `runtime/threads.rs`); each Debian package installs
//! into an empty root with its files where the README says, its example config passes `sluice check`, and its
//! unit passes `systemd-analyze verify` (beside the units of this machine's
//! systemd, which an empty root lacks).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, PyModbus, free_port};
use serde_json::json;

/// A build: its target, its Debian architecture, and what runs it here.
struct Build {
    triple: &'static str,
    debian: &'static str,
    runner: Option<&'static str>,
}

const BUILDS: [Build; 2] = [
    Build {
        triple: "x86_64-unknown-linux-musl",
        debian: "amd64",
        runner: None,
    },
    Build {
        triple: "aarch64-unknown-linux-musl",
        debian: "arm64",
        runner: Some("qemu-aarch64-static"),
    },
];

fn dist() -> PathBuf {
    PathBuf::from(
        std::env::var_os("SLUICE_DIST")
            .expect("SLUICE_DIST names target/packages: run `cargo xtask dist --check`"),
    )
}

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

impl Build {
    fn binary(&self) -> PathBuf {
        dist().join(format!("sluice-{}-{}", version(), self.triple))
    }

    fn package(&self) -> PathBuf {
        dist().join(format!("sluice_{}_{}.deb", version(), self.debian))
    }

    fn command(&self) -> Command {
        match self.runner {
            Some(runner) => {
                let mut command = Command::new(runner);
                command.arg(self.binary());
                command
            }
            None => Command::new(self.binary()),
        }
    }
}

/// A gateway started by a test, killed when the test is done with it (also
/// when an assertion fails while it runs).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `command` to its end within `limit`; its output.
fn finish(mut command: Command, limit: Duration) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{command:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

fn config(modbus: u16, mqtt: u16, http: u16) -> String {
    Gateway::new(&format!("dist-{mqtt}"), mqtt)
        .http(http, ADMIN_TOKEN)
        .device(
            Device::modbus("meter", modbus)
                .channel("readTimeoutMs", 1000)
                .tag(Tag::new("volts", "40001", "UINT16", 500).set("factor", 0.1)),
        )
        .yaml()
}

/// Where the meter of [`config`] reports.
const TOPIC: &str = "P/meter/property/post";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the dist build: cargo xtask dist --check"]
async fn each_static_binary_runs_a_gateway_and_has_no_demo() {
    let modbus = PyModbus::start(&json!({ "hr": { "0": [2305] } }));
    let broker = Mosquitto::start();
    for build in &BUILDS {
        let size = std::fs::metadata(build.binary()).expect("the binary").len();
        // A gateway build has no demo, and says so.
        let mut demo = build.command();
        demo.args(["demo", "--reports", "2"]);
        let output = finish(demo, Duration::from_secs(60));
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && said.contains("this build has no demo"),
            "{}: {said}",
            build.triple
        );

        let host = Subscriber::connect(broker.port()).await;
        let dir = scratch_dir(&format!("dist-{}", build.debian));
        let file = dir.join("gateway.yaml");
        let http = free_port();
        std::fs::write(&file, config(modbus.port(), broker.port(), http)).expect("config");
        let log = std::fs::File::create(dir.join("engine.log")).expect("log");
        let started = Instant::now();
        let mut gateway = build.command();
        let child = Running(
            gateway
                .args(["run", "--config"])
                .arg(&file)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("the gateway starts"),
        );
        let messages = host
            .wait_until(Duration::from_secs(300), "the first report", |m| {
                m.iter().any(|m| m.topic == TOPIC)
            })
            .await;
        let first = started.elapsed();
        if build.runner.is_none() {
            uploaded_stages_run_below_the_engine(&host, http, child.0.id()).await;
        }
        drop(child);
        let report = messages
            .iter()
            .find(|m| m.topic == TOPIC)
            .expect("a report")
            .json();
        assert_eq!(report["values"][0]["value"], json!(230.5), "{report}");
        eprintln!(
            "dist: {} {:.1} MB, cold start to the first publish {:.2} s{}",
            build.triple,
            size as f64 / 1e6,
            first.as_secs_f64(),
            build
                .runner
                .map_or(String::new(), |r| format!(" (under {r})")),
        );
    }
}

/// Replaces the pipeline's `scale` with an uploaded version (`shifted_scale`,
/// which adds 1000), waits for its values, and checks the threads of the
/// gateway `pid`: the uploaded stage's calls ran on `sluice-sandbox` threads
/// under `SCHED_IDLE`, every other thread kept the normal policy.
async fn uploaded_stages_run_below_the_engine(host: &Subscriber, http: u16, pid: u32) {
    let wasm = PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm");
    let bytes = std::fs::read(&wasm).expect("the test component");
    let (status, body) = Engine::put_wasm(
        http,
        "/components/scale/7.0.0?kind=stage",
        ADMIN_TOKEN,
        &bytes,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    host.wait_until(Duration::from_secs(60), "the uploaded stage's value", |m| {
        m.iter()
            .any(|m| m.topic == TOPIC && m.json()["values"][0]["value"] == json!(1230.5))
    })
    .await;
    let threads = threads_of(pid);
    let sandbox: Vec<_> = threads
        .iter()
        .filter(|(name, _)| name == "sluice-sandbox")
        .collect();
    assert!(!sandbox.is_empty(), "no sandbox thread: {threads:?}");
    for (name, policy) in &threads {
        let expected = if name == "sluice-sandbox" {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        assert_eq!(*policy, expected, "{name}: {threads:?}");
    }
}

/// The name and scheduling policy of each thread of `pid` (`/proc`).
fn threads_of(pid: u32) -> Vec<(String, i32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the gateway's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            // Fields after the name start at the third; the policy is the 41st.
            let policy = rest.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

/// Installs `package` into a new empty root; the root.
fn install(package: &Path, name: &str) -> PathBuf {
    let root = scratch_dir(name);
    let admin = root.join("var/lib/dpkg");
    std::fs::create_dir_all(admin.join("info")).expect("dpkg dirs");
    std::fs::create_dir_all(admin.join("updates")).expect("dpkg dirs");
    std::fs::write(admin.join("status"), "").expect("dpkg status");
    let output = Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args([
            "--force-script-chrootless",
            "--force-architecture",
            "--force-not-root",
            "--log=/dev/null",
            "-i",
        ])
        .arg(package)
        .output()
        .expect("dpkg runs");
    assert!(
        output.status.success(),
        "dpkg -i {}: {}",
        package.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    root
}

#[test]
#[ignore = "needs the dist build: cargo xtask dist --check"]
fn each_package_installs_with_its_files_where_the_readme_says() {
    for build in &BUILDS {
        let root = install(&build.package(), &format!("deb-{}", build.debian));
        for file in [
            "usr/bin/sluice",
            "etc/sluice/sluice.yaml",
            "usr/lib/systemd/system/sluice.service",
            "usr/share/doc/sluice/README.md",
        ] {
            assert!(root.join(file).is_file(), "{}: /{file}", build.debian);
        }
        let status = Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["-s", "sluice"])
            .output()
            .expect("dpkg -s");
        let status = String::from_utf8_lossy(&status.stdout);
        assert!(status.contains("Status: install ok installed"), "{status}");
        assert!(
            status.contains(&format!("Architecture: {}", build.debian)),
            "{status}"
        );
        let conffiles = String::from_utf8_lossy(
            &std::fs::read(root.join("var/lib/dpkg/info/sluice.conffiles")).expect("conffiles"),
        )
        .into_owned();
        assert!(conffiles.contains("/etc/sluice/sluice.yaml"), "{conffiles}");

        // The unit's ExecStartPre: the example config passes `sluice check`.
        let mut check = build.command();
        check.arg("check").arg(root.join("etc/sluice/sluice.yaml"));
        let checked = finish(check, Duration::from_secs(600));
        assert!(
            checked.status.success(),
            "{}: sluice check of the example config: {}",
            build.debian,
            String::from_utf8_lossy(&checked.stderr)
        );

        // The units a systemd system has (targets, sockets), beside the package's.
        let copied = Command::new("cp")
            .args(["-rn", "/usr/lib/systemd/system/."])
            .arg(root.join("usr/lib/systemd/system"))
            .status()
            .expect("cp runs");
        assert!(copied.success(), "the host's units copied");
        let verified = Command::new("systemd-analyze")
            .arg(format!("--root={}", root.display()))
            .args(["verify", "--man=no", "sluice.service"])
            .output()
            .expect("systemd-analyze runs");
        let said = String::from_utf8_lossy(&verified.stderr);
        assert!(
            verified.status.success() && !said.contains("sluice.service"),
            "{}: systemd-analyze verify: {said}",
            build.debian
        );
    }
}
