//! `errbook run -- CMD`: real jobs as child processes. Their output passes through byte
//! for byte, errbook exits with their status, passes a stop on to them, and diagnoses
//! those that fail.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::fixture_dir;

/// The errbook binary over the fixture entries alone, with the tests' index cache.
fn errbook_run() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_errbook"));
    command
        .env(
            "ERRBOOK_INDEX_CACHE",
            std::env::temp_dir().join("errbook-tests-index-cache"),
        )
        .env("ERRBOOK_NO_BUILTIN", "1")
        .env("ERRBOOK_KB", fixture_dir())
        .env_remove("ERRBOOK_PUBLIC_URL")
        .arg("run");
    command
}

/// A job script in a fresh folder, run as `sh SCRIPT`.
struct Job {
    dir: tempfile::TempDir,
}

impl Job {
    fn new(script: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("job.sh"), script).unwrap();
        Job { dir }
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("job.sh")
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

fn run(args: &[&str], job: &Path) -> Output {
    errbook_run()
        .args(args)
        .arg("--")
        .arg("sh")
        .arg(job)
        .output()
        .expect("errbook runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the fixture job prints on standard output: a line ended by `\r\n`, a byte that
/// is not UTF-8, and a last line without its end.
const JOB_STDOUT: &[u8] = b"epoch 0 step 10 loss 2.31\r\nsample \xff\xfe id 7\nlast words";

/// What it prints on standard error: two ranks' tracebacks as torchrun shows them.
const JOB_STDERR: &str = "\
W0612 14:03:11.482000 139921 torch/distributed/run.py:779] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/home/lee/proj/train.py\", line 41, in <module>
[rank0]:     model = DDP(model, device_ids=[local_rank])
[rank1]: Traceback (most recent call last):
[rank0]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3
[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank1]:   File \"/home/lee/proj/train.py\", line 41, in <module>
[rank1]:     model = DDP(model, device_ids=[local_rank])
[rank1]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
E0612 14:07:53.371000 139921 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 4123) of binary: /usr/bin/python3
";

/// A torchrun-style job: its output, then exit 1.
fn failing_job() -> Job {
    let job =
        Job::new("cat \"$(dirname \"$0\")/out\"\ncat \"$(dirname \"$0\")/err\" >&2\nexit 1\n");
    job.file("out", JOB_STDOUT);
    job.file("err", JOB_STDERR.as_bytes());
    job
}

/// The diagnosis errbook printed after the job's standard error.
fn diagnosis(stderr: &[u8]) -> String {
    let stderr = text(stderr);
    let at = stderr
        .find("\nerrbook: the job")
        .unwrap_or_else(|| panic!("no diagnosis in {stderr}"));
    stderr[at..].to_string()
}

#[test]
fn a_failing_job_is_diagnosed_in_chinese_when_asked() {
    let job = failing_job();
    let out = run(&["--lang", "zh-CN"], &job.script());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = diagnosis(&out.stderr);
    assert!(
        report.contains("[nccl-invalid-usage] — 答案，置信度高"),
        "{report}"
    );
    assert!(
        report.contains("包装之前先用 `model.to(local_rank)` 把模型移过去。"),
        "the Chinese fix: {report}"
    );
    assert!(
        report.contains("完整条目：errbook show nccl-invalid-usage --lang zh-CN"),
        "{report}"
    );
}

#[test]
fn a_failing_job_passes_its_output_through_and_is_diagnosed() {
    let job = failing_job();
    let out = run(&[], &job.script());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // Standard output as the job wrote it, byte for byte, and nothing else.
    assert_eq!(out.stdout, JOB_STDOUT);
    // Standard error: the job's, unchanged, then the diagnosis.
    assert!(
        out.stderr.starts_with(JOB_STDERR.as_bytes()),
        "{}",
        text(&out.stderr)
    );
    let report = diagnosis(&out.stderr);
    assert_eq!(
        text(&out.stderr[JOB_STDERR.len()..]),
        report,
        "the diagnosis follows the job's own lines"
    );
    let lines: Vec<&str> = report.trim().lines().collect();
    assert_eq!(lines[0], "errbook: the job failed (exit 1); diagnosis:");
    assert!(
        lines[1].contains("[nccl-invalid-usage] — the answer, high confidence"),
        "{report}"
    );
    // The first steps of the fix, and where the rest is.
    assert!(
        report.contains("torch.cuda.set_device(local_rank)"),
        "{report}"
    );
    assert!(
        report.contains("errbook show nccl-invalid-usage"),
        "{report}"
    );
    assert!(
        (6..=25).contains(&lines.len()),
        "{} lines: {report}",
        lines.len()
    );
}

#[test]
fn with_a_server_the_diagnosis_ends_with_its_share_link() {
    let job = failing_job();
    let out = run(&["--server", "https://errbook.example.com/"], &job.script());
    assert_eq!(out.status.code(), Some(1));
    let report = diagnosis(&out.stderr);
    let link = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("the whole answer: "))
        .unwrap_or_else(|| panic!("no link in {report}"));
    let packed = link
        .strip_prefix("https://errbook.example.com/diagnose?p=")
        .unwrap_or_else(|| panic!("not a share link: {link}"));
    let paste = errbook::web::share::decode(packed).unwrap();
    // The lines the answer rests on travel in the link, with their ranks.
    assert!(
        paste.contains("[rank0]: ncclInvalidUsage: This usually reflects"),
        "{paste}"
    );
    assert!(
        paste.contains("ProcessGroupNCCL.cpp:1191, invalid usage"),
        "{paste}"
    );
    assert!(!report.contains("errbook show"), "{report}");
}

#[test]
fn a_long_failing_log_shares_a_link_of_bounded_size_with_the_error_in_it() {
    // 30,000 lines of training, the traceback, then 2,000 more lines of shutdown; in
    // hex, so that most lines differ beyond their numbers and the paste is far larger
    // than a link holds.
    let job = Job::new(
        "i=0; while [ $i -lt 30000 ]; do printf 'step %x loss %x\\n' $i $((i*7)); i=$((i+1)); done\n\
         cat \"$(dirname \"$0\")/err\" >&2\n\
         i=0; while [ $i -lt 2000 ]; do printf '[rank1]: shutting down %x\\n' $((i*13)); i=$((i+1)); done\n\
         exit 1\n",
    );
    job.file("err", JOB_STDERR.as_bytes());
    let out = run(&["--server", "http://errbook.internal:8080"], &job.script());
    assert_eq!(out.status.code(), Some(1));
    let report = diagnosis(&out.stderr);
    assert!(report.contains("[nccl-invalid-usage]"), "{report}");
    let link = (report.lines())
        .find_map(|l| l.trim().strip_prefix("the whole answer: "))
        .unwrap();
    assert!(link.len() < 12_100, "{} characters", link.len());
    let packed = link.split_once("?p=").unwrap().1;
    let paste = errbook::web::share::decode(packed).unwrap();
    let kept = paste.lines().count();
    assert!((100..20_000).contains(&kept), "condensed to {kept} lines");
    assert!(paste.contains("ncclInvalidUsage"), "{paste}");
    assert!(paste.contains("invalid usage, NCCL version"), "{paste}");
}

#[test]
fn the_builtin_entries_diagnose_a_multi_rank_out_of_memory() {
    let job = Job::new(
        "echo 'epoch 0 step 1 loss 2.3'\n\
         for r in 0 1; do\n\
         echo \"[rank$r]: Traceback (most recent call last):\" >&2\n\
         echo \"[rank$r]:   File \\\"/home/lee/proj/train_ddp.py\\\", line 187, in main\" >&2\n\
         echo \"[rank$r]:     loss.backward()\" >&2\n\
         echo \"[rank$r]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 768.00 MiB. GPU $r has a total capacity of 23.65 GiB of which 412.56 MiB is free.\" >&2\n\
         done\n\
         exit 1\n",
    );
    let out = errbook_run()
        .env_remove("ERRBOOK_NO_BUILTIN")
        .env_remove("ERRBOOK_KB")
        .args(["--", "sh"])
        .arg(job.script())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "epoch 0 step 1 loss 2.3\n");
    let report = diagnosis(&out.stderr);
    assert!(report.contains("[cuda-out-of-memory]"), "{report}");
    assert!(
        report.contains("errbook show cuda-out-of-memory"),
        "{report}"
    );
    assert!(report.lines().count() <= 26, "{report}");
}

