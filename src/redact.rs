//! Taking what identifies people, machines and credentials out of a paste before it is
//! kept anywhere (a draft entry's example, a stored paste): user names in home paths,
//! host names, IP addresses, e-mail addresses, and tokens, keys and passwords.
//!
//! The same value becomes the same placeholder within one paste (`<host-1>` on every
//! line of the first node, `<host-2>` for the second), so a log keeps saying which
//! lines came from the same machine. Loopback and unspecified addresses stay: they
//! name no machine and they matter to a diagnosis (`127.0.0.1`, `0.0.0.0`, `::1`).

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::{Captures, Match, Regex};

/// What was taken out of a paste.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Secret,
    Email,
    User,
    Host,
    Ip,
}

impl Kind {
    fn placeholder(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::Email => "email",
            Kind::User => "user",
            Kind::Host => "host",
            Kind::Ip => "ip",
        }
    }
}

/// Every placeholder `redact` writes (`<host-2>`, `<secret>`, `<ip6>`), and nothing a
/// log prints otherwise.
pub static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"<(?:user|host|ip|email|secret)(?:-\d+)?>|<ip6>").expect("compiles")
});

/// A redacted paste and how many values of each kind it hid.
#[derive(Debug, Default)]
pub struct Redacted {
    pub text: String,
    pub hidden: BTreeMap<Kind, usize>,
}

/// One rule: a pattern, the kind of value its `value` group holds (the whole match when
/// it has none), and whether equal values share a numbered placeholder.
struct Rule {
    kind: Kind,
    pattern: Regex,
    numbered: bool,
}

fn rule(kind: Kind, pattern: &str, numbered: bool) -> Rule {
    Rule {
        kind,
        pattern: Regex::new(pattern).expect("redaction patterns compile"),
        numbered,
    }
}

/// In order: credentials first (a URL's password must go before its host is looked
/// at), then addresses, then names.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        // https://user:password@host/…
        rule(
            Kind::Secret,
            r"(?i)\b[a-z][a-z0-9+.-]*://(?P<value>[^/\s:@]+:[^/\s@]+)@",
            false,
        ),
        // Authorization: Bearer …, Authorization=token …
        rule(
            Kind::Secret,
            r#"(?i)\bauthorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token)\s+)?(?P<value>[^\s"',;]+)"#,
            false,
        ),
        rule(
            Kind::Secret,
            r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})",
            false,
        ),
        // Hugging Face, GitHub, AWS, OpenAI-style and Slack tokens, as issued.
        rule(
            Kind::Secret,
            r"\b(?P<value>hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}|(?:AKIA|ASIA)[A-Z0-9]{16}|sk-[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,})\b",
            false,
        ),
        // NAME=value and NAME: value for keys, tokens, secrets and passwords
        // (WANDB_API_KEY, HF_TOKEN, aws_secret_access_key, --password …).
        rule(
            Kind::Secret,
            r#"(?i)\b[\w.-]*(?:api[_-]?key|token|secret|password|passwd|access[_-]?key)["']?(?:\s*[:=]\s*|\s+)["']?(?P<value>[A-Za-z0-9._~+/=-]{8,})"#,
            false,
        ),
        // `wandb login KEY`: a 40-hex key after the command.
        rule(
            Kind::Secret,
            r"(?i)\bwandb\s+login\s+(?:--relogin\s+)?(?P<value>[0-9a-f]{40})\b",
            false,
        ),
        rule(
            Kind::Email,
            r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            false,
        ),
        // Home folders: /home/alice, /Users/alice, C:\Users\alice, /data/home/alice.
        rule(
            Kind::User,
            r"(?:/home|/Users|/users|\\Users)[/\\](?P<value>[^/\\\s:'\x22]+)",
            true,
        ),
        // Four numbers are a release too (cuDNN 8.9.2.26): after a version's name
        // (`keep` sees `release`), or before `+`, they stay.
        rule(
            Kind::Ip,
            r"(?i)(?P<release>(?:cudnn|version|==|v)\s*[:=]?\s*)?\b(?P<value>(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3})\b(?P<plus>\+)?",
            true,
        ),
        // NCCL's line prefix `host:pid:tid [gpu]`, torchrun's `hostname : host`,
        // `pdsh@host:`, MASTER_ADDR=host, `user@host` in prompts and ssh commands.
        rule(
            Kind::Host,
            r"(?m)^(?:\[[^\]]*\]:?\s*)?(?P<value>[A-Za-z][\w-]*(?:\.[\w-]+)*):\d+:\d+ \[\d+\]",
            true,
        ),
        rule(
            Kind::Host,
            r"(?i)\b(?:hostname|host|node(?:list|name)?|master_addr|rdzv_endpoint)\s*[:=]\s*['\x22]?(?P<value>[A-Za-z][\w-]*(?:\.[\w-]+)*)",
            true,
        ),
        rule(
            Kind::Host,
            r"(?i)--(?:master[_-]addr|rdzv[_-]endpoint)[=\s]+['\x22]?(?P<value>[A-Za-z][\w-]*(?:\.[\w-]+)*)",
            true,
        ),
        rule(
            Kind::Host,
            r"\b(?:pdsh|ssh|root|[a-z_][a-z0-9_-]*)@(?P<value>[A-Za-z][\w-]*(?:\.[\w-]+)*)",
            true,
        ),
        // A machine named in prose: `on node-07`, `from gpu-a100-3`, `at worker-2`
        // (letters, a hyphen and a number; `on gpu-0` goes too, which costs nothing).
        rule(
            Kind::Host,
            r"(?i)\b(?:on|from|at|to|node|host|machine|server)\s+(?P<value>[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+[a-z0-9]*(?:\.[a-z][\w-]*)*)\b",
            true,
        ),
        // Names under private domains anywhere.
        rule(
            Kind::Host,
            r"(?i)\b(?P<value>[a-z0-9][\w-]*(?:\.[\w-]+)*\.(?:local|internal|lan|corp|intranet|cluster|svc|home|localdomain))\b",
            true,
        ),
    ]
});

