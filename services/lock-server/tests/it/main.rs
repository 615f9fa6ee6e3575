//! lock-server integration tests: one binary, one module per concern.

mod auth;
mod auth_persist;
mod auth_process;
mod boundaries;
mod cancel;
mod cli;
mod hardening;
mod metrics;
mod processes;
mod proptest_router;
mod proptest_table;
mod replicas;
mod semantics;
mod store_suite;
mod support;
mod table_rules;
mod tls;
