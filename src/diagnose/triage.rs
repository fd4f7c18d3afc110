//! What a paste says happened, whether or not an entry explains it: the rank that
//! failed first and its root-cause exception, the innermost frame in the user's own
//! code, which other errors only follow from that failure, exit codes and signals in
//! words, and the versions and environment the paste names.

use std::sync::LazyLock;

use regex::Regex;

use super::clip;
use super::parse::{Exception, Frame, Parsed};
use super::paste::{Outstanding, Paste, Sequence};
use crate::kb::Lang;

/// Most consequences and exits listed.
const MOST_LISTED: usize = 8;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Triage {
    /// The rank that failed first, when the paste says.
    pub first_failure: Option<FirstFailure>,
    /// The innermost frame of the root-cause traceback in the user's own code (not in
    /// `site-packages` or the standard library).
    pub user_frame: Option<Frame>,
    /// Errors that follow from the first failure rather than cause it.
    pub consequences: Vec<Consequence>,
    /// Exit codes and signals, with what they usually mean.
    pub exits: Vec<Exit>,
    /// Versions and environment the paste names, in the order found.
    pub environment: Vec<Fact>,
    /// The ranks that fell behind, when several ranks timed out waiting in a collective
    /// and these, seen elsewhere in the paste, did not, or issued fewer collectives.
    pub behind: Option<Behind>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behind {
    /// Ascending.
    pub ranks: Vec<u32>,
    /// 1-based paste line of the first collective timeout, or of the sequence number
    /// that showed them behind.
    pub line: usize,
    /// When sequence numbers showed it: the last collective these ranks enqueued, and
    /// the later one another rank timed out waiting in.
    pub seq: Option<(u64, u64)>,
    /// When the heartbeat monitor's counts showed it: the collectives these ranks had
    /// outstanding, and the most another rank had.
    pub outstanding: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstFailure {
    pub rank: Option<u32>,
    pub host: Option<String>,
    /// When, as printed (torchrun's root-cause block).
    pub time: Option<String>,
    pub known_from: KnownFrom,
}

/// How the first failure was told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownFrom {
    /// torchrun's "Root Cause (first observed failure)" block.
    RootCauseBlock,
    /// The first exception printed with a rank prefix (`[rank1]:`).
    FirstRankedException,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consequence {
    /// 1-based paste line.
    pub line: usize,
    pub rank: Option<u32>,
    pub kind: ConsequenceKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsequenceKind {
    /// The launcher stopping the surviving ranks (`Sending process 123 closing signal
    /// SIGTERM`).
    LauncherStopsSurvivors,
    /// Another rank lost its connection to the one that died.
    PeerConnectionLost,
    /// Another rank waited in a collective until its watchdog gave up.
    WatchdogTimeout,
    /// The launcher's summary that a worker failed (`ChildFailedError`).
    LauncherSummary,
}

impl ConsequenceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsequenceKind::LauncherStopsSurvivors => "launcher_stops_survivors",
            ConsequenceKind::PeerConnectionLost => "peer_connection_lost",
            ConsequenceKind::WatchdogTimeout => "watchdog_timeout",
            ConsequenceKind::LauncherSummary => "launcher_summary",
        }
    }

    /// Why such a line follows from the first failure.
    pub fn explanation(self) -> &'static str {
        match self {
            ConsequenceKind::LauncherStopsSurvivors => {
                "the launcher stops the other ranks once one has failed"
            }
            ConsequenceKind::PeerConnectionLost => {
                "another rank lost its connection to the rank that died"
            }
            ConsequenceKind::WatchdogTimeout => {
                "another rank waited in a collective for the rank that died"
            }
            ConsequenceKind::LauncherSummary => {
                "the launcher's summary that a worker failed, not the cause"
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// 1-based paste line.
    pub line: usize,
    /// The exit code as printed: negative for a signal under torchrun, 128 + the
    /// signal from a shell or container.
    pub code: i32,
    /// The signal's name, when the exit was one.
    pub signal: Option<&'static str>,
    /// What such an exit usually means.
    pub meaning: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// `torch`, `CUDA`, `NCCL`, `NVIDIA driver`, `GPU`, `world size`, `launcher`...
    pub name: &'static str,
    pub value: String,
}

/// Lines that may hold an exit, a signal or a consequence: one search over the paste
/// finds them.
static NOTEWORTHY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)exit ?code|exitcode|exit status|return code|Signals\.SIG|received by PID|Segmentation fault|Bus error|^Killed|closing signal|closed by peer|reset by peer|Broken pipe|Watchdog caught|Timed out waiting \d+ms for|ChildFailedError").unwrap()
});
static EXIT_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:exitcode|exit code|exit status|returned non-zero exit status|return code)\s*[:=]?\s*(-?\d+)",
    )
    .unwrap()
});
static SIGNAL_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Signals\.(SIG[A-Z]+): (\d+)|Signal (\d+) \((SIG[A-Z]+)\)").unwrap()
});
static SURVIVORS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"closing signal SIG(?:TERM|KILL)").unwrap());
static PEER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)Connection closed by peer|Connection reset by peer|Broken pipe").unwrap()
});
static WATCHDOG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Watchdog caught collective operation timeout").unwrap());
/// A rank that timed out waiting in a collective (NCCL's watchdog, Gloo's transport).
static COLLECTIVE_TIMEOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Watchdog caught collective operation timeout|Timed out waiting \d+ms for (recv|send) operation to complete").unwrap()
});

