//! The knowledge base: entries loaded from Markdown files with YAML front matter,
//! validated once into trusted [`Entry`] values. Knows nothing of search or HTTP.

mod builtin;
mod entry;
mod front_matter;
mod lang;
mod markdown;
mod matcher;
mod signatures;
mod translation;
mod versions;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

pub use entry::{
    BRANCH_FACTS, Body, Branch, Entry, ExitSpec, LazyRegex, Section, Signature, SignatureKind,
    UNWRITTEN,
};
pub use lang::Lang;
pub use markdown::render_markdown;
pub use matcher::{Found, Matcher};
pub use signatures::{SignatureMatch, SignatureSet};
pub use versions::Affected;

/// One thing wrong with the knowledge base, located in a file (and a line when known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    /// 1-based line number in the file, when the problem can be pinned to a line.
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Problem {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Why a knowledge base could not be loaded: every problem found, not just the first.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A folder that could not be listed (the reason is in the message, not a source,
    /// so that it is printed once).
    #[error("cannot read the knowledge base folder {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} problem(s) in the knowledge base:\n{}", problems.len(), ProblemList(problems))]
    Invalid { problems: Vec<Problem> },
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// Where a knowledge base's entries come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    /// The entries shipped in the binary.
    pub builtin: bool,
    /// A team's folders, each read whole; their entries are added to the shipped ones.
    pub folders: Vec<PathBuf>,
}

impl Sources {
    /// Only these folders' entries.
    pub fn folders(folders: Vec<PathBuf>) -> Sources {
        Sources {
            builtin: false,
            folders,
        }
    }

    /// What a log line or a problem calls these sources.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .folders
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        if self.builtin {
            parts.insert(0, "the built-in entries".to_string());
        }
        if parts.is_empty() {
            return "no entries".to_string();
        }
        parts.join(" + ")
    }
}

/// A loaded knowledge base, and the shipped entries a team's replaced.
#[derive(Debug)]
pub struct Loaded {
    pub kb: Kb,
    pub replaced: Vec<Replaced>,
}

/// A shipped entry that a team's entry of the same slug replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replaced {
    pub slug: String,
    /// The team's file that replaces it.
    pub by: PathBuf,
}

impl fmt::Display for Replaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} replaces the built-in entry `{}`",
            self.by.display(),
            self.slug
        )
    }
}

/// Drops from `shipped` each entry whose slug one of `team` has, and says which.
fn replace_shipped(shipped: &mut Vec<entry::Parsed>, team: &[entry::Parsed]) -> Vec<Replaced> {
    let by_slug: HashMap<&str, &Path> = team
        .iter()
        .map(|p| (p.entry.slug.as_str(), p.entry.path.as_path()))
        .collect();
    let mut replaced = Vec::new();
    shipped.retain(|p| match by_slug.get(p.entry.slug.as_str()) {
        Some(by) => {
            replaced.push(Replaced {
                slug: p.entry.slug.clone(),
                by: by.to_path_buf(),
            });
            false
        }
        None => true,
    });
    replaced.sort_by(|a, b| a.slug.cmp(&b.slug));
    replaced
}

/// A validated knowledge base: entries sorted by slug, with lookups by slug and tag and
/// all signatures compiled into one matcher.
#[derive(Debug)]
pub struct Kb {
    entries: Vec<Entry>,
    /// Position of each entry by slug (FxHash: a slug is looked up for each candidate
    /// of a diagnosis, and slugs come from the knowledge base's own files).
    by_slug: FxHashMap<String, usize>,
    tags: BTreeMap<String, Vec<usize>>,
    /// Built on first use (see `signatures`): searching does not need it, so a server
    /// can open its port first and build it right after.
    signatures: OnceLock<SignatureSet>,
    /// Positions of the entries others relate to, most referenced first; counted on
    /// first use.
    referenced: OnceLock<Vec<usize>>,
    /// A hash of every file the entries were read from (paths relative to the kb
    /// folder, and contents), or `None` when the entries did not come from files.
    fingerprint: Option<u128>,
    /// Chinese bodies found without their English entry.
    stray: Vec<PathBuf>,
}

/// What `parse_all` found in the files.
#[derive(Default)]
struct Parsed {
    entries: Vec<entry::Parsed>,
    problems: Vec<Problem>,
    /// A hash of each file's path and contents.
    hashes: Vec<u128>,
    /// Chinese bodies without an English entry beside them.
    stray: Vec<PathBuf>,
}