/// Words that follow `host`, `node` and the like without being a machine's name.
const NOT_HOSTS: &[&str] = &[
    "localhost",
    "is",
    "was",
    "and",
    "or",
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "with",
    "for",
    "memory",
    "rank",
    "ranks",
    "name",
    "names",
    "count",
    "id",
    "none",
    "null",
    "true",
    "false",
    "failed",
    "not",
    "has",
    "had",
    "does",
    "did",
    "can",
    "could",
    "will",
    "would",
    "should",
    "may",
    "list",
    "per",
    "local",
    "process",
    "processes",
    "gpu",
    "gpus",
    "cpu",
    "side",
    "address",
    "port",
    "ip",
    "rank0",
];

/// `text` with every value the rules find replaced by a placeholder.
pub fn redact(text: &str) -> Redacted {
    let mut hidden = BTreeMap::new();
    let mut numbers: HashMap<(Kind, String), usize> = HashMap::new();
    let mut next: HashMap<Kind, usize> = HashMap::new();
    let mut text = text.to_string();
    for rule in RULES.iter() {
        let replaced = rule.pattern.replace_all(&text, |caps: &Captures| {
            let whole = caps.get(0).expect("a match");
            let value = caps.name("value").unwrap_or(whole);
            let found = value.as_str();
            let release = caps.name("release").is_some() || caps.name("plus").is_some();
            if release || keep(rule.kind, found) {
                return whole.as_str().to_string();
            }
            *hidden.entry(rule.kind).or_insert(0) += 1;
            let name = rule.kind.placeholder();
            let placeholder = if rule.numbered {
                let key = (rule.kind, found.to_ascii_lowercase());
                let n = *numbers.entry(key).or_insert_with(|| {
                    let n = next.entry(rule.kind).or_insert(0);
                    *n += 1;
                    *n
                });
                format!("<{name}-{n}>")
            } else {
                format!("<{name}>")
            };
            with_value(whole, value, &placeholder)
        });
        text = replaced.into_owned();
    }
    // A machine found in one place is the same machine wherever else its name stands
    // alone: in prose, a path, an error message.
    let mut hosts: Vec<(&String, usize)> = numbers
        .iter()
        .filter(|((kind, _), _)| *kind == Kind::Host)
        .map(|((_, name), n)| (name, *n))
        .collect();
    hosts.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, n) in hosts {
        let alone = Regex::new(&format!(
            r"(?i)(?:^|[^\w<.-])(?P<value>{})(?:$|[^\w-])",
            regex::escape(name)
        ))
        .expect("an escaped name compiles");
        let placeholder = format!("<host-{n}>");
        let mut count = 0;
        let replaced = alone.replace_all(&text, |caps: &Captures| {
            count += 1;
            let value = caps.name("value").expect("the group");
            with_value(caps.get(0).expect("a match"), value, &placeholder)
        });
        text = replaced.into_owned();
        if count > 0 {
            *hidden.entry(Kind::Host).or_insert(0) += count;
        }
    }
    let (text, ipv6) = redact_ipv6(&text);
    if ipv6 > 0 {
        *hidden.entry(Kind::Ip).or_insert(0) += ipv6;
    }
    Redacted { text, hidden }
}