/// Facts found anywhere in the paste: (pattern whose first group is the value, name).
static FACTS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (
            r"\b((?:NVIDIA |Tesla |GeForce )?(?:A100|A800|H100|H800|H200|B200|V100|P100|T4|A10G|A10|L4|L40S|L40|A6000|RTX ?[0-9]{4}(?: Ti)?)(?:[-‑ ](?:SXM[0-9]?|PCIE|PCIe)[A-Za-z0-9-]*)?)\b",
            "GPU",
        ),
        (r"(?i)\bworld[_ ]size\b\s*[:=]?\s*([0-9]+)", "world size"),
        (r"(?i)--nproc[_-]per[_-]node[= ]([0-9]+)", "processes per node"),
        (r"(?i)--nnodes[= ]([0-9:]+)", "nodes"),
        (
            r"\b(torchrun|torch\.distributed\.launch|torch\.distributed\.run|accelerate launch|deepspeed(?: --[a-z_]+| [a-z_./]+\.py)|mpirun|srun|torch\.multiprocessing\.spawn|mp\.spawn)\b",
            "launcher",
        ),
    ]
    .into_iter()
    .map(|(p, name)| (Regex::new(p).unwrap(), name))
    .collect()
});

/// The triage of `paste`, as parsed.
pub fn triage(paste: &Paste, text: &str, starts: &[usize], parsed: &Parsed) -> Triage {
    let first_failure = first_failure(parsed);
    let root = parsed.root_exception();
    let failed_rank = first_failure
        .as_ref()
        .and_then(|f| f.rank)
        .or(root.and_then(|e| e.rank));
    let mut triage = Triage {
        user_frame: root.and_then(user_frame).or_else(|| {
            (root.is_none_or(|e| e.frames.is_empty()))
                .then(|| innermost_own(&parsed.dangling_frames))
                .flatten()
        }),
        first_failure,
        ..Triage::default()
    };
    let root_is = |re: &Regex| root.is_some_and(|e| re.is_match(&e.message));
    let mut seen_lines = Vec::new();
    let mut timed_out = 0u64;
    let mut first_timeout = None;
    for m in NOTEWORTHY.find_iter(text) {
        let i = starts.partition_point(|&s| s <= m.start()) - 1;
        if seen_lines.last() == Some(&i) {
            continue;
        }
        seen_lines.push(i);
        let line = &paste.lines[i];
        let words = line.text.as_str();
        if let Some(exit) = exit_of(words, line.number)
            && triage.exits.len() < MOST_LISTED
            && !triage.exits.iter().any(|e| e.code == exit.code)
        {
            triage.exits.push(exit);
        }
        if COLLECTIVE_TIMEOUT.is_match(words) {
            timed_out |= line.ranks;
            first_timeout.get_or_insert(line.number);
        }
        // The ranks that printed this line (copies from several ranks are one line).
        let ranks: Vec<Option<u32>> = if line.ranks == 0 {
            vec![line.rank]
        } else {
            ranks_of(line.ranks).map(Some).collect()
        };
        let others: Vec<Option<u32>> = (ranks.iter().copied())
            .filter(|r| r.is_none() || *r != failed_rank)
            .collect();
        let other_rank = !others.is_empty();
        // Something failed that a line of another rank can follow from.
        let failed = root.is_some() || failed_rank.is_some();
        let kind = if SURVIVORS.is_match(words) {
            Some(ConsequenceKind::LauncherStopsSurvivors)
        } else if PEER.is_match(words) && other_rank && failed && !root_is(&PEER) {
            Some(ConsequenceKind::PeerConnectionLost)
        } else if WATCHDOG.is_match(words) && other_rank && failed && !root_is(&WATCHDOG) {
            Some(ConsequenceKind::WatchdogTimeout)
        } else if words.contains("ChildFailedError") && root.is_some_and(|e| !e.wrapper) {
            Some(ConsequenceKind::LauncherSummary)
        } else {
            None
        };
        let Some(kind) = kind else { continue };
        let who = match kind {
            ConsequenceKind::PeerConnectionLost | ConsequenceKind::WatchdogTimeout => others,
            _ => vec![line.rank],
        };
        for rank in who {
            if (triage.consequences.iter())
                .filter(|c| c.kind == kind)
                .count()
                < MOST_LISTED
                && !(triage.consequences.iter()).any(|c| c.kind == kind && c.rank == rank)
            {
                triage.consequences.push(Consequence {
                    line: line.number,
                    rank,
                    kind,
                    text: words.trim().to_string(),
                });
            }
        }
    }
    triage.behind = (behind_by_sequence(&paste.sequence))
        .or_else(|| behind_by_outstanding(&paste.outstanding))
        .or_else(|| {
            let line = first_timeout?;
            let ranks = behind(paste, timed_out);
            (!ranks.is_empty()).then_some(Behind {
                ranks,
                line,
                seq: None,
                outstanding: None,
            })
        });
    for version in &parsed.versions {
        if let Some((name, value)) = version.split_once(' ') {
            let name = match name {
                "NCCL" => "NCCL",
                "torch" => "torch",
                "CUDA" => "CUDA",
                "Python" => "Python",
                "DeepSpeed" => "DeepSpeed",
                "Accelerate" => "Accelerate",
                "transformers" => "transformers",
                "Lightning" => "Lightning",
                "driver" => "NVIDIA driver",
                _ => continue,
            };
            triage.environment.push(Fact {
                name,
                value: value.to_string(),
            });
        }
    }
    for (re, name) in FACTS.iter() {
        if let Some(value) = re.captures(text).and_then(|c| c.get(1)) {
            triage.environment.push(Fact {
                name,
                value: value.as_str().trim().to_string(),
            });
        }
    }
    triage
}

