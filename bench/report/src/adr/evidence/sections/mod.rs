//! The document's sections, one module each (or two where they read the
//! same data): each writes its Markdown into the document from the
//! [`Evidence`](super::Evidence) alone. This file only re-exports them.

mod adaptive;
mod clock;
mod fences;
mod files;
pub(crate) mod header;
mod long_hold;
mod peer;
mod projection;
mod proposal;
mod server_pause;
mod services;
mod sweep;
mod triggers;

pub(crate) use adaptive::adaptive_section;
pub use clock::ESSAY_SENTENCE;
pub(crate) use clock::clock_section;
pub(crate) use fences::fences_section;
pub(crate) use files::{files_section, others_section};
pub use header::{DECISION_PLOT, TOLERANCE_FLAGS};
pub(crate) use header::{guide, header, plan_section};
pub(crate) use long_hold::long_hold_section;
pub(crate) use peer::peer_section;
pub(crate) use projection::projection_section;
pub(crate) use proposal::revision_section;
pub(crate) use server_pause::pause_condition_section;
pub(crate) use services::services_section;
pub(crate) use sweep::{margin_section, rtt_section};
pub use triggers::{TriggerTally, not_imposed, trigger_tally};
pub(crate) use triggers::{triggers_appendix, triggers_section};
