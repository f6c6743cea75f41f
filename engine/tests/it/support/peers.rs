//! Real protocol peers for integration tests: a pymodbus server with a data map
//! chosen by the test, a libmodbus server with fixed contents, and a Mosquitto
//! broker. Each runs as a child process bound to 127.0.0.1 on a free port and
//! is owned by a [`Peer`], which kills it when dropped.
//!
//! Everything the peers need is installed by `scripts/setup-peers.sh` into
//! `.peers/` at the project root (plus Debian packages); a missing install
//! fails the test with a message saying so.
//!
//! Each peer gets a scratch directory under `$TMPDIR/sluice-peers/` holding its
//! log (stdout and stderr), config and data. The directory is removed when the
//! peer is dropped, except while the test is panicking: then it is kept and its
//! path printed, so the peer's side of a failure can be read afterwards.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a peer may take from spawn to accepting connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful stop (SIGTERM) may take before SIGKILL follows.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Polling interval of every wait loop here.
const POLL: Duration = Duration::from_millis(10);

pub(crate) const SETUP_HINT: &str = "run scripts/setup-peers.sh (cargo xtask test does it)";

/// The workspace root (the directory holding `engine/`, `scripts/`, `.peers/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the engine crate lives inside the workspace")
        .to_path_buf()
}

/// First port [`free_port`] hands out; with [`PORT_SPAN`] the range stays
/// below Linux's default ephemeral range (32768-60999), so no outgoing
/// connection's source port and no `bind(0)` elsewhere can take one.
const FIRST_PORT: u32 = 20_000;
const PORT_SPAN: u32 = 12_000;
/// Ports handed out by this process so far.
static PORTS_TAKEN: AtomicU32 = AtomicU32::new(0);

/// A TCP port on 127.0.0.1 that is free now and that no other caller in this
/// test process is given.
///
/// Tests of one binary run on parallel threads: releasing a `bind(0)` port
/// and binding 0 again can return the same port to the next test, which then
/// finds the first test's peer on it. Ports here come from a per-process
/// counter instead, starting at an offset drawn from the process id so that
/// two test processes rarely walk the same ports; each is checked free.
pub fn free_port() -> u16 {
    let offset = std::process::id().wrapping_mul(7_919) % PORT_SPAN;
    for _ in 0..PORT_SPAN {
        let taken = PORTS_TAKEN.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST_PORT + (offset + taken) % PORT_SPAN) as u16;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() && !port_open(port) {
            return port;
        }
    }
    panic!(
        "no free TCP port on 127.0.0.1 between {FIRST_PORT} and {}",
        FIRST_PORT + PORT_SPAN
    )
}

/// Socket address of `port` on 127.0.0.1.
pub fn local(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
}

/// Polls until 127.0.0.1:`port` accepts a TCP connection; false if it still
/// does not after `timeout`. The probe connection is closed straight away.
pub fn wait_for_port(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if port_open(port) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// One connection attempt to 127.0.0.1:`port`.
fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&local(port), Duration::from_millis(200)).is_ok()
}

/// A path under `.peers/` that setup must have created.
fn installed(relative: &str) -> PathBuf {
    let path = project_root().join(".peers").join(relative);
    assert!(path.exists(), "{} is missing: {SETUP_HINT}", path.display());
    path
}

/// A fresh scratch directory `$TMPDIR/sluice-peers/<kind>-<port>-<pid>-<n>`.
pub(crate) fn scratch_dir(kind: &str, port: u16) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("sluice-peers")
        .join(format!("{kind}-{port}-{}-{n}", std::process::id()));
    // A leftover from an earlier run with the same pid must not leak state in.
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// A running peer process, listening on 127.0.0.1:[`Peer::port`].
///
/// It remembers how it was started, so [`Peer::restart`] brings the same
/// program back on the same port with the same files (map, config,
/// persistence directory).
pub struct Peer {
    kind: &'static str,
    port: u16,
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    log: PathBuf,
    /// `None` once killed or stopped.
    child: Option<Child>,
}

