//! `bench peer` against the physical limits, pure over its rows:
//! each system's heartbeat over its own floor (the cheapest request through
//! the same client), and each store's grants against the fsync ceiling of
//! its directory with the flushes the server counted. Ratios are taken
//! within a repeat, like every ratio of `bench peer` ([`crate::peer`]).

use std::collections::BTreeMap;

use bench_core::peer::PeerOp;

use crate::peer::{PeerRow, Spread};

/// The heartbeat ÷ floor ratio the performance targets ask of fencepost at 16 clients:
/// at most a tenth of a heartbeat's throughput lost to the server's own work.
pub const FLOOR_TARGET: f64 = 0.9;

/// One system's heartbeat throughput over its own floor's for one concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorRatio {
    /// The system's [`label`] (`fencepost/sqlite`, `etcd/bbolt`, ...).
    pub label: String,
    /// Whether it is a fencepost lock-server (the target is fencepost's).
    pub fencepost: bool,
    /// Concurrent clients.
    pub conc: usize,
    /// Heartbeat ops/s ÷ floor ops/s, one per repeat that measured both.
    pub spread: Spread,
}

/// The grants each flush must carry at 64 clients.
pub const GRANTS_PER_FSYNC_TARGET: f64 = 8.0;

/// The concurrency at which grants are judged against the fsync ceiling.
pub const CEILING_CONCURRENCY: usize = 64;

/// The share of the fsync ceiling grants/s must reach at
/// [`CEILING_CONCURRENCY`] clients: within 2× of it.
pub const OF_CEILING_TARGET: f64 = 0.5;

/// One store's grants against its directory's fsync ceiling, for one concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct CeilingRow {
    /// The system's [`label`].
    pub label: String,
    /// Concurrent clients.
    pub conc: usize,
    /// The store directory's fdatasyncs/s, per repeat.
    pub fsync_per_s: Spread,
    /// Grants per flush, from the server's counters, per repeat.
    pub grants_per_fsync: Spread,
    /// Writes per store transaction (fencepost's counters), per repeat.
    pub writes_per_tx: Option<Spread>,
    /// Grants/s ÷ (fsyncs/s × grants per flush), per repeat: 1.0 is the
    /// ceiling; within 2× of it is ≥ 0.5.
    pub of_ceiling: Spread,
    /// Grants/s, per repeat.
    pub grants_per_s: Spread,
}

/// One store's grants against its directory's fsync ceiling, per repeat
/// (what [`CeilingRow`] spreads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CeilingValues {
    /// The store directory's fdatasyncs/s.
    pub fsync_per_s: Vec<f64>,
    /// Grants per flush.
    pub grants_per_fsync: Vec<f64>,
    /// Writes per store transaction (where the server counted them).
    pub writes_per_tx: Vec<f64>,
    /// Grants/s ÷ (fsyncs/s × grants per flush).
    pub of_ceiling: Vec<f64>,
    /// Grants/s.
    pub grants_per_s: Vec<f64>,
}

/// Each store's grant rows against the fsync ceiling its repeat measured:
/// grants per flush are the window's grants ÷ the server's own flush count
/// over the same window, the ceiling the directory's fdatasyncs/s × that.
/// Per (system, concurrency), the values of each repeat.
pub fn ceiling_values(rows: &[PeerRow]) -> BTreeMap<(String, usize), CeilingValues> {
    let fsync: BTreeMap<(String, u32), f64> = rows
        .iter()
        .filter(|r| r.op == PeerOp::Fsync && r.ops_per_s > 0.0)
        .map(|r| ((format!("{}/{}", r.system, r.store), r.repeat), r.ops_per_s))
        .collect();
    let mut per: BTreeMap<(String, usize), CeilingValues> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.op == PeerOp::Grant && r.is_native())
    {
        let (Some(&f), Some(tx)) = (
            fsync.get(&(format!("{}/{}", r.system, r.store), r.repeat)),
            r.store_tx.filter(|t| *t > 0),
        ) else {
            continue;
        };
        let per_flush = r.ops as f64 / tx as f64;
        let e = per.entry((r.label(), r.conc)).or_default();
        e.fsync_per_s.push(f);
        e.grants_per_fsync.push(per_flush);
        if let Some(w) = r.store_writes {
            e.writes_per_tx.push(w as f64 / tx as f64);
        }
        e.of_ceiling.push(r.ops_per_s / (f * per_flush));
        e.grants_per_s.push(r.ops_per_s);
    }
    per
}

