//! `errbook run -- CMD ARGS...`: runs a training job with its output passed through as
//! it comes, and diagnoses what it printed when it fails.
//!
//! The job's standard output and error come through pipes, each copied by a thread to
//! errbook's own (the same bytes, written as soon as they are read) and cut into lines
//! for the paste, which keeps a bounded window of them (`PasteBuilder`: the start, the
//! error lines and each rank's traceback, the end). Nothing else happens until the job
//! ends: a job that succeeds costs a copy of its output, and the knowledge base is
//! loaded only for one that failed.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{ErrorKind, IsTerminal, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context;
use errbook::diagnose::{
    Diagnoser, Diagnosis, LineSplitter, Match, Paste, PasteBuilder, Request, Verdict, clip,
};
use errbook::kb::{Branch, Entry, Kb, Lang, LoadError, Section};

use crate::KbArg;

/// The job's process id while it runs; 0 before it starts, [`JOB_ENDED`] once it ended.
static JOB: AtomicI32 = AtomicI32::new(0);
const JOB_ENDED: i32 = -1;
/// Signals that came before the job started, by number, to send it once it has.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The status errbook exits with, once the job ended; -1 before.
static EXIT: AtomicI32 = AtomicI32::new(-1);

/// Signals passed on to the job. Without a handler each would end errbook and leave
/// the job writing into closed pipes: Ctrl-C, Ctrl-\ and a closed terminal, a
/// scheduler's or container runtime's stop, and the `USR1`/`USR2` that Slurm's
/// `--signal` sends before a time limit.
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// How long, once the job ended, its output may still take to arrive: a process it
/// left behind can hold the pipes open, and the job's own status should not wait
/// for it.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// Bytes the job's pipes hold, and read from one at a time: when the job writes
/// faster than errbook copies, each wake-up takes more at once (the default, 64 KiB,
/// made the copy cost as much again as the job's own writes).
const CHUNK: usize = 1 << 20;
/// Lines of the fix printed under the answer; the rest is one `errbook show` away.
const FIX_LINES: usize = 8;
/// Matches diagnosed: the answer and the other candidates named on one line.
const MATCHES: i64 = 3;

/// Runs `command`, passing its output through, and diagnoses it if it fails; exits
/// with the job's status. `server` is the team's errbook, whose share link ends the
/// diagnosis.
pub(crate) fn run(
    kb_arg: &KbArg,
    server: Option<&str>,
    lang: Lang,
    command: &[OsString],
) -> anyhow::Result<ExitCode> {
    // A bad URL is refused before the job starts, not after it ran for hours.
    let base = server.map(crate::server_base).transpose()?;
    let (program, args) = command
        .split_first()
        .context("no command to run: errbook run -- CMD ARGS...")?;
    forward_signals()?;
    let mut job = Command::new(program);
    job.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Python buffers a pipe's output in blocks but a terminal's by line: at a terminal,
    // the job prints each line as it would without errbook.
    if std::io::stdout().is_terminal() && std::env::var_os("PYTHONUNBUFFERED").is_none() {
        job.env("PYTHONUNBUFFERED", "1");
    }
    let mut child = match job.spawn() {
        Ok(child) => child,
        Err(err) => {
            let name = program.to_string_lossy();
            // As a shell says it: 127 for a command that is not there, 126 for one
            // that cannot run.
            let (why, code) = match err.kind() {
                ErrorKind::NotFound => ("command not found".to_string(), 127),
                ErrorKind::PermissionDenied => ("permission denied".to_string(), 126),
                _ => (err.to_string(), 126),
            };
            eprintln!("errbook: cannot run `{name}`: {why}");
            return Ok(ExitCode::from(code));
        }
    };
    let pid = child.id() as libc::pid_t;
    JOB.store(pid, Ordering::SeqCst);
    send_pending(pid);

    let window = Arc::new(Mutex::new(PasteBuilder::default()));
    let output_closed = Arc::new(AtomicBool::new(false));
    let (done, drained) = mpsc::channel();
    let streams = [
        (
            child.stdout.take().map(OwnedFd::from),
            std::io::stdout().as_fd().try_clone_to_owned(),
        ),
        (
            child.stderr.take().map(OwnedFd::from),
            std::io::stderr().as_fd().try_clone_to_owned(),
        ),
    ];
    for (from, to) in streams {
        let Some(from) = from else { continue };
        // Best effort: a system that caps pipes lower keeps its default.
        // SAFETY: fcntl on a descriptor this function owns.
        unsafe { libc::fcntl(from.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
        let pump = Pump {
            from: File::from(from),
            to: to.ok().map(File::from),
            window: window.clone(),
            closed: output_closed.clone(),
        };
        let done = done.clone();
        std::thread::Builder::new()
            .name("errbook-pump".into())
            .spawn(move || {
                pump.run();
                let _ = done.send(());
            })
            .context("starting a thread to copy the job's output")?;
    }
    drop(done);

    let status = wait_for(pid, &mut child)?;
    let code = exit_code(status);
    EXIT.store(code.into(), Ordering::SeqCst);
    let deadline = Instant::now() + DRAIN_GRACE;
    while drained
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .is_ok()
    {}
    if status.success() {
        return Ok(ExitCode::SUCCESS);
    }
    // `errbook run -- job | head`: the reader left, the job died writing to it, as it
    // would without errbook, and nobody asked about it.
    if status.signal() == Some(libc::SIGPIPE) && output_closed.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(code));
    }
    let paste = std::mem::take(&mut *window.lock().unwrap_or_else(PoisonError::into_inner));
    let mut report = format!("\nerrbook: the job {}; diagnosis:\n", ended(status));
    match diagnose(kb_arg, paste.finish(), status, base, lang) {
        Ok(summary) => report.push_str(&summary),
        Err(err) => {
            report = format!(
                "\nerrbook: the job {}; no diagnosis: {err:#}\n",
                ended(status)
            );
        }
    }
    // The job's status is the answer: a diagnosis nobody can read changes nothing.
    let _ = std::io::stderr().lock().write_all(report.as_bytes());
    Ok(ExitCode::from(code))
}