impl Peer {
    /// Spawns `program args` in a new scratch directory and waits until it
    /// listens on `port`.
    fn launch(kind: &'static str, port: u16, program: PathBuf, args: Vec<String>) -> Peer {
        let dir = scratch_dir(kind, port);
        Self::launch_in(kind, port, program, args, dir)
    }

    /// Like [`Peer::launch`] in an existing directory (for peers whose
    /// arguments point at files they need in it).
    fn launch_in(
        kind: &'static str,
        port: u16,
        program: PathBuf,
        args: Vec<String>,
        dir: PathBuf,
    ) -> Peer {
        let mut peer = Peer {
            kind,
            port,
            program,
            args,
            log: dir.join("peer.log"),
            dir,
            child: None,
        };
        peer.spawn();
        peer
    }

    /// Starts the process (which must not be running) and waits until it
    /// accepts connections; panics with its log if it exits or stays deaf.
    fn spawn(&mut self) {
        // Something already answering on the port would make the readiness
        // check below pass for the wrong process.
        assert!(
            !port_open(self.port),
            "{}: 127.0.0.1:{} is already in use by another process",
            self.kind,
            self.port
        );
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("open {}: {e}", self.log.display()));
        // Marks each (re)start in the log, which is appended to across restarts.
        let _ = writeln!(
            log,
            "--- sluice test harness: starting {} {:?}",
            self.program.display(),
            self.args
        );
        let stdout = log.try_clone().expect("clone log handle");
        let child = Command::new(&self.program)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: cannot run {}: {e} ({SETUP_HINT})",
                    self.kind,
                    self.program.display()
                )
            });
        self.child = Some(child);
        self.wait_ready();
    }

    /// Bounded wait for the port, failing early if the process dies.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if port_open(self.port) {
                return;
            }
            let child = self.child.as_mut().expect("spawned");
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                panic!(
                    "{} exited ({status}) before listening on 127.0.0.1:{}\n{}",
                    self.kind,
                    self.port,
                    self.log_tail()
                );
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!(
                    "{} did not listen on 127.0.0.1:{} within {START_TIMEOUT:?}\n{}",
                    self.kind,
                    self.port,
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The TCP port the peer listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port` as a socket address.
    pub fn addr(&self) -> SocketAddr {
        local(self.port)
    }

    /// The process id; panics if the peer is not running.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .unwrap_or_else(|| panic!("{} is not running", self.kind))
            .id()
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The peer's scratch directory (log, config, data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The whole log, for assertion messages.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_else(|e| format!("<{}: {e}>", self.log.display()))
    }

    /// The log's last lines with its path, for panic messages.
    fn log_tail(&self) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("--- {} (last lines) ---\n{tail}", self.log.display())
    }

    /// Kills the process at once (SIGKILL) and reaps it, like a crash or a
    /// power cut. Nothing is flushed: Mosquitto, for one, loses whatever it
    /// had not yet saved. Does nothing if the peer is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks the process to exit (SIGTERM) and waits up to 5 s for it, then
    /// kills it. Mosquitto saves its persistence file on this path.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // std can only send SIGKILL; the `kill` utility (procps) sends TERM.
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if sent {
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(POLL);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the peer gracefully (if still running) and starts the same
    /// program again on the same port with the same files. After
    /// [`Peer::kill`] it simply starts it again: `kill()` then `restart()`
    /// is a crash and recovery.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "{} peer files kept for inspection: {}",
                self.kind,
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The pymodbus server of `tests/peers/pymodbus_server.py`: serves exactly the
/// address ranges of a JSON map (see that file), answering exception 2 for
/// anything else, on every unit id.
pub struct PyModbus;

impl PyModbus {
    /// Starts a server on a free port. `map` looks like
    /// `{"hr": {"0": [1, 2, 3]}, "ir": {...}, "co": {"0": [1, 0]}, "di": {...}}`:
    /// keys are 0-based start addresses, values the initial contents.
    pub fn start(map: &serde_json::Value) -> Peer {
        Self::restart_on(free_port(), map)
    }

    /// Starts a server on a given port, e.g. where a killed one listened, so
    /// a client configured with that port can reconnect.
    pub fn restart_on(port: u16, map: &serde_json::Value) -> Peer {
        python_peer("pymodbus", "pymodbus_server.py", port, map, &[])
    }

    /// A server framing Modbus RTU over TCP on a free port, answering `units`
    /// only (each with its own copy of `map`; any other unit id goes unanswered).
    pub fn rtu_over_tcp(map: &serde_json::Value, units: &[u8]) -> Peer {
        let mut args = vec!["--rtu".to_owned()];
        args.extend(units_arg(units));
        python_peer(
            "pymodbus-rtu",
            "pymodbus_server.py",
            free_port(),
            map,
            &args,
        )
    }

    /// A server of Modbus RTU on the serial port `tty` (one end of a
    /// [`SerialPair`]), answering `units` only. Its TCP port only tells the
    /// harness it is up.
    pub fn serial(tty: &Path, map: &serde_json::Value, units: &[u8]) -> Peer {
        let mut args = vec!["--serial".to_owned(), tty.display().to_string()];
        args.extend(units_arg(units));
        python_peer(
            "pymodbus-serial",
            "pymodbus_server.py",
            free_port(),
            map,
            &args,
        )
    }

    /// Every write the server carried out, oldest first:
    /// `{"fc": 6, "address": 0, "values": [42]}` each.
    pub fn writes(peer: &Peer) -> Vec<serde_json::Value> {
        let journal = peer.dir().join("writes.jsonl");
        let text = fs::read_to_string(&journal).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a journal line is JSON"))
            .collect()
    }
}

/// Certificates made for a test by `scripts/make-test-certs.sh` (the `openssl`
/// command), in `dir`: a CA (`ca.pem`), a broker certificate for 127.0.0.1
/// (`trusted`), one for another name (`stranger`), a client certificate of
/// the CA (`client`) and one of another CA (`intruder`), each `NAME.pem` with
/// `NAME.key`.
pub struct Certificates {
    pub dir: PathBuf,
}

impl Certificates {
    pub fn make(name: &str) -> Self {
        let dir = scratch_dir(name, free_port());
        let made = Command::new("bash")
            .arg(project_root().join("scripts/make-test-certs.sh"))
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("make-test-certs.sh: {e} ({SETUP_HINT})"));
        assert!(
            made.status.success(),
            "make-test-certs.sh: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        Self { dir }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

/// DL/T 645-2007 meters of `tests/peers/dlt645_meter.py` (the `dlt645`
/// package's meter). `map` looks like `{"address": "000000000001", "values":
/// {"02010100": 229.7}}`: values by data identifier.
pub struct Dlt645Meter;

impl Dlt645Meter {
    pub fn start(map: &serde_json::Value) -> Peer {
        python_peer("dlt645", "dlt645_meter.py", free_port(), map, &[])
    }

    /// Meters sharing the serial port `tty` (one end of a [`SerialPair`], 9600
    /// baud, 8E1), each answering its own address: `map` is `{"meters": [...]}`
    /// of maps as [`Dlt645Meter::start`] takes. Its TCP port only tells the
    /// harness it is up.
    pub fn serial(tty: &Path, map: &serde_json::Value) -> Peer {
        let args = ["--serial".to_owned(), tty.display().to_string()];
        python_peer("dlt645-serial", "dlt645_meter.py", free_port(), map, &args)
    }
}

fn units_arg(units: &[u8]) -> Vec<String> {
    if units.is_empty() {
        return Vec::new();
    }
    let list: Vec<String> = units.iter().map(u8::to_string).collect();
    vec!["--units".to_owned(), list.join(",")]
}

/// A pseudo-terminal pair made by `socat`: two serial ports wired to each
/// other, `a` for the engine and `b` for the device; ended on drop.
pub struct SerialPair {
    pub a: PathBuf,
    pub b: PathBuf,
    child: Child,
    _dir: PathBuf,
}

impl SerialPair {
    pub fn start() -> Self {
        let dir = scratch_dir("socat", 0);
        let (a, b) = (dir.join("tty-a"), dir.join("tty-b"));
        let end = |path: &Path| format!("pty,raw,echo=0,link={}", path.display());
        let child = Command::new("socat")
            .args([end(&a), end(&b)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("socat: {e} ({SETUP_HINT})"));
        let deadline = Instant::now() + START_TIMEOUT;
        while !(a.exists() && b.exists()) {
            assert!(Instant::now() < deadline, "socat made no pseudo-terminals");
            std::thread::sleep(POLL);
        }
        Self {
            a,
            b,
            child,
            _dir: dir,
        }
    }
}

impl Drop for SerialPair {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `value` as `dir/name` and returns the path.
fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, serde_json::to_vec_pretty(value).expect("serialise"))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// A peer script of `tests/peers/` run as `python SCRIPT PORT MAP.json` in a new
/// scratch directory, with `map` as its map file.
fn python_peer(
    kind: &'static str,
    script: &str,
    port: u16,
    map: &serde_json::Value,
    options: &[String],
) -> Peer {
    let python = installed("venv/bin/python");
    let script = project_root().join("tests/peers").join(script);
    let dir = scratch_dir(kind, port);
    let map_path = write_json(&dir, "map.json", map);
    let mut args = vec![
        script.display().to_string(),
        port.to_string(),
        map_path.display().to_string(),
    ];
    args.extend_from_slice(options);
    Peer::launch_in(kind, port, python, args, dir)
}

/// The libmodbus server of `tests/peers/libmodbus_server.c`. Every table has
/// addresses 0..=199 (exception 2 beyond) holding:
/// holding register i = i*3+1, input register i = 1000+i, coil i = i%2 == 1,
/// discrete input i = i%3 == 0. It serves one client at a time.
pub struct LibModbus;

impl LibModbus {
    /// Number of addresses in each table.
    pub const SIZE: u16 = 200;

    /// Starts the server on a free port.
    pub fn start() -> Peer {
        Self::start_on(free_port())
    }

    /// Starts the server on a given port.
    pub fn start_on(port: u16) -> Peer {
        let binary = installed("libmodbus_server");
        Peer::launch("libmodbus", port, binary, vec![port.to_string()])
    }

    /// Initial value of holding register `i`.
    pub fn holding(i: u16) -> u16 {
        i.wrapping_mul(3).wrapping_add(1)
    }

    /// Initial value of input register `i`.
    pub fn input(i: u16) -> u16 {
        1000 + i
    }

    /// Initial value of coil `i`.
    pub fn coil(i: u16) -> bool {
        i % 2 == 1
    }

    /// Initial value of discrete input `i`.
    pub fn discrete(i: u16) -> bool {
        i.is_multiple_of(3)
    }
}

/// The snap7 server of `tests/peers/snap7_server.py`: an S7 PLC with exactly the
/// areas of a JSON map (see that file).
pub struct Snap7;

impl Snap7 {
    /// Starts a server on a free port. `map` looks like
    /// `{"db": {"1": [bytes...]}, "mk": [bytes...], "pe": [...], "pa": [...]}`.
    pub fn start(map: &serde_json::Value) -> Peer {
        python_peer("snap7", "snap7_server.py", free_port(), map, &[])
    }
}

/// virtual-plc: a Mitsubishi MC 3E binary PLC in Python, with memory from a
/// JSON snapshot and optional response faults.
pub struct VirtualPlc;

impl VirtualPlc {
    /// Starts a PLC of `profile` (`Q`, `iQ-R`, ...) on a free port. `memory`
    /// looks like `{"D": {"100": [1, 2]}, "M": {"0": [1, 0, 1]}}` (unsigned
    /// words and bits, decimal device numbers); `faults` is a fault plan
    /// (`{"steps": [...]}`), if any; `limits` narrow devices (`"D:0-8191"`).
    pub fn start(
        profile: &str,
        memory: &serde_json::Value,
        faults: Option<&serde_json::Value>,
        limits: &[&str],
    ) -> Peer {
        let port = free_port();
        let program = installed("venv/bin/virtual-plc");
        let dir = scratch_dir("virtual-plc", port);
        let init = write_json(&dir, "memory.json", memory);
        let mut args = vec![
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--profile".to_owned(),
            profile.to_owned(),
            "--init".to_owned(),
            init.display().to_string(),
        ];
        for limit in limits {
            args.extend(["--limit".to_owned(), (*limit).to_owned()]);
        }
        if let Some(faults) = faults {
            let plan = write_json(&dir, "faults.json", faults);
            args.extend(["--fault-plan".to_owned(), plan.display().to_string()]);
        }
        Peer::launch_in("virtual-plc", port, program, args, dir)
    }
}

/// A Mosquitto broker with anonymous access and persistence in the peer's
/// scratch directory. [`Peer::restart`] keeps port and persistence; a graceful
/// stop (the default in `restart`) saves the broker's state, [`Peer::kill`]
/// does not.
pub struct Mosquitto;

impl Mosquitto {
    /// Starts a broker on a free port.
    pub fn start() -> Peer {
        Self::start_with("")
    }

    /// Starts a broker on a free port with more lines of configuration
    /// (`max_packet_size 2048\n`, say).
    pub fn start_with(extra: &str) -> Peer {
        Self::start_configured("", extra)
    }

    /// A broker whose configuration starts with `head` (options that must come
    /// before any listener) and ends with `extra`.
    fn start_configured(head: &str, extra: &str) -> Peer {
        let port = free_port();
        let dir = scratch_dir("mosquitto", port);
        let data = dir.join("data");
        fs::create_dir_all(&data).unwrap_or_else(|e| panic!("create {}: {e}", data.display()));
        // `user root`: started as root, Mosquitto would otherwise switch to
        // the `mosquitto` user, which cannot write the persistence directory.
        let config = format!(
            "{head}listener {port} 127.0.0.1\n\
             allow_anonymous true\n\
             persistence true\n\
             persistence_location {}/\n\
             user root\n\
             max_queued_messages 100000\n\
             log_dest stderr\n\
             {extra}",
            data.display()
        );
        let config_path = dir.join("mosquitto.conf");
        fs::write(&config_path, config)
            .unwrap_or_else(|e| panic!("write {}: {e}", config_path.display()));
        let args = vec!["-c".to_string(), config_path.display().to_string()];
        Peer::launch_in("mosquitto", port, Self::binary(), args, dir)
    }

    /// Starts a broker with a plain listener (the peer's port, for the tests'
    /// subscribers) and a TLS one on another free port (returned), serving
    /// `certs`' server certificate for `server` (`trusted` or `stranger`); with
    /// `require_certificate`, only clients with a certificate of the CA get in.
    pub fn start_tls(certs: &Certificates, server: &str, require_certificate: bool) -> (Peer, u16) {
        let tls_port = free_port();
        let dir = &certs.dir;
        let extra = format!(
            "listener {tls_port} 127.0.0.1\n\
             allow_anonymous true\n\
             cafile {ca}\n\
             certfile {cert}\n\
             keyfile {key}\n\
             require_certificate {require_certificate}\n",
            ca = dir.join("ca.pem").display(),
            cert = dir.join(format!("{server}.pem")).display(),
            key = dir.join(format!("{server}.key")).display(),
        );
        // With `per_listener_settings` (before any listener), each listener
        // has its own `allow_anonymous` and certificates.
        (
            Self::start_configured("per_listener_settings true\n", &extra),
            tls_port,
        )
    }

    /// Debian's broker path, else `mosquitto` from PATH.
    fn binary() -> PathBuf {
        let debian = PathBuf::from("/usr/sbin/mosquitto");
        if debian.exists() {
            return debian;
        }
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("mosquitto"))
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("mosquitto is not installed: {SETUP_HINT}"))
    }
}
