//! The redis backend: fencepost's client-side lease arithmetic on a lock in
//! one Redis instance, through the `redis` crate (RESP over TCP, Lua
//! scripts). [`server`] starts redis-server as a child (one instance, or
//! the N independent ones Redlock needs), with its persistence setting.
//!
//! | fencepost (C1/C3)            | Redis, as this adapter does it |
//! |---|---|
//! | L1 open a session            | client-side only: one renew exchange without keys (connects, loads the script); deadline `send + session TTL × (1 − m)` |
//! | L2 heartbeat                 | the renew exchange (L5 below), sent every `min(session TTL, lease) × (1 − m) / k` on the SDK's fixed-rate schedule (the SDK's period), with every key the session holds, or none; an answer moves the session's deadline to `send + session TTL × (1 − m)` |
//! | L4 acquire                   | one Lua script: `SET lock:{K} OWNER NX PX lease`; if it succeeds `INCR fence:{K}` is the token and the value becomes `OWNER:TOKEN`; retried with the SDK's jittered backoff within the budget |
//! | fencing token                | the per-key counter `fence:{K}`: strictly increasing per key while Redis keeps it (no expiry; only `INCR` touches it) |
//! | L5 renew                     | one Lua script for all held keys: `PEXPIRE lock:{K} lease` where the value is still `OWNER:TOKEN`; deadline `send + lease × (1 − m)` per key and for the session |
//! | L6 release                   | Lua: `DEL lock:{K}` only while it holds `OWNER:TOKEN`: never deletes a successor's key |
//! | L3 close                     | client-side: the renew task stops, held keys are released (compare-value `DEL`), best effort |
//! | 410 SESSION_EXPIRED          | a renew refused for a held key (it expired, or holds another value): the session and its grants are lost |
//!
//! What a session is here: Redis has none. [`RedisSession`] lives in the
//! client: it owns a renew task and a client deadline over the session TTL
//! moved by each acknowledged renew exchange (as the SDK's session is by
//! each heartbeat), and each grant has a deadline of its own
//! (from its acquire's send, then from each renew that extended it). The
//! session is lost when its deadline or a held grant's passes, or when a
//! renew is refused; its held grants are then reported lost, once, to the
//! listeners (`lock_lost`), and the worker opens a new session. So
//! `session_lost_deadline` counts sessions whose renewals did not arrive in
//! time, and `session_lost_expired` sessions whose key Redis no longer held
//! for them. The renew exchange is recorded in the SDK's recorder as a
//! heartbeat (`hb_*` columns mean what they mean on fencepost and etcd),
//! and each key it carried as a renewal (`renew_attempts`, `renewals`,
//! `renew_refusals`, ...: counts only, `renew_count` stays 0, the RTT is the
//! exchange's).
//!
//! Where Redis differs, and what that does to the measurement:
//! - **No grace.** A key expires at its `PX` on the server's clock and is
//!   free for the next `SET NX` at once; fencepost's server keeps a lapsed
//!   grant in `GRACE` first. Only the client margin stands between a slow
//!   client and a second holder; the fences catch the rest.
//! - **Expiry on the server's clock, in ms.** `PX` counts from when the
//!   server ran the command, at millisecond precision (a key is found
//!   expired on access, and by a background sweep). The client counts from
//!   the send of the request, before the server's start, so the client's
//!   deadline is never later than the server's expiry if both clocks run at
//!   the same rate.
//! - **Persistence decides what a restart forgets.** With `--redis-persistence
//!   none` a restarted Redis has no keys and no counters: a holder's key is
//!   gone (a second client may acquire while the first still believes it
//!   holds) and tokens start again at 1, below the rail's highest token, so
//!   fence 1 refuses every later holder of a key paid before (a liveness
//!   loss, not a safety one). With `everysec` a crash loses up to about a
//!   second of writes (a `kill -9` loses nothing already written to the
//!   kernel); with `always` every write is fsynced before the reply. An
//!   append-only file stores expiries as absolute Unix times, so a key
//!   still expires on time across a restart (by the wall clock).
//! - **One lease for every key.** The backend's lease (`--ttl`) is every
//!   key's `PX`; the acquire's `ttl` argument is that same lease in the bench.
//!   The session TTL exists only in the client (no key lives on it); as in
//!   the SDK it sets the heartbeat period and bounds every grant's usable
//!   lease.

pub mod backend;
mod renew;
pub mod scripts;
pub mod server;
mod session;
mod shared;

pub use backend::{RedisBackend, RedisConfig};
pub use server::{RedisLaunch, RedisPersistence, RedisServer, RedisServerError};
pub use session::{RedisHandle, RedisSession};