impl Triage {
    /// What happened in a sentence or three, for a reader: who failed first with
    /// what and where, what follows from it, what the exit means. Empty when the paste
    /// says none of it.
    pub fn summary(&self, root: Option<&Exception>) -> String {
        self.summary_in(root, Lang::En)
    }

    /// [`Triage::summary`] in `lang` (the error's own text stays as printed).
    pub fn summary_in(&self, root: Option<&Exception>, lang: Lang) -> String {
        let zh = lang.is_zh();
        let mut out = String::new();
        if let Some(b) = &self.behind {
            out.push_str(&b.sentence(lang));
        }
        let rank = self.first_failure.as_ref().and_then(|f| f.rank);
        if let Some(root) = root.filter(|e| !e.wrapper) {
            let message = clip(&root.message, 160);
            let what = if message.is_empty() {
                root.kind.clone()
            } else {
                format!("{}: {message}", root.kind)
            };
            match (rank, zh) {
                (Some(rank), false) => out.push_str(&format!("Rank {rank} failed first: {what}")),
                (None, false) => out.push_str(&format!("The error: {what}")),
                (Some(rank), true) => out.push_str(&format!("rank {rank} 最先失败：{what}")),
                (None, true) => out.push_str(&format!("报错：{what}")),
            }
            if let Some(f) = &self.user_frame {
                out.push_str(&match lang {
                    Lang::En => format!(" (in {} line {}, in {})", f.file, f.line, f.function),
                    Lang::Zh => format!("（{} 第 {} 行，{} 中）", f.file, f.line, f.function),
                });
            }
            let end = lang.pick(".", "。");
            if !out.ends_with(end) {
                out.push_str(end);
            }
        } else if let Some(rank) = rank {
            out.push_str(&match lang {
                Lang::En => format!("Rank {rank} failed first."),
                Lang::Zh => format!("rank {rank} 最先失败。"),
            });
        }
        let mut kinds = Vec::new();
        for c in &self.consequences {
            if kinds.contains(&c.kind) {
                continue;
            }
            kinds.push(c.kind);
            let sentence = match c.kind {
                ConsequenceKind::LauncherStopsSurvivors => lang
                    .pick(
                        " The launcher's SIGTERM to the other ranks follows from it.",
                        "启动器随后向其他 rank 发出的 SIGTERM 是它的后果。",
                    )
                    .to_string(),
                ConsequenceKind::LauncherSummary => lang
                    .pick(
                        " The launcher's ChildFailedError only reports it.",
                        "启动器的 ChildFailedError 只是在报告它。",
                    )
                    .to_string(),
                ConsequenceKind::PeerConnectionLost | ConsequenceKind::WatchdogTimeout => {
                    let same: Vec<&Consequence> = self
                        .consequences
                        .iter()
                        .filter(|o| o.kind == c.kind)
                        .collect();
                    let ranks: Vec<u32> = same.iter().filter_map(|o| o.rank).collect();
                    let lost = c.kind == ConsequenceKind::PeerConnectionLost;
                    let quoted = if lost {
                        PEER.find(&c.text).map_or("", |m| m.as_str())
                    } else {
                        "Watchdog caught collective operation timeout"
                    };
                    let more = same.len() >= MOST_LISTED;
                    let what = match (lost, lang) {
                        (true, Lang::En) => "lost the connection to it",
                        (false, Lang::En) => "timed out waiting for it in a collective",
                        (true, Lang::Zh) => "与它断开了连接",
                        (false, Lang::Zh) => "在集合通信里等它等到超时",
                    };
                    let who = if ranks.is_empty() {
                        lang.pick("Other processes", "其他进程").to_string()
                    } else {
                        ranks_in(&ranks, more, lang)
                    };
                    match lang {
                        Lang::En => format!(" {who} then {what} (\"{quoted}\")."),
                        Lang::Zh => format!("{who}随后{what}（“{quoted}”）。"),
                    }
                }
            };
            out.push_str(&sentence);
        }
        // The survivors' SIGTERM is said already when the launcher was seen sending it.
        let said = |e: &&Exit| {
            e.signal == Some("SIGTERM") && kinds.contains(&ConsequenceKind::LauncherStopsSurvivors)
        };
        if let Some(exit) = (self.exits.iter()).find(|e| e.signal.is_some() && !said(e)) {
            let signal = exit.signal.unwrap_or_default();
            out.push_str(&match lang {
                Lang::En => format!(" Exit code {} ({signal}): {}.", exit.code, exit.meaning),
                Lang::Zh => format!(
                    "退出码 {}（{signal}）：{}。",
                    exit.code,
                    meaning_zh(exit.code, exit.signal)
                ),
            });
        }
        out.trim().to_string()
    }
}

/// The ranks whose bits are set in `mask` (see `Line::ranks`), ascending.
fn ranks_of(mask: u64) -> impl Iterator<Item = u32> {
    (0..64).filter(move |r| mask & (1 << r) != 0)
}

