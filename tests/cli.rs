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

/// The errbook binary, with one index cache for every command these tests run (so
/// they also share it the way parallel processes would), outside the user's own cache.
///
/// The entries built into the binary are left out (`ERRBOOK_NO_BUILTIN`): each test
/// names the folder it is about. The tests of the built-in entries use
/// [`with_builtin`].
fn errbook_command() -> Command {
    static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let store = std::env::temp_dir().join(format!(
        "errbook-tests-store-{}-{}.db",
        std::process::id(),
        SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut command = Command::new(env!("CARGO_BIN_EXE_errbook"));
    command
        .env("ERRBOOK_STORE", store)
        .env(
            "ERRBOOK_INDEX_CACHE",
            std::env::temp_dir().join("errbook-tests-index-cache"),
        )
        .env("ERRBOOK_NO_BUILTIN", "1");
    command
}

/// The binary as a user runs it: the built-in entries, no folder named, from a
/// directory with no `kb` in it.
fn with_builtin(cwd: &Path) -> Command {
    let mut command = errbook_command();
    command
        .current_dir(cwd)
        .env_remove("ERRBOOK_NO_BUILTIN")
        .env_remove("ERRBOOK_KB")
        .env_remove("ERRBOOK_PUBLIC_URL");
    command
}

fn errbook(args: &[&str]) -> Output {
    errbook_command()
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

/// The Chinese body of [`GOOD`] and of the entries made from it.
const GOOD_ZH: &str =
    "## 症状\n\n文字。\n\n## 原因\n\n文字。\n\n## 解决\n\n1. 文字。\n\n## 验证\n\n文字。\n";

/// A knowledge base holding the good entry plus `files` (path, content); each entry
/// gets [`GOOD_ZH`] as its Chinese body unless `files` gives one.
fn kb_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good-entry.md"), GOOD).unwrap();
    std::fs::write(dir.path().join("good-entry.zh.md"), GOOD_ZH).unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        let zh = path.with_extension("zh.md");
        let given = files.iter().any(|(n, _)| dir.path().join(n) == zh);
        if !name.ends_with(".zh.md") && !given {
            std::fs::write(zh, GOOD_ZH).unwrap();
        }
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

/// An entry with a command in its fix, and its Chinese body as `zh` makes it.
fn with_command(zh: impl Fn(&str) -> String) -> [(String, String); 2] {
    let en = good_with(
        "1. Text.",
        "1. Run:\n\n   ```bash\n   export NCCL_DEBUG=INFO\n   ```",
    );
    let zh_body = GOOD_ZH.replace(
        "1. 文字。",
        "1. 运行：\n\n   ```bash\n   export NCCL_DEBUG=INFO\n   ```",
    );
    [
        ("second.md".to_string(), en),
        ("second.zh.md".to_string(), zh(&zh_body)),
    ]
}

fn check_reports_owned(files: &[(String, String)], file: &str, line: usize, needle: &str) {
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    check_reports(&files, file, line, needle);
}

#[test]
fn check_accepts_an_entry_whose_chinese_body_has_its_code() {
    let files = with_command(|zh| zh.to_string());
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let kb = kb_with(&files);
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("in English and Chinese (2)"), "{stdout}");
}

#[test]
fn check_requires_a_chinese_body_beside_every_entry() {
    let kb = kb_with(&[]);
    std::fs::remove_file(kb.path().join("good-entry.zh.md")).unwrap();
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let expected = format!(
        "{}: no Chinese body: write it in this file, beside `good-entry.md`, with the sections 症状, 原因, 解决, 验证",
        kb.path().join("good-entry.zh.md").display()
    );
    assert!(stderr.contains(&expected), "{stderr}");

    // A Chinese body whose entry is gone is reported too.
    let kb = kb_with(&[("gone.zh.md", GOOD_ZH)]);
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("gone.zh.md: a Chinese body without its entry"),
        "{stderr}"
    );
}

#[test]
fn check_names_the_line_of_a_command_that_differs_between_the_languages() {
    let files = with_command(|zh| zh.replace("NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN"));
    // The block starts on line 13 of the Chinese file, line 26 of the English one.
    check_reports_owned(
        &files,
        "second.zh.md",
        13,
        "code block 1 differs from the English one",
    );
    let kb = kb_with(
        &files
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_str()))
            .collect::<Vec<_>>(),
    );
    let out = errbook(&["check", "--kb", kb.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("second.md:26): its line 1 reads `export NCCL_DEBUG=WARN` where the English reads `export NCCL_DEBUG=INFO`"),
        "{stderr}"
    );

    let files = with_command(|zh| {
        zh.replace(
            "   ```bash\n   export NCCL_DEBUG=INFO\n   ```",
            "`export NCCL_DEBUG=INFO`",
        )
    });
    // The missing block belongs in the Fix, which starts on line 9.
    check_reports_owned(
        &files,
        "second.zh.md",
        9,
        "0 code blocks, and the English body has 1",
    );
}