/// One of the job's streams, copied to errbook's own and into the paste's window.
struct Pump {
    from: File,
    /// errbook's own stream (a duplicate of its descriptor, so writes are not
    /// buffered); `None` when it is closed.
    to: Option<File>,
    window: Arc<Mutex<PasteBuilder>>,
    /// Set when writing to errbook's stream failed.
    closed: Arc<AtomicBool>,
}

impl Pump {
    fn run(mut self) {
        let mut buf = vec![0; CHUNK];
        let mut lines = LineSplitter::default();
        loop {
            let n = match self.from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let chunk = &buf[..n];
            // A reader that went away (`| head`) or a closed terminal: stop reading, so
            // that the job's next write fails as it would have without errbook.
            let written = self.to.as_mut().map(|to| to.write_all(chunk));
            if !matches!(written, Some(Ok(()))) {
                self.closed.store(true, Ordering::SeqCst);
                return;
            }
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            window.feed(&mut lines, chunk);
        }
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        lines.finish(|line| window.push(line));
    }
}

/// Waits for the job to end, then stops forwarding signals to its process id before
/// reaping it (a reaped id can be another process's), and reaps it.
fn wait_for(pid: libc::pid_t, child: &mut std::process::Child) -> anyhow::Result<ExitStatus> {
    loop {
        // SAFETY: a zeroed siginfo_t is valid for waitid to fill; WNOWAIT leaves the
        // job to `child.wait()`.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let waited = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if waited == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != ErrorKind::Interrupted {
            return Err(err).context("waiting for the job");
        }
    }
    JOB.store(JOB_ENDED, Ordering::SeqCst);
    child.wait().context("waiting for the job")
}

/// The status errbook exits with: the job's code, or 128 + N when signal N killed it,
/// as a shell reports it.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => (128 + signal) as u8,
        (None, None) => 1,
    }
}

/// How the job ended, in words: `failed (exit 1)`, `was killed by SIGKILL (signal 9,
/// exit 137)`.
fn ended(status: ExitStatus) -> String {
    match status.signal() {
        Some(signal) => format!(
            "was killed by {} (signal {signal}, exit {})",
            signal_name(signal),
            exit_code(status)
        ),
        None => format!("failed (exit {})", exit_code(status)),
    }
}