impl Behind {
    /// What the paste shows of them, with what to look for next.
    pub fn sentence(&self, lang: Lang) -> String {
        let one = self.ranks.len() == 1;
        let ranks = self.ranks_text_in(lang);
        let (who, verb, it) = match one {
            true => (format!("Rank {ranks}"), "was", "it"),
            false => (format!("Ranks {ranks}"), "were", "they"),
        };
        let them = if one { "它" } else { "它们" };
        if let Some((theirs, most)) = self.outstanding {
            let missing = most - theirs;
            return match lang {
                Lang::En => format!(
                    "{who} fell behind: when the heartbeat monitor fired, {it} had {theirs} \
                     collectives outstanding and another rank {most}, so {it} had not issued \
                     the last {missing}; find what {it} {verb} doing then. "
                ),
                Lang::Zh => format!(
                    "rank {ranks} 落后了：心跳监控触发时{them}还有 {theirs} 个未完成的集合通信，\
                     而另一个 rank 有 {most} 个，说明{them}没有发起最后的 {missing} 个；\
                     查一下{them}当时在做什么。"
                ),
            };
        }
        match (lang, self.seq) {
            (Lang::En, Some((last, waited))) => format!(
                "{who} fell behind: it last enqueued collective {last}, while another rank \
                 timed out waiting in collective {waited}, which {it} never issued; find \
                 what it {verb} doing then. "
            ),
            (Lang::En, None) => format!(
                "{who} fell behind: the other ranks timed out waiting for it in a \
                 collective, and it did not; find what it {verb} doing then. "
            ),
            (Lang::Zh, Some((last, waited))) => format!(
                "rank {ranks} 落后了：{them}最后发起的集合通信是 {last}，而另一个 rank 在 \
                 {waited} 上等到超时，{them}根本没有发起这次通信；查一下{them}当时在做什么。"
            ),
            (Lang::Zh, None) => format!(
                "rank {ranks} 落后了：其他 rank 在一次集合通信里等{them}等到超时，而{them}没有超时；\
                 查一下{them}当时在做什么。"
            ),
        }
    }

    /// "0", "0 and 3".
    pub fn ranks_text(&self) -> String {
        self.ranks_text_in(Lang::En)
    }

    /// "0", "0 and 3", "0 和 3".
    pub fn ranks_text_in(&self, lang: Lang) -> String {
        let ranks: Vec<String> = self.ranks.iter().map(u32::to_string).collect();
        ranks.join(lang.pick(" and ", " 和 "))
    }
}

/// The ranks seen in `paste` that did not time out when at least two others did
/// (`timed_out`), as long as they are few: the one that never reached the collective.
fn behind(paste: &Paste, timed_out: u64) -> Vec<u32> {
    if timed_out.count_ones() < 2 {
        return Vec::new();
    }
    let seen = paste.lines.iter().fold(0, |seen, l| seen | l.ranks);
    let behind = seen & !timed_out;
    if behind == 0 || behind.count_ones() * 4 > seen.count_ones() {
        return Vec::new();
    }
    ranks_of(behind).collect()
}

/// The ranks that never issued a collective another rank timed out waiting in: their
/// last enqueued sequence number is lower than the one the other waited in (rank 3
/// enqueued 5212, rank 0 timed out in 5213). Numbers count per process group: a paste
/// that names several groups compares ranks within each, and one that names none and
/// shows a rank waiting in two collectives (a tensor- and a data-parallel group, say)
/// is not compared at all.
fn behind_by_sequence(sequence: &[Sequence]) -> Option<Behind> {
    let mut groups: Vec<Option<u32>> = sequence.iter().map(|s| s.group).collect();
    groups.sort_unstable();
    groups.dedup();
    let named: Vec<u32> = groups.iter().flatten().copied().collect();
    let compared: Vec<Vec<&Sequence>> = if named.len() > 1 {
        (named.iter())
            .map(|g| sequence.iter().filter(|s| s.group == Some(*g)).collect())
            .collect()
    } else {
        vec![sequence.iter().collect()]
    };
    for group in compared {
        let waits_twice = group.iter().any(|a| {
            a.waiting
                && group
                    .iter()
                    .any(|b| b.waiting && b.rank == a.rank && b.seq != a.seq)
        });
        if waits_twice {
            continue;
        }
        let mut found: Vec<(u32, u64, u64, usize)> = Vec::new();
        for enqueued in group.iter().filter(|s| !s.waiting) {
            let last = (group.iter())
                .filter(|s| !s.waiting && s.rank == enqueued.rank)
                .map(|s| s.seq)
                .max()
                .unwrap_or(enqueued.seq);
            let waited = (group.iter())
                .filter(|s| s.waiting && s.rank != enqueued.rank && s.seq > last)
                .map(|s| s.seq)
                .min();
            if let Some(waited) = waited
                && !found.iter().any(|f| f.0 == enqueued.rank)
            {
                found.push((enqueued.rank, last, waited, enqueued.line));
            }
        }
        if found.is_empty() {
            continue;
        }
        found.sort_unstable();
        let last = found.iter().map(|f| f.1).min()?;
        let waited = found.iter().map(|f| f.2).min()?;
        let line = found.iter().map(|f| f.3).min()?;
        return Some(Behind {
            ranks: found.iter().map(|f| f.0).collect(),
            line,
            seq: Some((last, waited)),
            outstanding: None,
        });
    }
    None
}