#[test]
fn check_holds_the_chinese_sections_to_the_english_ones() {
    let files = with_command(|zh| zh.replace("## 验证", "## 检验"));
    check_reports_owned(&files, "second.zh.md", 17, "unknown section `## 检验`");
    check_reports_owned(
        &files,
        "second.zh.md",
        1,
        "missing the required section `## 验证`",
    );

    let files = with_command(|zh| format!("{zh}\n## 背景\n\n多出来的一节。\n"));
    check_reports_owned(
        &files,
        "second.zh.md",
        1,
        "the sections differ from the English body's: it has Symptom, Cause, Fix, Verify, this one 症状, 原因, 解决, 验证, 背景",
    );
}

/// A failure no entry knows, with a user, a host, an address and a key in it.
const UNKNOWN_FAILURE: &str = "\
[rank1]: Traceback (most recent call last):
[rank1]:   File \"/home/alice/proj/train.py\", line 190, in main
[rank1]:     batch = collate_shards(shards, world=8)
[rank1]:   File \"/home/alice/proj/data/shards.py\", line 57, in collate_shards
[rank1]:     raise ShardLayoutError(msg)
[rank1]: data.shards.ShardLayoutError: shard 7 of /mnt/web/part-0007.arrow has 40960 rows, index says 40961
gpu-node-17:2841:2841 [0] NCCL INFO Bootstrap : Using eth0:10.42.3.17<0>
export WANDB_API_KEY=3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f
";

