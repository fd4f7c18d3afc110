//! The `errbook` binary as an author and an operator use it: `check` names file and
//! line for every kind of broken entry, `serve` refuses a broken knowledge base and
//! serves a valid one, `search` answers in the terminal.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::fixture_dir;

fn errbook(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args(args)
        .env_remove("ERRBOOK_KB")
        .env_remove("ERRBOOK_ADDR")
        .output()
        .expect("binary runs")
}

const GOOD: &str = r#"---
slug: good-entry
title: "A good entry"
title_zh: "一个正确的条目"
summary: "It is fine."
summary_zh: "没问题。"
tags: [demo]
signatures:
  - "GoodError"
symptoms:
  - "nothing wrong"
---

## Symptom

Text.

## Cause

Text.

## Fix

1. Text.

## Verify

Text.
"#;

/// A knowledge base holding the good entry plus `files` (path, content).
fn kb_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good-entry.md"), GOOD).unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// Runs `check` and asserts it fails with a message naming `file:line` and `needle`.
fn check_reports(files: &[(&str, &str)], file: &str, line: usize, needle: &str) {
    let kb = kb_with(files);
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check should fail:\n{stderr}");
    let located = format!("{}:{line}: ", kb.path().join(file).display());
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(&located) && l.contains(needle)),
        "expected `{located}` with `{needle}` in:\n{stderr}"
    );
}

fn good_with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from));
    GOOD.replacen(from, to, 1).replace("good-entry", "second")
}

#[test]
fn check_accepts_a_valid_kb() {
    let out = errbook(&["check", "--kb", fixture_dir().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("6 entries, all valid"));
}

#[test]
fn check_accepts_the_shipped_kb() {
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let out = errbook(&["check", "--kb", kb.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_reports_invalid_yaml_with_its_line() {
    let broken = good_with("tags: [demo]", "tags: [demo\nsignatures_oops: x");
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        8,
        "invalid front matter",
    );
}

#[test]
fn check_reports_unknown_field() {
    let broken = good_with("tags: [demo]", "tags: [demo]\nsynonyms: [x]");
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        8,
        "unknown field `synonyms`",
    );
}

#[test]
fn check_reports_missing_required_field() {
    let broken = good_with("title_zh: \"一个正确的条目\"\n", "");
    check_reports(&[("second.md", &broken)], "second.md", 2, "title_zh");
}

#[test]
fn check_reports_slug_not_matching_file_name() {
    let broken = good_with("tags", "tags").replace("slug: second", "slug: other-name");
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        2,
        "does not match the file name",
    );
}

#[test]
fn check_reports_duplicate_slug() {
    check_reports(
        &[("more/good-entry.md", GOOD)],
        "more/good-entry.md",
        2,
        "duplicate slug `good-entry`",
    );
}

#[test]
fn check_reports_dangling_related_slug() {
    let broken = good_with("symptoms:", "related: [RELATED]\nsymptoms:")
        .replace("RELATED", "good-entry, no-such-entry");
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        10,
        "`no-such-entry` does not exist",
    );
}

#[test]
fn check_reports_regex_that_does_not_compile() {
    let broken = good_with(
        "  - \"GoodError\"",
        "  - \"GoodError\"\n  - {regex: 'Output (\\d+ of'}",
    );
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        10,
        "does not compile",
    );
}

#[test]
fn check_reports_missing_front_matter_and_sections() {
    check_reports(
        &[("second.md", "# Just a heading\n")],
        "second.md",
        1,
        "front matter",
    );
    let no_fix = good_with("## Fix\n\n1. Text.\n\n", "");
    check_reports(&[("second.md", &no_fix)], "second.md", 13, "`## Fix`");
}

#[test]
fn check_reports_every_problem_not_just_the_first() {
    let a = good_with("tags: [demo]", "tags: [demo]\nbogus: 1");
    let b = good_with("symptoms:", "related: [ghost]\nsymptoms:").replace("second", "third");
    let kb = kb_with(&[("second.md", &a), ("third.md", &b)]);
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("second.md:8: invalid front matter: unknown field `bogus`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("third.md:10: related slug `ghost` does not exist"),
        "{stderr}"
    );
    assert!(stderr.contains("2 problem(s) found"), "{stderr}");
}

#[test]
fn check_reports_a_missing_folder() {
    let out = errbook(&["check", "--kb", "/nonexistent/kb"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/kb"));
}

#[test]
fn serve_refuses_a_broken_kb() {
    let broken = good_with("symptoms:", "related: [ghost]\nsymptoms:");
    let kb = kb_with(&[("second.md", &broken)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args([
            "serve",
            "--kb",
            kb.path().to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("serve kept running on a broken kb");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("second.md:10: related slug `ghost` does not exist"),
        "{stderr}"
    );
    assert!(stderr.contains("refusing to serve"), "{stderr}");
}

/// Kills the server when the test ends, pass or fail.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

#[test]
fn serve_answers_over_http() {
    let child = Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args([
            "serve",
            "--kb",
            fixture_dir().to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "errbook=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = BufReader::new(server.0.stdout.take().unwrap());
    let mut addr = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            addr = Some(rest.split_whitespace().next().unwrap().to_string());
            break;
        }
    }
    let addr = addr.expect("server logs its address");
    let (status, body) = http_get(&addr, "/healthz");
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_get(&addr, "/api/v1/search?q=ncclInvalidUsage");
    assert_eq!(status, 200);
    assert!(body.contains("\"slug\":\"nccl-invalid-usage\""), "{body}");
    let (status, _) = http_get(&addr, "/entries/nope");
    assert_eq!(status, 404);
}

#[test]
fn search_command_prints_text_and_json() {
    let dir = fixture_dir();
    let out = errbook(&["search", "--kb", dir.to_str().unwrap(), "显存不均衡"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().unwrap().contains("[gpu0-imbalance]"),
        "{text}"
    );

    let out = errbook(&[
        "search",
        "--kb",
        dir.to_str().unwrap(),
        "--json",
        "--",
        "-ncclInvalidUsage",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["hits"][0]["slug"], "nccl-invalid-usage");
}

#[test]
fn check_reports_an_example_its_own_signatures_miss() {
    let broken = good_with(
        "symptoms:",
        "examples:\n  - \"SomeOtherError: boom\"\nsymptoms:",
    );
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        11,
        "example 1 matches none of this entry's signatures",
    );
}

#[test]
fn check_reports_an_example_another_entrys_signature_fires_on() {
    let broken = good_with("  - \"GoodError\"", "  - \"SecondError\"").replace(
        "symptoms:",
        "examples:\n  - \"SecondError after GoodError\"\nsymptoms:",
    );
    check_reports(
        &[("second.md", &broken)],
        "second.md",
        11,
        "also matches signature `GoodError` of entry `good-entry`",
    );
}

#[test]
fn weak_signatures_of_other_entries_may_fire_on_an_example() {
    let wrapper = good_with(
        "  - \"GoodError\"",
        "  - {literal: \"LauncherFailed\", weak: true}",
    );
    let root = good_with("  - \"GoodError\"", "  - \"RootError\"")
        .replace("second", "third")
        .replace(
            "symptoms:",
            "examples:\n  - \"RootError\\nLauncherFailed\"\nsymptoms:",
        );
    let kb = kb_with(&[("second.md", &wrapper), ("third.md", &root)]);
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
