//! The worker's renewals in its history: a [`RenewalObserver`] set on each
//! SDK session the worker opens while it records a history, writing one
//! `Renew` operation per L5 the session's heartbeat sends (the key's payout,
//! the token, and on an acknowledgement the client's new deadline on the
//! history's clock).

use std::sync::Arc;

use bench_history::{OpKind, Outcome, Pending, Recorder};
use fencepost_sdk::{RenewalObserver, RenewalOutcome, Session};

/// Records one session's renewals into the worker's history.
pub struct HistoryRenewals {
    /// The worker's history.
    recorder: Arc<Recorder>,
    /// The session's name in the history.
    session: String,
}

impl HistoryRenewals {
    /// Sets the observer on `sdk`, recording as `session` into `recorder`.
    pub fn observe(sdk: &Session, recorder: Arc<Recorder>, session: &str) {
        sdk.set_renewal_observer(Arc::new(HistoryRenewals {
            recorder,
            session: session.to_string(),
        }));
    }
}

impl RenewalObserver for HistoryRenewals {
    fn invoked(&self, key: &str, token: u64) -> u64 {
        let payout = key.strip_prefix("payout:").unwrap_or(key);
        self.recorder
            .invoke(OpKind::Renew, &self.session, Some(payout), Some(token))
            .id()
    }

    fn completed(&self, ticket: u64, _key: &str, _token: u64, outcome: RenewalOutcome) {
        let (outcome, remaining) = match outcome {
            RenewalOutcome::Acknowledged { remaining, .. } => (Outcome::Ok, Some(remaining)),
            RenewalOutcome::Refused => (Outcome::Lost, None),
            RenewalOutcome::Unknown => (Outcome::Unknown, None),
        };
        self.recorder
            .complete(Pending::from_id(ticket), outcome, None, remaining);
    }
}
