//! ADR-006 §6.5 "Revisit when" as data: all five triggers, each with its rule
//! over the results table, a [`Verdict`] per cell, and the ADR's action
//! quoted verbatim.
//!
//! `bench triggers DIR` ([`run_triggers_command`]) reads the results table,
//! evaluates every trigger on every cell (five rows per cell) and prints the
//! table (`triggers.json` only when asked); the exit code is 0 when none fired
//! and 3 when any fired. Bad input (missing directory, no or unreadable
//! results table) is an `Err`, which the CLI maps to exit code 2 (see
//! [`crate::results::BadInput`]).
//!
//! A verdict is `fired`, `ok`, `insufficient_data` (the cell cannot say: too
//! few samples, an untraceable fence-out, unresolved intervals) or
//! `not_evaluated` (the trigger does not apply to the cell, with the reason:
//! trigger 4 with the client check off, trigger 5 outside a throttled vs
//! unthrottled pair). "ok" is only ever said on enough data (docs/measurement.md).
//!
//! Trigger 1 is evaluated on the heartbeat RTT corrected for coordinated
//! omission against `min(lease, session TTL) × margin / 3`, the same window
//! trigger 3 uses (a handle is usable only while its own and its session's
//! deadlines are ahead, C3). The §6.5 row "lock.session.ttl or
//! lock.default.ttl changes" is evaluated through its action (trigger 3, D4
//! against the window just before a heartbeat); "a move off Autopilot" through
//! the throttle experiment's pair of runs (trigger 5).
//!
//! The module tree: `catalog` holds what the triggers are (ids, the ADR's
//! wording, [`Verdict`], [`TriggerResult`]); `rules` the five rules and the
//! arithmetic they share; `verdicts` evaluates them over a table and answers
//! questions about the results; `output` writes `triggers.json`, formats the
//! tables and runs `bench triggers`. This file only re-exports them.
//!
//! In production the same checks, plus the lease-safety essay's clock check
//! ([`CLOCK_CHECK`]), run over Prometheus: `live` holds the parameters and
//! the shape of a check, `live_checks` defines each as PromQL ([`checks`]):
//! recorded terms and conditions over their names, `recorded` names the
//! recorded series and expands a condition into a self-contained query,
//! `rules_file` renders them as a Prometheus rules file (`bench rules`), and
//! `live_verdict` turns instant-query answers into the same
//! [`TriggerResult`]s (`bench triggers --prometheus`).

mod catalog;
mod live;
mod live_checks;
mod live_verdict;
mod output;
mod recorded;
mod rules;
mod rules_file;
mod verdicts;

pub use catalog::{
    AUTOPILOT_THROTTLING, CLOCK_CHECK, CLOCK_OFFSET_BOUND, D4_UNSATISFIABLE,
    FENCED_OUT_WITH_CLIENT_CHECK, MARGIN_DOMINANT_LIMITER, RTT_P99_VS_MARGIN, TRIGGERS, Trigger,
    TriggerResult, Verdict, trigger,
};
pub use live::{
    Check, DEFAULT_WINDOW, NotEvaluated, Params, RTT_CORRECTED, Term, UNTHROTTLED_SHARE_MAX, num,
    prom_duration,
};
pub use live_checks::checks;
pub use live_verdict::{Answer, Part, live_result, queries};
pub use output::{
    EXIT_BAD_INPUT, EXIT_FIRED, EXIT_NONE_FIRED, TRIGGERS_JSON, TriggersError, WriteError,
    exit_code, fmt_value, format_table, markdown_table, run_triggers_command, write_triggers,
};
pub use recorded::{expand, recorded};
pub use rules::{
    BUDGET_DIVISOR, D4Window, LOST_WORK_MIN, MARGIN_SHARE_MIN, MIN_SAMPLES_P99, OVER_BUDGET_FLOOR,
    P99_TAIL, UNTHROTTLED, lost_work, margin_needed, rtt_budget_ms, trigger1_verdict,
};
pub use rules_file::{
    Alert, DEFAULT_FOR, SEVERITY_INFO, SEVERITY_PAGE, SEVERITY_TICKET, alerts, command_line,
    fired_severity, render, rule_names,
};
pub use verdicts::{INTERRUPTED, evaluate, evaluate_row, fired, verdict_of};
