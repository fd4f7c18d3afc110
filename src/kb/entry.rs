//! One knowledge-base entry: parsing a file and validating it into a trusted [`Entry`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_saphyr::Spanned;

use super::front_matter::{self, FrontMatter, SignatureSpec, VersionSpec};
use super::markdown;
use super::matcher::Matcher;
use super::versions::Affected;
use super::{Lang, Problem};

/// A validated entry. Past `Kb::load`, every field can be trusted: the slug matches the
/// file name, regexes compile, the body has its sections.
#[derive(Debug, Clone)]
pub struct Entry {
    pub slug: String,
    pub title: String,
    pub title_zh: String,
    pub summary: String,
    pub summary_zh: String,
    pub tags: Vec<String>,
    pub signatures: Vec<Signature>,
    pub symptoms: Vec<String>,
    pub examples: Vec<String>,
    /// The file line on which each example starts, parallel to `examples`.
    pub example_lines: Vec<usize>,
    pub related: Vec<String>,
    pub sources: Vec<String>,
    /// Causes of the same symptom, each with what selects it and its own fix, in the
    /// order they are tried.
    pub branches: Vec<Branch>,
    /// The file line on which each branch starts, parallel to `branches`.
    pub branch_lines: Vec<usize>,
    /// Releases the problem affects, by package.
    pub versions: Vec<Affected>,
    /// The English body.
    pub body: Body,
    /// The Chinese body, from the file beside the entry's (`<slug>.zh.md`), when it
    /// has one; `errbook check` requires it.
    pub body_zh: Option<Body>,
    /// Where the entry was loaded from.
    pub path: PathBuf,
    /// Front-matter fields a draft left to write (marked `TODO(draft)`), with the file
    /// line of each.
    pub unwritten: Vec<(usize, String)>,
}

impl Entry {
    /// The body in `lang`, or the English one when the entry has no Chinese body.
    pub fn body(&self, lang: Lang) -> &Body {
        match lang {
            Lang::Zh => self.body_zh.as_ref().unwrap_or(&self.body),
            Lang::En => &self.body,
        }
    }

    /// The Markdown of one section of the English body, heading excluded.
    pub fn section(&self, section: Section) -> Option<&str> {
        self.body.section(section)
    }

    /// Where the entry's Chinese body is, or would be: `<slug>.zh.md` beside it.
    pub fn path_zh(&self) -> PathBuf {
        translation_path(&self.path)
    }
}

/// The file holding the Chinese body of the entry file `path`.
pub(super) fn translation_path(path: &Path) -> PathBuf {
    path.with_extension("zh.md")
}

/// One of the sections of an entry body, named `## Fix` in English and `## 解决` in
/// Chinese.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Symptom,
    Cause,
    Fix,
    Verify,
    Background,
}

impl Section {
    /// The sections every body must have, in this order.
    pub const REQUIRED: [Section; 4] = [
        Section::Symptom,
        Section::Cause,
        Section::Fix,
        Section::Verify,
    ];
    pub const ALL: [Section; 5] = [
        Section::Symptom,
        Section::Cause,
        Section::Fix,
        Section::Verify,
        Section::Background,
    ];

    /// The section's level-two heading in `lang`.
    pub fn heading(self, lang: Lang) -> &'static str {
        match (self, lang) {
            (Section::Symptom, Lang::En) => "Symptom",
            (Section::Cause, Lang::En) => "Cause",
            (Section::Fix, Lang::En) => "Fix",
            (Section::Verify, Lang::En) => "Verify",
            (Section::Background, Lang::En) => "Background",
            (Section::Symptom, Lang::Zh) => "症状",
            (Section::Cause, Lang::Zh) => "原因",
            (Section::Fix, Lang::Zh) => "解决",
            (Section::Verify, Lang::Zh) => "验证",
            (Section::Background, Lang::Zh) => "背景",
        }
    }

    /// The section a heading in `lang` names.
    pub fn named(heading: &str, lang: Lang) -> Option<Section> {
        let heading = heading.trim();
        Section::ALL
            .into_iter()
            .find(|s| s.heading(lang).eq_ignore_ascii_case(heading))
    }
}

