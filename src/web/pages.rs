//! Portal pages: each handler extracts its input, asks the domain, and wraps the result
//! in a template struct named after the page (`SearchPage` -> `search.html`). Every page
//! carries a [`Ui`]: the interface language, its labels, and where the language switch
//! leads.

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::AppState;
use super::error::AppError;
use super::i18n::{self, Labels, Lang};
use super::{assets, share};
use crate::diagnose::{
    ChosenBranch, Diagnosis, Evidence, Match, Request, RequestError, Verdict, clip,
};
use crate::kb::{Body, Branch, Entry, Kb, render_markdown};
use crate::search::{Hit, SearchQuery};

const PAGE_HITS: usize = 20;
/// Entries on the home page's "start here" list.
const START_HERE: usize = 8;

type PageResult = Result<Response, AppError>;

/// What every page needs besides its content: the interface language and its labels,
/// and this page's own address (for the language switch to come back to).
pub struct Ui {
    pub lang: Lang,
    pub t: &'static Labels,
    here: String,
}

impl Ui {
    pub fn new(lang: Lang, here: impl Into<String>) -> Ui {
        Ui {
            lang,
            t: lang.labels(),
            here: here.into(),
        }
    }

    /// The fingerprinted URL of a static asset.
    pub fn asset(&self, name: &str) -> String {
        assets::url(name)
    }

    /// The language switch: this page in the other language.
    pub fn switch_href(&self) -> String {
        format!(
            "/lang/{}?next={}",
            self.lang.other().code(),
            percent_encode(&self.here)
        )
    }

    /// Of an English and a Chinese text, the one in the interface language.
    fn pick<'a>(&self, en: &'a str, zh: &'a str) -> &'a str {
        if self.lang.is_zh() { zh } else { en }
    }

    /// An entry's title and summary in the interface language first.
    pub fn title<'a>(&self, entry: &'a Entry) -> &'a str {
        self.pick(&entry.title, &entry.title_zh)
    }

    pub fn other_title<'a>(&self, entry: &'a Entry) -> &'a str {
        self.pick(&entry.title_zh, &entry.title)
    }

    pub fn summary<'a>(&self, entry: &'a Entry) -> &'a str {
        self.pick(&entry.summary, &entry.summary_zh)
    }

    /// The `lang` attribute of text in the other language.
    pub fn other_code(&self) -> &'static str {
        self.lang.other().code()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Ui {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let here = parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        Ok(Ui::new(Lang::of_request(&parts.headers), here))
    }
}

/// Everything but unreserved URL characters percent-encoded (for a query value).
fn percent_encode(value: &str) -> String {
    percent_encode_unless(value, |byte| {
        byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte)
    })
}

/// `value` with every byte that `keep` refuses percent-encoded.
fn percent_encode_unless(value: &str, keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if keep(byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A rendered page. It depends on the reader's language, so caches must key on it.
fn render(page: impl Template) -> PageResult {
    let mut response = Html(page.render()?).into_response();
    response.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("Accept-Language, Cookie"),
    );
    Ok(response)
}

/// A search or diagnosis result as the templates show it.
pub struct ResultView<'a> {
    pub entry: &'a Entry,
    pub snippet_html: &'a str,
}

fn result_views<'a>(kb: &'a Kb, hits: &'a [Hit]) -> Vec<ResultView<'a>> {
    hits.iter()
        .filter_map(|hit| {
            Some(ResultView {
                entry: kb.get(&hit.slug)?,
                snippet_html: &hit.snippet_html,
            })
        })
        .collect()
}

/// Entries listed on one page of the home and tag pages: all of a knowledge base of
/// hundreds, and pages of a large one, whose full list would be megabytes.
pub const PAGE_SIZE: usize = 500;

#[derive(Debug, Deserialize)]
pub struct PageParams {
    pub page: Option<String>,
}

/// The page number in `page` (absent: the first); 400 for one that is not a number
/// from 1.
fn page_number(page: Option<&str>) -> Result<usize, AppError> {
    match page {
        None => Ok(1),
        Some(p) => p
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&p| p >= 1)
            .ok_or_else(|| {
                AppError::BadRequest(format!("`page` must be a page number from 1, got `{p}`"))
            }),
    }
}

/// What a paged list counts, for the pager's words.
#[derive(Clone, Copy, Debug)]
pub enum Counted {
    Entries,
    Results,
}

