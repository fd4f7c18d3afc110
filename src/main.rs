//! The `errbook` command: serve the portal and API, check a knowledge base, search it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use errbook::answer::{Answers, EntryTexts};
use errbook::diagnose::{Diagnoser, Paste, Pasted, Request, Verdict, clip};
use errbook::kb::{Branch, Entry, Kb, Lang, LoadError, Loaded, Section, Sources};
use errbook::reload::Reloader;
use errbook::search::{CacheBudget, IndexStore, SearchError, SearchIndex, SearchQuery};
use errbook::web::server;
use errbook::{AppState, app};

/// `println!` for what a command answers: a reader that goes away
/// (`errbook diagnose x.log | head -1`) ends the command quietly with status 0, as other
/// Unix tools end, and any other failed write is an error.
macro_rules! say {
    () => { $crate::say_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::say_line(format_args!($($arg)*)) };
}

mod eval;
mod inbox_cli;
mod run;

fn say_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(err) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to standard output: {err}");
        std::process::exit(1);
    }
}

/// mimalloc instead of glibc's allocator: faster for the many small allocations of
/// analysis, indexing and JSON; tuned in `tune_allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "errbook",
    version,
    about = "Known problems of distributed training, answered offline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct KbArg {
    /// A team's folder of Markdown entries, added to the built-in ones (an entry with a
    /// built-in entry's slug replaces it); repeat for more. Environment: separated by `:`.
    #[arg(
        long = "kb",
        value_name = "DIR",
        env = "ERRBOOK_KB",
        value_delimiter = ':'
    )]
    kb: Vec<PathBuf>,
    /// Only the team's entries (`--kb`), none of the built-in ones.
    #[arg(long, env = "ERRBOOK_NO_BUILTIN",
      value_parser = clap::builder::FalseyValueParser::new())]
    no_builtin: bool,
    /// Folder where built indexes are kept, so that the next start with the same
    /// entries opens them instead of building them [default: $XDG_CACHE_HOME/errbook,
    /// or ~/.cache/errbook].
    #[arg(long, env = "ERRBOOK_INDEX_CACHE")]
    index_cache: Option<PathBuf>,
    /// Build the indexes in memory only, reading and writing no index cache.
    #[arg(long)]
    no_index_cache: bool,
}

impl KbArg {
    /// Where the entries come from.
    fn sources(&self) -> anyhow::Result<Sources> {
        let folders: Vec<PathBuf> = (self.kb.iter())
            .filter(|dir| !dir.as_os_str().is_empty())
            .cloned()
            .collect();
        if self.no_builtin && folders.is_empty() {
            anyhow::bail!(
                "--no-builtin leaves no entries: name the team's folder with --kb DIR \
                 (or ERRBOOK_KB)"
            );
        }
        Ok(Sources {
            builtin: !self.no_builtin,
            folders,
        })
    }

