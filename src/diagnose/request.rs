//! A diagnosis asked for, checked once for every front door: the pages, the API, the
//! MCP tool and the command line build a [`Request`] and get the same limits and the
//! same refusals.

use std::fmt;
use std::sync::Arc;

use super::paste::Paste;

/// Matches given when the caller does not say how many.
pub const DEFAULT_MATCHES: usize = 5;
/// Most matches a caller may ask for.
pub const MAX_MATCHES: usize = 20;

/// What was pasted: text as a request body carries it, or a log already read line by
/// line (the command line reads files and pipes in bounded memory).
#[derive(Debug)]
pub enum Pasted {
    Text(Arc<str>),
    Read(Paste),
}

/// A valid diagnosis request: a paste with something in it, and a number of matches
/// from 1 to [`MAX_MATCHES`].
#[derive(Debug)]
pub struct Request {
    pasted: Pasted,
    matches: usize,
}

/// Why a request was refused. The message tells the caller what to send instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Nothing but white space was pasted.
    Empty,
    /// The number of matches asked for is out of range.
    Matches(i64),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Empty => {
                f.write_str("the paste (`text`) is empty: send the traceback, log or question")
            }
            RequestError::Matches(n) => write!(
                f,
                "the number of matches (`limit`) must be from 1 to {MAX_MATCHES}, got {n}"
            ),
        }
    }
}

impl std::error::Error for RequestError {}

impl Request {
    /// A request for `pasted`, with `matches` results or [`DEFAULT_MATCHES`].
    pub fn new(pasted: Pasted, matches: Option<i64>) -> Result<Request, RequestError> {
        let matches = match matches {
            None => DEFAULT_MATCHES,
            Some(n) => match usize::try_from(n) {
                Ok(n @ 1..=MAX_MATCHES) => n,
                _ => return Err(RequestError::Matches(n)),
            },
        };
        let empty = match &pasted {
            Pasted::Text(text) => text.trim().is_empty(),
            Pasted::Read(paste) => paste.is_empty(),
        };
        if empty {
            return Err(RequestError::Empty);
        }
        Ok(Request { pasted, matches })
    }

    /// A request for pasted text.
    pub fn text(text: impl Into<Arc<str>>, matches: Option<i64>) -> Result<Request, RequestError> {
        Request::new(Pasted::Text(text.into()), matches)
    }

    pub fn pasted(&self) -> &Pasted {
        &self.pasted
    }

    /// The pasted text, when it came as text.
    pub fn text_pasted(&self) -> Option<&Arc<str>> {
        match &self.pasted {
            Pasted::Text(text) => Some(text),
            Pasted::Read(_) => None,
        }
    }

    pub fn matches(&self) -> usize {
        self.matches
    }

    /// Bytes pasted: what decides whether the diagnosis leaves the async runtime.
    pub fn len(&self) -> usize {
        match &self.pasted {
            Pasted::Text(text) => text.len(),
            Pasted::Read(paste) => paste.lines.iter().map(|l| l.text.len() + 1).sum(),
        }
    }

    /// Always false: an empty paste is refused by [`Request::new`].
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_emptiness_are_checked_once() {
        assert_eq!(Request::text("x", None).unwrap().matches(), DEFAULT_MATCHES);
        assert_eq!(Request::text("x", Some(20)).unwrap().matches(), 20);
        for n in [0, -1, 21, i64::MAX] {
            assert_eq!(
                Request::text("x", Some(n)).unwrap_err(),
                RequestError::Matches(n)
            );
        }
        assert_eq!(
            Request::text(" \n\t", None).unwrap_err(),
            RequestError::Empty
        );
        let read = Paste::from_text("\n\n");
        assert_eq!(
            Request::new(Pasted::Read(read), None).unwrap_err(),
            RequestError::Empty
        );
    }
}
