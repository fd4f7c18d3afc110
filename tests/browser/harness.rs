//! The machinery behind the browser tests: the real `errbook serve`, chromedriver, one
//! fresh headless Chromium per test, console-log collection and screenshots.
//!
//! One server and one chromedriver are started lazily and shared by every test of the
//! binary; each test gets its own Chromium session (own profile, own console log, own
//! language) and the tests take turns, because several Chromiums at once on a small
//! machine make timing flaky. Every child process runs under a tiny `sh` supervisor in
//! its own process group that kills the whole group (chromedriver's Chromiums included)
//! as soon as its stdin closes: when the guard is dropped, or when the test binary exits
//! for whatever reason, even SIGKILL. A test that panics still closes its browser session.

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long a page, an element or a navigation may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// How long `errbook serve` may take to index the knowledge base and listen.
const SERVER_STARTUP: Duration = Duration::from_secs(60);

/// The language the browser asks for (Chromium's UI language and `Accept-Language`).
#[derive(Clone, Copy, Debug)]
pub enum Lang {
    English,
    Chinese,
}

impl Lang {
    fn chromium_flag(self) -> &'static str {
        match self {
            Lang::English => "--lang=en-US",
            Lang::Chinese => "--lang=zh-CN",
        }
    }

    fn accept_languages(self) -> &'static str {
        match self {
            Lang::English => "en-US,en",
            Lang::Chinese => "zh-CN,zh",
        }
    }
}

/// A window size to look at a page with.
#[derive(Clone, Copy, Debug)]
pub enum Viewport {
    /// 1280×900.
    Desktop,
    /// 390×844, a current phone held upright.
    Phone,
}

impl Viewport {
    fn size(self) -> (u32, u32) {
        match self {
            Viewport::Desktop => (1280, 900),
            Viewport::Phone => (390, 844),
        }
    }
}