#[test]
fn a_job_killed_by_a_signal_exits_as_a_shell_reports_it() {
    for (signal, status, name) in [("KILL", 137, "SIGKILL"), ("TERM", 143, "SIGTERM")] {
        let job = Job::new(&format!("echo started\nkill -{signal} $$\nsleep 5\n"));
        let out = run(&[], &job.script());
        assert_eq!(out.status.code(), Some(status), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "started\n");
        let report = diagnosis(&out.stderr);
        assert!(
            report.starts_with(&format!(
                "\nerrbook: the job was killed by {name} (signal {}, exit {status}); diagnosis:\n",
                status - 128
            )),
            "{report}"
        );
        // The job printed nothing about it; the diagnosis still reads the signal.
        assert!(
            report.contains(&format!("Exit code {status} ({name})")),
            "{report}"
        );
    }
}

#[test]
fn a_succeeding_job_passes_every_byte_and_says_nothing() {
    // 100 MB of 100-byte lines: the debug build copies and windows them in a few
    // seconds; BENCHMARKS.md has the release build's 1 GB figure.
    let bytes: u64 = 100 << 20;
    let line = "a".repeat(99);
    let mut child = errbook_run()
        .args(["--", "sh", "-c"])
        .arg(format!("yes {line} | head -c {bytes}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let (mut count, mut lines, mut other) = (0u64, 0u64, 0u64);
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        count += n as u64;
        for &b in &buf[..n] {
            match b {
                b'\n' => lines += 1,
                b'a' => {}
                _ => other += 1,
            }
        }
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    eprintln!("{bytes} bytes through errbook in {:?}", started.elapsed());
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(count, bytes);
    assert_eq!(lines, bytes / 100);
    assert_eq!(other, 0);
    assert_eq!(stderr, "", "a job that succeeds gets no diagnosis");
}

#[test]
fn each_line_shows_as_soon_as_the_job_prints_it() {
    let mut child = errbook_run()
        .args([
            "--",
            "sh",
            "-c",
            "echo first; echo err-first >&2; sleep 5; echo second",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "first\n");
    line.clear();
    err.read_line(&mut line).unwrap();
    assert_eq!(line, "err-first\n");
    let shown = started.elapsed();
    // Well before the job ends.
    assert!(
        shown < Duration::from_secs(4),
        "the first lines took {shown:?}"
    );
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "second\n");
    assert!(child.wait().unwrap().success());
}

/// Reads `child`'s standard output until a line is `wanted`.
fn wait_for_line(out: &mut impl BufRead, wanted: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no `{wanted}` line");
        if line.trim_end() == wanted {
            return;
        }
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on the process these tests started and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
}

#[test]
fn sigterm_to_errbook_reaches_the_job_and_its_status_wins() {
    let job = Job::new(
        "trap 'echo \"job: stopping cleanly\"; exit 42' TERM\n\
         echo ready\n\
         while :; do sleep 0.05; done\n",
    );
    let mut child = errbook_run()
        .args(["--", "sh"])
        .arg(job.script())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_line(&mut out, "ready");
    signal(&child, libc::SIGTERM);
    wait_for_line(&mut out, "job: stopping cleanly");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(42), "the job's own status");
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    assert!(
        text(&stderr).contains("errbook: the job failed (exit 42)"),
        "{}",
        text(&stderr)
    );
}

#[test]
fn a_signal_to_the_whole_group_leaves_errbook_waiting_for_the_job() {
    // As a scheduler stops a job step: errbook and the job get SIGINT together. errbook
    // outlives the job's cleanup and reports its status.
    let job = Job::new(
        "trap 'sleep 0.3; echo \"job: cleaned up\"; exit 130' INT\n\
         echo ready\n\
         while :; do sleep 0.05; done\n",
    );
    let mut command = errbook_run();
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .args(["--", "sh"])
        .arg(job.script())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_line(&mut out, "ready");
    // SAFETY: the group this test made for the child.
    assert_eq!(
        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGINT) },
        0
    );
    wait_for_line(&mut out, "job: cleaned up");
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

