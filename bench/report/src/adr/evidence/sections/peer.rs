//! §9: fencepost against etcd on the same machine, from `peer/peer.csv`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::adr::evidence::format::median;
use crate::adr::evidence::model::Evidence;

/// §9: fencepost vs etcd.
pub(crate) fn peer_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 9. fencepost vs etcd on this machine\n");
    let Some(t) = &ev.peer else {
        md.push_str(&ev.absent("peer", "peer.csv"));
        return;
    };
    let (Some(sys), Some(store), Some(op), Some(conc), Some(ops)) = (
        t.col("system"),
        t.col("store"),
        t.col("op"),
        t.col("conc"),
        t.col("ops_per_s"),
    ) else {
        let _ = writeln!(
            md,
            "`peer/peer.csv` lacks the columns system, store, op, conc, ops_per_s.\n"
        );
        return;
    };
    let mut groups: BTreeMap<(String, String, String, String), Vec<f64>> = BTreeMap::new();
    for r in &t.rows {
        let get = |i: usize| r.get(i).cloned().unwrap_or_default();
        if let Ok(v) = get(ops).parse::<f64>() {
            groups
                .entry((get(op), get(conc), get(sys), get(store)))
                .or_default()
                .push(v);
        }
    }
    let _ = writeln!(
        md,
        "Same driver, same concurrency, systems interleaved per repeat ({}; the ratios with \
         their intervals are in {}). Median ops/s over repeats (min–max):\n",
        ev.link("peer/peer.csv", "peer/peer.csv"),
        ev.link("peer/report.md", "peer/report.md")
    );
    let _ = writeln!(
        md,
        "| op | clients | system | store | repeats | ops/s median (min–max) |\n|---|---:|---|---|---:|---|"
    );
    for ((op, conc, sys, store), mut v) in groups {
        let med = median(&mut v);
        let _ = writeln!(
            md,
            "| {op} | {conc} | {sys} | {store} | {} | {med:.0} ({:.0}–{:.0}) |",
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    }
    md.push('\n');
    md.push_str(&ev.figure("peer/peer_throughput", "fencepost vs etcd throughput"));
    md.push('\n');
}
