//! The real server process: reloads on `--watch` and `SIGHUP`, a broken edit kept out,
//! a graceful stop, the connection's own limits, and a knowledge base left untouched.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::server::Server;
use common::{copy_dir, fixture_dir};

const WATCHDOG: &str = "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600321 milliseconds before timing out.";

impl Server {
    fn get(&self, path: &str) -> (u16, String) {
        request(&self.addr, &format!("GET {path} HTTP/1.1\r\n"), "")
    }

    fn json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Polls `path` until `done` holds for its JSON; every answer on the way must be a
    /// 200 (the server keeps answering while it rebuilds).
    fn until(&self, path: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let value = self.json(path);
            if done(&value) {
                return value;
            }
            assert!(Instant::now() < deadline, "{path} never changed: {value}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One request on a fresh connection: `head` is the request line; the body, if any,
/// is sent as JSON.
fn request(addr: &str, line: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body_headers = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    write!(
        stream,
        "{line}Host: {addr}\r\nConnection: close\r\n{body_headers}\r\n{body}"
    )
    .unwrap();
    read_response(&mut stream)
}

fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let response = String::from_utf8_lossy(&raw).into_owned();
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A copy of the fixture knowledge base the test may edit.
fn kb_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), dir.path());
    dir
}

/// Edits `file` in `dir` by replacing `from` with `to`.
fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} lacks {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

fn title(server: &Server) -> String {
    server.json("/api/v1/entries/view-inplace")["title"]
        .as_str()
        .unwrap()
        .to_string()
}

const TITLE: &str = "A view returned by a multi-output function is modified in place";

#[test]
fn watch_reloads_edits_and_keeps_the_last_good_kb_when_an_edit_breaks_it() {
    let kb = kb_copy();
    let server = Server::start(kb.path(), &["--watch"]);
    assert_eq!(title(&server), TITLE);

    edit(
        kb.path(),
        "view-inplace.md",
        TITLE,
        "Edited: a view modified in place",
    );
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Edited: a view modified in place"
    });
    let health = server.json("/healthz");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["reloads"], 1);

    // A typo in a field name: the edit is refused, the last good entry stays.
    edit(kb.path(), "view-inplace.md", "\ntitle:", "\ntitel:");
    let health = server.until("/healthz", |h| h["status"] == "reload_failed");
    let problems = health["reload_error"]["problems"].to_string();
    assert!(
        problems.contains("view-inplace.md:3") && problems.contains("titel"),
        "{health}"
    );
    assert_eq!(title(&server), "Edited: a view modified in place");
    assert!(server.logged("reload failed"), "the failure is logged");
    // `errbook check` names the same problem.
    let check = Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args(["check", "--no-builtin", "--kb", kb.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!check.status.success());
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(stderr.contains("view-inplace.md:3"), "{stderr}");

    // Fixed again: served, and the error is gone.
    edit(kb.path(), "view-inplace.md", "\ntitel:", "\ntitle:");
    let health = server.until("/healthz", |h| h["status"] == "ok");
    assert_eq!(health["reloads"], 2);
    assert_eq!(health["failed_reloads"], 1);
    assert!(health["reload_error"].is_null());

    // A new entry appears; a deleted one goes.
    std::fs::copy(
        kb.path().join("view-inplace.md"),
        kb.path().join("memory").join("view-inplace-2.md"),
    )
    .unwrap();
    edit(
        &kb.path().join("memory"),
        "view-inplace-2.md",
        "slug: view-inplace",
        "slug: view-inplace-2",
    );
    server.until("/api/v1/entries", |e| {
        e["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["slug"] == "view-inplace-2")
    });
    std::fs::remove_file(kb.path().join("memory").join("view-inplace-2.md")).unwrap();
    server.until("/api/v1/entries", |e| {
        !e["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["slug"] == "view-inplace-2")
    });
}

/// A Chinese body is part of its entry: editing it alone reloads the entry.
#[test]
fn watch_reloads_an_edited_chinese_body() {
    let kb = kb_copy();
    let server = Server::start(kb.path(), &["--watch"]);
    let fix = |server: &Server| {
        server.json("/api/v1/entries/view-inplace?lang=zh-CN")["markdown"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(fix(&server).contains("backward 不再报这个错。"));
    edit(
        kb.path(),
        "view-inplace.zh.md",
        "backward 不再报这个错。",
        "反向传播不再报错。",
    );
    server.until("/api/v1/entries/view-inplace?lang=zh-CN", |e| {
        e["markdown"]
            .as_str()
            .unwrap()
            .contains("反向传播不再报错。")
    });
    // Removed: the entry is served with its English body, and `check` asks for it.
    std::fs::remove_file(kb.path().join("view-inplace.zh.md")).unwrap();
    let entry = server.until("/api/v1/entries/view-inplace?lang=zh-CN", |e| {
        e["lang"] == "en"
    });
    assert!(
        entry["markdown"]
            .as_str()
            .unwrap()
            .starts_with("## Symptom")
    );
    assert_eq!(server.json("/healthz")["status"], "ok");
}

#[test]
fn sighup_reloads_the_kb_without_watch() {
    let kb = kb_copy();
    let server = Server::start(kb.path(), &[]);
    // Answers write each entry's title as JSON once: a reload must not keep the old one.
    let hit_title = |server: &Server| {
        let found = server.json("/api/v1/search?q=view+modified+in+place&limit=1");
        assert_eq!(found["hits"][0]["slug"], "view-inplace", "{found}");
        found["hits"][0]["title"].as_str().unwrap().to_string()
    };
    assert_eq!(hit_title(&server), TITLE);
    edit(kb.path(), "view-inplace.md", TITLE, "Reloaded by SIGHUP");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(title(&server), TITLE, "no reload without --watch or SIGHUP");

    server.signal(libc::SIGHUP);
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Reloaded by SIGHUP"
    });
    assert_eq!(hit_title(&server), "Reloaded by SIGHUP");
    // A broken knowledge base on SIGHUP: still serving, error on /healthz.
    edit(
        kb.path(),
        "view-inplace.md",
        "slug: view-inplace",
        "slug: Not A Slug",
    );
    server.signal(libc::SIGHUP);
    let health = server.until("/healthz", |h| h["status"] == "reload_failed");
    assert!(
        health["reload_error"]["problems"]
            .to_string()
            .contains("view-inplace.md")
    );
    assert_eq!(title(&server), "Reloaded by SIGHUP");
}

#[test]
fn sigterm_lets_the_request_in_flight_finish_then_exits_0() {
    let mut server = Server::start(&fixture_dir(), &[]);
    // An idle keep-alive connection must not hold up the stop.
    let mut idle = TcpStream::connect(&server.addr).unwrap();
    write!(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).unwrap();
    assert_eq!(&first[9..12], b"200");

    // A paste half uploaded when the signal comes.
    let body = serde_json::json!({ "text": WATCHDOG }).to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let mut upload = TcpStream::connect(&server.addr).unwrap();
    upload
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        upload,
        "POST /api/v1/diagnose HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{head}",
        body.len()
    )
    .unwrap();
    upload.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));

    // No new connections are taken...
    assert!(
        TcpStream::connect(&server.addr).is_err(),
        "the listener is closed"
    );
    assert!(server.child.try_wait().unwrap().is_none(), "still draining");
    // ...but the request in flight is answered.
    upload.write_all(tail.as_bytes()).unwrap();
    let (status, answer) = read_response(&mut upload);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("watchdog-timeout"), "{answer}");

    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "exit status {status}");
    assert!(server.logged("every request answered"));
}