fn signal_name(signal: libc::c_int) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// Installs the handlers that pass [`FORWARDED`] signals on to the job.
///
/// A terminal sends its keys' signals (and its hang-up) to its whole foreground
/// process group, the job included: those are not sent again while the job is still
/// in errbook's group. A signal from a process (`kill`, a scheduler, `docker stop`) may
/// have been meant for errbook alone, and is passed on. Once the job ended, a signal
/// ends errbook with the job's status, without its diagnosis.
///
/// A signal ignored when errbook started (`nohup`, a shell's background job) stays
/// ignored, so that the job inherits it ignored, as it would without errbook.
fn forward_signals() -> anyhow::Result<()> {
    for signal in FORWARDED.into_iter().filter(|&s| !ignored(s)) {
        let action = move |info: &libc::siginfo_t| {
            let from_terminal = info.si_code == libc::SI_KERNEL;
            match JOB.load(Ordering::SeqCst) {
                0 => {
                    PENDING.fetch_or(1 << signal, Ordering::SeqCst);
                }
                JOB_ENDED => {
                    let code = EXIT.load(Ordering::SeqCst);
                    if code >= 0 {
                        // SAFETY: _exit is async-signal-safe.
                        unsafe { libc::_exit(code) };
                    }
                }
                job => {
                    // SAFETY: getpgid, getpgrp and kill are async-signal-safe system
                    // calls; `job` is not reaped until JOB says it ended.
                    unsafe {
                        if !(from_terminal && libc::getpgid(job) == libc::getpgrp()) {
                            libc::kill(job, signal);
                        }
                    }
                }
            }
        };
        // SAFETY: the action only touches atomics and makes async-signal-safe calls.
        unsafe { signal_hook_registry::register_sigaction(signal, action) }
            .with_context(|| format!("handling {}", signal_name(signal)))?;
    }
    Ok(())
}

fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: with no new action, sigaction only reads the current one into `current`.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Sends the job the signals that came while it was being started.
fn send_pending(pid: libc::pid_t) {
    let pending = PENDING.swap(0, Ordering::SeqCst);
    for signal in FORWARDED {
        if pending & (1 << signal) != 0 {
            // SAFETY: `pid` is the job's, not yet reaped.
            unsafe { libc::kill(pid, signal) };
        }
    }
}

/// The diagnosis of a failed job's output, as the few lines printed under its log.
fn diagnose(
    kb_arg: &KbArg,
    paste: Paste,
    status: ExitStatus,
    base: Option<&str>,
    lang: Lang,
) -> anyhow::Result<String> {
    let text = paste_text(&paste, status);
    let request = Request::text(text.as_str(), Some(MATCHES))
        .map_err(|_| anyhow::anyhow!("the job printed nothing"))?;
    let sources = kb_arg.sources()?;
    let kb = match Kb::load_from(&sources) {
        Ok(loaded) => loaded.kb,
        Err(LoadError::Invalid { problems }) => anyhow::bail!(
            "{} has {} problem(s); `errbook check` lists them",
            sources.describe(),
            problems.len()
        ),
        Err(err) => return Err(err.into()),
    };
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    let d = diagnoser.answer(&request)?;
    let link = base.map(|base| {
        let link = errbook::web::share::link(&text, &d);
        format!("{base}{}", link.path)
    });
    Ok(summary(diagnoser.index().kb(), &d, link.as_deref(), lang))
}

/// The window's lines as a paste to diagnose (and to share): each with its rank prefix
/// again, and, when a signal killed the job, its exit code, since the job itself may
/// have printed nothing about it.
fn paste_text(paste: &Paste, status: ExitStatus) -> String {
    let mut text = String::with_capacity(paste.lines.iter().map(|l| l.text.len() + 12).sum());
    for line in &paste.lines {
        if let Some(rank) = line.rank {
            let _ = write!(text, "[rank{rank}]: ");
        }
        text.push_str(&line.text);
        text.push('\n');
    }
    // 129 and up: a shell (`sh -c`, a wrapper script) reporting its own child's signal.
    let code = exit_code(status);
    if status.signal().is_some() || code > 128 {
        let how = match status.signal() {
            Some(signal) => format!("was killed by {}", signal_name(signal)),
            None => "failed".to_string(),
        };
        let _ = writeln!(text, "errbook: the job {how}: exit code {code}");
    }
    text
}