/// The ranks of one process group that had fewer collectives outstanding than the
/// others when their heartbeat monitors fired: collectives complete on every rank
/// together, so the ranks with the shorter queue never issued the last ones (rank 0
/// had 84, ranks 1 to 7 had 103). Only a minority of at least three ranks counts as
/// behind; with two, either could be the odd one.
fn behind_by_outstanding(outstanding: &[Outstanding]) -> Option<Behind> {
    let mut groups: Vec<Option<u32>> = outstanding.iter().map(|o| o.group).collect();
    groups.sort_unstable();
    groups.dedup();
    groups.into_iter().find_map(|group| {
        let counted: Vec<&Outstanding> =
            (outstanding.iter()).filter(|o| o.group == group).collect();
        let most = counted.iter().map(|o| o.count).max()?;
        let mut short: Vec<&Outstanding> = (counted.iter().copied())
            .filter(|o| o.count < most)
            .collect();
        if short.is_empty() || short.len() * 2 >= counted.len() {
            return None;
        }
        short.sort_unstable_by_key(|o| o.rank);
        Some(Behind {
            ranks: short.iter().map(|o| o.rank).collect(),
            line: short.iter().map(|o| o.line).min()?,
            seq: None,
            outstanding: Some((short.iter().map(|o| o.count).min()?, most)),
        })
    })
}

/// "Rank 4", "Ranks 2 and 4", "Ranks 0, 1, 2 and more"; "rank 4 ", "rank 2 和 4 ",
/// "rank 0、1、2 等".
fn ranks_in(ranks: &[u32], more: bool, lang: Lang) -> String {
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    match (list.as_slice(), more, lang) {
        ([], _, _) => String::new(),
        ([one], false, Lang::En) => format!("Rank {one}"),
        ([one], false, Lang::Zh) => format!("rank {one} "),
        (many, true, Lang::En) => format!("Ranks {} and more", many.join(", ")),
        (many, true, Lang::Zh) => format!("rank {} 等", many.join("、")),
        ([init @ .., last], false, Lang::En) => format!("Ranks {} and {last}", init.join(", ")),
        ([init @ .., last], false, Lang::Zh) => format!("rank {} 和 {last} ", init.join("、")),
    }
}

fn first_failure(parsed: &Parsed) -> Option<FirstFailure> {
    if let Some(block) = &parsed.first_failure
        && block.rank.is_some()
    {
        return Some(FirstFailure {
            rank: block.rank,
            host: block.host.clone(),
            time: block.time.clone(),
            known_from: KnownFrom::RootCauseBlock,
        });
    }
    let first = parsed
        .exceptions
        .iter()
        .find(|e| e.rank.is_some() && !e.wrapper)?;
    Some(FirstFailure {
        rank: first.rank,
        host: None,
        time: None,
        known_from: KnownFrom::FirstRankedException,
    })
}

/// The innermost frame of `exception` in the user's own code.
fn user_frame(exception: &Exception) -> Option<Frame> {
    innermost_own(&exception.frames)
}

fn innermost_own(frames: &[Frame]) -> Option<Frame> {
    frames.iter().rev().find(|f| !f.is_library()).cloned()
}

/// The exit on a line, if it names one.
fn exit_of(text: &str, line: usize) -> Option<Exit> {
    let (code, signal) = if let Some(c) = SIGNAL_NAMED.captures(text) {
        let (name, number) = match (c.get(1), c.get(2), c.get(3), c.get(4)) {
            (Some(name), Some(n), _, _) | (_, _, Some(n), Some(name)) => (name, n),
            _ => return None,
        };
        let number: i32 = number.as_str().parse().ok()?;
        (
            -number,
            signal_name(number).or(signal_name_of(name.as_str())),
        )
    } else if let Some(c) = EXIT_CODE.captures(text) {
        let code: i32 = c[1].parse().ok()?;
        (code, signal_of_code(code))
    } else if text.contains("Segmentation fault") {
        (-11, Some("SIGSEGV"))
    } else if text.contains("Bus error") {
        (-7, Some("SIGBUS"))
    } else if text.trim() == "Killed" {
        (-9, Some("SIGKILL"))
    } else {
        return None;
    };
    if code == 0 {
        return None;
    }
    Some(Exit {
        line,
        code,
        signal,
        meaning: meaning(code, signal),
    })
}

/// The signal behind an exit code: negative under torchrun and Python's
/// `subprocess`, 128 + the signal from a shell or a container runtime.
fn signal_of_code(code: i32) -> Option<&'static str> {
    match code {
        c if c < 0 => signal_name(-c),
        c if (129..=159).contains(&c) => signal_name(c - 128),
        _ => None,
    }
}

fn signal_name(number: i32) -> Option<&'static str> {
    Some(match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        6 => "SIGABRT",
        7 => "SIGBUS",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => return None,
    })
}

fn signal_name_of(name: &str) -> Option<&'static str> {
    [
        "SIGHUP", "SIGINT", "SIGABRT", "SIGBUS", "SIGKILL", "SIGSEGV", "SIGTERM",
    ]
    .into_iter()
    .find(|n| *n == name)
}