impl Parsed {
    fn append(&mut self, mut other: Parsed) {
        self.entries.append(&mut other.entries);
        self.problems.append(&mut other.problems);
        self.hashes.append(&mut other.hashes);
        self.stray.append(&mut other.stray);
    }

    /// One hash for the whole set of files, whatever order they were read in.
    fn fingerprint(&mut self) -> u128 {
        self.hashes.sort_unstable();
        let mut all = Vec::with_capacity(self.hashes.len() * 16);
        for hash in &self.hashes {
            all.extend_from_slice(&hash.to_le_bytes());
        }
        xxhash_rust::xxh3::xxh3_128(&all)
    }
}

/// Reads (with `read`) and parses `files`, on as many threads as there are cores:
/// parsing (YAML, Markdown, sanitising) is most of loading. Each entry file is read
/// with its Chinese body (`<slug>.zh.md`) when `files` has one. `root` is the folder
/// the files are under, `layer` tells folders apart in the fingerprint.
fn parse_all<R>(root: &Path, layer: u8, files: &[PathBuf], read: R) -> Parsed
where
    R: Fn(&Path) -> std::io::Result<Cow<'static, str>> + Sync,
{
    let is_translation = |path: &PathBuf| path.to_string_lossy().ends_with(".zh.md");
    let translations: HashSet<&PathBuf> = files.iter().filter(|p| is_translation(p)).collect();
    let entries: Vec<&PathBuf> = files.iter().filter(|p| !is_translation(p)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = entries.len().div_ceil(threads).max(1);
    let parse_chunk = |paths: &[&PathBuf]| {
        let mut parsed = Parsed::default();
        let read_hashed = |parsed: &mut Parsed, path: &Path| match read(path) {
            Ok(text) => {
                parsed.hashes.push(file_hash(root, layer, path, &text));
                Some(text)
            }
            Err(err) => {
                parsed
                    .problems
                    .push(Problem::new(path, None, format!("cannot read file: {err}")));
                None
            }
        };
        for path in paths {
            let Some(text) = read_hashed(&mut parsed, path) else {
                continue;
            };
            let zh_path = entry::translation_path(path);
            let zh = if translations.contains(&zh_path) {
                match read_hashed(&mut parsed, &zh_path) {
                    Some(zh) => Some(zh),
                    None => continue,
                }
            } else {
                None
            };
            match entry::parse(path, &text, zh.as_deref()) {
                Ok(entry) => parsed.entries.push(entry),
                Err(mut found) => parsed.problems.append(&mut found),
            }
        }
        parsed
    };
    let mut all = std::thread::scope(|scope| {
        let workers: Vec<_> = entries
            .chunks(chunk)
            .map(|paths| scope.spawn(|| parse_chunk(paths)))
            .collect();
        let mut all = Parsed::default();
        all.entries.reserve(entries.len());
        for worker in workers {
            all.append(
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        all
    });
    let english: HashSet<PathBuf> = entries.iter().map(|p| entry::translation_path(p)).collect();
    all.stray = translations
        .into_iter()
        .filter(|zh| !english.contains(*zh))
        .cloned()
        .collect();
    all
}

/// A hash of a file's layer, its path under its folder, and its text.
fn file_hash(dir: &Path, layer: u8, path: &Path, text: &str) -> u128 {
    let relative = path.strip_prefix(dir).unwrap_or(path);
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&[layer]);
    hasher.update(relative.to_string_lossy().as_bytes());
    hasher.update(&[0]);
    hasher.update(text.as_bytes());
    hasher.digest128()
}

impl Kb {
    /// Loads and validates every `*.md` file under `dir` (recursively; `README.md` is the
    /// authors' guide and is skipped), and nothing else. Returns all problems found,
    /// sorted by file and line.
    pub fn load(dir: &Path) -> Result<Kb, LoadError> {
        Kb::load_from(&Sources::folders(vec![dir.to_path_buf()])).map(|loaded| loaded.kb)
    }

    /// The shipped entries, or those of `sources`: a team's folders on top of the
    /// shipped entries, where an entry with a shipped entry's slug replaces it.
    pub fn load_from(sources: &Sources) -> Result<Loaded, LoadError> {
        let mut shipped = Parsed::default();
        if sources.builtin {
            let root = Path::new(builtin::ROOT);
            shipped = parse_all(root, 0, &builtin::files(), builtin::read);
        }
        let mut team = Parsed::default();
        for (layer, dir) in (1..).zip(&sources.folders) {
            let files = markdown_files(dir)?;
            let read = |path: &Path| std::fs::read_to_string(path).map(Cow::Owned);
            team.append(parse_all(dir, layer, &files, read));
        }
        let replaced = replace_shipped(&mut shipped.entries, &team.entries);
        shipped.append(team);
        let fingerprint = shipped.fingerprint();
        let Parsed {
            mut entries,
            mut problems,
            mut stray,
            ..
        } = shipped;
        entries.sort_by(|a, b| a.entry.slug.cmp(&b.entry.slug));
        problems.extend(cross_check(&entries));
        if !problems.is_empty() {
            problems.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
            return Err(LoadError::Invalid { problems });
        }
        let mut kb = Kb::assemble(entries.into_iter().map(|p| p.entry).collect());
        kb.fingerprint = Some(fingerprint);
        stray.sort();
        kb.stray = stray;
        Ok(Loaded { kb, replaced })
    }

    /// A hash of the files the entries were read from: equal for two loads of the
    /// same files (wherever the folder is), `None` for entries not read from files.
    pub fn fingerprint(&self) -> Option<u128> {
        self.fingerprint
    }

    /// Builds a knowledge base from entries that are already valid.
    pub fn from_entries(mut entries: Vec<Entry>) -> Kb {
        entries.sort_by(|a, b| a.slug.cmp(&b.slug));
        Kb::assemble(entries)
    }

    /// `entries`, sorted by slug.
    fn assemble(entries: Vec<Entry>) -> Kb {
        let by_slug = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.slug.clone(), i))
            .collect();
        let mut tags: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            for tag in &e.tags {
                tags.entry(tag.clone()).or_default().push(i);
            }
        }
        Kb {
            entries,
            by_slug,
            tags,
            signatures: OnceLock::new(),
            referenced: OnceLock::new(),
            fingerprint: None,
            stray: Vec::new(),
        }
    }

    /// Every entry's signatures as one matcher; match indexes are `entries()` indexes.
    /// Built the first time it is asked for (tens of milliseconds for the shipped kb).
    pub fn signatures(&self) -> &SignatureSet {
        self.signatures
            .get_or_init(|| SignatureSet::new(&self.entries))
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The authoring checks `errbook check` adds to loading: each example holds one of
    /// its entry's signatures and no strong signature of another entry fires on it.
    /// (Examples are documentation and test data; serving does not need them checked.)
    pub fn example_problems(&self) -> Vec<Problem> {
        check_examples(&self.entries, self.signatures())
    }

    /// The authoring checks of the Chinese bodies: every entry has one, with the
    /// English body's sections and the same code blocks, and none is without its entry.
    pub fn translation_problems(&self) -> Vec<Problem> {
        let mut problems: Vec<Problem> = self
            .entries
            .iter()
            .flat_map(translation::problems)
            .collect();
        problems.extend(self.stray.iter().map(|path| {
            Problem::new(
                path,
                None,
                "a Chinese body without its entry: the English file beside it is missing",
            )
        }));
        problems
    }

    /// What draft entries still leave to write: each field and section marked
    /// `TODO(draft)`, in either language.
    pub fn unwritten_problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for entry in &self.entries {
            for (line, field) in &entry.unwritten {
                problems.push(Problem::new(
                    &entry.path,
                    Some(*line),
                    format!("left to write: `{field}` (still the draft's placeholder)"),
                ));
            }
            for body in std::iter::once(&entry.body).chain(&entry.body_zh) {
                let mut section = String::new();
                for (n, line) in body.markdown.lines().enumerate() {
                    if let Some(heading) = line.strip_prefix("## ") {
                        section = heading.trim().to_string();
                    }
                    if line.contains(entry::UNWRITTEN) {
                        problems.push(Problem::new(
                            &body.path,
                            Some(body.line + n),
                            format!("left to write: the `## {section}` section (still the draft's placeholder)"),
                        ));
                    }
                }
            }
        }
        problems
    }

    /// Compiles every signature regex (serving compiles each only when a paste needs
    /// it) and reports those past the regex crate's size limits.
    pub fn compile_regexes(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for entry in &self.entries {
            for signature in &entry.signatures {
                if let SignatureKind::Regex(regex) = &signature.kind
                    && let Err(message) = regex.compiled()
                {
                    problems.push(Problem::new(&entry.path, None, message));
                }
            }
        }
        problems
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where the entry `slug` is in `entries()`.
    pub fn position(&self, slug: &str) -> Option<usize> {
        self.by_slug.get(slug).copied()
    }

    pub fn get(&self, slug: &str) -> Option<&Entry> {
        self.by_slug.get(slug).map(|&i| &self.entries[i])
    }

    /// All tags with the number of entries carrying each, alphabetically.
    pub fn tags(&self) -> impl Iterator<Item = (&str, usize)> {
        self.tags.iter().map(|(t, v)| (t.as_str(), v.len()))
    }

    /// The entries that other entries send readers to most (by `related` links), most
    /// first, ties by slug: the hubs worth reading first.
    pub fn most_referenced(&self) -> impl Iterator<Item = &Entry> {
        let ranked = self.referenced.get_or_init(|| {
            let mut links = vec![0usize; self.entries.len()];
            for entry in &self.entries {
                for slug in &entry.related {
                    if let Some(&at) = self.by_slug.get(slug) {
                        links[at] += 1;
                    }
                }
            }
            let mut ranked: Vec<usize> = (0..links.len()).filter(|&at| links[at] > 0).collect();
            ranked.sort_by(|&a, &b| {
                links[b]
                    .cmp(&links[a])
                    .then_with(|| self.entries[a].slug.cmp(&self.entries[b].slug))
            });
            ranked
        });
        ranked.iter().map(|&at| &self.entries[at])
    }

    /// Entries carrying `tag`, in slug order.
    pub fn tagged(&self, tag: &str) -> impl ExactSizeIterator<Item = &Entry> {
        self.tags
            .get(tag)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|&i| &self.entries[i])
    }
}

