//! §9's second table: the lock services side by side, from the facts
//! [`crate::lock_services::lock_services_in`] computes on the pack
//! (the same facts `docs/performance.md`'s generated table formats).

use std::fmt::Write as _;

use serde_json::Value;

use crate::adr::evidence::model::Evidence;
use crate::lock_services::pause_dirs;

/// What a cell says when its file is not in the pack.
const NO_DATA: &str = "no data committed";

/// "median (min–max)" of a facts spread, times `k`, with `d` decimals.
fn mm(sp: &Value, k: f64, d: usize) -> String {
    let v = |key: &str| sp[key].as_f64().map(|x| x * k);
    match (v("median"), v("min"), v("max")) {
        (Some(m), Some(lo), Some(hi)) => format!("{m:.d$} ({lo:.d$}–{hi:.d$})"),
        _ => "–".into(),
    }
}

/// The exchange's two cells, one entry per store: p50 / p99 ms, and the
/// margin trigger 1 needs.
fn exchange_cells(all: &[Value], margin: f64) -> (String, String) {
    if all.is_empty() {
        return (NO_DATA.into(), NO_DATA.into());
    }
    let rtt: Vec<String> = all
        .iter()
        .map(|e| {
            format!(
                "`{}`: {} / {} ({} client{}, {} repeats, {} errors)",
                e["label"].as_str().unwrap_or("?"),
                mm(&e["p50_us"], 1e-3, 2),
                mm(&e["p99_us"], 1e-3, 2),
                e["conc"],
                if e["conc"] == 1 { "" } else { "s" },
                e["repeats"],
                e["errors"],
            )
        })
        .collect();
    let need: Vec<String> = all
        .iter()
        .map(|e| {
            format!(
                "`{}`: {}, ≤ {margin:.2} {}",
                e["label"].as_str().unwrap_or("?"),
                mm(&e["margin_needed"], 1.0, 5),
                e["within_margin"].as_str().unwrap_or("?")
            )
        })
        .collect();
    (rtt.join("; "), need.join("; "))
}

/// One pause run's cell: the fences, the double payments, the ledger.
fn pause_cell(p: &Value) -> String {
    if p.is_null() {
        return NO_DATA.into();
    }
    if p["backend_matches"] == false {
        return format!(
            "**`{}` ran another backend**",
            p["file"].as_str().unwrap_or("?")
        );
    }
    let fences = if p["rail_fences"] == "off" {
        "fences off, nothing to fence".to_string()
    } else {
        format!(
            "fenced out {} (fence 1 / 2: {} / {})",
            p["fenced_out"], p["fenced_out_fence1"], p["fenced_out_fence2"]
        )
    };
    let twice = p["paid_twice"].as_u64().unwrap_or(0);
    let twice = if twice > 0 {
        format!("**{twice}**")
    } else {
        twice.to_string()
    };
    let ledger = if p["ledger_ok"] == true {
        "ok"
    } else {
        "**broken**"
    };
    let mut cell = format!(
        "{fences}; paid twice {twice}, stale paid {}, ledger {ledger}",
        p["stale_paid"]
    );
    let differs: Vec<&str> = p["schedule_differs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !differs.is_empty() {
        let _ = write!(
            cell,
            " (not `pause`'s schedule: {} differ)",
            differs.join(", ")
        );
    }
    cell
}

/// §9, continued: one row per lock service.
pub(crate) fn services_section(md: &mut String, ev: &Evidence) {
    let Some(ls) = &ev.lock_services else {
        return;
    };
    let margin = ls["production"]["margin"].as_f64().unwrap_or(0.3);
    let _ = writeln!(
        md,
        "### The lock services side by side\n\n\
         What plays the lease and the token on each lock service, its heartbeat-equivalent \
         exchange in {} (median (min–max) over repeats, per store, at the fewest clients measured), the \
         margin trigger 1 needs for that p99 at production (3 × p99 ÷ min(lease, session TTL), \
         per repeat, against {margin:.2}), and what the fences and the ledger saw when a worker \
         was frozen past its lease (`experiments pause`, steps `pause`/`pause-uc03` for \
         fencepost, `pause-SERVICE`/`pause-SERVICE-uc03` for the others). \"{NO_DATA}\": the \
         pack has no such file.\n",
        ev.link("peer/peer.csv", "peer/peer.csv"),
    );
    let _ = writeln!(
        md,
        "| lock service | lease | token | exchange p50 / p99 ms | margin needed | frozen, client check off | frozen, client check on |\n|---|---|---|---|---|---|---|"
    );
    for r in ls["rows"].as_array().into_iter().flatten() {
        let all = r["exchanges"].as_array().cloned().unwrap_or_default();
        let (rtt, need) = exchange_cells(&all, margin);
        let name = r["service"].as_str().unwrap_or("?");
        let (on, off) = pause_dirs(name);
        let cell = |p: &Value, dir: &str| {
            let c = pause_cell(p);
            if p.is_null() {
                c
            } else {
                format!("{c} ({})", ev.link(&format!("{dir}/report.md"), dir))
            }
        };
        let _ = writeln!(
            md,
            "| **{name}** | {} | {} | {rtt} | {need} | {} | {} |",
            r["lease"].as_str().unwrap_or(""),
            r["token"].as_str().unwrap_or(""),
            cell(&r["pause_check_off"], &off),
            cell(&r["pause_check_on"], &on),
        );
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_without_fences_says_so_and_a_double_payment_stands_out() {
        let redlock = json!({"backend_matches": true, "rail_fences": "off", "paid_twice": 3,
            "stale_paid": 3, "ledger_ok": false, "schedule_differs": []});
        let c = pause_cell(&redlock);
        assert!(c.starts_with("fences off"), "{c}");
        assert!(
            c.contains("paid twice **3**") && c.contains("ledger **broken**"),
            "{c}"
        );
        let fenced = json!({"backend_matches": true, "rail_fences": "on", "fenced_out": 5,
            "fenced_out_fence1": 0, "fenced_out_fence2": 5, "paid_twice": 0, "stale_paid": 0,
            "ledger_ok": true, "schedule_differs": ["seed"]});
        let c = pause_cell(&fenced);
        assert!(
            c.contains("fenced out 5 (fence 1 / 2: 0 / 5); paid twice 0"),
            "{c}"
        );
        assert!(c.ends_with("(not `pause`'s schedule: seed differ)"), "{c}");
        let wrong = json!({"backend_matches": false, "file": "pause-etcd/pause.json"});
        assert!(pause_cell(&wrong).contains("ran another backend"));
        assert_eq!(pause_cell(&Value::Null), NO_DATA);
    }
}