/// An entry's body in one language.
#[derive(Debug, Clone)]
pub struct Body {
    pub lang: Lang,
    /// The Markdown as written, trimmed.
    pub markdown: String,
    /// The body as plain text, for indexing and snippets.
    pub text: String,
    /// The body rendered to sanitised HTML, on first use (see `html`).
    html: OnceLock<String>,
    /// The file the body was read from, and the line of that file on which `markdown`
    /// starts.
    pub path: PathBuf,
    pub line: usize,
}

impl Body {
    /// `markdown`, read from `path` where it starts on line `line`.
    pub fn new(lang: Lang, markdown: &str, path: &Path, line: usize) -> Body {
        let skipped = markdown.len() - markdown.trim_start().len();
        Body {
            lang,
            markdown: markdown.trim().to_string(),
            text: markdown::plain_text(markdown),
            html: OnceLock::new(),
            path: path.to_path_buf(),
            line: line + markdown[..skipped].matches('\n').count(),
        }
    }

    /// The Markdown of one section, heading excluded.
    pub fn section(&self, section: Section) -> Option<&str> {
        let heading = section.heading(self.lang);
        let start = self
            .markdown
            .match_indices("## ")
            .find(|(at, _)| {
                (*at == 0 || self.markdown[..*at].ends_with('\n'))
                    && self.markdown[at + 3..].starts_with(heading)
                    && self.markdown[at + 3 + heading.len()..].starts_with(['\n', '\r'])
            })?
            .0;
        let body = &self.markdown[start..];
        let body = &body[body.find('\n').map_or(body.len(), |n| n + 1)..];
        let end = body.find("\n## ").map_or(body.len(), |n| n + 1);
        Some(body[..end].trim())
    }

    /// The body rendered to sanitised HTML. Rendering (Markdown, then the sanitiser)
    /// is most of the cost of loading an entry, and most entries are never opened, so
    /// it happens the first time a page needs it.
    pub fn html(&self) -> &str {
        self.html
            .get_or_init(|| markdown::render_markdown(&self.markdown))
    }
}

/// One cause of an entry's symptom: what in a paste selects it, and its fix, whose
/// `{name|fallback}` placeholders are filled from what selected it.
#[derive(Debug, Clone)]
pub struct Branch {
    pub id: String,
    pub title: String,
    pub title_zh: String,
    pub when: Vec<SignatureKind>,
    pub exits: Vec<ExitSpec>,
    /// Triage facts that select it (see `SELECTING_FACTS`).
    pub facts: Vec<String>,
    /// Regexes that only fill placeholders, once `when` or `exits` selected the branch.
    pub values: Vec<LazyRegex>,
    /// Markdown, with placeholders.
    pub fix: String,
    pub fix_zh: String,
}

/// An exit that selects a branch: a code as printed, or a signal by name (which also
/// stands for its negative code and 128 + its number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitSpec {
    Code(i32),
    Signal(String),
}

impl ExitSpec {
    /// Whether an exit with `code`, and `signal` if it was one, is this one.
    pub fn names(&self, code: i32, signal: Option<&str>) -> bool {
        match self {
            ExitSpec::Code(c) => *c == code,
            ExitSpec::Signal(name) => signal == Some(name.as_str()),
        }
    }
}

/// Facts a fix may name besides a regex's groups, filled from the paste's triage.
pub const BRANCH_FACTS: [&str; 6] = [
    "rank",
    "exit_code",
    "signal",
    "behind",
    "behind_seq",
    "waiting_seq",
];
/// Triage facts a branch may be selected by (`facts:`): `behind`, ranks that fell
/// behind in a collective (by the sequence numbers the ranks printed, or because the
/// others timed out and they did not); `behind_seq`, only by sequence numbers.
pub const SELECTING_FACTS: [&str; 2] = ["behind", "behind_seq"];