/// Where one page of a long list stands, and the links to the pages either side.
pub struct Pager {
    /// 1-based.
    pub page: usize,
    pub pages: usize,
    pub total: usize,
    /// Items on a full page.
    size: usize,
    /// Items on this page.
    shown: usize,
    /// The list's own address, which `page=N` is added to.
    base: String,
    counted: Counted,
}

impl Pager {
    /// Page `page` of `total` items, `size` a page, `shown` of them on this one; 404
    /// past the last page (a list of none has one, empty).
    fn new(
        page: usize,
        total: usize,
        size: usize,
        shown: usize,
        base: String,
        counted: Counted,
    ) -> Result<Pager, AppError> {
        let pages = total.div_ceil(size).max(1);
        if page > pages {
            return Err(AppError::NotFound(format!(
                "There is no page {page}: the list has {pages}."
            )));
        }
        Ok(Pager {
            page,
            pages,
            total,
            size,
            shown,
            base,
            counted,
        })
    }

    /// Items before this page: the offset of its first.
    fn skipped(page: usize, size: usize) -> usize {
        (page - 1).saturating_mul(size)
    }

    /// Position of the page's first item in the list, 1-based.
    pub fn first(&self) -> usize {
        (Pager::skipped(self.page, self.size) + 1).min(self.total)
    }

    pub fn last(&self) -> usize {
        Pager::skipped(self.page, self.size) + self.shown
    }

    /// "Entries 501–1000 of 1201", "Results 21–40 of 94", in the reader's language.
    pub fn showing(&self, lang: &Lang) -> String {
        let (first, last, total) = (self.first(), self.last(), self.total);
        match self.counted {
            Counted::Entries => lang.showing(first, last, total),
            Counted::Results => lang.showing_results(first, last, total),
        }
    }

    pub fn previous_href(&self) -> Option<String> {
        (self.page > 1).then(|| self.href(self.page - 1))
    }

    pub fn next_href(&self) -> Option<String> {
        (self.page < self.pages).then(|| self.href(self.page + 1))
    }

    fn href(&self, page: usize) -> String {
        if page == 1 {
            self.base.clone()
        } else if self.base.contains('?') {
            format!("{}&page={page}", self.base)
        } else {
            format!("{}?page={page}", self.base)
        }
    }
}

/// The page of `all` that `params` asks for (the first by default), and its pager; 400
/// for a page that is not a number, 404 past the last.
fn page_of<'a>(
    all: impl ExactSizeIterator<Item = &'a Entry>,
    params: Result<Query<PageParams>, QueryRejection>,
    base: String,
) -> Result<(Vec<&'a Entry>, Pager), AppError> {
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let page = page_number(params.page.as_deref())?;
    let total = all.len();
    let skipped = Pager::skipped(page, PAGE_SIZE);
    let entries: Vec<&Entry> = all.skip(skipped).take(PAGE_SIZE).collect();
    let pager = Pager::new(
        page,
        total,
        PAGE_SIZE,
        entries.len(),
        base,
        Counted::Entries,
    )?;
    Ok((entries, pager))
}

#[derive(Template)]
#[template(path = "home.html")]
pub struct HomePage<'a> {
    pub ui: Ui,
    pub entries: Vec<&'a Entry>,
    pub pager: Pager,
    pub start_here: Vec<&'a Entry>,
    pub tags: Vec<(&'a str, usize)>,
    /// What the paste box says while capture is on.
    pub capture_notice: Option<String>,
}

pub async fn home(
    State(state): State<AppState>,
    ui: Ui,
    params: Result<Query<PageParams>, QueryRejection>,
) -> PageResult {
    let served = state.served();
    let kb = served.index.kb();
    let (entries, pager) = page_of(kb.entries().iter(), params, "/".into())?;
    let capture_notice = (state.inbox.as_ref())
        .filter(|inbox| inbox.capture())
        .map(|inbox| ui.lang.capture_notice(inbox.retention_days()));
    render(HomePage {
        ui,
        entries,
        pager,
        start_here: kb.most_referenced().take(START_HERE).collect(),
        tags: kb.tags().collect(),
        capture_notice,
    })
}

#[derive(Debug, Deserialize)]
pub struct SearchParams {
    #[serde(default)]
    pub q: String,
    pub tag: Option<String>,
    /// Which page of `PAGE_HITS` results, from 1.
    pub page: Option<String>,
}