/// [`ceiling_values`] spread over the repeats, one row per (system, concurrency).
pub fn ceiling_rows(rows: &[PeerRow]) -> Vec<CeilingRow> {
    ceiling_values(rows)
        .into_iter()
        .filter_map(|((label, conc), v)| {
            Some(CeilingRow {
                label,
                conc,
                fsync_per_s: Spread::of(&v.fsync_per_s)?,
                grants_per_fsync: Spread::of(&v.grants_per_fsync)?,
                writes_per_tx: Spread::of(&v.writes_per_tx),
                of_ceiling: Spread::of(&v.of_ceiling)?,
                grants_per_s: Spread::of(&v.grants_per_s)?,
            })
        })
        .collect()
}

/// Per (system, concurrency) of the grant rows: the share of the fsync
/// ceiling a store that cost nothing would reach, per repeat. A grant is two
/// requests (L4, L6), so such a store could serve at most half the floor's
/// requests/s as grants: min(1, floor ÷ 2 ÷ ceiling), the ceiling as in
/// [`ceiling_rows`] (the directory's fdatasyncs/s × grants per flush). A
/// repeat without the system's floor, fsync or flush count gives none.
pub fn free_store_shares(rows: &[PeerRow]) -> BTreeMap<(String, usize), Spread> {
    let fsync: BTreeMap<(String, u32), f64> = rows
        .iter()
        .filter(|r| r.op == PeerOp::Fsync && r.ops_per_s > 0.0)
        .map(|r| ((format!("{}/{}", r.system, r.store), r.repeat), r.ops_per_s))
        .collect();
    let floor: BTreeMap<(String, usize, u32), f64> = rows
        .iter()
        .filter(|r| r.op == PeerOp::Floor && r.ops_per_s > 0.0)
        .map(|r| ((r.label(), r.conc, r.repeat), r.ops_per_s))
        .collect();
    let mut per: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.op == PeerOp::Grant && r.is_native())
    {
        let (Some(&f), Some(tx), Some(&fl)) = (
            fsync.get(&(format!("{}/{}", r.system, r.store), r.repeat)),
            r.store_tx.filter(|t| *t > 0),
            floor.get(&(r.label(), r.conc, r.repeat)),
        ) else {
            continue;
        };
        let ceiling = f * (r.ops as f64 / tx as f64);
        per.entry((r.label(), r.conc))
            .or_default()
            .push((fl / 2.0 / ceiling).min(1.0));
    }
    per.into_iter()
        .filter_map(|(k, v)| Some((k, Spread::of(&v)?)))
        .collect()
}

/// Heartbeat ÷ floor per (system, fencepost or not, concurrency), each
/// taken within a repeat (the two ran as neighbours in the interleaved order
/// of that repeat): the ratios of each repeat, with the heartbeat and floor
/// ops/s they were taken from.
pub fn floor_pairs(rows: &[PeerRow]) -> BTreeMap<(String, bool, usize), Vec<(f64, f64)>> {
    let floor: BTreeMap<(String, usize, u32), f64> = rows
        .iter()
        .filter(|r| r.op == PeerOp::Floor)
        .map(|r| ((r.label(), r.conc, r.repeat), r.ops_per_s))
        .collect();
    let mut per: BTreeMap<(String, bool, usize), Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.op == PeerOp::Heartbeat) {
        if let Some(&f) = floor.get(&(r.label(), r.conc, r.repeat))
            && f > 0.0
        {
            per.entry((r.label(), r.system == "fencepost", r.conc))
                .or_default()
                .push((r.ops_per_s, f));
        }
    }
    per
}

