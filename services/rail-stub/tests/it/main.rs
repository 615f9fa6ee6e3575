//! rail-stub's integration tests, one binary: the C2 routes driven in-process
//! through the router (`tower::ServiceExt::oneshot`), plus a few over a real
//! loopback listener and against the built binary.

mod common;

mod auth;
mod binary;
mod concurrency;
mod fences;
mod input;
mod metrics;
mod payouts;
mod persistence;
