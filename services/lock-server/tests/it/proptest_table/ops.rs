//! What a sequence is made of: the keys it names, the limits and caps of the
//! table under test (short TTLs and small caps, so expiry, grace, the sweep
//! batch and the tombstone cap are reached often), the [`Op`]s with their
//! symbolic session and token references, and the strategies that draw them.

use std::time::Duration;

use fencepost_api::grace::GracePolicy;
use lock_server::core::{Caps, Limits};
use proptest::prelude::*;

/// Keys the operations name.
pub(super) const KEYS: &[&str] = &["k1", "k2", "payout:3", "a/b"];

/// The limits under test: short TTLs so expiry and grace are reached often.
pub(super) fn limits() -> Limits {
    Limits {
        default_ttl: Duration::from_millis(1_000),
        session_ttl: Duration::from_millis(1_000),
        ttl_min: Duration::from_millis(100),
        ttl_max: Duration::from_millis(5_000),
        grace: GracePolicy::default(),
        sabotage: None,
    }
}

/// Small caps, so the sweep batch and the tombstone cap are reached.
pub(super) fn caps() -> Caps {
    Caps {
        max_sessions: 6,
        max_tombstones: 3,
        tombstone_keep: Duration::from_secs(4),
        sweep_batch: 3,
    }
}

/// Which session an operation names, resolved against the model when it runs.
#[derive(Clone, Debug)]
pub(super) enum Sess {
    /// One of the sessions opened so far (modulo their number).
    Pool(usize),
    /// The key's current holder in the model (else the latest session).
    Holder,
    /// An id nobody opened.
    Unknown,
}

/// Which token a renew or release carries.
#[derive(Clone, Debug)]
pub(super) enum Tok {
    /// The key's current grant's token in the model.
    Right,
    /// That token plus this (wrapping into wrong ones).
    Off(i8),
}

/// One step.
#[derive(Clone, Debug)]
pub(super) enum Op {
    /// L1 with a TTL, ms (None: the default).
    Open { ttl_ms: Option<u64> },
    /// L2.
    Heartbeat { sess: Sess },
    /// L3.
    Delete { sess: Sess },
    /// L4, persisted at once (or refused by a failing store, a 503).
    Acquire {
        key: usize,
        sess: Sess,
        ttl_ms: Option<u64>,
        store_fails: bool,
    },
    /// L4's decision only: the store write is in flight until a [`Op::Finish`].
    Begin {
        key: usize,
        sess: Sess,
        ttl_ms: Option<u64>,
    },
    /// An in-flight store write returns (or fails).
    Finish { slot: usize, store_fails: bool },
    /// L5.
    Renew {
        key: usize,
        sess: Sess,
        tok: Tok,
        ttl_ms: Option<u64>,
    },
    /// L6.
    Release { key: usize, sess: Sess, tok: Tok },
    /// L8.
    Revoke { key: usize },
    /// The fake clock moves forward.
    Advance { ms: u64 },
    /// The sweeper runs.
    Sweep,
    /// The server restarts: a new table restored from the store.
    Restart,
}

pub(super) fn sess() -> impl Strategy<Value = Sess> {
    prop_oneof![
        6 => (0usize..6).prop_map(Sess::Pool),
        6 => Just(Sess::Holder),
        1 => Just(Sess::Unknown),
    ]
}

pub(super) fn tok() -> impl Strategy<Value = Tok> {
    prop_oneof![10 => Just(Tok::Right), 1 => (-2i8..=2).prop_map(Tok::Off)]
}

pub(super) fn ttl() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        6 => (50u64..3_000).prop_map(Some),
        1 => (0u64..20_000).prop_map(Some),
    ]
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let fails = prop_oneof![9 => Just(false), 1 => Just(true)];
    prop_oneof![
        6 => ttl().prop_map(|ttl_ms| Op::Open { ttl_ms }),
        8 => sess().prop_map(|sess| Op::Heartbeat { sess }),
        2 => sess().prop_map(|sess| Op::Delete { sess }),
        14 => (key.clone(), sess(), ttl(), fails.clone()).prop_map(|(key, sess, ttl_ms, store_fails)| {
            Op::Acquire { key, sess, ttl_ms, store_fails }
        }),
        3 => (key.clone(), sess(), ttl()).prop_map(|(key, sess, ttl_ms)| Op::Begin { key, sess, ttl_ms }),
        4 => (0usize..3, fails).prop_map(|(slot, store_fails)| Op::Finish { slot, store_fails }),
        10 => (key.clone(), sess(), tok(), ttl())
            .prop_map(|(key, sess, tok, ttl_ms)| Op::Renew { key, sess, tok, ttl_ms }),
        6 => (key.clone(), sess(), tok()).prop_map(|(key, sess, tok)| Op::Release { key, sess, tok }),
        2 => key.prop_map(|key| Op::Revoke { key }),
        10 => prop_oneof![6 => 0u64..400, 2 => 400u64..1_500, 1 => 1_500u64..6_000]
            .prop_map(|ms| Op::Advance { ms }),
        4 => Just(Op::Sweep),
        1 => Just(Op::Restart),
    ]
}