#[derive(Template)]
#[template(path = "search.html")]
pub struct SearchPage<'a> {
    pub ui: Ui,
    pub q: String,
    pub tag: Option<String>,
    pub results: Vec<ResultView<'a>>,
    /// Where these results stand among all the query finds.
    pub pager: Pager,
    pub tags: Vec<(&'a str, usize)>,
}

/// Full-text search; a pasted traceback goes to its diagnosis instead.
pub async fn search(
    State(state): State<AppState>,
    ui: Ui,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> PageResult {
    let served = state.served();
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    if share::looks_like_paste(&params.q) {
        let link = share::path(&share::unflatten(&params.q));
        return Ok(Redirect::to(&link).into_response());
    }
    let page = page_number(params.page.as_deref())?;
    let query = SearchQuery::new(&params.q, params.tag.as_deref(), PAGE_HITS)
        .from(Pager::skipped(page, PAGE_HITS));
    let found = served.index.search(&query)?;
    let mut base = format!("/search?q={}", percent_encode(&query.text));
    if let Some(tag) = &query.tag {
        base.push_str(&format!("&tag={}", percent_encode(tag)));
    }
    let pager = Pager::new(
        page,
        found.total,
        PAGE_HITS,
        found.hits.len(),
        base,
        Counted::Results,
    )?;
    render(SearchPage {
        ui,
        q: query.text,
        tag: query.tag,
        results: result_views(served.index.kb(), &found.hits),
        pager,
        tags: served.index.kb().tags().collect(),
    })
}

#[derive(Template)]
#[template(path = "entry.html")]
pub struct EntryPage<'a> {
    pub ui: Ui,
    pub entry: &'a Entry,
    /// The body shown: in the language asked for, else the interface's, else English.
    pub body: &'a Body,
    /// The same page with the body in the other language, when the entry has it.
    pub other_body: Option<String>,
    pub related: Vec<&'a Entry>,
    /// The address to share: absolute when the public URL is known.
    pub link: String,
}

#[derive(Deserialize)]
pub struct BodyParams {
    lang: Option<String>,
}

/// An entry's page, its body in the interface language unless `?lang=` asks for the
/// other; `/entries/{slug}.md` is the same entry as Markdown.
pub async fn entry(
    State(state): State<AppState>,
    ui: Ui,
    Path(slug): Path<String>,
    params: Result<Query<BodyParams>, QueryRejection>,
) -> Result<Response, AppError> {
    let served = state.served();
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let asked = match params.lang.as_deref() {
        None => None,
        Some(tag) => Some(Lang::parse(tag).ok_or_else(|| {
            AppError::BadRequest(format!(
                "Entries are written in English (`?lang=en`) and Chinese (`?lang=zh-CN`), not `{}`.",
                clip(tag, 40)
            ))
        })?),
    };
    if let Some(slug) = slug.strip_suffix(".md") {
        // For programs: English unless asked, whatever the browser's language.
        return super::llms::entry_markdown(&state, slug, asked.unwrap_or_default());
    }
    let lang = asked.unwrap_or(ui.lang);
    let kb = served.index.kb();
    let entry = kb
        .get(&slug)
        .ok_or_else(|| AppError::NotFound(format!("There is no entry `{slug}`.")))?;
    let body = entry.body(lang);
    let other_body = (entry.body_zh.is_some())
        .then(|| format!("/entries/{}?lang={}", entry.slug, body.lang.other().code()));
    render(EntryPage {
        ui,
        entry,
        body,
        other_body,
        related: entry.related.iter().filter_map(|s| kb.get(s)).collect(),
        link: state.entry_url(&entry.slug),
    })
}

#[derive(Template)]
#[template(path = "tag.html")]
pub struct TagPage<'a> {
    pub ui: Ui,
    pub tag: String,
    pub entries: Vec<&'a Entry>,
    pub pager: Pager,
}

