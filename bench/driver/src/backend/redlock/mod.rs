//! The Redlock backend: the algorithm of "Distributed locks with Redis"
//! (the redlock-rb / node-redlock reference) over N independent
//! redis-servers, through the `redis` crate directly, with fencepost's
//! client-side lease arithmetic (`fencepost_sdk::lease`) on top.
//!
//! | fencepost (C1/C3)            | Redlock, as this adapter does it |
//! |---|---|
//! | L1 open a session            | none on the servers: a client-side session ([`session`]) and its heartbeat task, no I/O |
//! | L4 acquire                   | one round: `SET key value NX PX ttl` on every instance at once, each bounded by a per-instance timeout (a tenth of the TTL); granted iff ≥ N/2+1 said yes and the validity `ttl − elapsed − drift` is positive (`drift = ttl × 0.01 + 2 ms`, `elapsed` from the send of the round); otherwise unlocked on ALL instances and retried after the SDK's jittered backoff within the budget. One random value per acquire (owner + 128 seeded bits), reused by its rounds |
//! | client deadline              | `t_send + min(ttl × (1 − margin), ttl − drift)`: the SDK's `lease::client_deadline` with the margin raised to at least `drift / ttl` ([`quorum::effective_margin_ppm`]); the margin stats record that raised margin |
//! | L2 heartbeat / L5 renew      | one beat of the session's heartbeat task at the SDK's fixed rate `ttl × (1 − m) / k`: an extend round per held lock (compare-value-and-`PEXPIRE ttl` on every instance), extended iff a majority said yes with validity left, deadline from the round's send (a reply read at or after the current deadline revives nothing); holding nothing, a `PING` round that measures and moves nothing. Recorded as one heartbeat exchange |
//! | fencing token                | none: [`RedlockHandle::token`] is 0 |
//! | L6 release                   | compare-value-and-`DEL` on ALL instances |
//! | L3 close                     | release what is still held, best effort |
//! | 410 SESSION_EXPIRED          | an extend round without a majority: the lock is lost at once (unlocked on all instances) |
//!
//! Where Redlock differs, and what that does to the measurement:
//! - **No fencing token.** A lock is a random value, not a number that
//!   grows, so the rail has nothing to compare: the bench runs the rail-stub
//!   with its token checks off (`rail_fences = off`) and every claim and
//!   submit carries token 0. A holder that outlives its lock (a pause, a slow
//!   step past the deadline) is stopped only by its own client checks
//!   (D3/D4); with those off, it pays beside its successor and nothing
//!   downstream refuses it. That is the measured point of this backend.
//! - **Clock drift.** Each instance expires the key on its own clock. Redlock
//!   assumes those clocks run at about the same rate and subtracts
//!   `ttl × 0.01 + 2 ms` for the difference; here that allowance is a floor
//!   under the margin, so a margin of 0.30 is unchanged and a margin below
//!   `drift / ttl` is raised to it. A server clock that jumps (an NTP step)
//!   breaks the assumption; nothing here detects it.
//! - **Majority.** A round waits for every instance (or its timeout), so one
//!   stalled instance makes every round as long as the per-instance timeout;
//!   one killed instance (connection refused) costs nothing, and with N = 3 a
//!   second one makes every round fail. The raw heartbeat RTT is a round's
//!   time, the slowest instance's.
//! - **Session.** Redlock has none; this adapter's session is lost when one of
//!   its locks is (its client deadline passed, or an extend round found no
//!   majority), and the worker opens a new one. `sessions_lost_deadline`
//!   counts the first, `sessions_lost_expired` the second.
//! - **Persistence and restarts.** An instance restarted without persistence
//!   comes back empty: the keys it held are gone, and a second client can then
//!   win a majority while the first still believes it holds the lock. Redlock's
//!   remedy is "delayed restarts": keep a crashed instance down for at least
//!   the longest TTL in use before it rejoins (or run it with
//!   `appendfsync always`). This adapter does not enforce either; the server
//!   helpers of the bench decide how instances run and restart.
//!
//! Measurement: every beat is recorded in the SDK's own recorder
//! (`fencepost_sdk::metrics::Metrics`) as the etcd adapter records its
//! keep-alives: outcome (a majority answered every round of it: reply; else a
//! timeout if an instance timed out; else error), the beat's RTT to its last
//! answer (with an instance's timeout in it: "≥"), the RTT corrected from the
//! scheduled send, tick lag, gaps (from one beat that did its job to the next),
//! margins, locks lost. So `hb_*` columns mean the same on every backend; a
//! ping beat between locks keeps them measured when payouts hold their locks
//! for less than a period (`heartbeats` counts only the extensions).

pub mod backend;
pub mod error;
#[cfg(test)]
mod fake;
mod heartbeat;
pub mod instance;
pub mod quorum;
pub mod round;
pub mod session;
mod shared;
mod state;
#[cfg(test)]
mod tests;

pub use backend::RedlockBackend;
pub use error::RedlockError;
pub use session::{RedlockHandle, RedlockSession};
pub use shared::RedlockConfig;
