//! errbook: an offline knowledge base for distributed-training failures.
//!
//! Dependencies point one way: `reload` -> `web` -> `answer` -> `diagnose` -> `search`
//! -> `kb`. Only `web` knows HTTP; only `answer` (and `web`'s own request and error
//! types) knows JSON.

pub mod answer;
pub mod diagnose;
pub mod draft;
pub mod inbox;
pub mod kb;
pub mod redact;
pub mod reload;
pub mod search;
pub mod web;

pub use web::{AppState, app};
