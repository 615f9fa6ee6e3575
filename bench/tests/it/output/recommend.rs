//! The per-TTL margin recommendation over repeats and intervals.

use super::fixtures::*;

/// One repeat gives no interval, so no throughput difference is resolved:
/// the recommendation is the largest margin that passes every check (the old
/// rule's "best throughput within 1 %" picked noise).
#[test]
fn one_repeat_resolves_nothing_so_the_largest_qualifying_margin_is_taken() {
    let recs = recommendations(&sweep_rows());
    assert_eq!(recs.len(), 2);
    let short = &recs[0];
    assert_eq!(short.lease_ms, 300);
    assert_eq!(short.margin, None);
    assert!(!short.reason.contains("raise the TTL"), "{}", short.reason);
    assert!(
        short.reason.contains("heartbeat divisor"),
        "{}",
        short.reason
    );
    let long = &recs[1];
    assert_eq!(long.lease_ms, 1000);
    assert_eq!(long.margin, Some(0.50));
    assert_eq!(long.qualifying, 4);
    assert!(!long.resolved);
    assert!(
        long.reason.contains("not resolved at 1 repeat(s)"),
        "{}",
        long.reason
    );
    assert!(
        long.to_string()
            .starts_with("TTL 1s: recommended margin 0.50 (not resolved, the larger margin)"),
        "{long}"
    );
}

/// Done-when: the recommendation does not change between two runs whose
/// only difference is noise within the intervals (the same seed twice), and
/// margins whose intervals overlap are reported "not resolved".
#[test]
fn noise_within_the_intervals_does_not_change_the_recommendation() {
    let first = repeated_rows(&[
        (0.10, [30.0, 30.6, 29.4]),
        (0.30, [25.0, 25.4, 24.7]),
        (0.50, [18.0, 18.5, 17.6]),
    ]);
    let second = repeated_rows(&[
        (0.10, [30.3, 29.8, 29.9]),
        (0.30, [24.8, 25.3, 25.1]),
        (0.50, [18.3, 17.9, 18.1]),
    ]);
    let (a, b) = (&recommendations(&first)[0], &recommendations(&second)[0]);
    assert_eq!((a.margin, a.resolved), (Some(0.10), true), "{a}");
    assert_eq!(
        (a.margin, a.resolved, &a.cell),
        (b.margin, b.resolved, &b.cell)
    );
    assert_eq!(recommendations(&first), recommendations(&first.clone()));
    assert_eq!(a.n_repeats, 3);
}

#[test]
fn overlapping_intervals_are_not_resolved_and_the_larger_margin_is_taken() {
    let rows = repeated_rows(&[(0.10, [30.0, 24.0, 27.0]), (0.30, [26.0, 29.0, 23.0])]);
    let r = &recommendations(&rows)[0];
    assert_eq!(r.margin, Some(0.30));
    assert!(!r.resolved);
    assert!(
        r.reason.contains("not resolved at 3 repeat(s)"),
        "{}",
        r.reason
    );
    assert_eq!(
        r.trigger2_sweep,
        bench_analysis::triggers::Verdict::InsufficientData
    );
}
