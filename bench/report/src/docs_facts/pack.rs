//! The facts of the reference pack (`data/reference/`): how long it ran, the
//! five triggers over its cells (the evidence document's own tally), the
//! adaptive policy against the fixed margin, the pauses' takeovers and the
//! clock run with a client margin.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bench_analysis::triggers::Verdict;
use serde_json::{Value, json};

use super::input::{FactsError, Row, read_json, read_table};
use crate::adr::evidence::{load, not_imposed, trigger_tally};
use crate::adr::revision::ADR_MARGIN;

/// `adr-manifest.json`: the wall time from start to finish, the steps per
/// status and the sum of the steps' own `seconds`.
pub(super) fn pack_run(data: &Path) -> Result<Value, FactsError> {
    let m = read_json(data, "reference/adr-manifest.json")?;
    let at = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .and_then(|s| humantime::parse_rfc3339(s).ok())
    };
    let took_s = match (at("started_at"), at("finished_at")) {
        (Some(a), Some(b)) => b.duration_since(a).ok().map(|d| d.as_secs_f64()),
        _ => None,
    };
    let steps = m
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for s in &steps {
        let st = s.get("status").and_then(Value::as_str).unwrap_or("?");
        *statuses.entry(st.to_string()).or_default() += 1;
    }
    let seconds: f64 = steps
        .iter()
        .filter_map(|s| s.get("seconds").and_then(Value::as_f64))
        .sum();
    Ok(json!({
        "took_s": took_s,
        "statuses": statuses.iter().map(|(s, n)| json!({"status": s, "steps": n})).collect::<Vec<_>>(),
        "steps_seconds": seconds,
    }))
}

/// The five triggers over every cell of the pack's results tables, as §3 of
/// the evidence document counts and headlines them.
pub(super) fn pack_triggers(data: &Path) -> Result<Value, FactsError> {
    let ev =
        load(&data.join("reference")).map_err(|_| FactsError::Missing("data/reference/".into()))?;
    // The steps with a results table, in the plan's order.
    let mut steps: Vec<&str> = ev
        .manifest
        .iter()
        .flat_map(|m| m.steps.iter().map(|r| r.step.name.as_str()))
        .filter(|n| ev.sweeps.contains_key(*n))
        .collect();
    steps.extend(
        ev.sweeps
            .keys()
            .map(String::as_str)
            .filter(|n| !steps.contains(n))
            .collect::<Vec<_>>(),
    );
    let cells: BTreeSet<(&str, &str)> = ev
        .sweeps
        .values()
        .flat_map(|s| {
            s.triggers
                .iter()
                .map(move |r| (s.name.as_str(), r.cell.as_str()))
        })
        .collect();
    let triggers: Vec<Value> = trigger_tally(&ev)
        .iter()
        .map(|t| {
            let left_out: Vec<&str> = steps
                .iter()
                .copied()
                .filter(|s| not_imposed(t.trigger.id, s))
                .collect();
            json!({
                "id": t.trigger.id,
                "adr_trigger": t.trigger.adr_trigger,
                "headline": t.headline().map(Verdict::as_str),
                "counts": Verdict::WORST_FIRST
                    .iter()
                    .map(|v| (v.as_str().to_string(), json!(t.count(*v))))
                    .collect::<serde_json::Map<_, _>>(),
                "not_imposed_on": left_out,
            })
        })
        .collect();
    Ok(json!({
        "steps": steps,
        "cells": cells.len(),
        "worst_first": Verdict::WORST_FIRST.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "triggers": triggers,
    }))
}

/// Each row of `adaptive/summary.csv`: its median payouts/s over the fixed
/// ADR-006 margin's at the same lease (`sweep/summary.csv`).
pub(super) fn adaptive(data: &Path) -> Result<Value, FactsError> {
    let fixed = read_table(data, "reference/sweep/summary.csv")?;
    let adaptive = read_table(data, "reference/adaptive/summary.csv")?;
    let fixed_at = |lease: f64| {
        Row::all(&fixed)
            .find(|r| r.num("lease_ms") == lease && (r.num("margin") - ADR_MARGIN).abs() < 1e-4)
            .map(|r| r.num("throughput_median"))
    };
    let rows: Vec<Value> = Row::all(&adaptive)
        .map(|r| {
            let lease = r.num("lease_ms");
            json!({
                "lease_ms": lease,
                "margin_policy": r.text("margin_policy"),
                "over_fixed": fixed_at(lease).map(|b| r.num("throughput_median") / b),
            })
        })
        .collect();
    Ok(json!({"fixed_margin": ADR_MARGIN, "rows": rows}))
}

/// The pause runs: the fastest and slowest takeover of a paused worker's payout, ms.
pub(super) fn pause(data: &Path) -> Result<Value, FactsError> {
    let mut out = serde_json::Map::new();
    for name in ["pause", "pause-uc03"] {
        let p = read_json(data, &format!("reference/{name}/pause.json"))?;
        let take: Vec<f64> = p
            .get("paused")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|x| x.get("takeover_after_s").and_then(Value::as_f64))
            .map(|s| s * 1000.0)
            .collect();
        let range = (!take.is_empty()).then(|| {
            json!([
                take.iter().copied().fold(f64::INFINITY, f64::min),
                take.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            ])
        });
        out.insert(name.into(), json!({ "takeover_ms": range }));
    }
    Ok(Value::Object(out))
}

/// The clock run with a client margin: violations and cases over every
/// scenario and grace.
pub(super) fn clock(data: &Path) -> Result<Value, FactsError> {
    let t = read_table(data, "reference/clock-margin/clock.csv")?;
    let sum = |col: &str| {
        Row::all(&t)
            .map(|r| r.text(col).parse::<u64>().unwrap_or(0))
            .sum::<u64>()
    };
    Ok(json!({"margin_violations": sum("violations"), "margin_cases": sum("cases")}))
}
