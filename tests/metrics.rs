//! `/metrics` of the real server process, read with the Prometheus Python client's own
//! parser (`.ci/prometheus_samples.py`; `.ci/prometheus-parser` installs it and names the
//! python in `ERRBOOK_PYTHON`): counters move by what the requests did, route labels
//! are templates, and reloads and caches are counted across a reload.
#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::Server;
use common::{copy_dir, fixture_dir};
use serde_json::Value;

const WATCHDOG: &str = "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600321 milliseconds before timing out.";
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Server {
    /// One HTTP/1.0 request (so the body ends with the connection, never chunked).
    fn send(&self, method: &str, path: &str, headers: &str, body: &str) -> Response {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.0\r\nHost: {}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a whole response head");
        let head = String::from_utf8(raw[..split].to_vec()).unwrap();
        let status = head[9..12].parse().unwrap();
        let headers = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Response {
            status,
            headers,
            body: raw[split + 4..].to_vec(),
        }
    }

    fn get(&self, path: &str) -> Response {
        self.send("GET", path, "", "")
    }

    fn diagnose(&self, text: &str) -> Response {
        let body = serde_json::json!({ "text": text }).to_string();
        self.send(
            "POST",
            "/api/v1/diagnose",
            "Content-Type: application/json\r\n",
            &body,
        )
    }

    /// `/metrics`, checked for its type and read by the Prometheus parser.
    fn scrape(&self, python: &Path) -> Scrape {
        let response = self.get("/metrics");
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some(CONTENT_TYPE));
        assert_eq!(response.header("cache-control"), Some("no-store"));
        Scrape::parse(python, &response.text())
    }

    fn health(&self) -> Value {
        serde_json::from_str(&self.get("/healthz").text()).unwrap()
    }

    /// Polls `/healthz` until `done` holds.
    fn until(&self, done: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(&self.health()) {
            assert!(Instant::now() < deadline, "{}", self.health());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// The python that has the Prometheus client (`ERRBOOK_PYTHON`, else `python3`), or
/// `None` when there is none and the test may skip (never under `CI=true`).
fn prometheus_python() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var_os("ERRBOOK_PYTHON").unwrap_or("python3".into()));
    let found = Command::new(&python)
        .args(["-c", "import prometheus_client.parser"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(python);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} cannot import prometheus_client, and under CI=true the metrics test must \
         run: set ERRBOOK_PYTHON to the python `.ci/prometheus-parser` prints",
        python.display()
    );
    eprintln!("skipping: no python with prometheus_client (run .ci/prometheus-parser)");
    None
}

/// Metric families as the Prometheus parser read them.
struct Scrape(Vec<Value>);

impl Scrape {
    fn parse(python: &Path, text: &str) -> Scrape {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/prometheus_samples.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "the Prometheus parser refused the metrics: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        Scrape(serde_json::from_slice(&out.stdout).unwrap())
    }

    fn family(&self, name: &str) -> &Value {
        (self.0.iter())
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no family {name}"))
    }

    /// The sample `name` with exactly `labels`, or 0 when there is none yet.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let wanted: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        (self.0.iter())
            .flat_map(|f| f["samples"].as_array().unwrap())
            .find(|s| s["name"] == name && s["labels"].as_object() == Some(&wanted))
            .map_or(0.0, |s| s["value"].as_f64().unwrap())
    }

    /// Every value of the label `label` among the samples of `name`.
    fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        (self.0.iter())
            .flat_map(|f| f["samples"].as_array().unwrap())
            .filter(|s| s["name"] == name)
            .filter_map(|s| s["labels"][label].as_str().map(String::from))
            .collect()
    }
}

