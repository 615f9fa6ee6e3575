//! `bench run` and `bench sweep`: turn the flags into a checked plan (every
//! bad value is an exit-2 error naming its flag), then run the cells in order
//! with a progress bar, writing results, histograms and the manifest after
//! every cell so nothing finished is lost on Ctrl-C or a crash, and finish
//! with the report, the triggers and a summary naming a margin per TTL.

//!
//! [`plan`] checks the flags, [`execute`] runs the plan, [`resume`] decides
//! whether `--resume` may go on, [`replay`] re-runs a recorded directory.

pub mod execute;
pub mod plan;
pub mod redis_flags;
pub mod replay;
pub mod resume;

pub use execute::{PARTIAL, RunError, execute, partial_note, prepare_out, summary_text};
pub use plan::{Plan, resolve};
pub use replay::{ReplayError, replay_plan};
pub use resume::{changed_flags, grid_of};