pub async fn tag(
    State(state): State<AppState>,
    ui: Ui,
    Path(tag): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> PageResult {
    let served = state.served();
    let entries = served.index.kb().tagged(&tag);
    if entries.len() == 0 {
        return Err(AppError::NotFound(format!("No entry has the tag `{tag}`.")));
    }
    let (entries, pager) = page_of(entries, params, format!("/tags/{tag}"))?;
    render(TagPage {
        ui,
        tag,
        entries,
        pager,
    })
}

/// The language switch: remembers the choice in a cookie and goes back to the page.
pub async fn switch_language(
    Path(code): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let lang = Lang::parse(&code)
        .ok_or_else(|| AppError::NotFound(format!("errbook has no `{code}` interface.")))?;
    let next = params
        .get("next")
        .and_then(|next| local_path(next))
        .unwrap_or_else(|| "/".to_string());
    let mut response = Redirect::to(&next).into_response();
    let cookie = format!(
        "{}={}; Path=/; Max-Age=31536000; SameSite=Lax",
        i18n::COOKIE,
        lang.code()
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `next` as a path on errbook's own origin, or `None` when a browser could read it
/// as anything else. Browsers drop tabs and line breaks anywhere in a URL, trim
/// spaces and control characters at its ends, and read `\\` as `/`, so `/\t/evil`
/// and `/\\evil` lead off-site; any such character, or a second leading slash, refuses
/// the target. Other bytes past ASCII are percent-encoded, so the `Location` header
/// is plain ASCII.
fn local_path(next: &str) -> Option<String> {
    let mut chars = next.chars();
    if chars.next() != Some('/') || matches!(chars.next(), Some('/')) {
        return None;
    }
    if next
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return None;
    }
    Some(percent_encode_unless(next, |byte| byte.is_ascii()))
}

#[derive(Debug, Deserialize)]
pub struct DiagnoseForm {
    #[serde(default)]
    pub text: String,
}

/// One answer on the diagnosis page.
pub struct MatchView<'a> {
    pub entry: &'a Entry,
    pub m: &'a Match,
    pub evidence: Vec<EvidenceView>,
    /// The cause the paste selects among the entry's several.
    pub branch: Option<BranchView>,
    /// What the entry's version ranges say of the releases in the paste, in words.
    pub versions: Vec<String>,
}

/// The branch of an entry a paste selects, in the reader's language.
pub struct BranchView {
    pub title: String,
    /// Paste lines that selected it.
    pub lines: Vec<usize>,
    /// Its fix, values from the paste filled in, as sanitised HTML.
    pub fix_html: String,
    /// Titles of the entry's other causes.
    pub otherwise: Vec<String>,
}

impl BranchView {
    fn new(entry: &Entry, chosen: &ChosenBranch, lang: Lang) -> BranchView {
        let b = &entry.branches[chosen.index];
        let pick = |en: &str, zh: &str| match lang {
            Lang::Zh => zh.to_string(),
            Lang::En => en.to_string(),
        };
        BranchView {
            title: pick(&b.title, &b.title_zh),
            lines: chosen.lines.clone(),
            fix_html: render_markdown(&Branch::filled(&pick(&b.fix, &b.fix_zh), &chosen.values)),
            otherwise: (entry.branches.iter())
                .filter(|o| o.id != b.id)
                .map(|o| pick(&o.title, &o.title_zh))
                .collect(),
        }
    }
}

/// One paste line behind a match, cut into pieces, the ones that matched marked; never
/// the entry's regexes or the analysed (stemmed) words themselves.
pub struct EvidenceView {
    pub line: usize,
    /// (text, matched) pieces of the line.
    pub pieces: Vec<(String, bool)>,
    /// Whether a signature (the entry's own error message) matched, rather than words.
    pub by_signature: bool,
}

impl EvidenceView {
    fn new(e: &Evidence) -> EvidenceView {
        let pieces = match e.span {
            Some(_) => {
                let (before, hit, after) = e.parts();
                [(before, false), (hit, true), (after, false)]
                    .into_iter()
                    .filter(|(t, _)| !t.is_empty())
                    .map(|(t, m)| (t.to_string(), m))
                    .collect()
            }
            None => mark_words(&e.text, &e.terms),
        };
        EvidenceView {
            line: e.line,
            pieces,
            by_signature: e.signature.is_some(),
        }
    }
}

/// `text` cut into words and what lies between, each word marked when it begins with
/// one of `terms` (analysed forms: `allreduc` marks `allreduce`); a Chinese term is
/// marked wherever it occurs.
fn mark_words(text: &str, terms: &[String]) -> Vec<(String, bool)> {
    let mut pieces: Vec<(String, bool)> = Vec::new();
    let mut push = |piece: &str, marked: bool| match pieces.last_mut() {
        Some((last, m)) if *m == marked => last.push_str(piece),
        _ => pieces.push((piece.to_string(), marked)),
    };
    let mut rest = text;
    while !rest.is_empty() {
        let word_len = rest
            .char_indices()
            .find(|&(_, c)| !c.is_alphanumeric() && c != '_')
            .map_or(rest.len(), |(i, _)| i);
        if word_len == 0 {
            let c = rest.chars().next().map_or(1, char::len_utf8);
            push(&rest[..c], false);
            rest = &rest[c..];
            continue;
        }
        let word = &rest[..word_len];
        let lower = word.to_lowercase();
        let marked = terms.iter().any(|t| {
            if !t.is_ascii() {
                lower.contains(t.as_str())
            } else {
                t.len() >= 2 && lower.starts_with(t.as_str())
            }
        });
        push(word, marked);
        rest = &rest[word_len..];
    }
    pieces
}

#[derive(Template)]
#[template(path = "diagnose.html")]
pub struct DiagnosePage<'a> {
    pub ui: Ui,
    pub text: &'a str,
    pub diagnosis: &'a Diagnosis,
    /// What happened, in a sentence or three in the reader's language, whatever the verdict.
    pub triage_summary: String,
    /// The answer, when there is one.
    pub top: Option<MatchView<'a>>,
    /// The entry's Fix section, shown inline under the answer, in the reader's language
    /// when the entry has it.
    pub fix_html: Option<String>,
    /// The language `fix_html` is in (`en`, `zh-CN`).
    pub fix_lang: &'static str,
    /// The whole entry in the other language, when it has both.
    pub other_body: Option<String>,
    /// When the answer's entry has several causes and the paste selects none: their
    /// titles, in the reader's language.
    pub causes: Vec<&'a str>,
    pub others: Vec<MatchView<'a>>,
    pub closest: Vec<ResultView<'a>>,
    pub share: share::Link,
    /// The share link's full address: absolute when the public URL is known.
    pub share_url: String,
    /// "Did this fix it?", when the server keeps feedback and the answer names an
    /// entry.
    pub feedback: Option<FeedbackForm>,
}