/// The text of `whole` with its part `value` replaced by `placeholder`.
fn with_value(whole: Match, value: Match, placeholder: &str) -> String {
    let mut out = whole.as_str().to_string();
    out.replace_range(
        value.start() - whole.start()..value.end() - whole.start(),
        placeholder,
    );
    out
}

/// Whether a value a rule found is left as it is: placeholders already put, loopback
/// and unspecified addresses, and words that only look like names.
fn keep(kind: Kind, value: &str) -> bool {
    if value.starts_with('<') {
        return true;
    }
    match kind {
        Kind::Ip => value.starts_with("127.") || value == "0.0.0.0",
        Kind::Host => {
            let lower = value.to_ascii_lowercase();
            NOT_HOSTS.contains(&lower.as_str())
                || lower.starts_with("localhost")
                || value.chars().all(|c| c.is_ascii_digit())
        }
        Kind::User => matches!(value, "<user>" | "user" | "ubuntu" | "root"),
        Kind::Secret | Kind::Email => false,
    }
}

/// IPv6 addresses: a run of hex digits, colons and dots that parses as one and is not
/// loopback or unspecified (times like `09:42:17` do not parse).
fn redact_ipv6(text: &str) -> (String, usize) {
    static CANDIDATE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?:%\w+)?").expect("compiles")
    });
    let mut count = 0;
    let out = CANDIDATE.replace_all(text, |caps: &Captures| {
        let found = &caps[0];
        let address = found.split('%').next().unwrap_or(found);
        match address.parse::<Ipv6Addr>() {
            Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() => {
                count += 1;
                "<ip6>".to_string()
            }
            _ => found.to_string(),
        }
    });
    (out.into_owned(), count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (paste, what must be gone, what must stay)
    const TABLE: &[(&str, &[&str], &[&str])] = &[
        (
            "export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            &["hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"],
            &["HF_TOKEN="],
        ),
        (
            "huggingface_hub.login(token='hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210')",
            &["hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"],
            &["login(token="],
        ),
        (
            "wandb: WANDB_API_KEY=3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f",
            &["3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f"],
            &["WANDB_API_KEY"],
        ),
        (
            "$ wandb login 3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f",
            &["3f2a9c1b7e8d4f6a0b5c2e9d1a7f3b8c4e6d2a0f"],
            &["wandb login"],
        ),
        (
            "git clone https://alice:ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R@github.com/org/repo.git",
            &["alice", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"],
            &["github.com/org/repo.git"],
        ),
        (
            "GITHUB_TOKEN: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            &["github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"],
            &["GITHUB_TOKEN"],
        ),
        (
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            &[
                "AKIAIOSFODNN7EXAMPLE",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ],
            &["aws_secret_access_key"],
        ),
        (
            "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig' http://10.0.0.5:8000/",
            &["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "10.0.0.5"],
            &["Authorization: Bearer", ":8000/"],
        ),
        (
            "requests.exceptions.HTTPError: 401 for url: https://bob:s3cr3tpass@mirror.corp.example/simple",
            &["bob", "s3cr3tpass"],
            &["401 for url"],
        ),
        (
            "Contact alice.zhang@example.com or ops-team@gpu-lab.cn",
            &["alice.zhang@example.com", "ops-team@gpu-lab.cn"],
            &["Contact"],
        ),
        (
            "  File \"/home/alice/proj/train.py\", line 88, in <module>",
            &["alice"],
            &["/home/<user-1>/proj/train.py", "line 88"],
        ),
        (
            "  File \"/Users/bob.smith/miniconda3/lib/python3.10/site-packages/torch/nn/modules/module.py\"",
            &["bob.smith"],
            &["miniconda3/lib/python3.10"],
        ),
        (
            "gpu-node-17:2841:2841 [0] NCCL INFO Bootstrap : Using eth0:10.42.3.17<0>",
            &["gpu-node-17", "10.42.3.17"],
            &["NCCL INFO Bootstrap", "eth0"],
        ),
        (
            "  hostname  : worker-a100-03.cluster.local\n  rank      : 5 (local_rank: 1)",
            &["worker-a100-03"],
            &["rank      : 5"],
        ),
        (
            "pdsh@login01: node-2: ssh exited with exit code 255",
            &["login01"],
            &["ssh exited with exit code 255"],
        ),
        (
            "MASTER_ADDR=train-master-0 MASTER_PORT=29500 torchrun --nnodes 2 train.py",
            &["train-master-0"],
            &["MASTER_PORT=29500"],
        ),
        (
            "The client socket has timed out while trying to connect to (fe80::1ff:fe23:4567:890a, 29500)",
            &["fe80::1ff:fe23:4567:890a"],
            &["29500"],
        ),
        (
            "[E1104 09:42:17.318204512 ProcessGroupNCCL.cpp:607] connect to 127.0.0.1:29500 and ::1 failed",
            &[],
            &[
                "09:42:17.318204512",
                "127.0.0.1:29500",
                "::1",
                "ProcessGroupNCCL.cpp:607",
            ],
        ),
        (
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: NCCL version 2.19.3+cuda12.2",
            &[],
            &[
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                "2.19.3+cuda12.2",
            ],
        ),
        (
            "cuDNN version: 8.9.2.26, NCCL 2.18.1.1+cuda12.1; the host ran out of memory; node failed",
            &[],
            &[
                "8.9.2.26",
                "2.18.1.1+cuda12.1",
                "the host ran out of memory",
                "node failed",
            ],
        ),
        (
            "torchrun --master_addr gpu-07 --master_port 29500 --nnodes 2 train.py",
            &["gpu-07"],
            &["--master_port 29500"],
        ),
    ];

    #[test]
    fn every_secret_of_the_table_is_gone_and_the_error_text_stays() {
        for (paste, gone, stays) in TABLE {
            let out = redact(paste).text;
            for secret in *gone {
                assert!(!out.contains(secret), "{secret:?} survives in {out:?}");
            }
            for kept in *stays {
                assert!(out.contains(kept), "{kept:?} lost from {out:?}");
            }
        }
    }

    #[test]
    fn the_same_machine_keeps_one_name_and_another_gets_its_own() {
        let log = "node-a:101:101 [0] NCCL INFO init\nnode-b:202:202 [1] NCCL INFO init\nnode-a:101:101 [0] NCCL WARN timeout";
        let out = redact(log);
        let lines: Vec<&str> = out.text.lines().collect();
        assert!(lines[0].starts_with("<host-1>:101"), "{}", out.text);
        assert!(lines[1].starts_with("<host-2>:202"), "{}", out.text);
        assert!(lines[2].starts_with("<host-1>:101"), "{}", out.text);
        assert_eq!(out.hidden[&Kind::Host], 3);
    }

    #[test]
    fn a_machine_named_once_is_hidden_wherever_else_it_stands() {
        let log = "gpu-node-17:2841:2841 [0] NCCL WARN Connection closed by remote peer\n\
                   The job died on gpu-node-17 after 3 h; gpu-node-170 was fine.\n\
                   ssh into gpu-node-17 and run nvidia-smi";
        let out = redact(log).text;
        assert!(!out.contains("gpu-node-17 "), "{out}");
        assert!(!out.contains("gpu-node-17;"), "{out}");
        assert!(out.contains("died on <host-1> after"), "{out}");
        assert!(out.contains("ssh into <host-1> and"), "{out}");
        assert!(out.contains("gpu-node-170 was fine"), "{out}");
    }

    #[test]
    fn a_machine_named_only_in_prose_is_hidden() {
        let out = redact("rank 3 on node-07 hangs; the run from worker-a100-2 is fine").text;
        assert!(!out.contains("node-07"), "{out}");
        assert!(!out.contains("worker-a100-2"), "{out}");
        assert!(out.contains("rank 3 on <host-1> hangs"), "{out}");
        let dotted = redact("the shard on gpu-node-01.cluster.local is short").text;
        assert!(dotted.contains("on <host-1> is short"), "{dotted}");
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        for (paste, _, _) in TABLE {
            let once = redact(paste).text;
            assert_eq!(redact(&once).text, once, "{paste}");
        }
    }
}