#[test]
fn draft_writes_an_entry_to_finish_and_check_names_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("team");
    let run = || {
        errbook_with_stdin(
            &[
                "draft",
                "--kb",
                fixture_dir().to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "-",
            ],
            UNKNOWN_FAILURE,
        )
    };
    let written = run();
    let stdout = String::from_utf8_lossy(&written.stdout);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let entry = out.join("shard-has-rows-index-says.md");
    assert!(stdout.contains(&entry.display().to_string()), "{stdout}");
    let text = std::fs::read_to_string(&entry).unwrap();
    // The message's details become patterns; the example is the paste, redacted.
    assert!(
        text.contains(r"{regex: 'shard \d+(?:\.\d+)? of \S+ has \d+(?:\.\d+)? rows, index says \d+(?:\.\d+)?'}"),
        "{text}"
    );
    for secret in [
        "alice",
        "gpu-node-17",
        "10.42.3.17",
        "3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f",
    ] {
        assert!(!text.contains(secret), "{secret} in the draft: {text}");
    }
    assert!(text.contains("/home/<user-1>/proj/train.py"), "{text}");
    assert!(out.join("shard-has-rows-index-says.zh.md").exists());

    // A second draft never writes over the first.
    let again = run();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("a draft never replaces a file"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // `check` accepts everything but the parts still to write, and names each.
    let checked = errbook(&[
        "check",
        "--kb",
        fixture_dir().to_str().unwrap(),
        "--kb",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert!(
        errors.iter().all(|l| l.contains("left to write")),
        "only what is left to write: {stderr}"
    );
    assert!(
        stderr.contains("shard-has-rows-index-says.md:4: left to write: `title_zh`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("shard-has-rows-index-says.zh.md:15: left to write: the `## 解决` section"),
        "{stderr}"
    );

    let nothing = errbook_with_stdin(
        &["draft", "--kb", fixture_dir().to_str().unwrap(), "-"],
        "all good\n",
    );
    assert!(!nothing.status.success());
    assert!(
        String::from_utf8_lossy(&nothing.stderr)
            .contains("cannot draft an entry from standard input: no exception or error message"),
        "{}",
        String::from_utf8_lossy(&nothing.stderr)
    );
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
    let mut child = errbook_command()
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
    let child = errbook_command()
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

fn errbook_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = errbook_command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `errbook diagnose --kb KB -` on `paste`: its standard output, after it succeeded.
fn diagnose_stdin(kb: &Path, paste: &str) -> String {
    let out = errbook_with_stdin(&["diagnose", "--kb", kb.to_str().unwrap(), "-"], paste);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn diagnose_reads_a_log_from_standard_input() {
    let kb = fixture_dir();
    let log = "[rank0]: RuntimeError: Output 0 of SliceBackward0 is a view and is being modified inplace.\n";
    let text = diagnose_stdin(&kb, log);
    let heading = text.lines().next().unwrap();
    assert!(
        heading.ends_with("[view-inplace] — the answer, high confidence"),
        "the answer comes first: {text}"
    );
    assert!(
        text.contains("\nRank 0 failed first: RuntimeError: Output 0 of SliceBackward0"),
        "{text}"
    );
    let first = text.split("\nother candidates:").next().unwrap();
    assert_eq!(
        first.matches("line     1:").count(),
        1,
        "one line, listed once: {text}"
    );
    assert!(
        text.contains("line     1:"),
        "evidence with its line: {text}"
    );
}

#[test]
fn diagnose_answers_in_chinese_with_the_chinese_fix() {
    let kb = fixture_dir();
    let log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
    let out = errbook_with_stdin(
        &[
            "diagnose",
            "--kb",
            kb.to_str().unwrap(),
            "--lang",
            "zh-CN",
            "-",
        ],
        log,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let heading = text.lines().next().unwrap();
    assert!(heading.ends_with("[cuda-oom] — 答案，置信度高"), "{text}");
    assert!(
        text.contains("   解决：\n     1. batch size 减半。"),
        "{text}"
    );
    assert!(
        text.contains("完整条目：errbook show cuda-oom --lang zh-CN"),
        "{text}"
    );
    assert!(!text.contains("Halve the batch size"), "{text}");
    assert!(
        text.contains("报错：OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB。"),
        "{text}"
    );
}

#[test]
fn diagnose_reads_a_file_and_prints_json() {
    let kb = fixture_dir();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("train.log");
    // A long log: the answer is in the last line.
    let mut text = String::new();
    for step in 0..5000 {
        text.push_str(&format!(
            "step {step} loss {:.4}\n",
            1.0 / (step + 1) as f64
        ));
    }
    text.push_str("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
    std::fs::write(&log, text).unwrap();
    let out = errbook(&[
        "diagnose",
        "--kb",
        kb.to_str().unwrap(),
        "--json",
        log.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "matched");
    assert_eq!(json["matches"][0]["slug"], "cuda-oom");
    assert_eq!(json["matches"][0]["evidence"][0]["line"], 5001);
}

#[test]
fn diagnose_refuses_an_empty_paste_and_a_missing_file() {
    let kb = fixture_dir();
    let out = errbook_with_stdin(&["diagnose", "--kb", kb.to_str().unwrap()], "\n  \n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
    let out = errbook(&["diagnose", "--kb", kb.to_str().unwrap(), "/no/such.log"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such.log"));
}

#[test]
fn diagnose_refuses_a_number_of_matches_out_of_range_naming_the_file() {
    let kb = fixture_dir();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("train.log");
    std::fs::write(&log, "torch.OutOfMemoryError: CUDA out of memory.\n").unwrap();
    for limit in ["0", "21", "-3"] {
        let out = errbook(&[
            "diagnose",
            "--kb",
            kb.to_str().unwrap(),
            "--limit",
            limit,
            log.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--limit {limit} was accepted");
        assert!(
            stderr.contains("train.log") && stderr.contains("from 1 to 20"),
            "{stderr}"
        );
    }
}

#[test]
fn eval_scores_a_labelled_folder_against_the_full_text_baseline() {
    let kb = fixture_dir();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eval");
    let out = errbook(&["eval", "--kb", kb.to_str().unwrap(), dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "errbook diagnose : top-1 1.000  top-3 1.000  MRR 1.000  none->no_match 1.000 (1 of 1)"
        ),
        "{text}"
    );
    assert!(text.contains("full-text only   :"), "{text}");
    assert!(
        text.contains("none->no_match 0.000 (0 of 1)"),
        "the baseline rejects nothing: {text}"
    );
    assert!(text.contains("query-en"), "per-kind figures: {text}");
    assert!(text.contains("misses: none"), "{text}");
    assert!(
        text.contains("  matched   high       1    1  1.000"),
        "the reliability table: {text}"
    );
}

/// `errbook eval`'s output for `dir` (under the repository) against the shipped kb, and
/// its reliability table as (verdict, confidence, answers, right).
fn eval_shipped(dir: &str) -> (String, Vec<(String, String, usize, usize)>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kb = root.join("kb");
    let dir = root.join(dir);
    let out = errbook(&["eval", "--kb", kb.to_str().unwrap(), dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let table = text
        .lines()
        .skip_while(|l| !l.starts_with("reliability"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].into(),
                f[1].into(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect();
    (text, table)
}

/// The calibration targets, on the labelled tracker reports and the unrelated errors
/// kept in `eval/`: `matched` right at least 97 % of the time, unrelated errors
/// `matched` at most 3 % of the time, top-1 on the covered reports no lower than
/// when a signal exit came to outweigh a launcher box (0.869) by more than 2 points.
#[test]
fn verdicts_meet_their_calibration_targets() {
    let (trackers, tracker_table) = eval_shipped("eval/trackers");
    let (negative, negative_table) = eval_shipped("eval/negative");
    let matched = |table: &[(String, String, usize, usize)]| -> (usize, usize) {
        table
            .iter()
            .filter(|row| row.0 == "matched")
            .fold((0, 0), |(n, r), row| (n + row.2, r + row.3))
    };
    let (n, right) = matched(&tracker_table);
    assert!(n >= 10 && right as f64 >= 0.97 * n as f64, "{trackers}");
    let (wrongly_matched, _) = matched(&negative_table);
    let cases: usize = negative_table.iter().map(|row| row.2).sum();
    assert!(cases >= 80, "{negative}");
    assert!(wrongly_matched as f64 <= 0.03 * cases as f64, "{negative}");
    let ours = trackers
        .lines()
        .find(|l| l.starts_with("errbook diagnose"))
        .unwrap();
    let top1: f64 = ours
        .split("top-1")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(top1 >= 0.849, "{trackers}");
}

/// The bar from the diagnosis issue, on the labelled real pastes shipped beside the
/// repository (skipped where they are not present).
#[test]
fn dev_set_meets_the_bar() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval/dev");
    if !dir.join("manifest.tsv").exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} is missing; under CI=true the dev-set bar does not skip",
            dir.display()
        );
        eprintln!("skipped: {} not present", dir.display());
        return;
    }
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let out = errbook(&["eval", "--kb", kb.to_str().unwrap(), dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let ours = text
        .lines()
        .find(|l| l.starts_with("errbook diagnose"))
        .unwrap();
    let figure = |name: &str| -> f64 {
        let rest = ours.split(name).nth(1).unwrap().trim_start();
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(figure("top-1") >= 0.93, "{text}");
    assert!(figure("none->no_match") >= 1.0, "{text}");
}

/// Writes a test's input.
type Feed<'a> = &'a dyn Fn(&mut dyn Write);

/// Peak memory, in MB, of `errbook diagnose` reading what `feed` writes to its input,
/// or, when `feed` is `None`, `file` for `seconds` before it is stopped.
///
/// Read from the child's own `VmHWM` while it runs, not from `wait4`'s `ru_maxrss`:
/// a child spawned with `vfork` and `exec` counts the test process's peak as its own,
/// so another test holding memory at that moment would be blamed on errbook.
#[cfg(target_os = "linux")]
fn diagnose_peak_mb(file: &str, feed: Option<Feed<'_>>, seconds: u64) -> f64 {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let mut child = errbook_command()
        .args(["diagnose", "--kb", fixture_dir().to_str().unwrap(), file])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let peak_kb = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (peak_kb, done) = (peak_kb.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                });
                if let Some(kb) = hwm {
                    peak_kb.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let mut stdin = child.stdin.take().unwrap();
    if let Some(feed) = feed {
        feed(&mut stdin);
    }
    drop(stdin);
    if feed.is_none() {
        std::thread::sleep(Duration::from_secs(seconds));
        let _ = child.kill();
    }
    child.wait().unwrap();
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let peak = peak_kb.load(Ordering::Relaxed);
    assert!(peak > 0, "never read the child's memory");
    peak as f64 / 1024.0
}

#[cfg(target_os = "linux")]
#[test]
fn diagnose_reads_endless_lines_in_bounded_memory() {
    // Regression: a line was read whole before it was cut, so a log redrawn with `\r`
    // peaked at 538 MB for 300 MB and `diagnose /dev/zero` grew until it was killed.
    let no_break = diagnose_peak_mb(
        "-",
        Some(&|input| {
            let block = vec![b'0'; 1 << 20];
            for _ in 0..256 {
                input.write_all(&block).unwrap();
            }
        }),
        0,
    );
    assert!(
        no_break < 150.0,
        "256 MB without a line break: {no_break} MB"
    );
    let redrawn = diagnose_peak_mb(
        "-",
        Some(&|input| {
            for step in 0..200_000u32 {
                let percent = step % 100;
                write!(
                    input,
                    "\rEpoch 1: {percent:3}%|{:<10}| {step}/200000",
                    "#".repeat((percent / 10) as usize)
                )
                .unwrap();
            }
            input.write_all(b"\nRuntimeError: boom\n").unwrap();
        }),
        0,
    );
    assert!(
        redrawn < 150.0,
        "a progress bar redrawn 200,000 times: {redrawn} MB"
    );
    let zeros = diagnose_peak_mb("/dev/zero", None, 3);
    assert!(zeros < 150.0, "3 s of /dev/zero: {zeros} MB");
}

#[test]
fn check_requires_an_example_that_selects_each_branch() {
    let branched = GOOD.replace("slug: good-entry", "slug: branched").replace(
        "symptoms:\n  - \"nothing wrong\"\n",
        "symptoms:\n  - \"nothing wrong\"\nexamples:\n  - \"GoodError: disk full on /data\"\n\
         branches:\n  - id: disk\n    title: Disk\n    title_zh: 磁盘\n    when: [\"disk full\"]\n    \
         fix: x\n    fix_zh: x\n  - id: network\n    title: Network\n    title_zh: 网络\n    \
         when: [\"connection refused\"]\n    fix: x\n    fix_zh: x\n",
    );
    let dir = kb_with(&[("branched.md", &branched)]);
    let out = errbook(&["check", "--kb", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("branched.md:21: branch `network`: no example selects it"),
        "{stderr}"
    );
    assert!(!stderr.contains("branch `disk`"), "{stderr}");
}

/// A reader that goes away early (`| head -1`, `| head -c 300`) ends the command
/// quietly with status 0, as it would other Unix tools, never by a panic (exit 101).
#[test]
fn diagnose_ends_quietly_when_its_reader_goes_away() {
    let log: String = (0..2000)
        .map(|i| {
            format!(
                "[rank{}]: RuntimeError: NCCL error in: x.cpp:{i}, unhandled system error\n",
                i % 8
            )
        })
        .collect();
    let path = std::env::temp_dir().join(format!("errbook-pipe-{}.log", std::process::id()));
    std::fs::write(&path, log).unwrap();
    for (n, json) in [false, true, false, true, false, true]
        .into_iter()
        .enumerate()
    {
        let mut child = errbook_command()
            .args(["diagnose", "--kb", fixture_dir().to_str().unwrap()])
            .args(json.then_some("--json"))
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        if n % 3 != 2 {
            // `head -c 10`: a little of the answer read, then the pipe closed.
            let mut first = [0u8; 10];
            stdout.read_exact(&mut first).unwrap();
        }
        // Otherwise closed before errbook has loaded its knowledge base.
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.status.success(), "{:?}: {stderr}", out.status);
    }
    std::fs::remove_file(&path).ok();
}

/// An answer whose entry has several causes, none of which the paste selects, lists them
/// before the fix instead of leading with one.
#[test]
fn an_answer_that_cannot_tell_the_cause_lists_the_causes() {
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let log = "  File \"/usr/lib/python3/site-packages/torch/distributed/rendezvous.py\", line 95, in _tcp_rendezvous_handler\n    store = TCPStore(result.hostname, result.port, start_daemon)\nRuntimeError: Address already in use\n";
    let text = diagnose_stdin(&kb, log);
    assert!(
        text.contains("[master-port-address-in-use] — the answer"),
        "{text}"
    );
    let causes = text
        .split("the paste does not say which of these causes it is:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        causes.contains("- The port the store listens on is held by another process"),
        "{text}"
    );
    assert!(
        causes.find("- ").unwrap() < causes.find("fix:").unwrap(),
        "{text}"
    );
}

#[test]
fn diagnose_lists_a_questions_entries_without_asserting_a_cause() {
    let question =
        "Multi-GPU training with DDP hangs at startup, how do I find where it is stuck?\n";
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let text = diagnose_stdin(&kb, question);
    assert!(
        text.starts_with("no error in this paste to diagnose"),
        "{text}"
    );
    let leads: Vec<&str> = text.lines().filter(|l| l.starts_with("  - ")).collect();
    assert!(!leads.is_empty(), "the entries about it are listed: {text}");
    assert!(
        text.lines()
            .all(|l| l.starts_with("  - ") || !l.starts_with("  ")),
        "titles only, no entry's summary read as the answer: {text}"
    );
}

/// A candidate errbook is not sure of, with no cause the paste selects: its generic fix
/// is not printed as if it were the answer (such candidates were right less than half
/// the time), only its causes and where to read it.
#[test]
fn diagnose_prints_no_generic_fix_for_a_candidate_it_is_not_sure_of() {
    let paste = "Traceback (most recent call last):\n  File \"/home/u/run.py\", line 40, in <module>\n    mp.spawn(worker, args=(2,), nprocs=2, join=True)\n  File \"/usr/lib/python3.10/site-packages/torch/multiprocessing/spawn.py\", line 158, in join\n    raise ProcessRaisedException(msg, error_index, failed_process.pid)\ntorch.multiprocessing.spawn.ProcessRaisedException:\n\n-- Process 0 terminated with the following error:\nTraceback (most recent call last):\n  File \"/usr/lib/python3.10/site-packages/torch/multiprocessing/spawn.py\", line 69, in _wrap\n    fn(i, *args)\n  File \"/home/u/run.py\", line 22, in worker\n    dist.all_gather_object(out, obj)\nRuntimeError: the spawned worker failed\n";
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("kb");
    let text = diagnose_stdin(&kb, paste);
    assert!(
        text.starts_with("errbook is not sure; the closest candidate:"),
        "{text}"
    );
    assert!(text.contains("— medium confidence"), "{text}");
    assert!(!text.contains("\n   fix:"), "no generic fix: {text}");
    assert!(!text.contains("most likely:"), "no cause selected: {text}");
    assert!(
        text.contains("check its lines against yours before you follow its fix"),
        "{text}"
    );
    assert!(text.contains("errbook show "), "{text}");
}

const OOM_PASTE: &str = "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free.\n";

fn run_with_stdin(mut command: Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// The README's headline, `torchrun ... | errbook diagnose -`, from a training
/// directory with no knowledge base folder in it: the built-in entries answer, and the
/// answer says how to read the whole entry.
#[test]
fn the_built_in_entries_answer_from_any_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let mut command = with_builtin(cwd.path());
    command.args(["diagnose", "-"]);
    let out = run_with_stdin(command, OOM_PASTE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .contains("[cuda-out-of-memory]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("errbook show cuda-out-of-memory"),
        "{stdout}"
    );

    let out = with_builtin(cwd.path())
        .args(["show", "cuda-out-of-memory"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for section in ["## Cause", "## Fix", "## Verify"] {
        assert!(stdout.contains(section), "{section} missing: {stdout}");
    }
}

/// A team's folder adds its entries to the built-in ones; an entry with a built-in
/// entry's slug replaces it, and `check` says so.
#[test]
fn a_team_folder_adds_entries_and_replaces_a_built_in_one() {
    let team = kb_with(&[(
        "cuda-out-of-memory.md",
        &GOOD
            .replace("good-entry", "cuda-out-of-memory")
            .replace("A good entry", "Our own OOM advice")
            .replace("GoodError", "OurClusterOOMError"),
    )]);
    let cwd = tempfile::tempdir().unwrap();
    let team_dir = team.path().to_str().unwrap();

    let out = with_builtin(cwd.path())
        .args(["show", "--kb", team_dir, "cuda-out-of-memory"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Our own OOM advice"), "{stdout}");

    let mut command = with_builtin(cwd.path());
    command.env("ERRBOOK_KB", team_dir).args(["diagnose", "-"]);
    let out = run_with_stdin(
        command,
        "Traceback (most recent call last):\nGoodError: boom\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[good-entry]"), "{stdout}");

    let out = with_builtin(cwd.path())
        .args(["search", "--kb", team_dir, "NCCL watchdog timeout"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("[nccl-watchdog-timeout]"),
        "built-in entries stay: {stdout}"
    );

    let out = with_builtin(cwd.path())
        .args(["check", "--kb", team_dir])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cuda-out-of-memory.md replaces the built-in entry `cuda-out-of-memory`"),
        "{stderr}"
    );
}

/// A team may start from its own empty folder.
#[test]
fn an_empty_team_folder_is_a_knowledge_base() {
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    let out = errbook(&["check", "--kb", dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 entries, all valid"));
    let out = errbook_with_stdin(&["diagnose", "--kb", dir, "--json", "-"], OOM_PASTE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "no_match");
}

/// A folder or a log file that is not there is one line naming it, and for a folder
/// how to name another.
#[test]
fn missing_folders_and_files_are_named_in_one_line() {
    let out = errbook(&["check", "--kb", "/nonexistent/kb"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/nonexistent/kb")
            && stderr.contains("--kb")
            && stderr.contains("ERRBOOK_KB"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");

    let out = errbook(&["diagnose", "--kb", "/nonexistent/kb", "/no/such.log"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/no/such.log"),
        "the log is the problem: {stderr}"
    );

    let out = errbook(&["search", "nccl"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--no-builtin") && stderr.contains("--kb"),
        "{stderr}"
    );
}

#[test]
fn show_prints_an_entry_and_suggests_one_it_does_not_know() {
    let kb = fixture_dir();
    let kb = kb.to_str().unwrap();
    let out = errbook(&["show", "--kb", kb, "watchdog-timeout"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout
            .starts_with("NCCL watchdog timeout: a collective never finished  [watchdog-timeout]"),
        "{stdout}"
    );
    assert!(stdout.contains("## Fix"), "{stdout}");

    let out = errbook(&["show", "--kb", kb, "--lang", "zh-CN", "watchdog-timeout"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("NCCL watchdog 超时：集合通信卡住"),
        "{stdout}"
    );
    assert!(
        stdout.contains("## 解决\n\n1. 设置 `NCCL_DEBUG=INFO`，找出落后的那个 rank。"),
        "the Chinese body: {stdout}"
    );
    assert!(!stdout.contains("## Fix"), "{stdout}");

    let out = errbook(&["show", "--kb", kb, "--lang", "fr", "watchdog-timeout"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("`fr` is not `en` or `zh-CN`"), "{stderr}");

    let out = errbook(&[
        "show",
        "--kb",
        kb,
        "--public-url",
        "https://errbook.example.com/",
        "watchdog-timeout",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("https://errbook.example.com/entries/watchdog-timeout"),
        "{stdout}"
    );

    let out = errbook(&["show", "--kb", kb, "watchdog"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no entry `watchdog`") && stderr.contains("watchdog-timeout"),
        "{stderr}"
    );
}

/// `diagnose --json` prints what `POST /api/v1/diagnose` answers, and the text answer
/// links the entry page on the team's server.
#[tokio::test]
async fn diagnose_json_is_the_apis_json() {
    let paste = "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5213, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n";
    let kb = fixture_dir();
    let out = errbook_with_stdin(
        &["diagnose", "--kb", kb.to_str().unwrap(), "--json", "-"],
        paste,
    );
    assert!(out.status.success());
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let body = serde_json::json!({ "text": paste }).to_string();
    let api = common::send(
        axum::http::Request::post("/api/v1/diagnose")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap(),
    )
    .await
    .json();
    assert_eq!(cli["verdict"], "matched");
    assert_eq!(cli, api);

    let out = errbook_with_stdin(
        &[
            "diagnose",
            "--kb",
            kb.to_str().unwrap(),
            "--public-url",
            "https://errbook.example.com",
            "-",
        ],
        paste,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("https://errbook.example.com/entries/watchdog-timeout"),
        "{stdout}"
    );
}