#[test]
fn ctrl_c_stops_the_server_with_exit_0() {
    let mut server = Server::start(&fixture_dir(), &[]);
    assert_eq!(server.get("/healthz").0, 200);
    server.signal(libc::SIGINT);
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "exit status {status}");
}

#[test]
fn a_stop_sent_as_soon_as_the_address_is_logged_is_graceful() {
    // The signal handlers are in place before the address is logged: a supervisor
    // that stops the server at once still gets exit 0, not death by signal.
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut server = Server::start(&fixture_dir(), &[]);
        server.signal(signal);
        let status = server.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "signal {signal}: exit status {status}");
    }
}

/// Sends a request head too large for the connection: the answer's status, or `None`
/// when the server closed the connection before the rest could be sent or read (it
/// answers and closes without reading the rest, so the kernel may reset first).
fn oversized(addr: &str, head: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = stream.write_all(head.as_bytes());
    // The status line is enough (after a 431, hyper keeps the connection open until
    // its header timeout).
    let mut status = [0u8; 12];
    match stream.read_exact(&mut status) {
        Ok(()) => Some(String::from_utf8_lossy(&status)[9..12].parse().unwrap()),
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => None,
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn the_connection_refuses_a_request_head_over_64_kib() {
    let server = Server::start(&fixture_dir(), &[]);
    let filler = "v".repeat(100 * 1024);
    let mut answered = Vec::new();
    for _ in 0..5 {
        let header = oversized(
            &server.addr,
            &format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: {filler}\r\n\r\n"),
        );
        assert!(matches!(header, Some(431) | None), "{header:?}");
        let line = oversized(
            &server.addr,
            &format!("GET /search?q={filler} HTTP/1.1\r\nHost: x\r\n\r\n"),
        );
        assert!(matches!(line, Some(414 | 431) | None), "{line:?}");
        answered.extend(header.into_iter().chain(line));
    }
    assert!(!answered.is_empty(), "never answered 431 or 414");
    // The server is unharmed.
    assert_eq!(server.get("/healthz").0, 200);
}

/// Every file under `dir`: its bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            let bytes = if meta.is_file() {
                std::fs::read(entry.path()).unwrap()
            } else {
                Vec::new()
            };
            out.insert(entry.path(), (bytes, meta.modified().unwrap()));
        }
    }
    out
}

