//! A property test of the C1 router: over ten thousand random requests, on the
//! memory store and the fake clock, no reply is a 5xx, every refusal (status
//! ≥ 400) leaves [`LockService::state_digest`] exactly as it was, every error
//! body is `{"code", "message"}`, and the fencing tokens seen on the wire obey
//! C1 (strictly increasing per key, unchanged by renew, reported by L7).
//!
//! The strategy is a sequence of [`Step`]s, each an optional clock advance and
//! one request. Requests name sessions, keys and tokens *symbolically*
//! ([`Sess`], a key index, [`Tok`]) and are resolved against a small [`Model`]
//! of what the run has seen (sessions opened, grants made), so most requests
//! hit real sessions, held keys and right tokens and the server reaches HELD,
//! GRACE and FREE, while the rest are garbage: bad keys, wrong types, malformed
//! or oversized bodies, unknown paths and wrong methods. Resolving at run time
//! keeps every sequence replayable and shrinkable.
//!
//! The seed is fixed (override with `FP_PROPTEST_SEED=<u64>`) and printed.
//!
//! [`LockService::state_digest`]: lock_server::LockService::state_digest
//!
//! Layout: [`vocabulary`] and [`strategy`] draw the steps, [`model`]
//! resolves them, [`request`] puts them on the wire, [`check`] holds the
//! properties; this module runs the sequences. [`auth_headers`] is the same
//! property on a server with API tokens, over random `Authorization` headers.

mod auth_headers;
mod check;
mod model;
mod request;
mod strategy;
mod vocabulary;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fencepost_api::clock::Clock;
use proptest::collection::vec;
use proptest::test_runner::{TestCaseError, TestError};

use crate::support::TestServer;
use check::{Coverage, MUST_REACH, check, outcome};
use model::Model;
use request::{plan, send};
use strategy::step;
use vocabulary::{Advance, Step, key_pool};

/// Sequences run (each on a fresh server).
const CASES: u32 = 260;
/// Requests per sequence: 1..=100, mean ~50, so 260 cases give ~13,000.
const MAX_STEPS: usize = 100;
/// The least number of requests a full run must send.
const MIN_REQUESTS: u64 = 10_000;
/// The default seed; `FP_PROPTEST_SEED` overrides it.
const DEFAULT_SEED: u64 = 0x0f3c_e905_7c1a_2024;

/// At most `n` characters of `s`, marking a cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!(
            "{}…({} bytes in all)",
            s.chars().take(n).collect::<String>(),
            s.len()
        )
    }
}

/// The lines of two digests that differ, `-` before and `+` after.
fn digest_diff(before: &str, after: &str) -> String {
    let mut out = String::new();
    for (b, a) in before.lines().zip(after.lines()) {
        if a != b {
            out.push_str(&format!("  - {b}\n  + {a}\n"));
        }
    }
    out
}

/// Runs one sequence on a fresh server. Returns the number of requests sent;
/// with `transcript`, records one line per step.
async fn run_sequence(
    steps: &[Step],
    mut transcript: Option<&mut Vec<String>>,
    coverage: Option<&Coverage>,
) -> Result<u64, TestCaseError> {
    let srv = TestServer::memory().await;
    let mut m = Model {
        keys: key_pool(),
        ..Model::default()
    };
    let mut sent = 0u64;
    for (i, step) in steps.iter().enumerate() {
        let advanced = match &step.advance {
            Advance::None => Duration::ZERO,
            Advance::Ms(ms) => Duration::from_millis(*ms),
            Advance::PastLease { key, ms } => m.keys[*key]
                .key
                .as_ref()
                .and_then(|k| m.holder.get(k))
                .map(|h| {
                    h.started
                        .saturating_add(Duration::from_millis(h.lease_ms + ms))
                        .saturating_duration_since(srv.clock.now())
                })
                .unwrap_or_default(),
        };
        srv.clock.advance(advanced);
        let now = srv.clock.now();
        let clock_note = if advanced.is_zero() {
            String::new()
        } else {
            format!("[clock +{} ms] ", advanced.as_millis())
        };
        let p = plan(&m, &step.call);
        let before = srv.service.state_digest().await;
        let (status, raw) = send(&srv, &p, step.content_length).await;
        sent += 1;
        let after = srv.service.state_digest().await;
        if let Some(c) = coverage {
            let label = outcome(&p, status, &raw);
            *c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(label)
                .or_default() += 1;
        }
        let body_text = String::from_utf8_lossy(&p.body);
        let reply_text = String::from_utf8_lossy(&raw);
        if let Some(t) = transcript.as_deref_mut() {
            t.push(format!(
                "#{i} {clock_note}{} {} body={} -> {} {}",
                p.method,
                clip(&p.uri, 80),
                clip(&body_text, 120),
                status.as_u16(),
                clip(&reply_text, 200),
            ));
        }
        if let Err(why) = check(&mut m, &p, status, &raw, before != after, now) {
            return Err(TestCaseError::fail(format!(
                "step #{i}: {why}\n  request: {clock_note}{} {}\n  body ({} bytes): {}\n  \
                 reply: {} {}\n  state diff:\n{}  state before:\n{}",
                p.method,
                clip(&p.uri, 300),
                p.body.len(),
                clip(&body_text, 300),
                status.as_u16(),
                clip(&reply_text, 500),
                digest_diff(&before, &after),
                clip(&before, 3000),
            )));
        }
    }
    Ok(sent)
}

#[test]
fn random_requests_never_5xx_and_refusals_change_nothing() {
    let seed = crate::support::proptest_seed(DEFAULT_SEED);
    eprintln!("proptest_router: seed {seed} (set FP_PROPTEST_SEED to replay another)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut runner = crate::support::seeded_runner(CASES, 4_000, seed);
    let requests = AtomicU64::new(0);
    let coverage = Coverage::default();
    let started = Instant::now();
    let result = runner.run(&vec(step(), 1..=MAX_STEPS), |steps| {
        let sent = rt.block_on(run_sequence(&steps, None, Some(&coverage)))?;
        requests.fetch_add(sent, Ordering::Relaxed);
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, minimal)) => {
            let mut transcript = Vec::new();
            let _ = rt.block_on(run_sequence(&minimal, Some(&mut transcript), None));
            panic!(
                "seed {seed}: {why}\n\nminimal failing sequence, replayed ({} steps):\n{}\n\n\
                 as generated:\n{minimal:#?}",
                minimal.len(),
                transcript.join("\n")
            );
        }
        Err(e) => panic!("seed {seed}: {e}"),
    }
    let requests = requests.into_inner();
    eprintln!(
        "proptest_router: {requests} requests in {CASES} sequences, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let coverage = coverage.into_inner().unwrap_or_else(|e| e.into_inner());
    let table: Vec<String> = coverage.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    eprintln!("proptest_router: outcomes\n  {}", table.join("\n  "));
    assert!(
        requests >= MIN_REQUESTS,
        "only {requests} requests were sent; the property needs at least {MIN_REQUESTS}"
    );
    let missed: Vec<&str> = MUST_REACH
        .iter()
        .copied()
        .filter(|o| !coverage.contains_key(*o))
        .collect();
    assert!(
        missed.is_empty(),
        "the strategy never reached {missed:?}; it has gone shallow"
    );
}