#[test]
fn metrics_count_requests_diagnoses_caches_and_reloads() {
    let Some(python) = prometheus_python() else {
        return;
    };
    let kb = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), kb.path());
    let server = Server::start(kb.path(), &[]);
    let before = server.scrape(&python);

    let search = "/api/v1/search?q=nccl";
    assert_eq!(server.get(search).status, 200);
    assert_eq!(server.get(search).status, 200);
    for _ in 0..2 {
        let answer = server.diagnose(WATCHDOG);
        assert_eq!(answer.status, 200);
        assert!(answer.text().contains(r#""verdict":"matched""#));
    }
    let mid = server.scrape(&python);
    // The same search and paste twice: one miss, then one hit.
    let cache = |s: &Scrape, kind: &str, cache| {
        s.value(&format!("errbook_cache_{kind}_total"), &[("cache", cache)])
    };
    for name in ["searches", "diagnoses"] {
        for kind in ["hits", "misses"] {
            let moved = cache(&mid, kind, name) - cache(&before, kind, name);
            assert_eq!(moved, 1.0, "{name} {kind}");
        }
    }
    assert!(cache(&mid, "misses", "terms") > cache(&before, "misses", "terms"));
    assert!(cache(&mid, "hits", "terms") > cache(&before, "hits", "terms"));
    // Diagnoses by verdict and confidence.
    let diagnoses = |s: &Scrape, verdict, confidence| {
        s.value(
            "errbook_diagnoses_total",
            &[("verdict", verdict), ("confidence", confidence)],
        )
    };
    assert_eq!(
        diagnoses(&mid, "matched", "high") - diagnoses(&before, "matched", "high"),
        2.0
    );

    assert_eq!(server.diagnose("hello there").status, 200);
    assert_eq!(server.get("/no/such/page").status, 404);
    assert_eq!(server.get("/api/v1/no-such-route").status, 404);
    assert_eq!(server.get("/api/v1/entries/no-such-entry").status, 404);
    assert_eq!(server.send("PUT", "/search", "", "").status, 405);
    let after = server.scrape(&python);
    let no_match = |s: &Scrape| diagnoses(s, "no_match", "low") + diagnoses(s, "no_match", "none");
    assert_eq!(no_match(&after) - no_match(&mid), 1.0);
    assert_eq!(diagnoses(&after, "possible", "medium"), 0.0);

    let requests = "errbook_http_requests_total";
    let moved =
        |labels: &[(&str, &str)]| after.value(requests, labels) - before.value(requests, labels);
    let route = |route, method, status| [("route", route), ("method", method), ("status", status)];
    assert_eq!(moved(&route("/api/v1/search", "GET", "200")), 2.0);
    assert_eq!(moved(&route("/api/v1/diagnose", "POST", "200")), 3.0);
    assert_eq!(moved(&route("/api/v1/entries/{slug}", "GET", "404")), 1.0);
    assert_eq!(moved(&route("/search", "PUT", "405")), 1.0);
    // Both unknown addresses count under one label, whatever their path.
    assert_eq!(moved(&route("unmatched", "GET", "404")), 2.0);
    // The earlier scrapes count in the last.
    assert_eq!(moved(&route("/metrics", "GET", "200")), 2.0);
    let routes = after.label_values(requests, "route");
    assert!(
        routes
            .iter()
            .all(|r| r == "unmatched" || r.starts_with('/')),
        "{routes:?}"
    );
    assert!(!routes.iter().any(|r| r.contains("no-such")), "{routes:?}");
    assert_eq!(after.family("errbook_http_requests")["type"], "counter");

    // Latency: a histogram per route whose count moved with the requests.
    let latency = after.family("errbook_http_request_duration_seconds");
    assert_eq!(latency["type"], "histogram");
    let count = "errbook_http_request_duration_seconds_count";
    let search_route = [("route", "/api/v1/search")];
    assert_eq!(
        after.value(count, &search_route) - before.value(count, &search_route),
        2.0
    );
    let inf = [("route", "/api/v1/search"), ("le", "+Inf")];
    assert_eq!(
        after.value("errbook_http_request_duration_seconds_bucket", &inf),
        after.value(count, &search_route)
    );
    assert!(after.value("errbook_http_request_duration_seconds_sum", &search_route) > 0.0);

    let entries = server.health()["entries"].as_f64().unwrap();
    assert_eq!(after.value("errbook_kb_entries", &[]), entries);
    // Nothing waits; the scrape itself holds a turn.
    assert_eq!(after.value("errbook_requests_waiting", &[]), 0.0);
    assert_eq!(after.value("errbook_requests_in_flight", &[]), 1.0);
    assert!(after.value("errbook_request_turns", &[]) >= 32.0);

    // A reload that works and one that fails; the caches' counts survive the reload.
    let reloads = |s: &Scrape, result| s.value("errbook_kb_reloads_total", &[("result", result)]);
    assert_eq!(
        (reloads(&after, "ok"), reloads(&after, "failed")),
        (0.0, 0.0)
    );
    server.signal(libc::SIGHUP);
    server.until(|h| h["reloads"] == 1);
    let path = kb.path().join("view-inplace.md");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\ntitle:", "\ntitel:", 1)).unwrap();
    server.signal(libc::SIGHUP);
    server.until(|h| h["failed_reloads"] == 1);
    let reloaded = server.scrape(&python);
    assert_eq!(reloads(&reloaded, "ok"), 1.0);
    assert_eq!(reloads(&reloaded, "failed"), 1.0);
    for name in ["terms", "passage_terms", "searches", "diagnoses"] {
        for kind in ["hits", "misses"] {
            assert!(
                cache(&reloaded, kind, name) >= cache(&after, kind, name),
                "{name} {kind} fell after a reload"
            );
        }
    }
    // The new knowledge base's caches count on top of the old one's.
    assert_eq!(server.get(search).status, 200);
    let last = server.scrape(&python);
    assert_eq!(
        cache(&last, "misses", "searches") - cache(&reloaded, "misses", "searches"),
        1.0
    );
}

#[test]
fn metrics_are_compressed_for_a_scraper_that_asks_and_never_cached() {
    let Some(python) = prometheus_python() else {
        return;
    };
    let server = Server::start(&fixture_dir(), &[]);
    let response = server.send("GET", "/metrics", "Accept-Encoding: gzip\r\n", "");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-encoding"), Some("gzip"));
    assert_eq!(response.header("content-type"), Some(CONTENT_TYPE));
    assert_eq!(response.header("cache-control"), Some("no-store"));
    assert!(
        (response.header("vary").unwrap_or("")).contains("accept-encoding"),
        "{:?}",
        response.headers
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&response.body[..])
        .read_to_string(&mut text)
        .unwrap();
    let scrape = Scrape::parse(&python, &text);
    assert!(scrape.value("errbook_kb_entries", &[]) > 0.0);
    // A HEAD answers the same head without a body.
    let head = server.send("HEAD", "/metrics", "", "");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some(CONTENT_TYPE));
    assert!(head.body.is_empty());
}