#[test]
fn the_server_never_writes_to_the_kb() {
    let kb = kb_copy();
    let before = snapshot(kb.path());
    let mut server = Server::start(kb.path(), &["--watch"]);
    for path in [
        "/",
        "/search?q=nccl",
        "/entries/view-inplace",
        "/tags/nccl",
        "/api/v1/entries",
        "/llms.txt",
        "/entries/view-inplace.md",
    ] {
        assert_eq!(server.get(path).0, 200, "{path}");
    }
    let body = serde_json::json!({ "text": WATCHDOG }).to_string();
    let (status, _) = request(&server.addr, "POST /api/v1/diagnose HTTP/1.1\r\n", &body);
    assert_eq!(status, 200);
    server.signal(libc::SIGHUP);
    server.until("/healthz", |h| h["reloads"] == 1);
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(10)).success());
    assert_eq!(snapshot(kb.path()), before, "the kb folder changed");
}

#[test]
fn a_restart_opens_the_indexes_the_first_start_stored() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_str().unwrap();
    let query = "/api/v1/search?q=NCCL%20watchdog%20timeout";

    let first = Server::start(&fixture_dir(), &["--index-cache", dir]);
    assert!(first.logged("built and stored the indexes"));
    let answer = first.json(query);
    drop(first);

    let second = Server::start(&fixture_dir(), &["--index-cache", dir]);
    assert!(second.logged("opened the stored indexes"));
    assert_eq!(second.json(query), answer);
    drop(second);

    // An edited kb is indexed anew, and the edit is what it answers.
    let kb = kb_copy();
    edit(kb.path(), "view-inplace.md", TITLE, "Edited between starts");
    let third = Server::start(kb.path(), &["--index-cache", dir]);
    assert!(third.logged("built and stored the indexes"));
    assert_eq!(title(&third), "Edited between starts");

    let fourth = Server::start(&fixture_dir(), &["--no-index-cache"]);
    assert!(!fourth.logged("stored"));
    assert_eq!(fourth.json(query), answer);
}

// ---- hostile clients and hosts --------------------------------------------------------

/// Replaces the symlink `link` with one to `target`, at once, as Kubernetes ConfigMap
/// volumes and git-sync publish a new version.
fn swap_symlink(link: &Path, target: &str) {
    let next = link.with_extension("next");
    std::os::unix::fs::symlink(target, &next).unwrap();
    std::fs::rename(&next, link).unwrap();
}

