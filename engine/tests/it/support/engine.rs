//! The `sluice` binary as a process under test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The admin token the tests' gateways that need one name in their
/// `collector.http.adminToken`.
pub const ADMIN_TOKEN: &str = "admin-token";

/// A running `sluice run`, killed on drop; its log goes to a file kept for messages.
pub struct Engine {
    child: Child,
    pub log: PathBuf,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The compiled components' cache the tests' engines share, kept across runs
/// in the build's own scratch space (artifacts are named by their content and
/// the compiler's settings, so a changed component never meets a stale one).
fn component_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A fresh scratch directory for one test.
pub fn scratch_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("sluice-it-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

impl Engine {
    /// Writes `config` (YAML) into `dir` and runs `sluice run` on it.
    pub fn start(dir: &PathBuf, config: &str) -> Self {
        let config_path = dir.join("devices.yaml");
        std::fs::write(&config_path, config).expect("write config");
        Self::start_with(dir, &config_path)
    }

    /// Writes `config` into `dir` and runs `sluice run` with the pipeline files of
    /// `pipelines` (a directory).
    pub fn start_with_pipelines(dir: &PathBuf, config: &str, pipelines: &std::path::Path) -> Self {
        let config_path = dir.join("devices.yaml");
        std::fs::write(&config_path, config).expect("write config");
        Self::spawn(
            dir,
            &config_path,
            &[std::ffi::OsStr::new("--pipelines"), pipelines.as_os_str()],
        )
    }

    /// Writes `config` into `dir` and runs `sluice run` on it at the log level
    /// a user gets (no `RUST_LOG`), to test what the log tells at it.
    pub fn start_at_default_level(dir: &PathBuf, config: &str) -> Self {
        let config_path = dir.join("devices.yaml");
        std::fs::write(&config_path, config).expect("write config");
        Self::spawn_logging(dir, &config_path, &[], None)
    }

    /// Runs `sluice run` on an existing config file.
    pub fn start_with(dir: &PathBuf, config_path: &PathBuf) -> Self {
        Self::spawn(dir, config_path, &[])
    }

    /// Runs `sluice run` on an existing config file with more arguments.
    pub fn start_with_args(dir: &PathBuf, config_path: &PathBuf, args: &[&str]) -> Self {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        Self::spawn(dir, config_path, &args)
    }

    fn spawn(dir: &PathBuf, config_path: &PathBuf, extra: &[&std::ffi::OsStr]) -> Self {
        Self::spawn_logging(dir, config_path, extra, Some("info,sluice=debug"))
    }

    /// [`Engine::spawn`] with `RUST_LOG` set to `filter`, or unset.
    fn spawn_logging(
        dir: &PathBuf,
        config_path: &PathBuf,
        extra: &[&std::ffi::OsStr],
        filter: Option<&str>,
    ) -> Self {
        let log = dir.join(format!(
            "engine-{}.log",
            Instant::now().elapsed().as_nanos()
        ));
        let log = if log.exists() {
            dir.join("engine-2.log")
        } else {
            log
        };
        let file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        match filter {
            Some(filter) => command.env("RUST_LOG", filter),
            None => command.env_remove("RUST_LOG"),
        };
        let child = command
            .args(["run", "--config"])
            .arg(config_path)
            .args(extra)
            // Every engine of the run shares the compiled components: each
            // compiles the built-in ones once, not once per test.
            .env(sluice::gateway::COMPONENT_CACHE_VAR, component_cache())
            .stdout(Stdio::null())
            .stderr(file)
            .current_dir(dir)
            .spawn()
            .expect("sluice starts");
        Self { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The engine's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (std sends only SIGKILL; the `kill` utility sends TERM), then
    /// waits up to 15 s for a clean stop; fails the test if it takes longer.
    pub fn terminate(&mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill -TERM {}", self.child.id());
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no clean stop within 15 s; log:\n{}", self.log());
    }

    /// Fails the test if the engine exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("sluice exited with {status}; log:\n{}", self.log());
        }
    }

    /// Open file descriptors of the engine process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Command `id` of the engine whose API is on `http` once it is final
    /// (`ACKED`, `FAILED`, `TIMEOUT` or `CANCELLED`), asked every 100 ms for
    /// at most 20 s.
    pub async fn final_command(http: u16, id: u64) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        let path = format!("/commands/{id}");
        loop {
            let (status, command) =
                Self::request(http, "GET", &path, Some(ADMIN_TOKEN), None).await;
            assert_eq!(status, 200, "{command}");
            if ["ACKED", "FAILED", "TIMEOUT", "CANCELLED"]
                .contains(&command["status"].as_str().unwrap_or(""))
            {
                return command;
            }
            assert!(
                Instant::now() < deadline,
                "command {id} not final: {command}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The answer to `GET path` (bearer `token`) once it is 200 and `done`
    /// says so, asked every 100 ms for at most 15 s.
    pub async fn until_get(
        http: u16,
        path: &str,
        token: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (status, body) = Self::request(http, "GET", path, Some(token), None).await;
            if status == 200 && done(&body) {
                return body;
            }
            assert!(Instant::now() < deadline, "GET {path}: {status} {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends one request to the engine's HTTP API (bearer `token`, JSON `body`),
    /// waiting up to 10 s for it to listen; returns the status code and the JSON
    /// body (`null` when it is not JSON).
    pub async fn request(
        port: u16,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
            body.len()
        );
        Self::exchange(port, &head, body.as_bytes()).await
    }

    /// Sends one HTTP request, `head` (its request line and headers) then
    /// `body`, to the engine's API on `port`, waiting up to 10 s for it to
    /// listen; returns the status code and the JSON body (`null` when it is
    /// not JSON).
    pub async fn exchange(port: u16, head: &str, body: &[u8]) -> (u16, serde_json::Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // The engine may still be starting: retry the connection, bounded.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut stream = loop {
            match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                Ok(stream) => break stream,
                Err(e) if Instant::now() >= deadline => panic!("connect to {port}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        stream.write_all(head.as_bytes()).await.expect("write");
        stream.write_all(body).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        (
            status,
            serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        )
    }

    /// `PUT path` with a component's bytes (`application/wasm`) as `token`;
    /// the status code and the JSON body.
    pub async fn put_wasm(
        port: u16,
        path: &str,
        token: &str,
        bytes: &[u8],
    ) -> (u16, serde_json::Value) {
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
            bytes.len()
        );
        Self::exchange(port, &head, bytes).await
    }

    /// The engine's whole `/health` (the admin's `token`), waiting (bounded) for
    /// it to answer.
    pub async fn health(port: u16, token: &str) -> serde_json::Value {
        let text = Self::http_get(port, "/health", Some(token))
            .await
            .expect("health answers");
        serde_json::from_str(&text).expect("health is JSON")
    }

    /// Polls `/health` until `done` holds, for at most `within`.
    pub async fn until_health(
        port: u16,
        token: &str,
        (what, within): (&str, Duration),
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let health = Self::health(port, token).await;
            if done(&health) {
                return health;
            }
            assert!(Instant::now() < deadline, "{what}: {health}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (bounded) for a GET on the engine's HTTP API to answer, with
    /// `token` as the bearer if given.
    pub async fn http_get(port: u16, path: &str, token: Option<&str>) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                let request = format!(
                    "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n"
                );
                if stream.write_all(request.as_bytes()).await.is_ok() {
                    let mut response = String::new();
                    if stream.read_to_string(&mut response).await.is_ok() {
                        return response
                            .split_once("\r\n\r\n")
                            .map(|(_, body)| body.to_owned());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}