    fn store(&self) -> Option<IndexStore> {
        if self.no_index_cache {
            return None;
        }
        let root = self.index_cache.clone().or_else(|| {
            let home = |var| std::env::var_os(var).filter(|dir| !dir.is_empty());
            home("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| home("HOME").map(|dir| Path::new(&dir).join(".cache")))
                .map(|cache| cache.join("errbook"))
        })?;
        Some(IndexStore::new(root))
    }

    /// The search index of `kb`, opened from the index cache when it holds it.
    fn index(&self, kb: Kb) -> Result<SearchIndex, SearchError> {
        SearchIndex::build_in(Arc::new(kb), self.store().as_ref())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve the web portal and the JSON API.
    Serve {
        #[command(flatten)]
        kb: KbArg,
        #[command(flatten)]
        options: ServeOptions,
    },
    /// Validate every entry; exits non-zero naming file and line of each problem.
    Check {
        #[command(flatten)]
        kb: KbArg,
    },
    /// Diagnose a traceback or log: `torchrun train.py 2>&1 | errbook diagnose -`.
    Diagnose {
        /// Log file to read, or `-` for standard input.
        #[arg(default_value = "-")]
        file: PathBuf,
        #[command(flatten)]
        kb: KbArg,
        /// Number of matches, 1 to 20 [default: 5].
        #[arg(long, allow_negative_numbers = true)]
        limit: Option<i64>,
        /// Print the API's JSON instead of text (both languages, as the API gives them).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lang: LangArg,
        #[command(flatten)]
        links: LinkArg,
    },
    /// Print an entry: `errbook show nccl-watchdog-timeout`.
    Show {
        /// The entry's slug (as `diagnose` and `search` print it).
        slug: String,
        #[command(flatten)]
        kb: KbArg,
        #[command(flatten)]
        lang: LangArg,
        #[command(flatten)]
        links: LinkArg,
    },
    /// Draft a new entry from a failure errbook does not know: `errbook draft job.log
    /// --out kb/team`.
    ///
    /// The draft has a slug and title from the root exception, signatures generalised
    /// from its message (numbers, hex, paths and addresses as patterns; wrapper
    /// exceptions weak), the paste's lines around it as the first example with user
    /// names, hosts, addresses, e-mails and secrets taken out, and the closest entries
    /// as related. What a person must write is marked `TODO(draft)`; `errbook check`
    /// lists each one left. Without --out the entry's file is printed.
    Draft {
        /// Log file to read, or `-` for standard input.
        #[arg(default_value = "-")]
        file: PathBuf,
        #[command(flatten)]
        kb: KbArg,
        /// Folder to write `<slug>.md` and its Chinese body `<slug>.zh.md` into (never
        /// over an existing file).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Score diagnosis against labelled pastes: DIR/manifest.tsv (file, expected, kind, source).
    Eval {
        /// Folder with manifest.tsv and the paste files.
        dir: PathBuf,
        #[command(flatten)]
        kb: KbArg,
        /// Print one line per case.
        #[arg(long)]
        verbose: bool,
    },
    /// Run a training job; when it fails, print the diagnosis of its output:
    /// `errbook run -- torchrun --nproc-per-node 8 train.py`.
    ///
    /// The job's standard output and error pass through unchanged, each line as soon as
    /// the job prints it; errbook keeps only a bounded window of them (the start, the
    /// error lines, each rank's traceback, the end). When the job fails (a non-zero exit
    /// or a signal), the diagnosis follows on standard error: the answer, the first
    /// steps of its fix, and `errbook show SLUG`, or with --server the server's share
    /// link. errbook exits with the job's status (128 + N when signal N killed it; 127
    /// when the command is not found) and passes SIGINT, SIGTERM, SIGHUP, SIGQUIT,
    /// SIGUSR1 and SIGUSR2 on to the job, except a terminal's own (Ctrl-C reaches the
    /// job already). At a terminal the job gets PYTHONUNBUFFERED=1 unless it is set, so
    /// Python prints line by line as it does there.
    ///
    /// Around torchrun every rank's output arrives through torchrun's own, and under
    /// srun each task's errbook runs its own job: `srun errbook run -- python train.py`.
    Run {
        #[command(flatten)]
        kb: KbArg,
        /// The team's errbook server (`https://errbook.example.com`): the diagnosis
        /// ends with its share link for this job's output, which opens the whole answer.
        #[arg(
            long,
            env = "ERRBOOK_PUBLIC_URL",
            value_name = "URL",
            alias = "public-url"
        )]
        server: Option<String>,
        #[command(flatten)]
        lang: LangArg,
        /// The job: a command and its arguments, after `--`.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<std::ffi::OsString>,
    },
    /// The team's inbox in the store a server keeps: list its groups, purge what is
    /// past the retention, or export what people labelled as an `errbook eval` folder.
    Inbox {
        #[command(subcommand)]
        command: inbox_cli::InboxCommand,
    },
    /// Full-text search from the terminal.
    Search {
        /// Words, an error message, or Chinese text.
        query: String,
        #[command(flatten)]
        kb: KbArg,
        /// Only entries with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Number of results.
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        links: LinkArg,
    },
}

#[derive(clap::Args)]
struct LangArg {
    /// Language of the answer: `en` or `zh-CN` (`zh` will do).
    #[arg(long, env = "ERRBOOK_LANG", default_value = "en", value_parser = parse_lang)]
    lang: Lang,
}

fn parse_lang(tag: &str) -> Result<Lang, String> {
    Lang::parse(tag).ok_or_else(|| format!("`{tag}` is not `en` or `zh-CN`"))
}

#[derive(clap::Args)]
struct LinkArg {
    /// The team's errbook server (`https://errbook.example.com`): answers link to its
    /// entry pages.
    #[arg(long, env = "ERRBOOK_PUBLIC_URL")]
    public_url: Option<String>,
}

impl LinkArg {
    /// What entry links start with: the server's URL, or nothing for relative links.
    fn base(&self) -> anyhow::Result<&str> {
        match self.public_url.as_deref() {
            Some(url) => server_base(url),
            None => Ok(""),
        }
    }
}

fn server_base(url: &str) -> anyhow::Result<&str> {
    errbook::web::public_base(url).map_err(|message| anyhow::anyhow!("--public-url: {message}"))
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { kb, options } => serve(&kb, options),
        Command::Check { kb } => check(&kb),
        Command::Diagnose {
            file,
            kb,
            limit,
            json,
            lang,
            links,
        } => diagnose(&kb, &file, limit, json, lang.lang, &links),
        Command::Show {
            slug,
            kb,
            lang,
            links,
        } => show(&kb, &slug, lang.lang, &links),
        Command::Draft { file, kb, out } => draft(&kb, &file, out.as_deref()),
        Command::Eval { dir, kb, verbose } => match load(&kb) {
            Ok(Some(loaded)) => eval::run(loaded.kb, &dir, verbose),
            Ok(None) => Ok(ExitCode::FAILURE),
            Err(err) => Err(err),
        },
        Command::Inbox { command } => inbox_cli::run(command),
        Command::Search {
            query,
            kb,
            tag,
            limit,
            json,
            links,
        } => search(&kb, &query, tag.as_deref(), limit, json, &links),
        Command::Run {
            kb,
            server,
            lang,
            command,
        } => run::run(&kb, server.as_deref(), lang.lang, &command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Loads the knowledge base, printing every problem in it when it is invalid.
fn load(kb_arg: &KbArg) -> anyhow::Result<Option<Loaded>> {
    let sources = kb_arg.sources()?;
    match Kb::load_from(&sources) {
        Ok(loaded) => Ok(Some(loaded)),
        Err(LoadError::Invalid { problems }) => {
            for problem in &problems {
                eprintln!("error: {problem}");
            }
            eprintln!(
                "{}: {} problem(s) found",
                sources.describe(),
                problems.len()
            );
            Ok(None)
        }
        Err(err) => Err(anyhow::anyhow!(
            "{err} (the team's folders are named by --kb DIR or ERRBOOK_KB)"
        )),
    }
}

fn check(kb_arg: &KbArg) -> anyhow::Result<ExitCode> {
    let Some(Loaded { kb, replaced }) = load(kb_arg)? else {
        return Ok(ExitCode::FAILURE);
    };
    let sources = kb_arg.sources()?;
    for replacement in &replaced {
        eprintln!("note: {replacement}");
    }
    let entries = kb.len();
    let examples: usize = kb.entries().iter().map(|e| e.examples.len()).sum();
    let bilingual = kb.entries().iter().filter(|e| e.body_zh.is_some()).count();
    let mut problems = kb.compile_regexes();
    problems.extend(kb.example_problems());
    problems.extend(kb.translation_problems());
    problems.extend(kb.unwritten_problems());
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    problems.extend(diagnoser.check_examples()?);
    problems.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        eprintln!(
            "{}: {} problem(s) found",
            sources.describe(),
            problems.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    say!(
        "{}: {entries} entries, all valid and in English and Chinese ({bilingual}); \
         all {examples} examples diagnose to their own entry",
        sources.describe()
    );
    Ok(ExitCode::SUCCESS)
}

fn search(
    kb_arg: &KbArg,
    query: &str,
    tag: Option<&str>,
    limit: usize,
    json: bool,
    links: &LinkArg,
) -> anyhow::Result<ExitCode> {
    let base = links.base()?;
    let Some(Loaded { kb, .. }) = load(kb_arg)? else {
        return Ok(ExitCode::FAILURE);
    };
    let index = kb_arg.index(kb)?;
    let asked = SearchQuery::new(query, tag, limit);
    let found = index.search(&asked)?;
    let hits = &found.hits;
    if json {
        let kb = index.kb();
        let texts = EntryTexts::new(kb);
        let answers = Answers {
            kb,
            texts: &texts,
            base,
        };
        let response = answers.search(asked, &found);
        say!("{}", serde_json::to_string_pretty(&response)?);
    } else if hits.is_empty() {
        say!("no entry matches {query:?}");
    } else {
        for (i, h) in hits.iter().enumerate() {
            let Some(e) = index.kb().get(&h.slug) else {
                continue;
            };
            say!("{}. {}  [{}]  score {:.2}", i + 1, e.title, e.slug, h.score);
            say!("   {}", e.title_zh);
            say!("   {}", h.snippet);
        }
        say!("\nread one: errbook show SLUG");
    }
    Ok(ExitCode::SUCCESS)
}

fn diagnose(
    kb_arg: &KbArg,
    file: &Path,
    limit: Option<i64>,
    json: bool,
    lang: Lang,
    links: &LinkArg,
) -> anyhow::Result<ExitCode> {
    let base = links.base()?;
    // The paste first: a log file that is not there is the error to report, whatever
    // the knowledge base.
    let paste = if file == Path::new("-") {
        Paste::from_reader(std::io::stdin().lock()).context("reading standard input")?
    } else {
        let f =
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        Paste::from_reader(std::io::BufReader::new(f))
            .with_context(|| format!("cannot read {}", file.display()))?
    };
    let request = Request::new(Pasted::Read(paste), limit)
        .with_context(|| format!("cannot diagnose {}", file.display()))?;
    let Some(Loaded { kb, .. }) = load(kb_arg)? else {
        return Ok(ExitCode::FAILURE);
    };
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    let d = diagnoser.answer(&request)?;
    let kb = diagnoser.index().kb();
    if json {
        let texts = EntryTexts::new(kb);
        let answers = Answers {
            kb,
            texts: &texts,
            base,
        };
        say!("{}", serde_json::to_string_pretty(&answers.diagnosis(&d))?);
        return Ok(ExitCode::SUCCESS);
    }
    print_diagnosis(kb, &d, base, lang);
    Ok(ExitCode::SUCCESS)
}

/// Largest paste a draft reads: its end is kept, where the failure is.
const DRAFT_MAX_BYTES: usize = 8 << 20;

fn draft(kb_arg: &KbArg, file: &Path, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
    } else {
        bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    }
    let start = bytes.len().saturating_sub(DRAFT_MAX_BYTES);
    let text = String::from_utf8_lossy(&bytes[start..]).into_owned();
    if text.trim().is_empty() {
        anyhow::bail!(
            "{} is empty: a draft starts from a failure's log",
            file.display()
        );
    }
    let Some(Loaded { kb, .. }) = load(kb_arg)? else {
        return Ok(ExitCode::FAILURE);
    };
    let diagnoser = Diagnoser::new(Arc::new(kb_arg.index(kb)?));
    let d = diagnoser.diagnose_text(&text, 3)?;
    let kb = diagnoser.index().kb();
    if d.verdict == Verdict::Matched
        && let Some(e) = d.matches.first().and_then(|m| kb.get(&m.slug))
    {
        eprintln!(
            "note: errbook already answers this paste: {} [{}]; if that answer is wrong, \
             widen or fix that entry rather than add a second one",
            e.title, e.slug
        );
    }
    let draft = errbook::draft::draft(kb, &text, &d).with_context(|| {
        let from = if file == Path::new("-") {
            "standard input".to_string()
        } else {
            file.display().to_string()
        };
        format!("cannot draft an entry from {from}")
    })?;
    let Some(dir) = out else {
        say!("{}", draft.entry.trim_end());
        eprintln!(
            "note: with --out DIR the draft's Chinese body ({}.zh.md) is written beside it",
            draft.slug
        );
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let entry = dir.join(format!("{}.md", draft.slug));
    let chinese = dir.join(format!("{}.zh.md", draft.slug));
    for (path, text) in [(&entry, &draft.entry), (&chinese, &draft.chinese)] {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| {
                format!(
                    "cannot write {} (a draft never replaces a file)",
                    path.display()
                )
            })?;
        file.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    say!(
        "wrote {} and {}; `errbook check --kb {}` lists what is left to write",
        entry.display(),
        chinese.display(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints an entry for reading in a terminal: its Markdown as written, which reads
/// well as it is, with the front matter's facts above it.
fn show(kb_arg: &KbArg, slug: &str, lang: Lang, links: &LinkArg) -> anyhow::Result<ExitCode> {
    let base = links.base()?;
    let Some(Loaded { kb, .. }) = load(kb_arg)? else {
        return Ok(ExitCode::FAILURE);
    };
    let slug = slug.trim();
    let Some(e) = kb.get(slug) else {
        let index = kb_arg.index(kb)?;
        let near = index.search(&SearchQuery::new(&slug.replace('-', " "), None, 3))?;
        let names: Vec<&str> = near.hits.iter().map(|h| h.slug.as_str()).collect();
        if names.is_empty() {
            anyhow::bail!("no entry `{slug}` (`errbook search WORDS` finds one)");
        }
        anyhow::bail!("no entry `{slug}`; did you mean: {}", names.join(", "));
    };
    print_entry(e, lang, base);
    Ok(ExitCode::SUCCESS)
}

fn print_entry(e: &Entry, lang: Lang, base: &str) {
    say!("{}  [{}]", lang.pick(&e.title, &e.title_zh), e.slug);
    say!("{}", lang.pick(&e.summary, &e.summary_zh));
    say!("tags: {}", e.tags.join(", "));
    for a in &e.versions {
        match &a.fixed {
            Some(fixed) => say!("affects: {} {} (fixed in {fixed})", a.package, a.range),
            None => say!("affects: {} {}", a.package, a.range),
        }
    }
    let body = e.body(lang);
    if body.lang != lang {
        say!("\n（本条目还没有中文正文，以下是英文。）");
    }
    say!("\n{}", body.markdown.trim_end());
    if !e.branches.is_empty() {
        say!("\n## {}", lang.pick("By cause", "按原因"));
        for b in &e.branches {
            say!("\n### {}\n", lang.pick(&b.title, &b.title_zh));
            say!(
                "{}",
                Branch::filled(lang.pick(&b.fix, &b.fix_zh), &[]).trim_end()
            );
        }
    }
    if !e.related.is_empty() {
        say!("\nrelated: {}", e.related.join(", "));
    }
    for source in &e.sources {
        say!("source: {source}");
    }
    if !base.is_empty() {
        say!("\n{base}/entries/{}", e.slug);
    }
}

/// Lines of an entry's Fix printed under the first match.
const FIX_LINES: usize = 30;

/// A diagnosis as a terminal's first screen: the answer and its fix first when there is
/// one; otherwise what happened, then the candidates (`possible`: the first with the
/// cause its evidence selected, if any, and no generic fix) or the leads (`no_match`),
/// one line each past the first.
fn print_diagnosis(kb: &errbook::kb::Kb, d: &errbook::diagnose::Diagnosis, base: &str, lang: Lang) {
    let t = |en, zh| lang.pick(en, zh);
    let title = |e: &Entry| lang.pick(&e.title, &e.title_zh).to_string();
    let show = |slug: &str| match lang {
        Lang::En => format!("errbook show {slug}"),
        Lang::Zh => format!("errbook show {slug} --lang zh-CN"),
    };
    let summary = d.triage.summary_in(d.parsed.root_exception(), lang);
    let what_happened = || {
        if !summary.is_empty() {
            say!("{summary}");
        }
        for fact in &d.triage.environment {
            say!("  {}: {}", fact.name, fact.value);
        }
    };
    match d.verdict {
        Verdict::Matched => {}
        Verdict::Possible => {
            say!(
                "{}",
                t(
                    "errbook is not sure; the closest candidate:",
                    "errbook 没有把握；最接近的候选："
                )
            );
            what_happened();
            say!();
        }
        Verdict::NoMatch => {
            // A question's leads are the entries about it; a failure's are unlikely.
            let question = d.question && !d.matches.is_empty();
            if question {
                // Words alone pick the right entry first less than half the time: list
                // the entries, and assert none of their causes.
                say!(
                    "{}",
                    t(
                        "no error in this paste to diagnose; the entries closest to its words\n\
                         (paste the traceback or the log's last lines for a diagnosis):",
                        "这段文字里没有可以诊断的报错；与它的字词最接近的条目\n\
                         （贴上 traceback 或日志的最后几行才能诊断）："
                    )
                );
            } else {
                say!(
                    "{}",
                    t(
                        "errbook does not know this failure: no entry fits it firmly.",
                        "errbook 不认识这个故障：没有条目能确切对上。"
                    )
                );
                what_happened();
                for hit in &d.closest {
                    if let Some(e) = kb.get(&hit.slug) {
                        say!(
                            "  {}: {} [{}]",
                            t("closest by text", "文字最接近"),
                            title(e),
                            e.slug
                        );
                    }
                }
                if !d.matches.is_empty() {
                    say!(
                        "\n{}",
                        t(
                            "entries with a little evidence, each unlikely:",
                            "有少量证据、但都不太可能的条目："
                        )
                    );
                }
            }
            for m in &d.matches {
                if let Some(e) = kb.get(&m.slug) {
                    say!("  - {} [{}]", title(e), e.slug);
                }
            }
            return;
        }
    }
    let Some((m, e)) = d.matches.first().and_then(|m| Some((m, kb.get(&m.slug)?))) else {
        return;
    };
    let answer = d.verdict == Verdict::Matched;
    say!("{}", headline(e, m, answer, lang));
    say!("   {}", lang.pick(&e.summary, &e.summary_zh));
    for ev in &m.evidence {
        say!(
            "   {} {:>5}: {}",
            t("line", "行"),
            ev.line,
            clip(&ev.text, 120)
        );
    }
    for check in &m.versions {
        say!(
            "   {}",
            match lang {
                Lang::En => check.sentence(),
                Lang::Zh => check.sentence_zh(),
            }
        );
    }
    if let Some(chosen) = &m.branch {
        let b = &e.branches[chosen.index];
        let lines: Vec<String> = chosen.lines.iter().map(usize::to_string).collect();
        say!(
            "\n   {}: {} ({} {})",
            t("most likely", "最可能"),
            lang.pick(&b.title, &b.title_zh),
            t("line", "行"),
            lines.join(", ")
        );
        for line in Branch::filled(lang.pick(&b.fix, &b.fix_zh), &chosen.values).lines() {
            say!("     {line}");
        }
        let others: Vec<&str> = (e.branches.iter())
            .filter(|o| o.id != b.id)
            .map(|o| lang.pick(&o.title, &o.title_zh))
            .collect();
        if !others.is_empty() {
            say!(
                "   {}: {}",
                t("if it is not this, check", "如果不是这个，再检查"),
                others.join(t("; ", "；"))
            );
        }
    } else {
        // A candidate errbook is not sure of, with no cause selected, is right less than
        // half the time: its generic fix would read as an answer, so only its causes show.
        let fix = (e.body(lang).section(Section::Fix)).filter(|_| answer);
        if !e.branches.is_empty() && (fix.is_some() || !answer) {
            let heading = match answer {
                true => t(
                    "the paste does not say which of these causes it is:",
                    "这段日志看不出是下面哪一个原因：",
                ),
                false => t(
                    "its causes, none selected by the paste:",
                    "它的几种原因，这段日志没有选中任何一个：",
                ),
            };
            say!("\n   {heading}");
            for b in &e.branches {
                say!("     - {}", lang.pick(&b.title, &b.title_zh));
            }
        }
        if let Some(fix) = fix {
            say!("\n   {}", t("fix:", "解决："));
            for line in fix.lines().take(FIX_LINES) {
                say!("     {line}");
            }
            let more = fix.lines().count().saturating_sub(FIX_LINES);
            if more > 0 {
                match lang {
                    Lang::En => say!("     … {more} more lines: {}", show(&e.slug)),
                    Lang::Zh => say!("     … 还有 {more} 行：{}", show(&e.slug)),
                }
            }
        } else if !answer {
            say!(
                "\n   {}",
                t(
                    "check its lines against yours before you follow its fix",
                    "先核对上面的依据行与你的日志是否一致，再照它的方法处理"
                )
            );
        }
    }
    if base.is_empty() {
        say!(
            "\n   {}{}",
            t("the whole entry: ", "完整条目："),
            show(&e.slug)
        );
    } else {
        let query = if lang.is_zh() { "?lang=zh-CN" } else { "" };
        say!("\n   {base}/entries/{}{query}", e.slug);
    }
    if answer && !(summary.is_empty() && d.triage.environment.is_empty()) {
        say!();
        what_happened();
    }
    let others: Vec<_> = d.matches[1..]
        .iter()
        .filter_map(|m| Some((m, kb.get(&m.slug)?)))
        .collect();
    if !others.is_empty() {
        say!("\n{}", t("other candidates:", "其他候选："));
        for (m, e) in others {
            say!("  - {} [{}] — {}", title(e), e.slug, confidence(m, lang));
        }
    }
}

/// A match's first line: `Title [slug] — the answer, high confidence`.
fn headline(e: &Entry, m: &errbook::diagnose::Match, answer: bool, lang: Lang) -> String {
    match lang {
        Lang::En => format!(
            "{} [{}] — {}{} confidence",
            e.title,
            e.slug,
            if answer { "the answer, " } else { "" },
            m.confidence.as_str()
        ),
        Lang::Zh => format!(
            "{} [{}] — {}置信度{}",
            e.title_zh,
            e.slug,
            if answer { "答案，" } else { "" },
            confidence(m, lang)
        ),
    }
}

/// A match's confidence, as a word in `lang`.
fn confidence(m: &errbook::diagnose::Match, lang: Lang) -> &'static str {
    use errbook::diagnose::Confidence;
    match (lang, m.confidence) {
        (Lang::En, c) => c.as_str(),
        (Lang::Zh, Confidence::High) => "高",
        (Lang::Zh, Confidence::Medium) => "中",
        (Lang::Zh, Confidence::Low) => "低",
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 0 to 3600"
        )),
    }
}

/// `errbook serve`'s settings beside the knowledge base.
#[derive(clap::Args)]
struct ServeOptions {
    /// Address to listen on.
    #[arg(long, env = "ERRBOOK_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// The URL users reach this server at (`https://errbook.example.com`): API and
    /// MCP answers then carry absolute links a chatbot can cite.
    #[arg(long, env = "ERRBOOK_PUBLIC_URL")]
    public_url: Option<String>,
    /// Reload the knowledge base whenever a file under it changes (`SIGHUP`
    /// reloads it in any case). A broken edit keeps the last good one serving.
    #[arg(long)]
    watch: bool,
    /// Seconds a request may take, waiting for its turn included, before 503.
    #[arg(long, env = "ERRBOOK_REQUEST_TIMEOUT", default_value_t = 15.0,
      value_parser = parse_seconds)]
    request_timeout: f64,
    /// Seconds a stop (SIGTERM, Ctrl-C) waits for requests in flight before
    /// closing them; under Docker's and Kubernetes' default of 10 s before SIGKILL.
    #[arg(long, env = "ERRBOOK_GRACE_PERIOD", default_value_t = 8.0,
      value_parser = parse_seconds)]
    grace_period: f64,
    /// A browser origin (`https://chat.example.com`) whose pages may call `/mcp`,
    /// besides pages on this machine and the public URL; repeat for more.
    /// Environment: comma-separated.
    #[arg(
        long = "allowed-origin",
        env = "ERRBOOK_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// Mebibytes the caches (term impacts, recent diagnoses and searches) may hold
    /// together [default: 64, or 8 KiB per entry past 8,192 entries].
    #[arg(long, env = "ERRBOOK_CACHE_MB", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    cache_mb: Option<u64>,
    #[command(flatten)]
    store: inbox_cli::StoreArg,
    /// Keep the pastes errbook answers `no_match` or `possible`, redacted, for the
    /// curators' inbox (off by default; the portal says so beside the paste box).
    #[arg(long, env = "ERRBOOK_CAPTURE",
      value_parser = clap::builder::FalseyValueParser::new())]
    capture: bool,
    /// The curators' token for `/inbox` (at least 16 characters); without it the
    /// inbox pages are off.
    #[arg(long, env = "ERRBOOK_CURATOR_TOKEN", hide_env_values = true)]
    curator_token: Option<String>,
}

