//! A real PostgreSQL 15 for the tests: a cluster made with `initdb` in a scratch
//! directory, started with `pg_ctl` on a free loopback port (as the `postgres`
//! user when the tests run as root, since the server refuses root), and
//! stopped by its PID when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::peers::{SETUP_HINT, free_port, scratch_dir};

/// A running PostgreSQL server.
pub struct Postgres {
    port: u16,
    dir: PathBuf,
}

/// Where Debian puts the server's programs.
fn bin(program: &str) -> PathBuf {
    let path = PathBuf::from("/usr/lib/postgresql/15/bin").join(program);
    assert!(path.exists(), "{} is missing: {SETUP_HINT}", path.display());
    path
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `program args` as the server's owner; panics with its output if it fails.
fn run(program: &Path, args: &[&str]) {
    let output = if as_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args)
            .output()
    } else {
        Command::new(program).args(args).output()
    }
    .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Postgres {
    /// Makes a cluster and starts it; returns once it accepts connections.
    pub fn start() -> Self {
        let port = free_port();
        let dir = scratch_dir("postgres", port);
        if as_root() {
            let status = Command::new("chown")
                .arg("postgres:")
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(status.success(), "chown postgres {}", dir.display());
        }
        let data = dir.join("data");
        let data_arg = data.display().to_string();
        run(
            &bin("initdb"),
            &[
                "-D",
                &data_arg,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c synchronous_commit=off \
             -c max_connections=200",
            dir.display()
        );
        let log = dir.join("log").display().to_string();
        run(
            &bin("pg_ctl"),
            &[
                "-D", &data_arg, "-l", &log, "-w", "-t", "30", "-o", &options, "start",
            ],
        );
        Self { port, dir }
    }

    /// A database of its own for one test, made on this server; its URL.
    pub fn database(&self, name: &str) -> String {
        self.client(&bin("createdb"), &[name]);
        format!("postgresql://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs `statement` in database `name` with `psql`.
    pub fn sql(&self, name: &str, statement: &str) {
        self.client(
            Path::new("/usr/bin/psql"),
            &["-d", name, "-v", "ON_ERROR_STOP=1", "-c", statement],
        );
    }

    /// Runs a client program against this server as `postgres`.
    fn client(&self, program: &Path, args: &[&str]) {
        let port = self.port.to_string();
        let mut all = vec!["-h", "127.0.0.1", "-p", &port, "-U", "postgres"];
        all.extend_from_slice(args);
        run(program, &all);
    }

    fn pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            // SIGINT: the server's fast shutdown.
            let _ = Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