#[test]
fn ctrl_c_at_a_terminal_stops_the_job_and_errbook_reports_it() {
    // A real terminal (Python's pty): Ctrl-C reaches errbook and the job, errbook waits
    // for the job's cleanup, then reports with the job's status.
    let python = ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("-c")
            .arg("import pty")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 is missing; under CI=true the terminal test does not skip"
        );
        eprintln!("skipped: no python3 with pty");
        return;
    };
    let job = Job::new(
        "trap 'sleep 0.3; echo \"job: interrupted, cleaned up\"; exit 130' INT\n\
         echo ready\n\
         while :; do sleep 0.05; done\n",
    );
    let driver = r#"
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
deadline = time.time() + 60
sent = False
while time.time() < deadline:
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    if not sent and b"ready" in out:
        os.write(fd, b"\x03")
        sent = True
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
print("\nSTATUS", os.waitstatus_to_exitcode(status))
"#;
    let output = Command::new(python)
        .args([
            "-c",
            driver,
            env!("CARGO_BIN_EXE_errbook"),
            "run",
            "--",
            "sh",
        ])
        .arg(job.script())
        .env(
            "ERRBOOK_INDEX_CACHE",
            std::env::temp_dir().join("errbook-tests-index-cache"),
        )
        .env("ERRBOOK_NO_BUILTIN", "1")
        .env("ERRBOOK_KB", fixture_dir())
        .output()
        .unwrap();
    let screen = text(&output.stdout);
    assert!(screen.contains("job: interrupted, cleaned up"), "{screen}");
    assert!(
        screen.contains("errbook: the job failed (exit 130)"),
        "{screen}"
    );
    assert!(screen.trim_end().ends_with("STATUS 130"), "{screen}");
}