/// Heartbeat ÷ floor per system and concurrency, each taken within a repeat
/// ([`floor_pairs`]).
pub fn floor_ratios(rows: &[PeerRow]) -> Vec<FloorRatio> {
    floor_pairs(rows)
        .into_iter()
        .filter_map(|((label, fencepost, conc), pairs)| {
            let v: Vec<f64> = pairs.iter().map(|(h, f)| h / f).collect();
            Spread::of(&v).map(|spread| FloorRatio {
                label,
                fencepost,
                conc,
                spread,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::{target_ratio, test_row as row};

    #[test]
    fn grants_are_set_against_the_fsync_ceiling_of_their_own_repeat() {
        let mut fs1 = row("fencepost", "sqlite", PeerOp::Fsync, 1, 1, 1_000.0);
        fs1.ops = 1_000;
        let fs2 = row("fencepost", "sqlite", PeerOp::Fsync, 1, 2, 500.0);
        let mut g1 = row("fencepost", "sqlite", PeerOp::Grant, 64, 1, 4_000.0);
        // 16,000 grants in 4 s over 1,000 flushes: 16 per flush, 2 writes each.
        (g1.store_tx, g1.store_writes) = (Some(1_000), Some(32_000));
        let mut g2 = row("fencepost", "sqlite", PeerOp::Grant, 64, 2, 2_000.0);
        (g2.store_tx, g2.store_writes) = (Some(2_000), Some(16_000));
        // No counters (etcd without /metrics): no row, rather than a guess.
        let e = row("etcd", "bbolt", PeerOp::Grant, 64, 1, 1_000.0);
        let r = ceiling_rows(&[fs1, fs2, g1, g2, e]);
        assert_eq!(r.len(), 1, "{r:?}");
        let c = &r[0];
        assert_eq!((c.label.as_str(), c.conc), ("fencepost/sqlite", 64));
        // Repeat 1: 16 per flush, ceiling 1,000 × 16 = 16,000/s, 4,000/s is 0.25 of it.
        // Repeat 2: 4 per flush, ceiling 500 × 4 = 2,000/s, 2,000/s is 1.0 of it.
        assert_eq!(
            (c.grants_per_fsync.min, c.grants_per_fsync.max),
            (4.0, 16.0)
        );
        assert_eq!((c.of_ceiling.min, c.of_ceiling.max), (0.25, 1.0));
        let w = c.writes_per_tx.unwrap();
        assert_eq!((w.min, w.max), (8.0, 32.0));
    }

    #[test]
    fn a_free_store_reaches_half_the_floor_as_grants_capped_at_the_ceiling() {
        let fs = row("fencepost", "sqlite", PeerOp::Fsync, 1, 1, 1_000.0);
        let mut g = row("fencepost", "sqlite", PeerOp::Grant, 64, 1, 4_000.0);
        // 16,000 grants over 1,000 flushes: 16 per flush, ceiling 16,000/s.
        g.store_tx = Some(1_000);
        let floor = row("fencepost", "sqlite", PeerOp::Floor, 64, 1, 8_000.0);
        let s = free_store_shares(&[fs.clone(), g.clone(), floor]);
        let got = s[&("fencepost/sqlite".to_string(), 64)];
        // 8,000 requests/s = 4,000 grants/s of a 16,000/s ceiling.
        assert_eq!((got.n, got.median), (1, 0.25));
        let fast = row("fencepost", "sqlite", PeerOp::Floor, 64, 1, 64_000.0);
        let capped = free_store_shares(&[fs.clone(), g.clone(), fast]);
        assert_eq!(capped[&("fencepost/sqlite".to_string(), 64)].median, 1.0);
        // Without the floor of that repeat: nothing, rather than a guess.
        assert!(free_store_shares(&[fs, g]).is_empty());
    }

    #[test]
    fn heartbeat_over_floor_is_taken_per_system_within_each_repeat() {
        let rows = vec![
            row("fencepost", "sqlite", PeerOp::Heartbeat, 16, 1, 9_000.0),
            row("fencepost", "sqlite", PeerOp::Floor, 16, 1, 10_000.0),
            row("fencepost", "sqlite", PeerOp::Heartbeat, 16, 2, 4_000.0),
            row("fencepost", "sqlite", PeerOp::Floor, 16, 2, 5_000.0),
            // Another server's floor never divides this one's heartbeat.
            row("fencepost", "postgres", PeerOp::Floor, 16, 1, 1.0),
            row("etcd", "bbolt", PeerOp::Heartbeat, 16, 1, 3_000.0),
            row("etcd", "bbolt", PeerOp::Floor, 16, 1, 6_000.0),
            // A heartbeat without its floor in that repeat gives no ratio.
            row("etcd", "bbolt", PeerOp::Heartbeat, 16, 2, 3_000.0),
        ];
        let r = floor_ratios(&rows);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].label, "etcd/bbolt");
        assert!(!r[0].fencepost);
        assert_eq!((r[0].spread.n, r[0].spread.median), (1, 0.5));
        assert_eq!(r[1].label, "fencepost/sqlite");
        assert!(r[1].fencepost);
        assert_eq!(r[1].spread.n, 2);
        assert!((r[1].spread.min - 0.8).abs() < 1e-12 && (r[1].spread.max - 0.9).abs() < 1e-12);
        assert_eq!(target_ratio(PeerOp::Floor), None);
    }
}