/// All `.md` files below `dir` except READMEs (entries and their Chinese bodies), in a
/// stable order.
fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for item in std::fs::read_dir(&current).map_err(io)? {
            let path = item.map_err(io)?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".md") && !name.eq_ignore_ascii_case("README.md") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Checks that need every entry at once: duplicate slugs and dangling `related` links.
fn cross_check(entries: &[entry::Parsed]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut first_seen: HashMap<&str, &entry::Parsed> = HashMap::new();
    for parsed in entries {
        let slug = parsed.entry.slug.as_str();
        if let Some(first) = first_seen.get(slug) {
            problems.push(Problem::new(
                &parsed.entry.path,
                Some(parsed.slug_line),
                format!(
                    "duplicate slug `{slug}`: already used by {}",
                    first.entry.path.display()
                ),
            ));
        } else {
            first_seen.insert(slug, parsed);
        }
    }
    for parsed in entries {
        for (related, line) in parsed.entry.related.iter().zip(&parsed.related_lines) {
            if !first_seen.contains_key(related.as_str()) {
                problems.push(Problem::new(
                    &parsed.entry.path,
                    Some(*line),
                    format!("related slug `{related}` does not exist"),
                ));
            }
        }
    }
    problems
}

/// Each example must contain one of its own entry's signatures, and no strong signature
/// of another entry may fire on it: otherwise the example documents an ambiguity.
fn check_examples(entries: &[Entry], set: &SignatureSet) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (e, entry) in entries.iter().enumerate() {
        for (n, (example, &line)) in entry.examples.iter().zip(&entry.example_lines).enumerate() {
            let matches = set.matches(example);
            if !matches.iter().any(|m| m.entry == e) {
                problems.push(Problem::new(
                    &entry.path,
                    Some(line),
                    format!("example {} matches none of this entry's signatures", n + 1),
                ));
            }
            let mut reported = Vec::new();
            for m in matches.iter().filter(|m| m.entry != e) {
                let other = &entries[m.entry];
                let sig = &other.signatures[m.signature];
                if sig.weak || reported.contains(&m.entry) {
                    continue;
                }
                reported.push(m.entry);
                problems.push(Problem::new(
                    &entry.path,
                    Some(line),
                    format!(
                        "example {} also matches signature `{}` of entry `{}`",
                        n + 1,
                        sig.as_str(),
                        other.slug
                    ),
                ));
            }
        }
    }
    problems
}
