//! A real PostgreSQL 15 for the tests: a cluster of its own in a scratch
//! directory on a free loopback port, made and started by `scripts/postgres.sh`
//! (fsync off: the tests check behaviour, not speed), stopped by its PID when
//! dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::peers::{SETUP_HINT, free_port, project_root, scratch_dir};

/// A running PostgreSQL server.
pub struct Postgres {
    port: u16,
    dir: PathBuf,
}

/// Runs `program args`; panics with its output if it fails; its stdout.
fn run(program: &Path, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}: {SETUP_HINT}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn script() -> PathBuf {
    project_root().join("scripts/postgres.sh")
}

impl Postgres {
    /// Makes a cluster and starts it; returns once it accepts connections.
    pub fn start() -> Self {
        let port = free_port();
        let dir = scratch_dir("postgres", port);
        let dir_arg = dir.display().to_string();
        let _ = run(&script(), &["start", &dir_arg, &port.to_string(), "fast"]);
        Self { port, dir }
    }

    /// A database of its own for one test, made on this server; its URL.
    pub fn database(&self, name: &str) -> String {
        let _ = self.client("/usr/lib/postgresql/15/bin/createdb", &[name]);
        format!("postgresql://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs `statement` in database `name` with `psql`.
    pub fn sql(&self, name: &str, statement: &str) {
        let _ = self.client(
            "/usr/lib/postgresql/15/bin/psql",
            &["-d", name, "-v", "ON_ERROR_STOP=1", "-c", statement],
        );
    }

    /// Runs `statement` in database `name`; what `psql` said when it fails.
    pub fn try_sql(&self, name: &str, statement: &str) -> Result<String, String> {
        let port = self.port.to_string();
        let output = Command::new("/usr/lib/postgresql/15/bin/psql")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", name])
            .args(["-v", "ON_ERROR_STOP=1", "-c", statement])
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// The first column of every row `query` returns in database `name`.
    pub fn query(&self, name: &str, query: &str) -> Vec<String> {
        self.client(
            "/usr/lib/postgresql/15/bin/psql",
            &["-d", name, "-At", "-v", "ON_ERROR_STOP=1", "-c", query],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// Runs a client program against this server as `postgres`; its output.
    fn client(&self, program: &str, args: &[&str]) -> String {
        let port = self.port.to_string();
        let mut all = vec!["-h", "127.0.0.1", "-p", &port, "-U", "postgres"];
        all.extend_from_slice(args);
        run(Path::new(program), &all)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let dir = self.dir.display().to_string();
        let _ = Command::new(script()).args(["stop", &dir]).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
