//! How the document writes what every section needs: a link to a file of
//! the pack (or a note that it is absent), a figure, the "not measured in
//! this pack" note with its reason, and numbers (ms, %, medians).

use bench_analysis::results::CellRow;

use crate::adr::evidence::model::Evidence;
use crate::adr::pack::{Program, Status, StepRecord};

impl Evidence {
    /// `[text](path)` when the file is in the pack, else the path marked absent.
    pub(crate) fn link(&self, path: &str, text: &str) -> String {
        if self.files.contains(path) {
            format!("[{text}]({path})")
        } else {
            format!("`{path}` (absent)")
        }
    }

    /// A plot: the SVG inline and the PNG linked, or a note that it was not drawn.
    pub(crate) fn figure(&self, stem: &str, caption: &str) -> String {
        let svg = format!("{stem}.svg");
        if self.files.contains(&svg) {
            format!(
                "![{caption}]({svg})\n\n*{caption}* — {}, {}\n",
                self.link(&svg, "SVG"),
                self.link(&format!("{stem}.png"), "PNG")
            )
        } else {
            format!("*{caption}*: plot `{svg}` was not drawn in this pack.\n")
        }
    }

    /// The step record of `name`.
    pub(crate) fn step(&self, name: &str) -> Option<&StepRecord> {
        self.manifest
            .as_ref()
            .and_then(|m| m.steps.iter().find(|s| s.step.name == name))
    }

    /// "not measured in this pack (…)" for a step whose output is absent.
    pub(crate) fn absent(&self, name: &str, what: &str) -> String {
        let why = match self.step(name) {
            None => format!("step `{name}` is not in this pack's plan"),
            Some(r) => {
                let cmd = format!(
                    "`{} {}`",
                    match r.step.program {
                        Program::Bench => "bench",
                        Program::Experiments => "experiments",
                    },
                    r.step.args.first().map(String::as_str).unwrap_or("")
                );
                match r.status {
                    Status::NotAvailable => format!("{cmd} not available: {}", r.note),
                    Status::Failed => format!("{cmd} failed: {}", r.note),
                    Status::Interrupted => format!("{cmd} was interrupted"),
                    Status::NotRun => format!("{cmd} not run"),
                    Status::Ok => format!("{cmd} ran but wrote no {what}"),
                }
            }
        };
        let unreadable: Vec<String> = self
            .problems
            .iter()
            .filter(|(f, _)| f.starts_with(&format!("{name}/")))
            .map(|(f, e)| format!("`{f}` unreadable: {e}"))
            .collect();
        if unreadable.is_empty() {
            format!("**Not measured in this pack** ({why}).\n\n")
        } else {
            format!(
                "**Not measured in this pack** ({}).\n\n",
                unreadable.join("; ")
            )
        }
    }

    /// The fixed-margin fencepost rows of the main sweep.
    pub(crate) fn fixed_rows(&self) -> Vec<&CellRow> {
        self.sweeps
            .get("sweep")
            .map(|s| {
                s.rows
                    .iter()
                    .filter(|r| r.margin_policy == "fixed" && r.backend == "fencepost")
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A number of ms for the tables: fewer decimals the larger it is, `—` for NaN.
pub(crate) fn ms(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `num / den` in %, `—` without a denominator.
pub(crate) fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        "—".into()
    } else {
        format!("{:.1} %", 100.0 * num as f64 / den as f64)
    }
}

/// The median of `v` (sorted in place), NaN when empty.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A number to three significant figures (integers from 100 up), `—` for
/// NaN: [`ms`]'s rounding from 1 up, more decimals below it.
pub(crate) fn sig3(v: f64) -> String {
    let a = v.abs();
    if v.is_nan() || v >= 1.0 {
        ms(v)
    } else if v <= -1.0 {
        format!("-{}", ms(a))
    } else if a >= 0.1 {
        format!("{v:.3}")
    } else if a >= 0.01 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}