fn meaning(code: i32, signal: Option<&'static str>) -> &'static str {
    match signal {
        Some("SIGKILL") => {
            "killed from outside: usually the host's out-of-memory killer (see `dmesg`) or \
             the scheduler's memory or time limit"
        }
        Some("SIGABRT") => {
            "aborted: a C++ exception or failed check in native code (NCCL, c10); the \
             lines just before it say which"
        }
        Some("SIGSEGV") => {
            "segmentation fault in native code: an extension, a driver or a library built \
             for another version"
        }
        Some("SIGBUS") => {
            "bus error: usually shared memory (/dev/shm) too small for DataLoader workers, \
             often in a container"
        }
        Some("SIGTERM") => {
            "terminated from outside: the launcher stopping the other ranks after one \
             failed, or the scheduler"
        }
        Some("SIGINT") => "interrupted (Ctrl-C)",
        Some("SIGHUP") => {
            "the terminal or SSH session closed; run under nohup, tmux or the scheduler"
        }
        _ if code == 1 => "the process raised an exception: its traceback says which",
        _ => "the process exited with an error",
    }
}

/// [`meaning`] in Chinese.
fn meaning_zh(code: i32, signal: Option<&'static str>) -> &'static str {
    match signal {
        Some("SIGKILL") => {
            "被外部杀掉：通常是主机的 OOM killer（看 `dmesg`）或调度器的内存、时间限制"
        }
        Some("SIGABRT") => {
            "中止：native 代码（NCCL、c10）里抛出了 C++ 异常或检查失败；它前面几行会说明是哪个"
        }
        Some("SIGSEGV") => "native 代码段错误：某个扩展、驱动，或为其他版本编译的库",
        Some("SIGBUS") => {
            "总线错误：通常是共享内存（/dev/shm）不够 DataLoader worker 用，多见于容器"
        }
        Some("SIGTERM") => "被外部终止：一个 rank 失败后启动器停掉其他 rank，或者是调度器",
        Some("SIGINT") => "被中断（Ctrl-C）",
        Some("SIGHUP") => "终端或 SSH 会话断开了；用 nohup、tmux 或调度器来运行",
        _ if code == 1 => "进程抛出了异常：看它的 traceback",
        _ => "进程以错误退出",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::parse::parse;

    fn triaged(text: &str) -> Triage {
        let paste = Paste::from_text(text);
        let (joined, starts) = paste.joined();
        let parsed = parse(&paste, &joined, &starts);
        triage(&paste, &joined, &starts, &parsed)
    }

    const TWO_RANKS: &str = r#"[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/me/proj/train.py", line 40, in <module>
[rank1]:     main()
[rank1]:   File "/home/me/proj/train.py", line 13, in main
[rank1]:     steps = cfg["warmup_steps"]
[rank1]:   File "/opt/conda/lib/python3.10/site-packages/omegaconf/dictconfig.py", line 9, in __getitem__
[rank1]:     raise KeyError(key)
[rank1]: KeyError: 'warmup_steps'
[rank0]:[E ProcessGroupGloo.cpp:144] Connection closed by peer [10.0.0.2]:5432
W0501 10:00:01 torch/distributed/elastic/multiprocessing/api.py:851] Sending process 4242 closing signal SIGTERM
E0501 10:00:02 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: 1) local_rank: 1 (pid: 4243) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:00:02
  host      : node-7
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4243)
torch 2.3.1+cu121 NCCL version 2.20.5 on NVIDIA A100-SXM4-80GB, world_size=8
"#;

    #[test]
    fn names_the_first_failure_its_own_frame_and_what_follows_from_it() {
        let t = triaged(TWO_RANKS);
        let first = t.first_failure.unwrap();
        assert_eq!(first.rank, Some(1));
        assert_eq!(first.host.as_deref(), Some("node-7"));
        assert_eq!(first.time.as_deref(), Some("2024-05-01_10:00:02"));
        assert_eq!(first.known_from, KnownFrom::RootCauseBlock);
        let frame = t.user_frame.unwrap();
        assert_eq!((frame.file.as_str(), frame.line), ("train.py", 13));
        assert_eq!(frame.function, "main");
        let kinds: Vec<_> = t.consequences.iter().map(|c| (c.kind, c.rank)).collect();
        assert_eq!(
            kinds,
            [
                (ConsequenceKind::PeerConnectionLost, Some(0)),
                (ConsequenceKind::LauncherStopsSurvivors, None),
                (ConsequenceKind::LauncherSummary, None),
            ]
        );
        assert_eq!(t.exits.len(), 1);
        assert_eq!(t.exits[0].code, 1);
        let facts: Vec<_> = t
            .environment
            .iter()
            .map(|f| (f.name, f.value.as_str()))
            .collect();
        for fact in [
            ("torch", "2.3.1"),
            ("NCCL", "2.20.5"),
            ("GPU", "NVIDIA A100-SXM4-80GB"),
            ("world size", "8"),
        ] {
            assert!(facts.contains(&fact), "{fact:?} not in {facts:?}");
        }
    }

    #[test]
    fn the_summary_says_who_failed_first_with_what_and_what_follows() {
        let paste = Paste::from_text(TWO_RANKS);
        let (joined, starts) = paste.joined();
        let parsed = parse(&paste, &joined, &starts);
        let t = triage(&paste, &joined, &starts, &parsed);
        let summary = t.summary(parsed.root_exception());
        assert!(
            summary.starts_with(
                "Rank 1 failed first: KeyError: 'warmup_steps' (in train.py line 13, in main). \
                 Rank 0 then lost the connection to it (\"Connection closed by peer\")."
            ),
            "{summary}"
        );
        assert!(summary.contains("SIGTERM to the other ranks"), "{summary}");

        let zh = t.summary_in(parsed.root_exception(), Lang::Zh);
        assert!(
            zh.starts_with(
                "rank 1 最先失败：KeyError: 'warmup_steps'（train.py 第 13 行，main 中）。\
                 rank 0 随后与它断开了连接（“Connection closed by peer”）。"
            ),
            "{zh}"
        );
        assert!(zh.contains("启动器随后向其他 rank 发出的 SIGTERM"), "{zh}");
    }

    #[test]
    fn exit_codes_and_signals_read_in_words() {
        for (line, code, signal) in [
            (
                "failed (exitcode: -9) local_rank: 0 (pid: 1) of binary",
                -9,
                "SIGKILL",
            ),
            ("  exitcode  : -6 (pid: 12)", -6, "SIGABRT"),
            ("process exited with exit code 137", 137, "SIGKILL"),
            (
                "[launch.py:319:sigkill_handler] exits with return code = -9",
                -9,
                "SIGKILL",
            ),
            ("Signal 11 (SIGSEGV) received by PID 3", -11, "SIGSEGV"),
            ("died with <Signals.SIGBUS: 7>.", -7, "SIGBUS"),
            ("Bus error (core dumped)", -7, "SIGBUS"),
            ("Killed", -9, "SIGKILL"),
        ] {
            let t = triaged(line);
            assert_eq!(t.exits.len(), 1, "{line}");
            assert_eq!(
                (t.exits[0].code, t.exits[0].signal),
                (code, Some(signal)),
                "{line}"
            );
        }
        assert!(triaged("exitcode: 0").exits.is_empty());
    }

    #[test]
    fn a_timeout_that_is_the_failure_is_not_its_own_consequence() {
        let t = triaged(
            "[rank0]: RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)\n\
             [rank1]: RuntimeError: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
        );
        assert!(t.consequences.is_empty(), "{:?}", t.consequences);
        assert_eq!(t.first_failure.unwrap().rank, Some(0));
    }

    /// What a run that `kill -9` took a rank from prints (torch 2.x, gloo, 8 ranks): the
    /// other ranks' exceptions first, then torchrun's blocks for every rank, whose
    /// fields repeat numbers aside, the root cause's last.
    #[test]
    fn a_rank_killed_without_a_word_failed_first_and_its_peers_errors_follow() {
        let mut text = String::new();
        for rank in [2, 4] {
            text.push_str(&format!(
                "[default{rank}]:[rank{rank}]: Traceback (most recent call last):\n\
                 [default{rank}]:[rank{rank}]:   File \"/job/train.py\", line 43, in <module>\n\
                 [default{rank}]:[rank{rank}]:     dist.all_reduce(flag)\n\
                 [default{rank}]:[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:27542\n"
            ));
        }
        text.push_str("E1126 22:16:50.452000 27550 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 3 (pid: 27557) of binary: /venv/bin/python\n");
        text.push_str(
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\nFailures:\n",
        );
        for rank in [0, 1, 2, 4] {
            text.push_str(&format!(
                "[{rank}]:\n  time      : 2026-11-26_22:16:50\n  host      : node-1\n  rank      : {rank} (local_rank: {rank})\n  exitcode  : -15 (pid: 2755{rank})  (SIGTERM)\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID 2755{rank}\n"
            ));
        }
        text.push_str("Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-26_22:16:50\n  host      : node-1\n  rank      : 3 (local_rank: 3)\n  exitcode  : -9 (pid: 27557)  (SIGKILL)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 27557\n");
        let paste = Paste::from_text(&text);
        let (joined, starts) = paste.joined();
        let parsed = parse(&paste, &joined, &starts);
        assert!(
            parsed.root_exception().is_none(),
            "{:?}",
            parsed.root_exception()
        );
        let t = triage(&paste, &joined, &starts, &parsed);
        let first = t.first_failure.as_ref().unwrap();
        assert_eq!(
            (first.rank, first.host.as_deref()),
            (Some(3), Some("node-1"))
        );
        let kinds: Vec<_> = t.consequences.iter().map(|c| (c.kind, c.rank)).collect();
        assert!(
            kinds.contains(&(ConsequenceKind::PeerConnectionLost, Some(2))),
            "{kinds:?}"
        );
        let summary = t.summary(None);
        assert!(summary.starts_with("Rank 3 failed first."), "{summary}");
        assert!(summary.contains("Exit code -9 (SIGKILL)"), "{summary}");
    }

    /// Eight ranks print the same peer error, numbers aside: one paste line, and every
    /// rank but the first to fail is named in the summary.
    #[test]
    fn the_summary_counts_every_rank_that_printed_a_folded_line() {
        let mut text = String::from(
            "[rank3]: Traceback (most recent call last):\n[rank3]:   File \"/job/train.py\", line 9, in <module>\n[rank3]:     step(batch)\n[rank3]: ValueError: bad batch 17\n",
        );
        for rank in [0, 1, 2, 4, 5, 6, 7] {
            text.push_str(&format!(
                "[rank{rank}]: RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.{rank}]:4{rank}21\n"
            ));
        }
        let paste = Paste::from_text(&text);
        assert_eq!(paste.lines.len(), 5, "{:?}", paste.lines);
        let (joined, starts) = paste.joined();
        let parsed = parse(&paste, &joined, &starts);
        let t = triage(&paste, &joined, &starts, &parsed);
        let summary = t.summary(parsed.root_exception());
        assert!(
            summary.contains(
                "Ranks 0, 1, 2, 4, 5, 6 and 7 then lost the connection to it (\"Connection closed by peer\")."
            ),
            "{summary}"
        );
    }

    /// Three ranks time out in a collective while rank 0 keeps printing its evaluation:
    /// rank 0 fell behind. With every rank timed out, no one did.
    #[test]
    fn the_rank_that_did_not_time_out_fell_behind() {
        let mut text = String::new();
        for rank in 1..4 {
            text.push_str(&format!(
                "[rank{rank}]:[E1126 10:32:11.40{rank} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 180008{rank} milliseconds before timing out.\n"
            ));
        }
        let evaluating = "[rank0]:Evaluating:  72%|███████▏  | 3600/5000\n";
        let t = triaged(&format!("{text}{evaluating}"));
        let behind = t.behind.as_ref().expect("a rank behind");
        assert_eq!((behind.ranks.as_slice(), behind.line), (&[0][..], 1));
        assert!(
            t.summary(None)
                .starts_with("Rank 0 fell behind: the other ranks timed out"),
            "{}",
            t.summary(None)
        );
        let all = text.replace("[rank1]", "[rank0]") + &text;
        assert_eq!(triaged(&all).behind, None);
    }

    /// Ranks that print their sequence numbers: the one whose last enqueued collective
    /// is lower than the one another rank timed out in fell behind, even when it timed
    /// out too and its line folds into the others'.
    #[test]
    fn the_rank_whose_last_collective_is_lower_fell_behind() {
        let waiting = |rank: u32, seq: u64| {
            format!(
                "[rank{rank}]:[E318 02:26:40.7319072 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n"
            )
        };
        let detected = |rank: u32, seq: u64, group: &str| {
            format!(
                "[rank{rank}]:[E318 02:26:41.1045228 ProcessGroupNCCL.cpp:2271] [PG ID {group} PG GUID {group}(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {}\n",
                seq - 1
            )
        };
        let text = [
            waiting(1, 90417),
            detected(1, 90417, "0"),
            waiting(3, 90417),
            detected(2, 90416, "0"),
        ]
        .concat();
        let t = triaged(&text);
        let behind = t.behind.as_ref().expect("a rank behind");
        assert_eq!(
            (behind.ranks.as_slice(), behind.seq, behind.line),
            (&[2][..], Some((90416, 90417)), 4)
        );
        assert!(
            t.summary(None).starts_with(
                "Rank 2 fell behind: it last enqueued collective 90416, while another rank \
                 timed out waiting in collective 90417"
            ),
            "{}",
            t.summary(None)
        );

        // The last enqueued runs ahead of the collective a rank waits in: rank 3 waits in
        // 335 having enqueued 731, and rank 2 waiting in 335 is not behind it.
        let ahead = [waiting(3, 335), detected(3, 731, "0"), waiting(2, 335)].concat();
        assert_eq!(triaged(&ahead).behind, None);

        // Numbers of different process groups are not compared: named groups apart...
        let groups = [
            waiting(1, 90417),
            detected(1, 90417, "1"),
            detected(2, 50, "2"),
        ];
        assert_eq!(triaged(&groups.concat()).behind.and_then(|b| b.seq), None);
        // ...and, unnamed, a rank waiting in two collectives means several groups.
        let unnamed = [waiting(0, 96117), waiting(0, 96125), waiting(7, 64088)].concat();
        let unnamed =
            unnamed + &detected(7, 64088, "0").replace("PG ID 0 PG GUID 0(default_pg) ", "");
        assert_eq!(triaged(&unnamed).behind.and_then(|b| b.seq), None);
    }

    /// When the heartbeat monitors fired, the rank with fewer collectives outstanding
    /// than the others had not issued the rest: it fell behind. Two ranks that differ,
    /// or a queue shorter on half the ranks, say nothing of which one.
    #[test]
    fn the_rank_with_the_shorter_queue_fell_behind() {
        let queue = |rank: u32, size: u64| {
            format!(
                "[rank{rank}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {rank}] Heartbeat \
                 monitor timed out! Process will be terminated after dumping debug info. \
                 workMetaList_.size()={size}\n"
            )
        };
        let text = [queue(1, 103), queue(0, 84), queue(2, 103), queue(3, 103)].concat();
        let t = triaged(&text);
        let behind = t.behind.as_ref().expect("a rank behind");
        assert_eq!(
            (behind.ranks.as_slice(), behind.line, behind.outstanding),
            (&[0][..], 2, Some((84, 103)))
        );
        assert!(
            (t.summary(None)).starts_with(
                "Rank 0 fell behind: when the heartbeat monitor fired, it had 84 collectives \
                 outstanding and another rank 103, so it had not issued the last 19"
            ),
            "{}",
            t.summary(None)
        );

        assert_eq!(
            triaged(&[queue(0, 84), queue(1, 103)].concat()).behind,
            None
        );
        let half = [queue(0, 84), queue(1, 84), queue(2, 103), queue(3, 103)];
        assert_eq!(triaged(&half.concat()).behind, None);
        let even = [queue(0, 103), queue(1, 103), queue(2, 103)];
        assert_eq!(triaged(&even.concat()).behind, None);
    }

    /// A terminal wrapped the line in the middle of the number's label: it is read
    /// whole once joined again.
    #[test]
    fn a_sequence_number_cut_by_the_terminal_is_read() {
        let text = "[rank7]:[E816 00:34:01.184200712 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 7]  failure detected by watchdog at work sequence id: 4410 PG status: last enqueue\n\
            d work: 4410, last completed work: 4409\n\
            [rank5]:[E816 00:34:01.333566386 ProcessGroupNCCL.cpp:629] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n";
        let behind = triaged(text).behind.expect("a rank behind");
        assert_eq!((behind.ranks, behind.seq), (vec![7], Some((4410, 4411))));
    }
    #[test]
    fn library_frames_are_not_the_users_own() {
        let t = triaged(
            "Traceback (most recent call last):\n  File \"/work/run.py\", line 5, in <module>\n  File \"/usr/lib/python3.10/json/decoder.py\", line 355, in raw_decode\njson.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        );
        let frame = t.user_frame.unwrap();
        assert_eq!((frame.file.as_str(), frame.line), ("run.py", 5));
    }
}