/// One entry of the browser console (`goog:loggingPrefs` browser log).
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO` or `DEBUG`.
    pub level: String,
    /// `console-api`, `network`, `javascript`, `security`, …
    pub source: String,
    pub message: String,
}

impl std::fmt::Display for LogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} {}] {}", self.level, self.source, self.message)
    }
}

/// Runs `test` against a fresh headless Chromium asking for `lang`, on the shared server.
///
/// Returns without running it (after saying so on stderr) when Chromium or chromedriver
/// is not installed; every other problem fails the test. The browser session is closed
/// even when `test` panics.
pub async fn with_browser<F, Fut>(lang: Lang, test: F)
where
    F: FnOnce(Browser) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(tools) = Tools::find() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium and chromedriver are missing, and under CI=true a browser test \
             does not skip: .ci/run installs them (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "skipping browser test: chromium and chromedriver are not installed \
             (apt-get install chromium chromium-driver)"
        );
        return;
    };
    // One browser at a time; tokio's mutex is not poisoned by a failed test.
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = TURN.lock().await;

    let shared = tokio::task::spawn_blocking(move || Shared::get(tools))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let profile = tempfile::tempdir().expect("temporary Chromium profile");
    let client = shared.open_session(lang, profile.path()).await;
    let session = client
        .session_id()
        .await
        .expect("session id")
        .expect("chromedriver returned a session id");
    let browser = Browser {
        client: client.clone(),
        base: shared.base.clone(),
        driver: shared.driver.clone(),
        session,
    };
    let outcome = tokio::spawn(test(browser)).await;
    let closed = client.close().await;
    drop(profile);
    if let Err(e) = outcome {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
        panic!("browser test did not finish: {e}");
    }
    closed.expect("closing the browser session");
}

/// A Chromium session on the shared server. Cheap to clone (all clones drive the same tab).
#[derive(Clone)]
pub struct Browser {
    client: Client,
    base: String,
    driver: String,
    session: String,
}

impl Browser {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Opens `path_or_url` (root-relative paths are resolved against the server).
    pub async fn goto(&self, path_or_url: &str) {
        let url = self.absolute(path_or_url);
        self.client
            .goto(&url)
            .await
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// `href` as the browser would resolve it from the server root.
    pub fn absolute(&self, href: &str) -> String {
        if href.starts_with("http://") || href.starts_with("https://") {
            href.to_string()
        } else if href.starts_with('/') {
            format!("{}{href}", self.base)
        } else {
            format!("{}/{href}", self.base)
        }
    }

    /// The current page's whole URL.
    pub async fn url(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("current URL")
            .to_string()
    }

    /// Path and query of the current page, e.g. `/search?q=x`.
    pub async fn location(&self) -> String {
        let url = self.client.current_url().await.expect("current URL");
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// Path of the current page, e.g. `/search`.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("current URL");
        url.path().to_string()
    }

    /// Waits until the current path satisfies `ready`, e.g. after a click or a submit.
    pub async fn wait_for_path(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let path = self.path().await;
            if ready(&path) {
                return path;
            }
            assert!(
                Instant::now() < deadline,
                "waited {TIMEOUT:?} for {what}; still on {}",
                self.location().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `script` returns `true`; errors while a new page loads count as not yet.
    pub async fn wait_for_js(&self, what: &str, script: &str) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(Value::Bool(true)) = self.client.execute(script, vec![]).await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited {TIMEOUT:?} for {what} on {}",
                self.location().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The first element matching `css`, waiting for it to appear.
    pub async fn wait_for(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(TIMEOUT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(el) => el,
            Err(e) => panic!(
                "`{css}` did not appear on {} within {TIMEOUT:?}: {e}",
                self.location().await
            ),
        }
    }

    /// The first element matching `css`, which must be on the page now.
    pub async fn find(&self, css: &str) -> Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(el) => el,
            Err(e) => panic!("no `{css}` on {}: {e}", self.location().await),
        }
    }

    /// Every element matching `css` (possibly none).
    /// Types `keys` (text, or `fantoccini::key::Key`s) into the element that has the
    /// keyboard focus.
    pub async fn press(&self, keys: &str) {
        self.active()
            .await
            .send_keys(keys)
            .await
            .unwrap_or_else(|e| panic!("typing {keys:?}: {e}"));
    }

    /// The element that has the keyboard focus.
    pub async fn active(&self) -> Element {
        self.client
            .active_element()
            .await
            .unwrap_or_else(|e| panic!("no focused element: {e}"))
    }

    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("looking for `{css}`: {e}"))
    }

    /// Visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css)
            .await
            .text()
            .await
            .unwrap_or_else(|e| panic!("text of `{css}`: {e}"))
    }

    /// Attribute `name` of the first element matching `css`.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.find(css)
            .await
            .attr(name)
            .await
            .unwrap_or_else(|e| panic!("attribute {name} of `{css}`: {e}"))
    }

    /// Runs `script` in the page (arguments as `arguments[i]`) and returns its result.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Runs asynchronous `script`; it calls `arguments[arguments.length - 1](result)`.
    pub async fn js_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute_async(script, args)
            .await
            .unwrap_or_else(|e| panic!("async script failed: {e}\n{script}"))
    }

    /// Console entries logged since the previous call (chromedriver hands each out once).
    pub async fn console_log(&self) -> Vec<LogEntry> {
        let value = self
            .driver_command("se/log", json!({ "type": "browser" }))
            .await;
        let entries = value
            .as_array()
            .unwrap_or_else(|| panic!("browser log is not a list: {value}"));
        entries
            .iter()
            .map(|e| LogEntry {
                level: e["level"].as_str().unwrap_or_default().to_string(),
                source: e["source"].as_str().unwrap_or_default().to_string(),
                message: e["message"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    }

    /// Console errors (level SEVERE: uncaught exceptions, `console.error`, failed resource
    /// loads, CSP violations) logged since the console was last read.
    pub async fn console_errors(&self) -> Vec<LogEntry> {
        let mut log = self.console_log().await;
        log.retain(|e| e.level == "SEVERE");
        log
    }

    /// Fails listing every console error logged since the console was last read.
    pub async fn assert_no_console_errors(&self) {
        let errors = self.console_errors().await;
        assert!(
            errors.is_empty(),
            "console errors on {}:\n{}",
            self.location().await,
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Lays the page out for `viewport` and checks it was. The desktop is a plain window;
    /// the phone is Chrome's device emulation as in DevTools' device mode (touch, overlay
    /// scrollbars, `pointer: coarse`, the viewport meta tag honoured). Stays in effect,
    /// across navigations, until changed.
    pub async fn set_viewport(&self, viewport: Viewport) {
        let (width, height) = viewport.size();
        let phone = matches!(viewport, Viewport::Phone);
        self.client
            .set_window_size(width, height)
            .await
            .unwrap_or_else(|e| panic!("resizing the window to {width}×{height}: {e}"));
        if phone {
            let metrics = json!({
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": true,
            });
            self.cdp("Emulation.setDeviceMetricsOverride", metrics)
                .await;
            let touch = json!({ "enabled": true, "maxTouchPoints": 5 });
            self.cdp("Emulation.setTouchEmulationEnabled", touch).await;
        } else {
            self.cdp("Emulation.clearDeviceMetricsOverride", json!({}))
                .await;
            let touch = json!({ "enabled": false });
            self.cdp("Emulation.setTouchEmulationEnabled", touch).await;
        }
        let expected = json!([width, phone]);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let script = "return [window.innerWidth, matchMedia('(pointer: coarse)').matches]";
            let actual = self.js(script, vec![]).await;
            if actual == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "[innerWidth, pointer: coarse] is {actual}, not {expected}, for {viewport:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fails if the page is wider than the window, so that the reader has to scroll
    /// sideways; names the elements that stick out.
    pub async fn assert_no_sideways_scroll(&self) {
        let found = self
            .js(
                r##"
                const width = document.documentElement.clientWidth;
                if (document.documentElement.scrollWidth <= width) return [];
                const name = (el) => el.tagName.toLowerCase()
                    + (el.id ? "#" + el.id : "")
                    + [...el.classList].map((c) => "." + c).join("");
                return [...document.body.querySelectorAll("*")]
                    .filter((el) => el.getBoundingClientRect().right > width + 1)
                    .filter((el) => !el.parentElement
                        || el.parentElement.getBoundingClientRect().right <= width + 1)
                    .slice(0, 10)
                    .map((el) => name(el) + " ends at "
                        + Math.round(el.getBoundingClientRect().right) + "px");
                "##,
                vec![],
            )
            .await;
        let sticking_out = found.as_array().cloned().unwrap_or_default();
        assert!(
            sticking_out.is_empty(),
            "{} is wider than the window; sticking out: {found}",
            self.location().await
        );
    }

    /// Lays the page out for `viewport` (which stays in effect afterwards), captures the
    /// whole page, not just the visible part, and writes it to
    /// `$CARGO_TARGET_TMPDIR/browser-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str, viewport: Viewport) -> PathBuf {
        self.set_viewport(viewport).await;
        let metrics = self
            .driver_command(
                "goog/cdp/execute",
                json!({ "cmd": "Page.getLayoutMetrics", "params": {} }),
            )
            .await;
        let content = &metrics["cssContentSize"];
        let (width, height) = (
            content["width"].as_f64().unwrap_or(0.0).ceil(),
            content["height"].as_f64().unwrap_or(0.0).ceil(),
        );
        assert!(width > 0.0 && height > 0.0, "page has no size: {metrics}");
        let shot = self
            .driver_command(
                "goog/cdp/execute",
                json!({
                    "cmd": "Page.captureScreenshot",
                    "params": {
                        "format": "png",
                        "captureBeyondViewport": true,
                        "clip": { "x": 0, "y": 0, "width": width, "height": height, "scale": 1 },
                    },
                }),
            )
            .await;
        let data = shot["data"]
            .as_str()
            .unwrap_or_else(|| panic!("no screenshot data: {shot}"));
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap_or_else(|e| panic!("screenshot data is not base64: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("screenshot {name}: {}", path.display());
        path
    }

    /// Runs a Chrome DevTools Protocol command in this tab.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.driver_command("goog/cdp/execute", json!({ "cmd": cmd, "params": params }))
            .await
    }

    /// `POST /session/{id}/{command}` on chromedriver, for what W3C WebDriver lacks
    /// (the console log, DevTools commands); returns the response's `value`.
    async fn driver_command(&self, command: &str, body: Value) -> Value {
        let addr = self.driver.clone();
        let path = format!("/session/{}/{command}", self.session);
        tokio::task::spawn_blocking(move || post_json(&addr, &path, &body))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// `POST path` with a JSON body to `addr`; the `value` of the JSON reply.
fn post_json(addr: &str, path: &str, body: &Value) -> Value {
    let body = body.to_string();
    let mut stream =
        TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to chromedriver: {e}"));
    stream.set_read_timeout(Some(TIMEOUT * 2)).ok();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sending to chromedriver");
    // chromedriver keeps the connection open whatever the request says: read the head,
    // then exactly Content-Length bytes.
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("reading chromedriver's reply to {path}: {e}"));
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().expect("Content-Length is a number");
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .unwrap_or_else(|e| panic!("reading chromedriver's reply to {path}: {e}"));
    let json = String::from_utf8_lossy(&body);
    let value: Value = serde_json::from_str(&json).unwrap_or_else(|e| {
        panic!("chromedriver's reply to {path} is not JSON ({e}): {head}{json}")
    });
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "chromedriver refused {path}: {}",
        value["value"]
    );
    value["value"].clone()
}

