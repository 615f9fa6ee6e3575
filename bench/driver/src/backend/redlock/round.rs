//! One Redlock round: the same request to every instance at once, each
//! bounded by the per-instance timeout, its answers counted ([`Votes`]) and
//! judged ([`quorum::verdict`]). An attempt ([`attempt`]) that is not granted
//! unlocks the key on ALL instances, not only on those that said yes: a
//! request that timed out may still have landed.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{Clock, MonoTime};
use futures_util::future::join_all;

use super::instance::{Instance, Op};
use super::quorum::{self, Verdict, Votes};

/// The instances of one Redlock, in the order of their URLs.
pub type Instances = Arc<[Arc<dyn Instance>]>;

/// What one attempt (a lock or extend round) saw and decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The clock reading just before the first request was written.
    pub send: MonoTime,
    /// The clock reading once every instance answered or timed out.
    pub received: MonoTime,
    /// The answers.
    pub votes: Votes,
    /// The verdict on them.
    pub verdict: Verdict,
}

impl Attempt {
    /// `received − send`.
    pub fn elapsed(&self) -> Duration {
        self.received.saturating_duration_since(self.send)
    }

    /// Whether the round was granted.
    pub fn granted(&self) -> bool {
        matches!(self.verdict, Verdict::Granted { .. })
    }
}

/// Sends `op` to every instance at once and counts the answers; each
/// instance has `timeout` to answer.
pub async fn ask_all(
    instances: &[Arc<dyn Instance>],
    op: Op,
    key: &str,
    value: &str,
    timeout: Duration,
) -> Votes {
    let asks = instances
        .iter()
        .map(|i| tokio::time::timeout(timeout, i.call(op, key, value)));
    let mut votes = Votes::default();
    for answer in join_all(asks).await {
        match answer {
            Ok(Ok(true)) => votes.yes += 1,
            Ok(Ok(false)) => votes.no += 1,
            Ok(Err(e)) => {
                tracing::debug!(key, ?op, error = %e, "redlock instance failed");
                votes.errors += 1;
            }
            Err(_) => votes.timeouts += 1,
        }
    }
    votes
}

/// One lock or extend round of `key` = `value` for `ttl`, timed on `clock`
/// from just before the first request; when it is not granted the key is
/// unlocked on every instance before returning.
pub async fn attempt(
    instances: &[Arc<dyn Instance>],
    clock: &dyn Clock,
    op: Op,
    key: &str,
    value: &str,
    (ttl, timeout): (Duration, Duration),
) -> Attempt {
    let send = clock.now();
    let votes = ask_all(instances, op, key, value, timeout).await;
    let received = clock.now();
    let elapsed = received.saturating_duration_since(send);
    let verdict = quorum::verdict(instances.len(), votes.yes, ttl, elapsed);
    if !matches!(verdict, Verdict::Granted { .. }) {
        let _ = ask_all(instances, Op::Unlock, key, value, timeout).await;
    }
    Attempt {
        send,
        received,
        votes,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use fencepost_sdk::FakeClock;

    use super::super::fake::{Script, Scripted, dyns, instances, unlocks};
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const TTL: Duration = Duration::from_secs(1);

    async fn lock(clock: &Arc<FakeClock>, set: &[Arc<Scripted>]) -> Attempt {
        let op = Op::Lock { ttl_ms: 1_000 };
        attempt(&dyns(set), &**clock, op, "k", "v", (TTL, 50 * MS)).await
    }

    #[tokio::test]
    async fn a_majority_grants_and_nothing_is_unlocked() {
        let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
        let set = instances(
            &clock,
            &[
                (Script::Yes, 3 * MS),
                (Script::Yes, 4 * MS),
                (Script::No, MS),
            ],
        );
        let a = lock(&clock, &set).await;
        assert_eq!(a.votes.yes, 2);
        assert_eq!(a.votes.no, 1);
        assert_eq!(a.elapsed(), 8 * MS);
        assert_eq!(
            a.verdict,
            Verdict::Granted {
                validity: 980 * MS // 1000 − 8 − 12
            }
        );
        assert!(set.iter().all(|i| unlocks(i) == 0));
    }

    #[tokio::test]
    async fn a_minority_is_refused_and_unlocked_on_all_instances() {
        let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
        let set = instances(
            &clock,
            &[(Script::Yes, MS), (Script::No, MS), (Script::Fail, MS)],
        );
        let a = lock(&clock, &set).await;
        assert_eq!((a.votes.yes, a.votes.no, a.votes.errors), (1, 1, 1));
        assert_eq!(a.verdict, Verdict::Minority);
        // Every instance gets the unlock, also those that said no or failed.
        assert!(set.iter().all(|i| unlocks(i) == 1));
    }

    #[tokio::test]
    async fn a_hung_instance_times_out_and_two_others_still_grant() {
        let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
        let set = instances(
            &clock,
            &[(Script::Yes, MS), (Script::Hang, MS), (Script::Yes, MS)],
        );
        let a = lock(&clock, &set).await;
        assert_eq!((a.votes.yes, a.votes.timeouts), (2, 1));
        assert!(a.granted());
        assert!(set.iter().all(|i| unlocks(i) == 0));
    }

    #[tokio::test]
    async fn a_majority_too_slow_for_the_ttl_is_refused_and_unlocked_on_all() {
        let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
        // 3 × 330 ms = 990 ms; + 12 ms drift ≥ 1 s.
        let set = instances(&clock, &[(Script::Yes, 330 * MS); 3]);
        let a = lock(&clock, &set).await;
        assert_eq!(a.votes.yes, 3);
        assert_eq!(a.verdict, Verdict::Expired);
        assert!(set.iter().all(|i| unlocks(i) == 1));
    }

    #[tokio::test]
    async fn a_failed_extend_unlocks_on_all_instances_too() {
        let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
        let set = instances(
            &clock,
            &[(Script::No, MS), (Script::No, MS), (Script::Yes, MS)],
        );
        let op = Op::Extend { ttl_ms: 1_000 };
        let a = attempt(&dyns(&set), &*clock, op, "k", "v", (TTL, 50 * MS)).await;
        assert_eq!(a.verdict, Verdict::Minority);
        assert!(set.iter().all(|i| unlocks(i) == 1));
    }
}
