//! fencepost's own backend: the SDK's [`LockClient`] and [`Session`]
//! implement [`LockBackend`] and [`BackendSession`] by delegation. Nothing is
//! re-implemented here; the worker on this backend is exactly the SDK worker
//! it was before the trait existed.

use std::time::Duration;

use fencepost_sdk::{
    AcquireOptions, ClientStats, Histogram, LockClient, LockError, LockHandle, LockLost,
    MarginStats, Session,
};

use super::{BackendError, BackendSession, HeartbeatStats, LockBackend};

impl HeartbeatStats for LockClient {
    fn stats(&self) -> ClientStats {
        LockClient::stats(self)
    }

    fn rtt_histogram(&self) -> Histogram<u64> {
        LockClient::rtt_histogram(self)
    }

    fn corrected_rtt_histogram(&self) -> Histogram<u64> {
        LockClient::corrected_rtt_histogram(self)
    }

    fn tick_lag_histogram(&self) -> Histogram<u64> {
        LockClient::tick_lag_histogram(self)
    }

    fn gap_histogram(&self) -> Histogram<u64> {
        LockClient::gap_histogram(self)
    }

    fn renew_rtt_histogram(&self) -> Histogram<u64> {
        LockClient::renew_rtt_histogram(self)
    }

    fn renew_corrected_histogram(&self) -> Histogram<u64> {
        LockClient::renew_corrected_rtt_histogram(self)
    }

    fn margin_stats(&self) -> MarginStats {
        LockClient::margin_stats(self)
    }

    fn reset_measurements(&self) {
        LockClient::reset_measurements(self)
    }
}

impl LockBackend for LockClient {
    type Session = Session;

    async fn open_session(&self, owner: &str) -> Result<Session, BackendError> {
        Ok(LockClient::open_session(self, owner).await?)
    }
}

impl BackendSession for Session {
    type Handle = LockHandle;

    fn token(handle: &LockHandle) -> u64 {
        handle.token()
    }

    fn on_lock_lost(&self, listener: Box<dyn Fn() + Send + Sync>) {
        Session::on_lock_lost(self, move |_| listener());
    }

    fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        budget: Duration,
    ) -> Result<LockHandle, BackendError> {
        let opts = AcquireOptions::default().ttl(ttl).wait_up_to(budget);
        Ok(Session::acquire(self, key, opts).await?)
    }

    fn remaining(&self, handle: &LockHandle) -> Result<Duration, LockLost> {
        Session::remaining(self, handle)
    }

    fn check_still_held(&self, handle: &LockHandle) -> Result<(), LockLost> {
        Session::check_still_held(self, handle)
    }

    fn ensure_time_for(
        &self,
        handle: &LockHandle,
        worst_case_cost: Duration,
    ) -> Result<(), LockError> {
        Session::ensure_time_for(self, handle, worst_case_cost)
    }

    async fn release(&self, handle: LockHandle) -> Result<(), BackendError> {
        Ok(Session::release(self, handle).await?)
    }

    async fn close(self) {
        Session::close(self).await
    }

    fn as_sdk(&self) -> Option<&Session> {
        Some(self)
    }
}