/// Where Chromium and chromedriver are installed.
#[derive(Clone, Debug)]
struct Tools {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

impl Tools {
    fn find() -> Option<Self> {
        Some(Self {
            chromium: find_executable(
                &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
                &["chromium", "chromium-browser"],
            )?,
            chromedriver: find_executable(&["/usr/bin/chromedriver"], &["chromedriver"])?,
        })
    }
}

fn find_executable(known: &[&str], names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path: Vec<PathBuf> = std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .collect();
    known.iter().map(PathBuf::from).chain(on_path).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The server and chromedriver every test uses; never dropped: their supervisors end
/// them when the test binary exits.
struct Shared {
    tools: Tools,
    /// `http://127.0.0.1:PORT` of `errbook serve`.
    base: String,
    /// `127.0.0.1:PORT` of chromedriver.
    driver: String,
    _server: Supervised,
    _driver: Supervised,
}

impl Shared {
    fn get(tools: Tools) -> &'static Shared {
        static SHARED: OnceLock<Shared> = OnceLock::new();
        SHARED.get_or_init(|| {
            let (server, base) = start_server();
            let (driver_process, driver) = start_chromedriver(&tools.chromedriver);
            Shared {
                tools,
                base,
                driver,
                _server: server,
                _driver: driver_process,
            }
        })
    }

    async fn open_session(&self, lang: Lang, profile: &Path) -> Client {
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.tools.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    format!("--user-data-dir={}", profile.display()),
                    lang.chromium_flag(),
                    "--window-size=1280,900",
                ],
                "prefs": { "intl.accept_languages": lang.accept_languages() },
            },
            "goog:loggingPrefs": { "browser": "ALL" },
            "timeouts": { "implicit": 0, "pageLoad": 60_000, "script": 30_000 },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("capabilities are an object")
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://{}", self.driver))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "starting {} through chromedriver: {e}",
                    self.tools.chromium.display()
                )
            })
    }
}

