//! The document itself, for its reader: the decision first (the proposed
//! text, the binding numbers, what would change it), how to read it, one
//! short section per question, the derivation, how the pack was made, and
//! the appendices (every trigger verdict, the files). The conditions the
//! revision is derived from are computed once and shared by the decision,
//! the projection and the derivation.

use crate::adr::evidence::conditions::conditions;
use crate::adr::evidence::model::Evidence;
use crate::adr::evidence::sections::{
    adaptive_section, clock_section, fences_section, files_section, guide, header, margin_section,
    others_section, pause_condition_section, peer_section, plan_section, projection_section,
    revision_section, rtt_section, triggers_appendix, triggers_section,
};

/// The document.
pub fn render(ev: &Evidence) -> String {
    let mut md = String::new();
    let conditions = conditions(ev);
    header(&mut md, ev, &conditions);
    guide(&mut md);
    rtt_section(&mut md, ev);
    margin_section(&mut md, ev);
    triggers_section(&mut md, ev);
    pause_condition_section(&mut md, ev);
    adaptive_section(&mut md, ev);
    projection_section(&mut md, ev, &conditions);
    clock_section(&mut md, ev);
    fences_section(&mut md, ev);
    peer_section(&mut md, ev);
    others_section(&mut md, ev);
    revision_section(&mut md, ev, &conditions);
    plan_section(&mut md, ev);
    triggers_appendix(&mut md, ev);
    files_section(&mut md, ev);
    md
}