fn serve(kb_arg: &KbArg, options: ServeOptions) -> anyhow::Result<ExitCode> {
    let ServeOptions {
        addr,
        public_url,
        watch,
        request_timeout,
        grace_period,
        allowed_origins,
        cache_mb,
        store: store_arg,
        capture,
        curator_token,
    } = options;
    let request_timeout = Duration::from_secs_f64(request_timeout);
    let grace_period = Duration::from_secs_f64(grace_period);
    CacheBudget::set(cache_mb.map(|mb| mb << 20));
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "errbook=info,tower_http=warn".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let started = Instant::now();
    let sources = kb_arg.sources()?;
    let Some(Loaded { kb, replaced }) = load(kb_arg)? else {
        eprintln!(
            "error: refusing to serve an invalid knowledge base; fix it and run `errbook check`"
        );
        return Ok(ExitCode::FAILURE);
    };
    let entries = kb.len();
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "kb loaded");
    if !replaced.is_empty() {
        let slugs: Vec<&str> = replaced.iter().map(|r| r.slug.as_str()).collect();
        tracing::info!(
            "{} team entries replace built-in ones: {}",
            slugs.len(),
            slugs.join(", ")
        );
    }
    let store = kb_arg.store();
    let index =
        SearchIndex::build_in(Arc::new(kb), store.as_ref()).context("building the search index")?;
    let mut state = AppState::new(index);
    state.limits.request_timeout = request_timeout;
    state.allowed_origins = allowed_origins
        .iter()
        .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
        .filter(|o| !o.is_empty())
        .collect();
    // Before anything opens files: a reload reads every entry, and at the common
    // `ulimit -n 1024` a flood of connections would leave it none.
    let config = server::ServerConfig {
        max_connections: server::connection_cap(),
        grace_period,
    };
    if let Some(base) = public_url.as_deref() {
        state = match state.with_public_url(base) {
            Ok(state) => state,
            Err(message) => {
                eprintln!("error: --public-url: {message}");
                return Ok(ExitCode::FAILURE);
            }
        };
    }
    let inbox_options = errbook::inbox::InboxOptions {
        location: store_arg.location()?,
        capture,
        retention_days: store_arg.retention_days,
    };
    if let Some(token) = curator_token.as_deref().filter(|t| !t.is_empty()) {
        let https = public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"));
        match errbook::web::curator::Curator::new(token, https) {
            Ok(curator) => state.curator = Some(Arc::new(curator)),
            Err(message) => {
                eprintln!("error: --curator-token: {message}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let inbox = errbook::inbox::Inbox::start(inbox_options);
        let state = state.with_inbox(inbox.clone());
        let reloader = Reloader::new(sources.clone(), state.clone()).with_store(store);
        // Listening for SIGHUP replaces its default action (exit) before anyone can
        // send it.
        #[cfg(unix)]
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("listening for SIGHUP")?;
        // Likewise Ctrl-C and SIGTERM: caught from before the address is logged, so a
        // stop sent as soon as the server answers is a graceful one.
        let shutdown = shutdown_signal()?;
        if watch && sources.folders.is_empty() {
            tracing::warn!("--watch has no folder to watch: the built-in entries change only with the binary; add the team's with --kb DIR");
        }
        let _watcher = watch.then(|| {
            tracing::info!(kb = %sources.describe(), "watching the knowledge base for changes");
            reloader.watch()
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        tracing::info!(
            entries,
            kb = %sources.describe(),
            ready_ms = started.elapsed().as_millis() as u64,
            max_connections = config.max_connections,
            "errbook listening on http://{local}"
        );
        state.warn_if_links_relative(local);
        // Search is ready. Now jieba's whole dictionary, which Chinese queries need
        // (indexing used only part of it), and the signature matcher that diagnosis
        // needs are built, side by side (rather than when the first query or paste
        // arrives), and the memory indexing freed is handed back.
        let served = state.served();
        tokio::task::spawn_blocking(move || {
            let jieba = std::thread::spawn(errbook::search::analysis::warm_up);
            served.index.kb().signatures();
            if jieba.join().is_err() {
                tracing::error!("loading jieba's dictionary failed");
            }
            settle_allocator();
            tracing::debug!(ms = started.elapsed().as_millis() as u64, "settled");
        });
        #[cfg(unix)]
        tokio::spawn(reload_on_hangup(hangups, reloader.clone()));
        server::serve(listener, app(state), config, shutdown).await;
        // What answers queued for the store is written before the process ends.
        inbox.flush(Duration::from_secs(2)).await;
        anyhow::Ok(())
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Reloads the knowledge base on each `SIGHUP`.
#[cfg(unix)]
async fn reload_on_hangup(mut hangups: tokio::signal::unix::Signal, reloader: Reloader) {
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the knowledge base");
        reloader.reload_in_background().await;
    }
}

/// mimalloc's options, by their numbers in the `mi_option_e` of the mimalloc v3 that
/// libmimalloc-sys builds (its Rust constants follow v2's numbering).
const MI_OPTION_PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// How long freed memory stays with mimalloc once the server is serving (its own
/// default).
const SERVING_PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// Freed memory goes back to the system at once (decommitted: `MADV_FREE` pages would
/// still count as resident), so that what indexing frees at start never stays.
fn tune_allocator() {
    // SAFETY: setting an option is always allowed; this runs before other threads.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DECOMMITS, 1);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

/// Once indexing is done: hands back what it freed, then lets freed memory wait a
/// second before it is handed back (requests free and reuse the same memory all the
/// time, and decommitting it each time would cost a page fault each reuse).
fn settle_allocator() {
    // SAFETY: mi_collect only frees memory mimalloc no longer uses; options may be set
    // at any time.
    unsafe {
        libmimalloc_sys::mi_collect(true);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, SERVING_PURGE_DELAY_MS);
    }
}

/// Starts listening for Ctrl-C and SIGTERM at once; the future resolves on the first
/// of them, so in-flight requests finish before exit. A second one, while they finish,
/// exits at once (status 130), as a person pressing Ctrl-C twice expects.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).context("listening for Ctrl-C")?,
            signal(SignalKind::terminate()).context("listening for SIGTERM")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = interrupt.recv() => {},
                _ = terminate.recv() => {},
            }
            tokio::spawn(async move {
                tokio::select! {
                    _ = interrupt.recv() => {},
                    _ = terminate.recv() => {},
                }
                tracing::warn!("second stop signal: exiting without waiting");
                std::process::exit(130);
            });
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
    })
}