impl Branch {
    /// `fix` (or `fix_zh`) with each `{name|fallback}` replaced by `values[name]`, or by
    /// its fallback when the paste did not give it.
    pub fn filled(text: &str, values: &[(String, String)]) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match placeholder(after) {
                Some((name, fallback, len)) => {
                    match values.iter().find(|(n, _)| n == name) {
                        Some((_, value)) => out.push_str(value),
                        None => out.push_str(fallback),
                    }
                    rest = &after[len + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The names the branch's placeholders ask for, in `text`.
    fn placeholders(text: &str) -> Vec<&str> {
        let mut names = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            rest = &rest[open + 1..];
            if let Some((name, _, len)) = placeholder(rest) {
                names.push(name);
                rest = &rest[len + 1..];
            }
        }
        names
    }
}

/// `name|fallback}` at the start of `text`: (name, fallback, bytes up to the `}`).
fn placeholder(text: &str) -> Option<(&str, &str, usize)> {
    let close = text.find('}')?;
    let (name, fallback) = text[..close].split_once('|')?;
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    name_ok.then_some((name, fallback, close))
}

/// An error fragment that identifies the entry's problem in a paste.
#[derive(Debug, Clone)]
pub struct Signature {
    pub kind: SignatureKind,
    /// A weak signature also appears around other problems (a launcher's wrapper
    /// error, a generic NCCL error code): it supports its entry but never rules out
    /// another one.
    pub weak: bool,
}

#[derive(Debug, Clone)]
pub enum SignatureKind {
    Literal(String),
    Regex(LazyRegex),
}

/// A signature's regular expression. Its syntax is checked when the entry loads; the
/// program is compiled the first time a paste needs it. Most never run, because their
/// literals never show up, so a large knowledge base neither waits for nor holds
/// thousands of compiled regexes. Clones share the compiled program.
#[derive(Clone)]
pub struct LazyRegex {
    source: Arc<str>,
    /// Its named groups, read from the syntax (a branch's fix may name them).
    names: Arc<[String]>,
    compiled: Arc<OnceLock<Result<Matcher, String>>>,
}

impl LazyRegex {
    /// Checks `source`: it must parse and must not match the empty string.
    pub fn new(source: &str) -> Result<LazyRegex, String> {
        let hir = regex_syntax::Parser::new().parse(source).map_err(|err| {
            format!(
                "signature regex `{source}` does not compile: {}",
                first_line(&err.to_string())
            )
        })?;
        if hir.properties().minimum_len() == Some(0) {
            return Err(format!(
                "signature regex `{source}` matches the empty string"
            ));
        }
        let mut names = Vec::new();
        group_names(&hir, &mut names);
        Ok(LazyRegex {
            source: source.into(),
            names: names.into(),
            compiled: Arc::new(OnceLock::new()),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The names of its groups, in order.
    pub fn group_names(&self) -> &[String] {
        &self.names
    }

    /// The compiled program, or why it cannot be built (a pattern past the regex
    /// crate's size limits parses but does not compile).
    pub fn compiled(&self) -> Result<&Matcher, &str> {
        self.compiled
            .get_or_init(|| {
                Matcher::new(&self.source).map_err(|err| {
                    format!(
                        "signature regex `{}` does not compile: {}",
                        self.source,
                        first_line(&err.to_string())
                    )
                })
            })
            .as_ref()
            .map_err(String::as_str)
    }
}

/// The names of the groups in `hir`, in order.
fn group_names(hir: &regex_syntax::hir::Hir, names: &mut Vec<String>) {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Capture(capture) => {
            if let Some(name) = &capture.name {
                names.push(name.to_string());
            }
            group_names(&capture.sub, names);
        }
        HirKind::Repetition(repetition) => group_names(&repetition.sub, names),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            for sub in subs {
                group_names(sub, names);
            }
        }
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {}
    }
}

impl std::fmt::Debug for LazyRegex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LazyRegex").field(&self.source).finish()
    }
}

impl Signature {
    pub fn literal(text: impl Into<String>) -> Self {
        Signature {
            kind: SignatureKind::Literal(text.into()),
            weak: false,
        }
    }

    /// The signature as the author wrote it (the literal, or the regex source).
    pub fn as_str(&self) -> &str {
        match &self.kind {
            SignatureKind::Literal(s) => s,
            SignatureKind::Regex(r) => r.as_str(),
        }
    }

    /// Words a full-text index can use: regex syntax such as `\d+` or `(a|b)` is blanked
    /// out so that only the literal words of a pattern are indexed.
    pub fn searchable_text(&self) -> String {
        match &self.kind {
            SignatureKind::Literal(s) => s.clone(),
            SignatureKind::Regex(r) => {
                let mut out = String::with_capacity(r.as_str().len());
                let mut chars = r.as_str().chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some(e) if e.is_ascii_alphanumeric() => out.push(' '),
                            Some(e) => out.push(e),
                            None => {}
                        },
                        '(' | ')' | '[' | ']' | '{' | '}' | '|' | '*' | '+' | '?' | '^' | '$' => {
                            out.push(' ')
                        }
                        _ => out.push(c),
                    }
                }
                out
            }
        }
    }
}

