//! Request bodies are read in full before a request takes one of the turns that answer
//! requests (the concurrency limit), and they must keep arriving: a client that sends
//! headers promising a body and then nothing, or a byte now and then, holds only its
//! own connection, never a turn that `/healthz`, pages or other pastes need.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{AppError, MAX_BODY_BYTES};

/// Longest wait for the next piece of a body.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest time a whole body may take to arrive (a mebibyte at about 100 KB/s).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Most body bytes held in memory at once, over every request still uploading or
/// being answered: bodies are read before a turn, so without this bound 4,096
/// connections could each hold a mebibyte.
pub const BUFFERED_BYTES: usize = 64 << 20;
/// Bodies are counted against [`BUFFERED_BYTES`] in pieces of this many bytes.
const PIECE: usize = 1024;

/// The room bodies share (see [`BUFFERED_BYTES`]).
#[derive(Clone, Debug)]
pub struct BodyRoom(Arc<Semaphore>);

impl Default for BodyRoom {
    fn default() -> Self {
        BodyRoom(Arc::new(Semaphore::new(BUFFERED_BYTES / PIECE)))
    }
}

/// Reads the request's body (at most [`MAX_BODY_BYTES`]) within the deadlines, then
/// passes the request on with the body in memory, counted against the room bodies
/// share until it is answered. A body that stalls or takes too long (waiting for room
/// included) is answered 408; one over the limit 413, without waiting for the rest.
pub async fn read_body(State(room): State<BodyRoom>, request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    if request
        .body()
        .size_hint()
        .lower()
        .try_into()
        .is_ok_and(|n: usize| n > MAX_BODY_BYTES)
    {
        return AppError::body_too_large().into_response();
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(BODY_TIMEOUT, collect(body, &room)).await {
        Ok(Ok((bytes, _held))) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(error)) => error.into_response(),
        Err(_) => slow_body().into_response(),
    }
}

/// The body's bytes and the room they hold, or why they could not be had.
async fn collect(
    mut body: Body,
    room: &BodyRoom,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), AppError> {
    let mut bytes = Vec::new();
    let mut held: Option<OwnedSemaphorePermit> = None;
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE_TIMEOUT, body.frame()).await {
            Err(_) => return Err(slow_body()),
            Ok(None) => return Ok((bytes, held)),
            Ok(Some(Err(_))) => {
                return Err(AppError::BadRequest(
                    "the request body could not be read: the connection broke while \
                     sending it"
                        .into(),
                ));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_BODY_BYTES {
                return Err(AppError::body_too_large());
            }
            let pieces = (bytes.len() + data.len()).div_ceil(PIECE) - bytes.len().div_ceil(PIECE);
            if pieces > 0 {
                let more = (room.0.clone())
                    .acquire_many_owned(pieces as u32)
                    .await
                    .map_err(|_| slow_body())?;
                match held.as_mut() {
                    Some(held) => held.merge(more),
                    None => held = Some(more),
                }
            }
            bytes.extend_from_slice(&data);
        }
    }
}

fn slow_body() -> AppError {
    AppError::RequestTimeout(format!(
        "the request body did not arrive in time: it must keep coming (no pause over \
         {} s) and be complete within {} s",
        BODY_IDLE_TIMEOUT.as_secs(),
        BODY_TIMEOUT.as_secs()
    ))
}