#[test]
fn a_swapped_kb_symlink_reloads_and_the_watch_outlives_its_old_target() {
    let root = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), &root.path().join("kbA"));
    copy_dir(&fixture_dir(), &root.path().join("kbB"));
    edit(
        &root.path().join("kbB"),
        "view-inplace.md",
        TITLE,
        "Version B",
    );
    let link = root.path().join("kb");
    std::os::unix::fs::symlink("kbA", &link).unwrap();
    let server = Server::start(&link, &["--watch"]);
    assert_eq!(title(&server), TITLE);

    let swapped = Instant::now();
    swap_symlink(&link, "kbB");
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Version B"
    });
    assert!(
        swapped.elapsed() < Duration::from_secs(5),
        "the swap reloaded after {:?}",
        swapped.elapsed()
    );
    let health = server.json("/healthz");
    assert_eq!(health["watch"], "watching", "{health}");
    assert!(
        health["watch_target"].as_str().unwrap().ends_with("kbB"),
        "{health}"
    );

    // The old version goes; edits of the new one still reload.
    std::fs::remove_dir_all(root.path().join("kbA")).unwrap();
    edit(
        &root.path().join("kbB"),
        "view-inplace.md",
        "Version B",
        "Version B2",
    );
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Version B2"
    });

    // The folder the link leads to vanishes: the watch reports it, and is set up again
    // when there is something to watch.
    std::fs::remove_file(&link).unwrap();
    server.until("/healthz", |h| h["watch"] == "failed");
    copy_dir(&fixture_dir(), &root.path().join("kbC"));
    edit(
        &root.path().join("kbC"),
        "view-inplace.md",
        TITLE,
        "Version C",
    );
    swap_symlink(&link, "kbC");
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Version C"
    });
    let health = server.json("/healthz");
    assert_eq!(health["watch"], "watching", "{health}");
    assert_eq!(health["watch_restarts"], 1, "{health}");
}

#[test]
fn a_stop_waits_at_most_the_grace_period_and_a_second_signal_exits_at_once() {
    for second in [false, true] {
        let mut server = Server::start(&fixture_dir(), &["--grace-period", "1"]);
        // A request whose body never comes.
        let mut upload = TcpStream::connect(&server.addr).unwrap();
        write!(
            upload,
            "POST /api/v1/diagnose HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n{{\"text\": \"Trace"
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let stopped = Instant::now();
        server.signal(libc::SIGTERM);
        if second {
            std::thread::sleep(Duration::from_millis(200));
            server.signal(libc::SIGTERM);
        }
        let status = server.wait_exit(Duration::from_secs(10));
        let took = stopped.elapsed();
        if second {
            assert_eq!(status.code(), Some(130), "exit status {status}");
            assert!(took < Duration::from_millis(900), "exited after {took:?}");
        } else {
            assert!(status.success(), "exit status {status}");
            assert!(took < Duration::from_secs(3), "exited after {took:?}");
        }
    }
}

/// Sets this process's soft limit on open files to `soft` (and the hard limit to
/// `hard`, when lower than now) in a child about to start.
fn limit_open_files(command: &mut Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The `Max open files` soft limit of process `pid`.
fn open_files_limit(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn at_ulimit_1024_the_server_raises_its_limit_and_a_flood_of_connections_leaves_it_working() {
    // This process needs room for the flood too.
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads and sets this process's own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut own);
        own.rlim_cur = own.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &own);
    }
    let hard = own.rlim_max.min(8192);
    assert!(
        hard >= 2048,
        "this test needs a hard limit of 2048 open files"
    );
    let kb = kb_copy();
    let server = Server::start_with(kb.path(), &[], |c| limit_open_files(c, 1024, hard));
    assert_eq!(open_files_limit(server.child.id()), hard);

    let flood: Vec<TcpStream> = (0..1200)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    edit(
        kb.path(),
        "view-inplace.md",
        TITLE,
        "Reloaded under a flood",
    );
    server.signal(libc::SIGHUP);
    server.until("/api/v1/entries/view-inplace", |e| {
        e["title"] == "Reloaded under a flood"
    });
    assert_eq!(server.json("/healthz")["failed_reloads"], 0);
    assert!(!server.logged("accepting a connection failed"));
    drop(flood);
}

#[test]
fn hundreds_of_header_fields_are_answered_and_too_many_refused() {
    let server = Server::start(&fixture_dir(), &[]);
    let fields: String = (0..300).map(|i| format!("X-Filler-{i}: 1\r\n")).collect();
    let (status, body) = request(
        &server.addr,
        &format!("GET /healthz HTTP/1.1\r\n{fields}"),
        "",
    );
    assert_eq!(status, 200, "{body}");
    // Past the HTTP library's count, it refuses the request itself (documented).
    let fields: String = (0..1100).map(|i| format!("X-F{i}: 1\r\n")).collect();
    let status = oversized(
        &server.addr,
        &format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{fields}\r\n"),
    );
    assert!(matches!(status, Some(431) | None), "{status:?}");
}