/// A diagnosis in 10 to 25 lines, in `lang`: the answer with the first steps of its
/// fix, or what happened and the closest entries; then where to read more.
fn summary(kb: &Kb, d: &Diagnosis, link: Option<&str>, lang: Lang) -> String {
    let t = |en, zh| lang.pick(en, zh);
    let title = |e: &Entry| clip(lang.pick(&e.title, &e.title_zh), 60);
    // The matches' entries on one line: `Title [slug]; Title [slug]`.
    let listed = |matches: &[Match]| {
        let names: Vec<String> = (matches.iter())
            .filter_map(|m| kb.get(&m.slug))
            .map(|e| format!("{} [{}]", title(e), e.slug))
            .collect();
        names.join(t("; ", "；"))
    };
    let mut out = String::new();
    let happened = d.triage.summary_in(d.parsed.root_exception(), lang);
    let top = (d.matches.first()).and_then(|m| Some((m, kb.get(&m.slug)?)));
    match (d.verdict, top) {
        (Verdict::Matched | Verdict::Possible, Some((m, e))) => {
            let answer = d.verdict == Verdict::Matched;
            if !answer {
                let _ = writeln!(
                    out,
                    "  {}",
                    t(
                        "errbook is not sure; the closest candidate:",
                        "errbook 没有把握；最接近的候选："
                    )
                );
            }
            let _ = writeln!(out, "  {}", crate::headline(e, m, answer, lang));
            let _ = writeln!(out, "  {}", clip(lang.pick(&e.summary, &e.summary_zh), 200));
            if !happened.is_empty() {
                let _ = writeln!(out, "  {}", clip(&happened, 300));
            }
            if let Some(ev) = m.evidence.first() {
                let _ = writeln!(
                    out,
                    "  {}{}",
                    t("the line: ", "依据："),
                    clip(&ev.text, 120)
                );
            }
            let (heading, fix) = match &m.branch {
                Some(chosen) => {
                    let b = &e.branches[chosen.index];
                    (
                        format!(
                            "{}{}",
                            t("most likely: ", "最可能："),
                            lang.pick(&b.title, &b.title_zh)
                        ),
                        Branch::filled(lang.pick(&b.fix, &b.fix_zh), &chosen.values),
                    )
                }
                None if answer => (
                    t("fix:", "解决：").to_string(),
                    (e.body(lang).section(Section::Fix))
                        .unwrap_or_default()
                        .to_string(),
                ),
                // Not sure and no cause selected: its generic fix would read as the answer.
                None => (
                    t(
                        "check its lines against yours before you follow its fix",
                        "先核对依据行与你的日志是否一致，再照它的方法处理",
                    )
                    .to_string(),
                    String::new(),
                ),
            };
            let _ = writeln!(out, "  {heading}");
            // Steps without the blank lines between them: the summary stays short.
            let lines: Vec<&str> = (fix.lines())
                .map(str::trim_end)
                .filter(|l| !l.trim().is_empty())
                .collect();
            for line in lines.iter().take(FIX_LINES) {
                let _ = writeln!(out, "    {}", clip(line, 400));
            }
            if lines.len() > FIX_LINES {
                let more = lines.len() - FIX_LINES;
                let _ = match lang {
                    Lang::En => writeln!(out, "    … {more} more lines"),
                    Lang::Zh => writeln!(out, "    … 还有 {more} 行"),
                };
            }
            let others = listed(&d.matches[1..]);
            if !others.is_empty() {
                let _ = writeln!(out, "  {}{others}", t("other candidates: ", "其他候选："));
            }
            match (link, lang) {
                (Some(link), _) => {
                    let _ = writeln!(out, "  {}{link}", t("the whole answer: ", "完整答案："));
                }
                (None, Lang::En) => {
                    let _ = writeln!(out, "  the whole entry: errbook show {}", e.slug);
                }
                (None, Lang::Zh) => {
                    let _ = writeln!(out, "  完整条目：errbook show {} --lang zh-CN", e.slug);
                }
            }
        }
        _ => {
            let _ = writeln!(
                out,
                "  {}",
                t(
                    "errbook does not know this failure: no entry fits it firmly.",
                    "errbook 不认识这个故障：没有条目能确切对上。"
                )
            );
            if !happened.is_empty() {
                let _ = writeln!(out, "  {}", clip(&happened, 400));
            }
            for hit in d.closest.iter().take(3) {
                if let Some(e) = kb.get(&hit.slug) {
                    let _ = writeln!(
                        out,
                        "  {}{} [{}]",
                        t("closest by text: ", "文字最接近："),
                        title(e),
                        e.slug
                    );
                }
            }
            let leads = listed(&d.matches);
            if !leads.is_empty() {
                let _ = writeln!(
                    out,
                    "  {}{leads}",
                    t(
                        "a little evidence, each unlikely: ",
                        "有少量证据、但都不太可能："
                    )
                );
            }
            if let Some(link) = link {
                let _ = writeln!(out, "  {}{link}", t("the whole answer: ", "完整答案："));
            }
        }
    }
    out
}