/// Starts `errbook serve` on its built-in entries (the shipped `kb/`) and a free port.
fn start_server() -> (Supervised, String) {
    let mut server = Supervised::spawn(
        Path::new(env!("CARGO_BIN_EXE_errbook")),
        &["serve".into(), "--addr".into(), "127.0.0.1:0".into()],
        |cmd| {
            cmd.env("RUST_LOG", "errbook=info")
                .env("NO_COLOR", "1")
                .env(
                    "ERRBOOK_STORE",
                    std::env::temp_dir().join(format!("errbook-browser-{}.db", std::process::id())),
                )
                .env_remove("ERRBOOK_KB")
                .env_remove("ERRBOOK_NO_BUILTIN")
                .env_remove("ERRBOOK_ADDR")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        },
    );
    // Both streams are read for as long as the server runs: it would block on a full pipe.
    let output = Arc::new(Mutex::new(Vec::new()));
    let (found, address) = mpsc::channel();
    let stdout = server.shell.stdout.take().expect("server stdout");
    let stderr = server.shell.stderr.take().expect("server stderr");
    drain(stdout, output.clone(), Some(found));
    drain(stderr, output.clone(), None);
    match address.recv_timeout(SERVER_STARTUP) {
        Ok(addr) => (server, format!("http://{addr}")),
        Err(e) => panic!(
            "errbook serve did not log `listening on http://` ({e}); its output:\n{}",
            output.lock().unwrap_or_else(|p| p.into_inner()).join("\n")
        ),
    }
}

/// Reads `stream` line by line into `output` until it closes; sends the address of the
/// first `listening on http://ADDR` line to `found`.
fn drain(
    stream: impl Read + Send + 'static,
    output: Arc<Mutex<Vec<String>>>,
    mut found: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on http://").nth(1)
                && let Some(sender) = found.take()
            {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = sender.send(addr.to_string());
            }
            let mut output = output.lock().unwrap_or_else(|p| p.into_inner());
            if output.len() < 1000 {
                output.push(line);
            }
        }
    });
}

/// Starts chromedriver on a free port and waits until it accepts connections.
fn start_chromedriver(chromedriver: &Path) -> (Supervised, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let driver = Supervised::spawn(chromedriver, &[format!("--port={port}")], |cmd| {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    });
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + TIMEOUT;
    while TcpStream::connect(&addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} did not listen on {addr} within {TIMEOUT:?}",
            chromedriver.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (driver, addr)
}

/// A program running under a `sh` supervisor in a new process group. The supervisor
/// waits for its stdin to close, then sends SIGTERM to the whole group.
struct Supervised {
    shell: Child,
    lifeline: Option<ChildStdin>,
}

const SUPERVISOR: &str = r#""$@" &
while read -r _; do :; done
trap '' TERM
kill -TERM 0
wait"#;

impl Supervised {
    fn spawn(program: &Path, args: &[String], configure: impl FnOnce(&mut Command)) -> Self {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(SUPERVISOR)
            .arg("sh")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .process_group(0);
        configure(&mut cmd);
        let mut shell = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let lifeline = shell.stdin.take();
        Self { shell, lifeline }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        drop(self.lifeline.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.shell.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Something ignored SIGTERM.
        let group = format!("-{}", self.shell.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.shell.wait();
    }
}
