//! The curator's sign-in to `/inbox`: one shared token, given once in a login form,
//! then a signed session cookie (HttpOnly, SameSite=Strict, scoped to `/inbox`) and a
//! CSRF token on every form. Nothing is kept on the server but the token itself, so
//! replicas behind a load balancer that share the token share the sessions too.
//! Failed logins are limited across the whole server.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The session cookie.
pub const SESSION: &str = "errbook_curator";
/// The cookie a login form's CSRF token is bound to, before there is a session.
pub const LOGIN: &str = "errbook_login";
/// How long a session lasts.
pub const SESSION_SECONDS: i64 = 12 * 3600;
/// Shortest token accepted: guessing it must be hopeless even without the rate limit.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Failed logins allowed per [`FAILURE_WINDOW`], for the whole server.
pub const MAX_FAILURES: usize = 5;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug)]
pub struct Curator {
    token: String,
    /// Cookies marked `Secure` (the public URL is https).
    secure: bool,
    failures: Mutex<VecDeque<Instant>>,
}

impl Curator {
    /// The sign-in for `token`; refused when it is too short to be a secret.
    pub fn new(token: &str, secure: bool) -> Result<Curator, String> {
        let token = token.trim();
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(format!(
                "the curator token must be at least {MIN_TOKEN_CHARS} characters \
                 (for example the output of `openssl rand -hex 24`)"
            ));
        }
        Ok(Curator {
            token: token.to_string(),
            secure,
            failures: Mutex::new(VecDeque::new()),
        })
    }

    fn mac(&self, purpose: &str, value: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(self.token.as_bytes()).expect("any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        mac
    }

    fn sign(&self, purpose: &str, value: &str) -> String {
        encode(&self.mac(purpose, value).finalize().into_bytes())
    }

    fn verify(&self, purpose: &str, value: &str, signature: &str) -> bool {
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(signature) else {
            return false;
        };
        self.mac(purpose, value).verify_slice(&bytes).is_ok()
    }

    /// Whether `given` is the token, compared in constant time.
    pub fn token_matches(&self, given: &str) -> bool {
        let expected = self.sign("token", &self.token);
        self.verify("token", given.trim(), &expected)
    }

    /// A new session's cookie value, valid until `now + SESSION_SECONDS`.
    pub fn new_session(&self, now: i64) -> String {
        let expires = now + SESSION_SECONDS;
        format!("{expires}.{}", self.sign("session", &expires.to_string()))
    }

    /// The session of a request, when its cookie is one this token signed and has not
    /// expired.
    pub fn session(&self, headers: &HeaderMap, now: i64) -> Option<String> {
        let value = cookie(headers, SESSION)?;
        let (expires, signature) = value.split_once('.')?;
        let valid = expires.parse::<i64>().is_ok_and(|at| at > now)
            && self.verify("session", expires, signature);
        valid.then(|| value.to_string())
    }

    /// The CSRF token of every form a session's pages carry.
    pub fn csrf(&self, session: &str) -> String {
        self.sign("csrf", session)
    }

    pub fn csrf_matches(&self, session: &str, given: &str) -> bool {
        self.verify("csrf", session, given)
    }

    /// The login form's CSRF token, bound to the random `nonce` in its cookie.
    pub fn login_csrf(&self, nonce: &str) -> String {
        self.sign("login", nonce)
    }

    pub fn login_csrf_matches(&self, headers: &HeaderMap, given: &str) -> bool {
        cookie(headers, LOGIN).is_some_and(|nonce| self.verify("login", nonce, given))
    }

    /// A `Set-Cookie` value for `name` under `/inbox`; `max_age` 0 deletes it.
    pub fn set_cookie(&self, name: &str, value: &str, max_age: i64) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!("{name}={value}; Path=/inbox; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}")
    }

    /// Whether a login may be tried now: `Err` with the seconds to wait when
    /// [`MAX_FAILURES`] failed within the last [`FAILURE_WINDOW`].
    pub fn may_try(&self, now: Instant) -> Result<(), u64> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        while failures
            .front()
            .is_some_and(|at| now.duration_since(*at) >= FAILURE_WINDOW)
        {
            failures.pop_front();
        }
        if failures.len() < MAX_FAILURES {
            return Ok(());
        }
        let oldest = failures.front().copied().unwrap_or(now);
        let wait = FAILURE_WINDOW.saturating_sub(now.duration_since(oldest));
        Err(wait.as_secs().max(1))
    }

    pub fn failed(&self, now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.push_back(now);
        while failures.len() > MAX_FAILURES {
            failures.pop_front();
        }
    }
}

/// A random value for a login form's cookie.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system's random source");
    encode(&bytes)
}

/// The value of cookie `name`, if the request sent it.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn a_session_is_valid_only_as_signed_and_until_it_expires() {
        let curator = Curator::new("correct horse battery staple", false).unwrap();
        let session = curator.new_session(1_000);
        let headers = with_cookie(&format!("errbook_lang=en; {SESSION}={session}"));
        assert_eq!(curator.session(&headers, 1_001), Some(session.clone()));
        assert_eq!(curator.session(&headers, 1_000 + SESSION_SECONDS), None);
        let (expires, signature) = session.split_once('.').unwrap();
        let later = format!("{}.{signature}", expires.parse::<i64>().unwrap() + 3600);
        assert_eq!(
            curator.session(&with_cookie(&format!("{SESSION}={later}")), 1_001),
            None
        );
        let other = Curator::new("another token of enough length", false).unwrap();
        assert_eq!(other.session(&headers, 1_001), None);

        assert!(curator.csrf_matches(&session, &curator.csrf(&session)));
        assert!(!curator.csrf_matches(&session, &other.csrf(&session)));
        assert!(!curator.csrf_matches(&session, "z!"));
    }

    #[test]
    fn tokens_are_long_and_compared_whole() {
        assert!(Curator::new("short", false).is_err());
        let curator = Curator::new("correct horse battery staple", true).unwrap();
        assert!(curator.token_matches("correct horse battery staple"));
        assert!(!curator.token_matches("correct horse battery"));
        assert!(!curator.token_matches(""));
        assert!(
            curator
                .set_cookie(SESSION, "v", 60)
                .ends_with("HttpOnly; SameSite=Strict; Secure")
        );
    }

    #[test]
    fn failed_logins_are_limited_for_a_minute() {
        let curator = Curator::new("correct horse battery staple", false).unwrap();
        let start = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert!(curator.may_try(start).is_ok());
            curator.failed(start);
        }
        let wait = curator
            .may_try(start + Duration::from_secs(10))
            .unwrap_err();
        assert!((49..=50).contains(&wait), "{wait}");
        assert!(curator.may_try(start + FAILURE_WINDOW).is_ok());
    }
}
