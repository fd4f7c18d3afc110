//! A real `errbook serve` process for the tests that need one (signals, reloads,
//! `/metrics`): started on a free port over a folder of entries alone, its log kept,
//! killed when the test ends.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `errbook serve`, killed when the test ends, pass or fail.
pub struct Server {
    pub child: Child,
    pub addr: String,
    log: Arc<Mutex<Vec<String>>>,
    /// The server's index cache, unless the test names one.
    _cache: tempfile::TempDir,
}

impl Server {
    pub fn start(kb: &Path, extra: &[&str]) -> Server {
        Server::start_with(kb, extra, |_| {})
    }

    /// `start`, with `configure` applied to the command first.
    pub fn start_with(kb: &Path, extra: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        let cache = tempfile::tempdir().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_errbook"));
        command.env("ERRBOOK_STORE", cache.path().join("inbox.db"));
        configure(&mut command);
        let mut child = command
            .args([
                "serve",
                "--no-builtin",
                "--kb",
                kb.to_str().unwrap(),
                "--addr",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env("ERRBOOK_INDEX_CACHE", cache.path())
            .env("RUST_LOG", "errbook=info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut addr = None;
        let mut before = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            before.push(line.clone());
            if let Some(rest) = line.split("listening on http://").nth(1) {
                addr = Some(rest.split_whitespace().next().unwrap().to_string());
                break;
            }
        }
        let log = Arc::new(Mutex::new(before));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            addr: addr.expect("the server logs its address"),
            log,
            _cache: cache,
        }
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: sends a signal to our own child process.
        let done = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(done, 0, "kill failed");
    }

    /// Whether the server logged a line holding `needle`.
    pub fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
