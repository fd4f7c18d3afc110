//! "Did this fix it?": the answer page's form (no script needed), `POST
//! /api/v1/feedback`, and the logic both share with MCP's `feedback` tool. A vote is
//! stored with the answer it is about: the entry, the verdict, the paste's group, and
//! with capture on the paste itself, redacted.

use askama::Template;
use axum::Json;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::api::LossyJson;
use super::error::AppError;
use super::error::{ApiError, Problem};
use super::{AppState, Served, share, unix_now};
use crate::diagnose::{Diagnosis, Request};
use crate::inbox::store::Write;
use crate::inbox::{Feedback, Vote};

/// What was kept of a vote.
#[derive(Debug, Serialize, ToSchema)]
pub struct Recorded {
    /// Always true: the vote is queued for the store.
    pub recorded: bool,
    /// Whether the paste was kept with it (capture is on and a paste came with it).
    pub kept_paste: bool,
}

/// Queues `vote` on `entry` for the store, with the paste its answer was about.
pub fn record(
    state: &AppState,
    served: &Served,
    vote: Vote,
    entry: &str,
    answered: Option<(&str, &Diagnosis)>,
    comment: Option<&str>,
) -> Result<Recorded, AppError> {
    let Some(inbox) = &state.inbox else {
        return Err(AppError::NotFound(
            "this errbook keeps no feedback: its server runs without a store".into(),
        ));
    };
    if served.index.kb().get(entry).is_none() {
        return Err(AppError::NotFound(format!(
            "there is no entry `{}`: `entry` is the id of the entry the answer named",
            crate::diagnose::clip(entry, 80)
        )));
    }
    let feedback = Feedback::new(
        vote,
        Some(entry.to_string()),
        answered,
        comment,
        inbox.capture(),
        unix_now(),
    );
    let kept_paste = feedback.sample.is_some();
    if !inbox.keep(Write::Feedback(feedback)) {
        return Err(AppError::Unavailable(
            "errbook cannot take feedback right now (its store is behind); try again in a \
             minute"
                .into(),
        ));
    }
    Ok(Recorded {
        recorded: true,
        kept_paste,
    })
}

#[derive(Debug, Deserialize)]
pub struct FeedbackFormData {
    #[serde(default)]
    vote: String,
    #[serde(default)]
    entry: String,
    /// The paste, packed as a share link packs it.
    p: Option<String>,
}

#[derive(Template)]
#[template(path = "feedback.html")]
struct ThanksPage {
    ui: super::pages::Ui,
    kept_paste: bool,
    answer: Option<String>,
}

/// `POST /feedback`: the answer page's form.
pub async fn page(
    State(state): State<AppState>,
    ui: super::pages::Ui,
    form: Result<Form<FeedbackFormData>, FormRejection>,
) -> Result<Response, AppError> {
    let Form(form) = form.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let vote = Vote::parse(&form.vote).ok_or_else(|| {
        AppError::BadRequest("Choose one of the answers: yes, no or wrong problem.".into())
    })?;
    let served = state.served();
    let text = match form.p.as_deref().filter(|p| !p.is_empty()) {
        Some(packed) => Some(share::decode(packed).map_err(AppError::BadRequest)?),
        None => None,
    };
    let d = match &text {
        Some(text) => Some(state.diagnose(&served, paste(text)?).await?),
        None => None,
    };
    let answered = text.as_deref().zip(d.as_ref());
    let recorded = record(&state, &served, vote, &form.entry, answered, None)?;
    let page = ThanksPage {
        ui,
        kept_paste: recorded.kept_paste,
        answer: form
            .p
            .filter(|p| !p.is_empty())
            .map(|p| share::packed_path(&p)),
    };
    Ok(Html(page.render()?).into_response())
}

fn paste(text: &str) -> Result<Request, AppError> {
    Request::text(text, None).map_err(AppError::from)
}

/// What a user said of an answer errbook gave.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FeedbackRequest {
    /// `yes`: the fix worked; `no`: the right problem, but the fix did not work;
    /// `wrong_entry`: the answer named the wrong problem.
    #[schema(value_type = String, example = "wrong_entry")]
    pub vote: VoteField,
    /// The id of the entry the answer named (`slug` in answers).
    pub entry: String,
    /// The paste the answer was about, as it was sent to `/diagnose`; kept (redacted)
    /// only while the server captures.
    pub text: Option<String>,
    /// What the user said, in their words (at most 2,000 characters are kept).
    pub comment: Option<String>,
}

/// A vote as sent: checked after parsing, so a wrong value gets a 422 naming it.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct VoteField(String);

/// Records whether an answer's fix worked (`yes`), its entry was right but the fix did
/// not work (`no`), or it named the wrong problem (`wrong_entry`). The team's curators
/// see it in their inbox.
#[utoipa::path(
    post,
    path = "/feedback",
    tag = "feedback",
    operation_id = "feedback",
    request_body(content = FeedbackRequest, example = json!({
        "vote": "wrong_entry",
        "entry": "nccl-watchdog-timeout",
        "text": "[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout",
    })),
    responses(
        (status = 202, description = "Queued for the store", body = Recorded),
        (status = 400, description = "Malformed JSON or a missing field", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No entry `entry`, or this server keeps no feedback (it runs without a store)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body not sent as application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An unknown `vote`, an empty `entry`, or a blank `text`", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn api(
    State(state): State<AppState>,
    LossyJson(request): LossyJson<FeedbackRequest>,
) -> Result<Response, ApiError> {
    if request.entry.trim().is_empty() {
        return Err(AppError::Unprocessable(
            "`entry` is empty: it is the id of the entry the answer named".into(),
        )
        .into());
    }
    let vote = Vote::parse(&request.vote.0).ok_or_else(|| {
        AppError::Unprocessable(format!(
            "`vote` must be `yes`, `no` or `wrong_entry`, got `{}`",
            crate::diagnose::clip(&request.vote.0, 40)
        ))
    })?;
    let served = state.served();
    let d = match &request.text {
        Some(text) => Some(state.diagnose(&served, paste(text)?).await?),
        None => None,
    };
    let answered = request.text.as_deref().zip(d.as_ref());
    let recorded = record(
        &state,
        &served,
        vote,
        &request.entry,
        answered,
        request.comment.as_deref(),
    )?;
    Ok((StatusCode::ACCEPTED, Json(recorded)).into_response())
}