#[test]
fn a_signal_ignored_before_errbook_stays_ignored_for_the_job() {
    // `nohup errbook run -- job`: a hang-up the job would ignore without errbook, it
    // ignores with errbook.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' HUP; exec \"$0\" run -- sh -c 'kill -HUP $$; echo alive'")
        .arg(env!("CARGO_BIN_EXE_errbook"))
        .env("ERRBOOK_NO_BUILTIN", "1")
        .env("ERRBOOK_KB", fixture_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "alive\n");
}

#[test]
fn a_command_that_cannot_start_is_one_line_and_a_shells_status() {
    let out = errbook_run()
        .args(["--", "no-such-training-command", "--epochs", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        text(&out.stderr),
        "errbook: cannot run `no-such-training-command`: command not found\n"
    );
    let job = Job::new("echo hi\n");
    let out = errbook_run().arg("--").arg(job.script()).output().unwrap();
    assert_eq!(out.status.code(), Some(126), "not executable");
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn when_the_diagnosis_fails_the_jobs_status_still_wins() {
    let job = Job::new("echo 'RuntimeError: boom' >&2\nexit 3\n");
    let out = errbook_run()
        .env("ERRBOOK_KB", "/nonexistent/errbook-kb")
        .args(["--", "sh"])
        .arg(job.script())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    let report = stderr.strip_prefix("RuntimeError: boom\n").unwrap();
    assert_eq!(report.trim().lines().count(), 1, "{report}");
    assert!(
        report.starts_with("\nerrbook: the job failed (exit 3); no diagnosis: "),
        "{report}"
    );
    // A bad server URL is refused before the job starts.
    let out = run(&["--server", "errbook.example.com"], &job.script());
    assert_eq!(out.status.code(), Some(1));
    assert!(!text(&out.stderr).contains("boom"), "{}", text(&out.stderr));
}