/// An entry fresh from its file, with the lines that cross-entry checks need to report.
#[derive(Debug)]
pub(super) struct Parsed {
    pub entry: Entry,
    pub slug_line: usize,
    pub related_lines: Vec<usize>,
}

impl Entry {
    /// Parses and validates the text of one entry file, as [`super::Kb::load`] does for
    /// each file (checks across entries, like `related` slugs, aside). `path` names
    /// the file in the problems returned.
    pub fn from_file_text(path: &Path, text: &str) -> Result<Entry, Vec<Problem>> {
        parse(path, text, None).map(|parsed| parsed.entry)
    }
}

/// Parses and validates one file, with the text of its Chinese body when it has one.
/// Returns every problem found in it. (How the Chinese body agrees with the English
/// one is `errbook check`'s to say: see `super::translation`.)
pub(super) fn parse(path: &Path, text: &str, zh: Option<&str>) -> Result<Parsed, Vec<Problem>> {
    let split = front_matter::split(text).map_err(|msg| vec![Problem::new(path, Some(1), msg)])?;
    let fm: FrontMatter = serde_saphyr::from_str(split.yaml).map_err(|err| {
        let options = serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off };
        let message = strip_location_suffix(&err.render_with_options(options));
        // A missing field is noticed at the end of the mapping; the start is more useful.
        let line = err
            .location()
            .map(|loc| loc.line() as usize)
            .filter(|&l| l > 0 && !message.starts_with("missing field"))
            .map(|l| l + split.yaml_line - 1);
        vec![Problem::new(
            path,
            line.or(Some(split.yaml_line)),
            format!("invalid front matter: {message}"),
        )]
    })?;

    let mut v = Validator {
        path,
        offset: split.yaml_line - 1,
        problems: Vec::new(),
    };

    let slug_line = v.line(&fm.slug);
    let slug = fm.slug.value.trim().to_string();
    if !is_kebab(&slug) {
        v.report(
            &fm.slug,
            format!("slug `{slug}` must be lowercase letters, digits and single hyphens"),
        );
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if slug != stem {
        v.report(
            &fm.slug,
            format!("slug `{slug}` does not match the file name `{stem}.md`"),
        );
    }
    let title = v.required_text(&fm.title, "title");
    let title_zh = v.required_text(&fm.title_zh, "title_zh");
    let summary = v.required_text(&fm.summary, "summary");
    let summary_zh = v.required_text(&fm.summary_zh, "summary_zh");

    let mut tags = Vec::new();
    for tag in &fm.tags {
        let t = tag.value.trim().to_string();
        if !is_kebab(&t) {
            v.report(
                tag,
                format!("tag `{t}` must be lowercase letters, digits and single hyphens"),
            );
        } else if !tags.contains(&t) {
            tags.push(t);
        }
    }
    if fm.tags.is_empty() {
        v.problems.push(Problem::new(
            path,
            Some(split.yaml_line),
            "`tags` must list at least one tag",
        ));
    }

    let mut signatures = Vec::new();
    for spec in &fm.signatures {
        match &spec.value {
            SignatureSpec::Literal(text) => {
                if text.trim().is_empty() {
                    v.report(spec, "empty signature");
                } else {
                    signatures.push(Signature::literal(text.clone()));
                }
            }
            SignatureSpec::Fragment(f) => {
                if f.literal.trim().is_empty() {
                    v.report(spec, "empty signature");
                } else {
                    signatures.push(Signature {
                        kind: SignatureKind::Literal(f.literal.clone()),
                        weak: f.weak,
                    });
                }
            }
            SignatureSpec::Pattern(p) => match LazyRegex::new(&p.regex) {
                Ok(r) => signatures.push(Signature {
                    kind: SignatureKind::Regex(r),
                    weak: p.weak,
                }),
                Err(message) => v.report(spec, message),
            },
        }
    }
    if fm.signatures.is_empty() {
        v.problems.push(Problem::new(
            path,
            Some(split.yaml_line),
            "`signatures` must list at least one error fragment",
        ));
    }

    let symptoms = v.non_empty_list(&fm.symptoms, "symptom");
    let examples = v.non_empty_list(&fm.examples, "example");
    let example_lines = fm
        .examples
        .iter()
        .filter(|e| !e.value.trim().is_empty())
        .map(|e| v.line(e))
        .collect();
    if symptoms.is_empty() {
        v.problems.push(Problem::new(
            path,
            Some(split.yaml_line),
            "`symptoms` must list at least one phrase",
        ));
    }

    let mut related = Vec::new();
    let mut related_lines = Vec::new();
    for r in &fm.related {
        let s = r.value.trim().to_string();
        if s == slug {
            v.report(r, "an entry cannot be related to itself");
        } else {
            related_lines.push(v.line(r));
            related.push(s);
        }
    }

    let mut branches = Vec::new();
    let mut branch_lines = Vec::new();
    for spec in &fm.branches {
        if let Some(branch) = v.branch(spec, &branches) {
            branch_lines.push(v.line(spec));
            branches.push(branch);
        }
    }

    // What selects a branch names its entry's problem too: each `when` fragment is also
    // a weak signature of the entry (the symptom's other causes share its entry).
    for branch in &branches {
        for when in &branch.when {
            let signature = Signature {
                kind: when.clone(),
                weak: true,
            };
            if !signatures.iter().any(|s| s.as_str() == signature.as_str()) {
                signatures.push(signature);
            }
        }
    }

    let mut versions = Vec::new();
    for spec in &fm.versions {
        let VersionSpec {
            package,
            affected,
            fixed,
        } = &spec.value;
        match Affected::new(package, affected, fixed.as_deref()) {
            Ok(a) => versions.push(a),
            Err(message) => v.report(spec, message),
        }
    }

    let body = split.body;
    for (line, message) in markdown::check_sections(body, Lang::En) {
        v.problems.push(Problem::new(
            path,
            Some(line + split.body_line - 1),
            message,
        ));
    }

    if !v.problems.is_empty() {
        return Err(v.problems);
    }
    Ok(Parsed {
        entry: Entry {
            slug,
            title,
            title_zh,
            summary,
            summary_zh,
            tags,
            signatures,
            symptoms,
            examples,
            example_lines,
            related,
            sources: fm.sources,
            branches,
            branch_lines,
            versions,
            body: Body::new(Lang::En, body, path, split.body_line),
            body_zh: zh.map(|zh| Body::new(Lang::Zh, zh, &translation_path(path), 1)),
            path: path.to_path_buf(),
            unwritten: unwritten_fields(split.yaml, split.yaml_line),
        },
        slug_line,
        related_lines,
    })
}

