//! The SDK's one integration-test binary (DEPENDENCIES.md): T-040 AC2–AC7
//! ported to Rust, the bounded acquire (T-041), configuration, and the tests
//! against a real `lock-server` process.

mod acquire;
mod arithmetic;
mod auth;
mod config;
mod confirm;
mod gaps;
mod hardening;
mod heartbeat;
mod hygiene;
mod measurement;
mod mock;
mod prometheus;
mod real_server;
mod renewals;
mod replicas;
mod tls;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencepost_sdk::{Clock, LockClient, LockClientConfig, Session};

/// 1 ms in nanoseconds.
pub const MS: u64 = 1_000_000;

/// A client for `url` on `clock`, with the C4 defaults changed by `tweak`.
pub fn client(
    url: &str,
    clock: Arc<dyn Clock>,
    tweak: impl FnOnce(LockClientConfig) -> LockClientConfig,
) -> LockClient {
    LockClient::new(tweak(LockClientConfig::new(url).with_clock(clock))).expect("valid test config")
}

/// Registers a listener that counts its calls.
pub fn count_losses(session: &Session) -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    // The argument type is inferred from the bound (`|_|` works).
    session.on_lock_lost(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
    });
    n
}

/// `t + ms` milliseconds.
pub fn plus_ms(t: fencepost_sdk::MonoTime, ms: u64) -> fencepost_sdk::MonoTime {
    t.saturating_add(Duration::from_millis(ms))
}

/// Logs to the test output when RUST_LOG is set.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
