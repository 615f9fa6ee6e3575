//! A payout worker on the SDK, exactly as the ADR's payout executor works:
//! open session → acquire `payout:<id>` → claim (fence 1) →
//! `ensure_time_for(worst-case rail hop)` → submit (fence 2) → release, and
//! abandon (R4) whenever the lease is insufficient or lost. A submit whose
//! outcome is unknown (the read timed out) keeps the lock until the
//! worst-case hop has passed since it was sent (D4's budget for the step),
//! then goes back on the queue like an abandoned payout. Abandoned payouts
//! go back on the queue, to be retried by a later holder under a higher token
//! (ADR-006 D6). A [`Pool`](crate::cell::Pool) runs N of these as tasks; the
//! experiments also run them as OS processes (`experiments worker`), which
//! report a [`TallySnapshot`] of their [`Tally`].
//!
//! The worker is written once, generic over the lock service
//! ([`LockBackend`]): the SDK's `LockClient` (fencepost) or the etcd
//! adapter (`crate::backend::etcd`). [`build_worker`] picks the one its
//! [`WorkerEnv`] names.
//!
//! Two things only the worker can record: every `(payout_id,
//! token)` it submits under *because* `check_still_held` and D4 passed — the
//! client believed it held the lease — which the cell driver joins with the
//! rail's fence-out events (trigger 4); and the rail submit's latency as the
//! worker saw it (`rail_measured_*`), timeouts censored at their give-up time.

//!
//! [`tally`] holds what workers share and count, [`env`] what each is given,
//! [`payout`] the loop itself, [`renewals`] its SDK renewals in its history.

pub mod env;
pub mod payout;
pub mod redlock;
pub mod renewals;
pub mod tally;

pub use env::{BoxFuture, ClaimFn, ClaimHook, Step, StepCtx, StepFn, StepHook, WorkerEnv};
pub use payout::{BuildError, RunWorker, Worker, build_worker, leg_id, leg_number, sdk_client};
pub use tally::{Belief, Tally, TallySnapshot, WorkQueue};
