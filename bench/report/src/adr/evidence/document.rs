//! The document itself: its sections, in order, each from the evidence
//! alone; the conditions the revision is derived from are computed once and
//! shared by the projection and the proposal.

use crate::adr::evidence::conditions::conditions;
use crate::adr::evidence::model::Evidence;
use crate::adr::evidence::sections::{
    adaptive_section, clock_section, fences_section, files_section, header, margin_section,
    others_section, pause_condition_section, peer_section, projection_section, revision_section,
    rtt_section, triggers_section,
};

/// The document.
pub fn render(ev: &Evidence) -> String {
    let mut md = String::new();
    header(&mut md, ev);
    rtt_section(&mut md, ev);
    margin_section(&mut md, ev);
    triggers_section(&mut md, ev);
    pause_condition_section(&mut md, ev);
    adaptive_section(&mut md, ev);
    let conditions = conditions(ev);
    projection_section(&mut md, ev, &conditions);
    clock_section(&mut md, ev);
    fences_section(&mut md, ev);
    peer_section(&mut md, ev);
    others_section(&mut md, ev);
    revision_section(&mut md, ev, &conditions);
    files_section(&mut md, ev);
    md
}
