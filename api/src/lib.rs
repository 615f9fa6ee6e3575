//! `fencepost-api` holds what every fencepost component must agree on: the C1
//! (lock-server) and C2 (rail-stub) wire types and error codes, the monotonic
//! [`clock::Clock`] seam that every expiry decision goes through, the duration
//! syntax of the C4 configuration keys, the server's grace formula, and the
//! ledger invariant check that the bench and the experiments run on R6's output,
//! the API token file both services read ([`auth`]),
//! and where the services keep their durable state by default ([`state_path`]).
//!
//! Nothing here does I/O but one read-only system call and one file read:
//! [`clock_discipline`] asks the kernel (adjtimex) what it knows of the host
//! clock's error, [`auth`] reads the API token file it is pointed at, and the
//! histogram boundaries every exported latency histogram uses are in [`buckets`]. Keeping these in one crate means a change to the wire
//! is one change, seen by the server and the client at once.

pub mod auth;
pub mod buckets;
pub mod clock;
pub mod clock_discipline;
pub mod duration;
pub mod grace;
pub mod input;
pub mod latency;
pub mod ledger_check;
pub mod lock;
pub mod rail;
pub mod state_path;

pub use clock::{Clock, FakeClock, MonoTime, MonotonicClock};
pub use duration::{DurationParseError, format_duration, parse_duration};
pub use grace::{GraceParams, GracePolicy};
pub use input::InputError;
pub use latency::{LatencySpec, LatencySpecError};
pub use ledger_check::{LedgerCheck, Violation, ViolationKind, check_ledger};
pub use rail::{LedgerView, OmittedSubmissions, PayoutState, RailErrorCode};
pub use state_path::default_state_file;
