//! `/inbox`: the curator's pages. Groups of failures errbook could not answer, the
//! most often seen first; entries by how often users said they did not help; and per
//! group, three decisions: draft an entry from it, attach it to an existing entry as a
//! signature that entry lacks, or mark it as not a training failure. Every page needs
//! the curator's session (see [`super::curator`]) and is never cached.

use std::sync::Arc;
use std::time::Instant;

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::curator::{self, Curator};
use super::error::AppError;
use super::inbox_text::InboxText;
use super::pages::{ErrorPage, Ui};
use super::{AppState, unix_now};
use crate::diagnose::Request;
use crate::inbox::{EntryVotes, Group, GroupStatus, Store};

/// Groups listed on the inbox page.
const LISTED: i64 = 200;

type PageResult = Result<Response, AppError>;

/// A page that is never stored by a browser or proxy.
fn private(status: StatusCode, html: String, cookie: Option<String>) -> Response {
    let mut response = (status, Html(html)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.append(header::SET_COOKIE, cookie);
    }
    response
}

fn refused(ui: &Ui, status: StatusCode, detail: &str) -> Response {
    let page = ErrorPage::new(ui.lang, status, detail.to_string());
    private(status, page.render_or_plain(), None)
}

/// The curator's sign-in, or 404 when the server has no curator token.
fn curator(state: &AppState) -> Result<&Arc<Curator>, AppError> {
    state.curator.as_ref().ok_or_else(|| {
        AppError::NotFound(
            "The inbox is off: start errbook serve with --curator-token (or set \
             ERRBOOK_CURATOR_TOKEN) to use it."
                .into(),
        )
    })
}

/// The store, or 503 while it cannot be read.
fn store(state: &AppState) -> Result<Arc<Store>, AppError> {
    let inbox = state.inbox.as_ref().ok_or_else(|| {
        AppError::NotFound("The inbox is off: this server runs without a store.".into())
    })?;
    inbox.store().ok_or_else(|| {
        let health = inbox.health();
        AppError::Unavailable(format!(
            "The inbox's store ({} at {}) is not open yet{}.",
            health.backend,
            health.location,
            health.error.map(|e| format!(": {e}")).unwrap_or_default()
        ))
    })
}

fn store_failed(err: crate::inbox::StoreError) -> AppError {
    tracing::error!(error = %err, "reading the inbox store failed");
    AppError::Unavailable("The inbox's store did not answer; try again in a moment.".into())
}

/// A signed-in curator's session, or where to send the browser instead.
enum Signed {
    In(String),
    Out(Response),
}

fn signed_in(curator: &Curator, headers: &HeaderMap) -> Signed {
    match curator.session(headers, unix_now()) {
        Some(session) => Signed::In(session),
        None => Signed::Out(Redirect::to("/inbox/login").into_response()),
    }
}

#[derive(Template)]
#[template(path = "inbox_login.html")]
struct LoginPage {
    ui: Ui,
    t: &'static InboxText,
    csrf: String,
    message: Option<&'static str>,
}

fn login_page(
    ui: Ui,
    curator: &Curator,
    status: StatusCode,
    message: Option<fn(&InboxText) -> &'static str>,
) -> PageResult {
    let nonce = curator::nonce();
    let t = InboxText::of(ui.lang);
    let page = LoginPage {
        csrf: curator.login_csrf(&nonce),
        message: message.map(|m| m(t)),
        t,
        ui,
    };
    let cookie = curator.set_cookie(curator::LOGIN, &nonce, 3600);
    Ok(private(status, page.render()?, Some(cookie)))
}