/// What marks the parts of a draft entry still to write (see `crate::draft`).
pub const UNWRITTEN: &str = "TODO(draft)";

/// The front-matter lines holding [`UNWRITTEN`], each with the field it belongs to.
fn unwritten_fields(yaml: &str, first_line: usize) -> Vec<(usize, String)> {
    let mut field = String::new();
    let mut found = Vec::new();
    for (n, line) in yaml.lines().enumerate() {
        if !line.starts_with([' ', '\t', '-'])
            && let Some((key, _)) = line.split_once(':')
        {
            field = key.trim().to_string();
        }
        if line.contains(UNWRITTEN) {
            found.push((first_line + n, field.clone()));
        }
    }
    found
}

/// Collects problems with file lines computed from YAML spans.
struct Validator<'a> {
    path: &'a Path,
    /// Lines before the YAML starts in the file.
    offset: usize,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    fn line<T>(&self, spanned: &Spanned<T>) -> usize {
        spanned.referenced.line() as usize + self.offset
    }

    fn report<T>(&mut self, spanned: &Spanned<T>, message: impl Into<String>) {
        let line = self.line(spanned);
        self.problems
            .push(Problem::new(self.path, Some(line), message.into()));
    }

    fn required_text(&mut self, value: &Spanned<String>, field: &str) -> String {
        let text = value.value.trim().to_string();
        if text.is_empty() {
            self.report(value, format!("`{field}` must not be empty"));
        }
        text
    }

    /// A branch, checked: an id of its own, titles, something that selects it, a fix in
    /// both languages whose placeholders name a regex group of `when` or a fact.
    fn branch(
        &mut self,
        spec: &Spanned<front_matter::BranchSpec>,
        earlier: &[Branch],
    ) -> Option<Branch> {
        let b = &spec.value;
        let before = self.problems.len();
        let id = b.id.trim().to_string();
        if !is_kebab(&id) {
            self.report(
                spec,
                format!("branch id `{id}` must be lowercase letters, digits and single hyphens"),
            );
        } else if earlier.iter().any(|e| e.id == id) {
            self.report(spec, format!("branch id `{id}` is used twice"));
        }
        for (text, field) in [
            (&b.title, "title"),
            (&b.title_zh, "title_zh"),
            (&b.fix, "fix"),
            (&b.fix_zh, "fix_zh"),
        ] {
            if text.trim().is_empty() {
                self.report(spec, format!("branch `{id}`: `{field}` must not be empty"));
            }
        }
        let mut when = Vec::new();
        let mut groups: Vec<String> = BRANCH_FACTS.iter().map(|f| f.to_string()).collect();
        for w in &b.when {
            match w {
                SignatureSpec::Literal(t)
                | SignatureSpec::Fragment(front_matter::LiteralSpec { literal: t, .. }) => {
                    if t.trim().is_empty() {
                        self.report(spec, format!("branch `{id}`: empty `when` fragment"));
                    } else {
                        when.push(SignatureKind::Literal(t.clone()));
                    }
                }
                SignatureSpec::Pattern(p) => match LazyRegex::new(&p.regex) {
                    Ok(r) => {
                        groups.extend(r.group_names().iter().cloned());
                        when.push(SignatureKind::Regex(r));
                    }
                    Err(message) => self.report(spec, format!("branch `{id}`: {message}")),
                },
            }
        }
        let mut values = Vec::new();
        for source in &b.values {
            match LazyRegex::new(source) {
                Ok(r) => {
                    groups.extend(r.group_names().iter().cloned());
                    values.push(r);
                }
                Err(message) => self.report(spec, format!("branch `{id}`: {message}")),
            }
        }
        let mut exits = Vec::new();
        for e in &b.exits {
            let e = e.trim();
            if let Ok(code) = e.parse::<i32>() {
                exits.push(ExitSpec::Code(code));
            } else if e.starts_with("SIG")
                && e.len() > 3
                && e[3..].bytes().all(|c| c.is_ascii_uppercase())
            {
                exits.push(ExitSpec::Signal(e.to_string()));
            } else {
                self.report(spec, format!("branch `{id}`: exit `{e}` is neither a code nor a signal name such as SIGKILL"));
            }
        }
        let mut facts = Vec::new();
        for f in &b.facts {
            let f = f.trim();
            if SELECTING_FACTS.contains(&f) {
                facts.push(f.to_string());
            } else {
                self.report(
                    spec,
                    format!("branch `{id}`: fact `{f}` is not one of {SELECTING_FACTS:?}"),
                );
            }
        }
        if when.is_empty() && exits.is_empty() && facts.is_empty() {
            self.report(
                spec,
                format!("branch `{id}`: give `when` fragments, `exits` or `facts` that select it"),
            );
        }
        for text in [&b.fix, &b.fix_zh] {
            for name in Branch::placeholders(text) {
                if !groups.iter().any(|g| g == name) {
                    self.report(
                        spec,
                        format!(
                            "branch `{id}`: placeholder `{{{name}|…}}` names neither a group of a `when` regex nor one of {}",
                            BRANCH_FACTS.join(", ")
                        ),
                    );
                }
            }
        }
        (self.problems.len() == before).then(|| Branch {
            id,
            title: b.title.trim().to_string(),
            title_zh: b.title_zh.trim().to_string(),
            when,
            exits,
            facts,
            values,
            fix: b.fix.trim().to_string(),
            fix_zh: b.fix_zh.trim().to_string(),
        })
    }

    fn non_empty_list(&mut self, items: &[Spanned<String>], what: &str) -> Vec<String> {
        let mut out = Vec::new();
        for item in items {
            if item.value.trim().is_empty() {
                self.report(item, format!("empty {what}"));
            } else {
                out.push(item.value.clone());
            }
        }
        out
    }
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(s)
}