impl DiagnosePage<'_> {
    pub fn matched(&self) -> bool {
        self.diagnosis.verdict == Verdict::Matched
    }

    pub fn possible(&self) -> bool {
        self.diagnosis.verdict == Verdict::Possible
    }
}

/// The paste box's target: the answer page for a pasted traceback or log.
pub async fn diagnose(
    State(state): State<AppState>,
    lang: Lang,
    form: Result<Form<DiagnoseForm>, FormRejection>,
) -> PageResult {
    let Form(form) = form.map_err(|e| match e.status().as_u16() {
        413 => AppError::PayloadTooLarge(format!(
            "The paste is over {} bytes: paste the part of the log around the failure.",
            super::MAX_BODY_BYTES
        )),
        _ => AppError::BadRequest(e.body_text()),
    })?;
    answer(&state, lang, form.text, true).await
}

/// The feedback form under an answer: the entry it led with, and the paste as its
/// share link packs it, so the vote is stored with the answer it is about.
pub struct FeedbackForm {
    pub entry: String,
    pub packed: String,
}

#[derive(Debug, Deserialize)]
pub struct SharedParams {
    pub p: Option<String>,
}

/// A share link: the paste travels in the URL and is diagnosed again.
pub async fn diagnose_shared(
    State(state): State<AppState>,
    lang: Lang,
    params: Result<Query<SharedParams>, QueryRejection>,
) -> PageResult {
    let Query(params) = params.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let Some(packed) = params.p else {
        return Ok(Redirect::to("/").into_response());
    };
    let text = share::decode(&packed).map_err(AppError::BadRequest)?;
    answer(&state, lang, text, false).await
}

