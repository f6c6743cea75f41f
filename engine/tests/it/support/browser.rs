//! Headless Chromium driven over WebDriver: Debian's `chromium` and
//! `chromium-driver` (installed by `scripts/setup-peers.sh`), a `chromedriver`
//! child process on a free loopback port, and a `fantoccini` client.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::future::Future;

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::peers::{free_port, wait_for_port};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long a page may take to show what a step waits for.
const PATIENCE: Duration = Duration::from_secs(20);

/// A `chromedriver` process and one browser session, both ended on drop.
pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Drop for Browser {
    /// Ends chromedriver and every browser process it started: they run in the
    /// process group chromedriver leads, so no browser outlives the test, even a
    /// panicking one.
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An element replaced (or being replaced) by a re-render of the page.
fn transient(error: &CmdError) -> bool {
    let text = error.to_string();
    text.contains("stale element") || text.contains("not interactable")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session with a 1366x900 window.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[]).await
    }

    /// [`Browser::start`] with more Chromium arguments.
    pub async fn start_with(dir: &Path, extra: &[String]) -> Self {
        for program in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: run scripts/setup-peers.sh (it installs chromium and \
                 chromium-driver)"
            );
        }
        let port = free_port();
        let log = dir.join("chromedriver.log");
        let out = std::fs::File::create(&log).expect("chromedriver log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        assert!(
            wait_for_port(port, Duration::from_secs(10)),
            "chromedriver did not listen on {port}"
        );
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--window-size=1366,900",
            "--disable-gpu",
        ]
        .map(String::from)
        .to_vec();
        args.extend_from_slice(extra);
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": CHROMIUM, "args": args }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("a browser session: {e}"));
        Self { client, driver }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.expect("script")
    }

    /// The text of the first element matching `css`, if there is one.
    pub async fn text(&self, css: &str) -> Option<String> {
        let found = self
            .eval(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                vec![json!(css)],
            )
            .await;
        found.as_str().map(str::to_owned)
    }

    /// The texts of every element matching `css`.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let found = self
            .eval(
                "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
                vec![json!(css)],
            )
            .await;
        serde_json::from_value(found).unwrap_or_default()
    }

    /// The values of attribute `name` of every element matching `css`.
    pub async fn attributes(&self, css: &str, name: &str) -> Vec<String> {
        let found = self
            .eval(
                "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]));",
                vec![json!(css), json!(name)],
            )
            .await;
        serde_json::from_value(found).unwrap_or_default()
    }

    /// Waits until the text of `css` satisfies `done`; returns it.
    pub async fn until_text(&self, css: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.text(css).await;
            if let Some(text) = text.as_deref().filter(|t| done(t)) {
                return text.to_owned();
            }
            if Instant::now() >= deadline {
                let page = self
                    .eval("return location.href + '\\n' + document.body.innerText + '\\n' + document.getElementById('view').innerHTML;", vec![])
                    .await;
                panic!(
                    "{what}: `{css}` shows {text:?}; the page:\n{}",
                    page.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until an element matches `css`.
    pub async fn until_present(&self, css: &str, what: &str) {
        self.until_text(css, what, |_| true).await;
    }

    /// Runs `action` on the element `css`; when the page re-rendered it meanwhile
    /// (a live update), it is looked up again, a bounded number of times.
    async fn on_element<F, Fut>(&self, css: &str, action: F)
    where
        F: Fn(Element) -> Fut,
        Fut: Future<Output = Result<(), CmdError>>,
    {
        let mut attempts = 0;
        loop {
            self.until_present(css, css).await;
            let element = self.client.find(Locator::Css(css)).await.expect("element");
            match action(element).await {
                Ok(()) => return,
                Err(e) if transient(&e) && attempts < 20 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{css}: {e}"),
            }
        }
    }

    pub async fn click(&self, css: &str) {
        self.on_element(css, |element| async move { element.click().await })
            .await;
    }

    /// Replaces the value of the input `css` with `text` (a path, for a file input).
    pub async fn fill(&self, css: &str, text: &str) {
        self.on_element(css, |element| async move {
            if element.attr("type").await?.as_deref() != Some("file") {
                element.clear().await?;
            }
            element.send_keys(text).await
        })
        .await;
    }

    /// Picks the option of the `<select>` `css` with value `value`.
    pub async fn select(&self, css: &str, value: &str) {
        self.until_present(css, css).await;
        let picked = self
            .eval(
                "const s = document.querySelector(arguments[0]); s.value = arguments[1];\
                 s.dispatchEvent(new Event('change')); return s.value;",
                vec![json!(css), json!(value)],
            )
            .await;
        assert_eq!(picked, json!(value), "{css} has no option {value}");
    }

    /// Saves a PNG of the window as `dir/name.png`.
    pub async fn screenshot(&self, dir: &Path, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("save screenshot");
    }
}