/// serde-saphyr appends " at line L column C" relative to the YAML; the caller reports
/// the file line instead, so the YAML-relative suffix would only confuse.
fn strip_location_suffix(message: &str) -> String {
    let message = message.trim();
    match message.rfind(" at line ") {
        Some(i) if message[i..].contains("column") => message[..i].to_string(),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_take_the_pastes_values_or_their_fallback() {
        let values = vec![("behind".to_string(), "3".to_string())];
        assert_eq!(
            Branch::filled(
                "Rank {behind|some rank} stopped at {seq|N}; {not a placeholder}",
                &values
            ),
            "Rank 3 stopped at N; {not a placeholder}"
        );
        assert_eq!(Branch::placeholders("{a|x} {B|y} {c_1|}"), ["a", "c_1"]);
    }

    fn with_branches(branches: &str) -> Result<Entry, Vec<Problem>> {
        let text = format!(
            "---\nslug: x\ntitle: X\ntitle_zh: X\nsummary: s\nsummary_zh: s\ntags: [t]\n\
             signatures: [\"boom\"]\nsymptoms: [\"it breaks\"]\nbranches:\n{branches}---\n\
             ## Symptom\n\nx\n\n## Cause\n\nx\n\n## Fix\n\nx\n\n## Verify\n\nx\n"
        );
        Entry::from_file_text(Path::new("kb/x.md"), &text)
    }

    #[test]
    fn branches_are_checked_where_they_are_written() {
        let good = with_branches(
            "  - id: one\n    title: One\n    title_zh: 一\n    when: [{regex: 'rank (?P<r>\\d+)'}]\n    exits: [SIGKILL, -9]\n    values: ['port (?P<port>\\d+)']\n    fix: 'rank {r|?} port {port|?} first {rank|?}'\n    fix_zh: '{r|?}'\n",
        )
        .unwrap();
        let b = &good.branches[0];
        assert_eq!(
            b.exits,
            [ExitSpec::Signal("SIGKILL".into()), ExitSpec::Code(-9)]
        );
        assert_eq!(good.branch_lines, [11]);
        // What selects the branch is also a weak signature of the entry.
        let from_when = good.signatures.last().unwrap();
        assert_eq!(
            (from_when.as_str(), from_when.weak),
            ("rank (?P<r>\\d+)", true)
        );
        let problems = with_branches(
            "  - id: Bad Id\n    title: ''\n    title_zh: 一\n    exits: [KILL]\n    facts: [slow]\n    fix: '{nope|x}'\n    fix_zh: x\n",
        )
        .unwrap_err();
        let messages: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        for expected in [
            "branch id `Bad Id` must be lowercase",
            "`title` must not be empty",
            "exit `KILL` is neither a code nor a signal",
            "fact `slow` is not one of [\"behind\", \"behind_seq\"]",
            "give `when` fragments, `exits` or `facts`",
            "placeholder `{nope|…}` names neither",
        ] {
            assert!(
                messages
                    .iter()
                    .any(|m| m.contains(expected) && m.starts_with("kb/x.md:11:")),
                "{expected} not in {messages:#?}"
            );
        }
    }

    #[test]
    fn kebab_slugs() {
        assert!(is_kebab("nccl-watchdog-timeout"));
        assert!(is_kebab("view-modified-inplace-torch-1-10"));
        assert!(!is_kebab("Bad-Slug"));
        assert!(!is_kebab("double--hyphen"));
        assert!(!is_kebab("-leading"));
        assert!(!is_kebab(""));
    }

    #[test]
    fn signature_regexes_are_checked_at_load_and_compiled_on_first_use() {
        let err = LazyRegex::new("(unclosed").unwrap_err();
        assert!(err.contains("does not compile"), "{err}");
        let err = LazyRegex::new("a*|b?").unwrap_err();
        assert!(err.contains("matches the empty string"), "{err}");
        let ok = LazyRegex::new(r"rank (\d+) failed").unwrap();
        assert!(ok.compiled.get().is_none(), "not compiled until needed");
        assert!(ok.compiled().unwrap().is_match("rank 3 failed"));
        // Parses, but its program is past the regex crate's size limit: an error
        // `errbook check` reports, never a panic.
        let huge = LazyRegex::new(r"(?:\w{100}){100}x").unwrap();
        assert!(huge.compiled().unwrap_err().contains("does not compile"));
    }

    #[test]
    fn regex_signature_indexes_only_its_words() {
        let sig = Signature {
            weak: false,
            kind: SignatureKind::Regex(
                LazyRegex::new(r"Duplicate GPU detected : rank \d+ and rank (\d+)").unwrap(),
            ),
        };
        let text = sig.searchable_text();
        assert!(text.contains("Duplicate GPU detected"));
        assert!(!text.contains('\\'));
        assert!(!text.contains('('));
    }
}
