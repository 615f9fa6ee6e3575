//! The derivation a document is written from, computed once per render:
//! the revision's inputs read off the pack, the tolerances in force, and
//! the outcome ([`Derived`]). Every section that reads the revision reads it.

use crate::adr::evidence::conditions::inputs;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::{self, Inputs, Revision, Tolerances};

/// The derivation every section reads: its inputs, the tolerances it was
/// judged with, and its outcome.
#[derive(Clone, Debug)]
pub struct Derived {
    /// What the revision is derived from.
    pub inputs: Inputs,
    /// The tolerances in force.
    pub tol: Tolerances,
    /// The outcome.
    pub revision: Revision,
}

impl Derived {
    /// Derives the revision of `ev` under `tol`.
    pub fn of(ev: &Evidence, tol: &Tolerances) -> Self {
        let inputs = inputs(ev);
        let revision = revision::derive(&inputs, tol);
        Derived {
            inputs,
            tol: tol.clone(),
            revision,
        }
    }
}