/// `GET /inbox/login`.
pub async fn login_form(State(state): State<AppState>, ui: Ui) -> PageResult {
    let curator = curator(&state)?;
    login_page(ui, curator, StatusCode::OK, None)
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /inbox/login`: the token, checked at most [`curator::MAX_FAILURES`] times a
/// minute when wrong.
pub async fn login(
    State(state): State<AppState>,
    ui: Ui,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> PageResult {
    let curator = curator(&state)?;
    let Form(form) = form.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let now = Instant::now();
    if let Err(wait) = curator.may_try(now) {
        let mut response = refused(
            &ui,
            StatusCode::TOO_MANY_REQUESTS,
            "Too many wrong tokens: wait a minute before trying again.",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(wait));
        return Ok(response);
    }
    if !curator.login_csrf_matches(&headers, &form.csrf) {
        return login_page(ui, curator, StatusCode::FORBIDDEN, Some(|t| t.form_expired));
    }
    if !curator.token_matches(&form.token) {
        curator.failed(now);
        tracing::warn!("a wrong curator token was given");
        return login_page(
            ui,
            curator,
            StatusCode::UNAUTHORIZED,
            Some(|t| t.wrong_token),
        );
    }
    let session = curator.new_session(unix_now());
    let mut response = Redirect::to("/inbox").into_response();
    let headers = response.headers_mut();
    for cookie in [
        curator.set_cookie(curator::SESSION, &session, curator::SESSION_SECONDS),
        curator.set_cookie(curator::LOGIN, "", 0),
    ] {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
    /// The entry a group is attached to.
    #[serde(default)]
    entry: String,
}

/// The session of a form's request, when its CSRF token is that session's.
fn checked(
    state: &AppState,
    ui: &Ui,
    headers: &HeaderMap,
    form: &Result<Form<CsrfForm>, FormRejection>,
) -> Result<Result<String, Response>, AppError> {
    let curator = curator(state)?;
    let session = match signed_in(curator, headers) {
        Signed::In(session) => session,
        Signed::Out(response) => return Ok(Err(response)),
    };
    let csrf = form.as_ref().map(|f| f.csrf.as_str()).unwrap_or("");
    if !curator.csrf_matches(&session, csrf) {
        return Ok(Err(refused(
            ui,
            StatusCode::FORBIDDEN,
            "This form was not sent from the inbox's own page (its CSRF token is missing or \
             wrong). Open the inbox again and repeat.",
        )));
    }
    Ok(Ok(session))
}

/// `POST /inbox/logout`.
pub async fn logout(
    State(state): State<AppState>,
    ui: Ui,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> PageResult {
    if let Err(response) = checked(&state, &ui, &headers, &form)? {
        return Ok(response);
    }
    let curator = curator(&state)?;
    let mut response = Redirect::to("/inbox/login").into_response();
    if let Ok(value) = HeaderValue::from_str(&curator.set_cookie(curator::SESSION, "", 0)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

#[derive(Template)]
#[template(path = "inbox.html")]
struct InboxPage {
    ui: Ui,
    t: &'static InboxText,
    csrf: String,
    groups: Vec<Group>,
    votes: Vec<EntryVotes>,
    capture: bool,
    retention_days: u32,
}

/// `GET /inbox`.
pub async fn list(State(state): State<AppState>, ui: Ui, headers: HeaderMap) -> PageResult {
    let curator = curator(&state)?;
    let session = match signed_in(curator, &headers) {
        Signed::In(session) => session,
        Signed::Out(response) => return Ok(response),
    };
    let store = store(&state)?;
    let groups = store.groups(true, LISTED).await.map_err(store_failed)?;
    let votes = store.entry_votes(LISTED).await.map_err(store_failed)?;
    let inbox = state.inbox.as_ref();
    let page = InboxPage {
        t: InboxText::of(ui.lang),
        ui,
        csrf: curator.csrf(&session),
        groups,
        votes,
        capture: inbox.is_some_and(|i| i.capture()),
        retention_days: inbox.map_or(0, |i| i.retention_days()),
    };
    Ok(private(StatusCode::OK, page.render()?, None))
}

#[derive(Template)]
#[template(path = "inbox_group.html")]
struct GroupPage {
    ui: Ui,
    t: &'static InboxText,
    csrf: String,
    group: Group,
    slugs: Vec<String>,
}

async fn find(store: &Store, fingerprint: &str) -> Result<Group, AppError> {
    store
        .group(fingerprint)
        .await
        .map_err(store_failed)?
        .ok_or_else(|| {
            AppError::NotFound(format!(
                "There is no group {} (it may have passed its retention).",
                crate::diagnose::clip(fingerprint, 40)
            ))
        })
}

/// `GET /inbox/groups/{fingerprint}`.
pub async fn group(
    State(state): State<AppState>,
    ui: Ui,
    headers: HeaderMap,
    Path(fingerprint): Path<String>,
) -> PageResult {
    let curator = curator(&state)?;
    let session = match signed_in(curator, &headers) {
        Signed::In(session) => session,
        Signed::Out(response) => return Ok(response),
    };
    let group = find(&*store(&state)?, &fingerprint).await?;
    let served = state.served();
    let page = GroupPage {
        t: InboxText::of(ui.lang),
        ui,
        csrf: curator.csrf(&session),
        group,
        slugs: served
            .index
            .kb()
            .entries()
            .iter()
            .map(|e| e.slug.clone())
            .collect(),
    };
    Ok(private(StatusCode::OK, page.render()?, None))
}

#[derive(Template)]
#[template(path = "inbox_done.html")]
struct DonePage {
    ui: Ui,
    t: &'static InboxText,
    group: Group,
    /// What was decided, in a sentence.
    decided: String,
    /// Files to write, as (suggested path, content).
    files: Vec<(String, String)>,
    /// Lines to add to an existing entry's front matter.
    signatures: Vec<String>,
}

/// `POST /inbox/groups/{fingerprint}/{action}`: a curator's decision on a group,
/// `draft`, `attach` (with the form's `entry`) or `dismiss`.
pub async fn decide(
    State(state): State<AppState>,
    ui: Ui,
    headers: HeaderMap,
    Path((fingerprint, action)): Path<(String, String)>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> PageResult {
    if let Err(response) = checked(&state, &ui, &headers, &form)? {
        return Ok(response);
    }
    let store = store(&state)?;
    match action.as_str() {
        "draft" => draft(&state, ui, &store, &fingerprint).await,
        "attach" => {
            let slug = form
                .map(|Form(f)| f.entry.trim().to_string())
                .unwrap_or_default();
            attach(&state, ui, &store, &fingerprint, &slug).await
        }
        "dismiss" => {
            if !store
                .set_status(&fingerprint, &GroupStatus::NotTraining)
                .await
                .map_err(store_failed)?
            {
                find(&store, &fingerprint).await?;
            }
            Ok(Redirect::to("/inbox").into_response())
        }
        _ => Err(AppError::NotFound(
            "There is no such decision: a group is drafted, attached or dismissed.".into(),
        )),
    }
}

/// A group and what errbook makes of its sample now.
async fn diagnosed(
    state: &AppState,
    store: &Store,
    fingerprint: &str,
) -> Result<(Group, crate::diagnose::Diagnosis), AppError> {
    let group = find(store, fingerprint).await?;
    let request = Request::text(group.sample.as_str(), None).map_err(AppError::from)?;
    let d = state.diagnose(&state.served(), request).await?;
    Ok((group, d))
}

/// The entry's two files, drafted from the group's sample; the group is marked
/// drafted.
async fn draft(state: &AppState, ui: Ui, store: &Store, fingerprint: &str) -> PageResult {
    let (group, d) = diagnosed(state, store, fingerprint).await?;
    let draft = crate::draft::draft(state.served().index.kb(), &group.sample, &d)
        .map_err(|err| AppError::Unprocessable(format!("No draft from this group: {err}.")))?;
    let decided = InboxText::of(ui.lang).drafted(&draft.slug);
    let files = vec![
        (format!("kb/<area>/{}.md", draft.slug), draft.entry),
        (format!("kb/<area>/{}.zh.md", draft.slug), draft.chinese),
    ];
    let status = GroupStatus::Drafted(draft.slug);
    decided_page(ui, store, group, status, decided, files, Vec::new()).await
}

/// Records `status` for `group` and shows what the curator is to do next.
async fn decided_page(
    ui: Ui,
    store: &Store,
    group: Group,
    status: GroupStatus,
    decided: String,
    files: Vec<(String, String)>,
    signatures: Vec<String>,
) -> PageResult {
    store
        .set_status(&group.fingerprint, &status)
        .await
        .map_err(store_failed)?;
    let page = DonePage {
        t: InboxText::of(ui.lang),
        ui,
        decided,
        files,
        signatures,
        group: Group { status, ..group },
    };
    Ok(private(StatusCode::OK, page.render()?, None))
}

/// An existing entry answers the group: the page shows the signature and example to
/// add to it.
async fn attach(
    state: &AppState,
    ui: Ui,
    store: &Store,
    fingerprint: &str,
    slug: &str,
) -> PageResult {
    if state.served().index.kb().get(slug).is_none() {
        return Err(AppError::Unprocessable(format!(
            "There is no entry `{}`: choose the entry that answers this group.",
            crate::diagnose::clip(slug, 80)
        )));
    }
    let (group, d) = diagnosed(state, store, fingerprint).await?;
    let decided = InboxText::of(ui.lang).attached(slug);
    let status = GroupStatus::Attached(slug.to_string());
    let signatures = crate::draft::suggested_signatures(&d);
    decided_page(ui, store, group, status, decided, Vec::new(), signatures).await
}

/// A Unix time as its UTC day (`2026-11-27`), for the inbox's tables.
fn day(unix: &i64) -> String {
    let days = unix.div_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
