//! The document itself, for its reader: the decision first (the proposed
//! text, the tolerances, the per-(margin, divisor) table, the binding
//! numbers, what would change it), how to read it, one short section per
//! question, the derivation, how the pack was made, and the appendices
//! (every trigger verdict, the files). The revision is derived once
//! ([`Derived`]) and shared by every section that reads it.

use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::model::Evidence;
use crate::adr::evidence::sections::{
    adaptive_section, clock_section, fences_section, files_section, guide, header,
    long_hold_section, margin_section, others_section, pause_condition_section, peer_section,
    plan_section, projection_section, revision_section, rtt_section, services_section,
    triggers_appendix, triggers_section,
};
use crate::adr::revision::Tolerances;

/// The document, under the default tolerances.
pub fn render(ev: &Evidence) -> String {
    render_with(ev, &Tolerances::default())
}

/// The document, under `tol`.
pub fn render_with(ev: &Evidence, tol: &Tolerances) -> String {
    let mut md = String::new();
    let d = Derived::of(ev, tol);
    header(&mut md, ev, &d);
    guide(&mut md);
    rtt_section(&mut md, ev);
    margin_section(&mut md, ev);
    triggers_section(&mut md, ev, &d);
    pause_condition_section(&mut md, ev, &d);
    adaptive_section(&mut md, ev);
    projection_section(&mut md, ev, &d);
    clock_section(&mut md, ev);
    fences_section(&mut md, ev);
    peer_section(&mut md, ev);
    services_section(&mut md, ev);
    others_section(&mut md, ev);
    long_hold_section(&mut md, ev);
    revision_section(&mut md, ev, &d);
    plan_section(&mut md, ev);
    triggers_appendix(&mut md, ev);
    files_section(&mut md, ev);
    md
}