/// The answer page for `text`; `sent`: the user pasted it now (a share link opened
/// is an answer seen again, not a failure seen again).
async fn answer(state: &AppState, lang: Lang, text: String, sent: bool) -> PageResult {
    let served = state.served();
    let text: Arc<str> = text.into();
    let request = Request::text(text.clone(), None).map_err(|err| match err {
        RequestError::Empty => AppError::BadRequest(
            "The paste is empty: paste a traceback or a log into the box.".into(),
        ),
        err => err.into(),
    })?;
    let diagnosis = if sent {
        state.answer_paste(&served, request).await?
    } else {
        state.diagnose(&served, request).await?
    };
    let share = share::link(&text, &diagnosis);
    let kb = served.index.kb();
    let mut views = diagnosis.matches.iter().filter_map(|m| {
        let entry = kb.get(&m.slug)?;
        Some(MatchView {
            entry,
            evidence: m.evidence.iter().map(EvidenceView::new).collect(),
            branch: (m.branch.as_ref()).map(|b| BranchView::new(entry, b, lang)),
            versions: (m.versions.iter())
                .map(|c| match lang {
                    Lang::Zh => c.sentence_zh(),
                    Lang::En => c.sentence(),
                })
                .collect(),
            m,
        })
    });
    let top = views.next();
    let others = views.collect();
    let body = top.as_ref().map(|top| top.entry.body(lang));
    let fix_html = body.and_then(|body| section_html(body.html(), "fix"));
    let fix_lang = body.map_or(lang, |body| body.lang).code();
    let other_body = top
        .as_ref()
        .filter(|top| top.entry.body_zh.is_some())
        .map(|top| {
            format!(
                "/entries/{}?lang={}#fix",
                top.entry.slug,
                lang.other().code()
            )
        });
    let causes = top
        .as_ref()
        .filter(|top| top.branch.is_none())
        .map(|top| {
            (top.entry.branches.iter())
                .map(|b| match lang {
                    Lang::Zh => b.title_zh.as_str(),
                    Lang::En => b.title.as_str(),
                })
                .collect()
        })
        .unwrap_or_default();
    let closest = result_views(kb, &diagnosis.closest);
    let feedback = (state.inbox.as_ref().zip(top.as_ref())).map(|(_, top)| FeedbackForm {
        entry: top.entry.slug.clone(),
        packed: share::packed(&share.path).to_string(),
    });
    render(DiagnosePage {
        ui: Ui::new(lang, share.path.clone()),
        share_url: state.url(&share.path),
        text: &text,
        diagnosis: &diagnosis,
        triage_summary: (diagnosis.triage).summary_in(diagnosis.parsed.root_exception(), lang),
        top,
        fix_html,
        fix_lang,
        other_body,
        causes,
        others,
        closest,
        share,
        feedback,
    })
}

/// The HTML of one `## Section` of a rendered entry body, heading excluded.
fn section_html(html: &str, id: &str) -> Option<String> {
    let start = html.find(&format!("<h2 id=\"{id}\">"))?;
    let body_start = start + html[start..].find("</h2>")? + "</h2>".len();
    let end = html[body_start..]
        .find("<h2")
        .map_or(html.len(), |i| body_start + i);
    Some(html[body_start..end].trim().to_string())
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub ui: Ui,
    pub status: u16,
    pub title: &'static str,
    pub detail: String,
}

impl ErrorPage {
    pub fn new(lang: Lang, status: StatusCode, detail: String) -> ErrorPage {
        ErrorPage {
            ui: Ui::new(lang, "/"),
            status: status.as_u16(),
            title: lang.status_title(status.as_u16()),
            detail,
        }
    }

    /// Error pages must never fail themselves: fall back to plain text.
    pub fn render_or_plain(&self) -> String {
        self.render()
            .unwrap_or_else(|_| format!("{} {}: {}", self.status, self.title, self.detail))
    }
}

pub async fn not_found() -> AppError {
    AppError::NotFound("There is no page at this address.".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_words_are_marked_as_written_not_as_stemmed() {
        let pieces = mark_words(
            "RuntimeError: allreduce hangs on 显存 rank 3",
            &["allreduc".into(), "hang".into(), "显存".into()],
        );
        let marked: Vec<&str> = pieces
            .iter()
            .filter(|(_, m)| *m)
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(marked, ["allreduce", "hangs", "显存"]);
        let whole: String = pieces.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(whole, "RuntimeError: allreduce hangs on 显存 rank 3");
    }

    #[test]
    fn the_switch_link_encodes_the_page_it_returns_to() {
        let ui = Ui::new(Lang::En, "/search?q=显存 a&tag=nccl");
        assert_eq!(
            ui.switch_href(),
            "/lang/zh-CN?next=/search%3Fq%3D%E6%98%BE%E5%AD%98%20a%26tag%3Dnccl"
        );
        assert_eq!(Ui::new(Lang::Zh, "/").switch_href(), "/lang/en?next=/");
    }
}
