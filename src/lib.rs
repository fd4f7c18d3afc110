//! errbook: an offline knowledge base for distributed-training failures.
//!
//! Dependencies point one way: `reload` -> `web` -> `diagnose` -> `search` -> `kb`. Only
//! `web` knows HTTP.

pub mod diagnose;
pub mod kb;
pub mod reload;
pub mod search;
pub mod web;

pub use web::{AppState, app};
