//! Request bodies are read in full before a request takes one of the turns that answer
//! requests (the concurrency limit), and they must keep arriving: a client that sends
//! headers promising a body and then nothing, or a byte now and then, holds only its
//! own connection, never a turn that `/healthz`, pages or other pastes need.
//!
//! A body over its limit is still read to its end, and dropped, up to
//! [`DRAINED_BYTES`]: a client still sending when the answer comes would see its
//! connection reset instead of the 413 that says how much to send.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::{AppError, body_limit};

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
/// Most bytes of a body over its limit that are read and dropped before the answer;
/// past them (or when the body announces more) the 413 goes out at once and the
/// connection closes. Dropped bytes take no memory.
pub const DRAINED_BYTES: usize = 16 << 20;

/// The room bodies share (see [`BUFFERED_BYTES`]).
#[derive(Clone, Debug)]
pub struct BodyRoom(Arc<Semaphore>);

impl Default for BodyRoom {
    fn default() -> Self {
        BodyRoom(Arc::new(Semaphore::new(BUFFERED_BYTES / PIECE)))
    }
}

/// Reads the request's body (at most [`body_limit`] of its path) within the deadlines,
/// then passes the request on with the body in memory, counted against the room bodies
/// share until it is answered. A body that stalls or takes too long (waiting for room
/// included) is answered 408; one over the limit 413, once the rest is read and dropped
/// (see [`DRAINED_BYTES`]).
pub async fn read_body(State(room): State<BodyRoom>, request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let limit = body_limit(request.uri().path());
    if request
        .body()
        .size_hint()
        .lower()
        .try_into()
        .is_ok_and(|n: usize| n > DRAINED_BYTES)
    {
        return AppError::body_too_large(limit).into_response();
    }
    let (parts, body) = request.into_parts();
    let deadline = Instant::now() + BODY_TIMEOUT;
    match collect(body, limit, deadline, &room).await {
        Ok((bytes, _held)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(error) => error.into_response(),
    }
}

/// The body's bytes and the room they hold, or why they could not be had.
async fn collect(
    mut body: Body,
    limit: usize,
    deadline: Instant,
    room: &BodyRoom,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), AppError> {
    let mut bytes = Vec::new();
    let mut held: Option<OwnedSemaphorePermit> = None;
    loop {
        let data = match next_data(&mut body, deadline).await {
            Arrived::Data(data) => data,
            Arrived::End => return Ok((bytes, held)),
            Arrived::Stalled => return Err(slow_body()),
            Arrived::Broken => {
                return Err(AppError::BadRequest(
                    "the request body could not be read: the connection broke while \
                     sending it"
                        .into(),
                ));
            }
        };
        if bytes.len() + data.len() > limit {
            let read = bytes.len() + data.len();
            drop((bytes, held));
            drain(body, read, deadline).await;
            return Err(AppError::body_too_large(limit));
        }
        let pieces = (bytes.len() + data.len()).div_ceil(PIECE) - bytes.len().div_ceil(PIECE);
        if pieces > 0 {
            let wait = (room.0.clone()).acquire_many_owned(pieces as u32);
            let more = match tokio::time::timeout_at(deadline, wait).await {
                Ok(Ok(more)) => more,
                _ => return Err(slow_body()),
            };
            match held.as_mut() {
                Some(held) => held.merge(more),
                None => held = Some(more),
            }
        }
        bytes.extend_from_slice(&data);
    }
}

/// Reads and drops the rest of a body (`read` bytes of it already read) until it ends,
/// stalls, passes [`DRAINED_BYTES`] or the deadline.
async fn drain(mut body: Body, mut read: usize, deadline: Instant) {
    while read <= DRAINED_BYTES {
        match next_data(&mut body, deadline).await {
            Arrived::Data(data) => read += data.len(),
            Arrived::End | Arrived::Stalled | Arrived::Broken => return,
        }
    }
}

/// What reading a body gave next.
enum Arrived {
    Data(axum::body::Bytes),
    End,
    /// Nothing for [`BODY_IDLE_TIMEOUT`], or the deadline passed.
    Stalled,
    Broken,
}

/// The body's next piece of data (trailers are skipped).
async fn next_data(body: &mut Body, deadline: Instant) -> Arrived {
    loop {
        let wait = deadline.min(Instant::now() + BODY_IDLE_TIMEOUT);
        match tokio::time::timeout_at(wait, body.frame()).await {
            Err(_) => return Arrived::Stalled,
            Ok(None) => return Arrived::End,
            Ok(Some(Err(_))) => return Arrived::Broken,
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    return Arrived::Data(data);
                }
            }
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
