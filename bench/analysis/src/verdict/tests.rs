//! The verdict's lines for the three situations a first run meets: D4's
//! sawtooth fails every margin, a margin is recommended, too few samples.

use super::*;

fn row(lease_ms: u64, margin: f64, samples: u64) -> CellRow {
    CellRow {
        lease_ms,
        margin,
        hb_corrected_count: samples,
        heartbeat_divisor: 3,
        margin_policy: "fixed".into(),
        ..CellRow::default()
    }
}

fn rec(lease_ms: u64, margin: Option<f64>, n_repeats: u32) -> Recommendation {
    Recommendation {
        lease_ms,
        backend: "fencepost".into(),
        margin,
        cell: margin.map(|m| format!("ttl={lease_ms}ms_margin={m:.2}")),
        throughput_per_s: margin.map(|_| 20.0),
        qualifying: usize::from(margin.is_some()),
        cells: 3,
        n_repeats,
        resolved: false,
        m_min: None,
        trigger2_sweep: crate::triggers::Verdict::NotEvaluated,
        adaptive: Vec::new(),
        reason: String::new(),
        provisional: false,
        excluded: Vec::new(),
    }
}

fn lines(rows: &[CellRow], recs: &[Recommendation]) -> Vec<String> {
    let lines = verdict_lines(&VerdictInput {
        rows,
        recommendations: recs,
        projection: &[],
        production: &Production::default(),
    });
    for l in &lines {
        assert!(l.chars().count() <= 120, "{} chars: {l}", l.chars().count());
    }
    lines
}

const SAWTOOTH: &str =
    "D4 sawtooth: the window just before a heartbeat ≤ worst-case rail hop (trigger 3)";
const NEEDED: &str = "below the margin needed (trigger 1): 3 × p99 RTT (95 % upper end) / base";

#[test]
fn a_sawtooth_failure_advises_the_margin_or_the_divisor_never_a_longer_ttl() {
    let rows: Vec<CellRow> = [0.1, 0.3, 0.5].map(|m| row(1000, m, 300)).to_vec();
    let mut r = rec(1000, None, 1);
    r.excluded = vec![
        (SAWTOOTH.to_owned(), vec![0.3, 0.5]),
        (NEEDED.to_owned(), vec![0.1]),
    ];
    let text = lines(&rows, &[r]).join("\n");
    assert!(
        text.contains("TTL 1s: no margin passes (0/3 tried)."),
        "{text}"
    );
    assert!(text.contains("D4 sawtooth"), "{text}");
    assert!(text.contains("at 0.30, 0.50"), "{text}");
    assert!(text.contains("larger heartbeat divisor"), "{text}");
    assert!(text.contains("A longer TTL does not"), "{text}");
    assert!(!text.contains("raise the TTL"), "{text}");
    assert!(text.contains("30× harsher"), "{text}");
}

#[test]
fn a_believed_fence_out_is_named_and_does_not_hide_the_sawtooth_advice() {
    let rows: Vec<CellRow> = [0.1, 0.3].map(|m| row(1000, m, 300)).to_vec();
    let mut r = rec(1000, None, 1);
    r.excluded = vec![
        (SAWTOOTH.to_owned(), vec![0.3]),
        (
            "fenced out although the client believed it held the lease (trigger 4)".to_owned(),
            vec![0.1],
        ),
    ];
    let text = lines(&rows, &[r]).join("\n");
    assert!(
        text.contains("believed fence-out is a safety failure"),
        "{text}"
    );
    assert!(text.contains("larger heartbeat divisor"), "{text}");
}

#[test]
fn a_recommendation_names_the_margin_and_how_it_was_chosen() {
    let rows: Vec<CellRow> = [0.1, 0.3]
        .iter()
        .flat_map(|&m| (0..3).map(move |_| row(5000, m, 20_000)))
        .collect();
    let mut r = rec(5000, Some(0.3), 3);
    r.resolved = true;
    let text = lines(&rows, &[r]).join("\n");
    assert!(
        text.contains("TTL 5s: margin 0.30 (1/3 margins pass; the highest throughput, resolved)."),
        "{text}"
    );
    assert!(text.contains("enough for a decision"), "{text}");
    assert!(!text.contains("advice"), "{text}");
    assert!(!text.contains("smoke test"), "{text}");
}

#[test]
fn too_few_samples_is_a_smoke_test_with_the_command_for_a_decision() {
    let rows: Vec<CellRow> = [0.1, 0.3, 0.5]
        .map(|m| row(1000, m, 112 + (m * 500.0) as u64))
        .to_vec();
    let text = lines(&rows, &[rec(1000, Some(0.1), 1)]).join("\n");
    assert!(
        text.contains("smoke test: 162–362 heartbeat samples per cell, 1 repeat(s)"),
        "{text}"
    );
    assert!(
        text.contains(
            "bench sweep --ttl 1s --margin 0.1,0.3,0.5 --repeat 3 --sessions 800 \
             --projection-lease 30s"
        ),
        "{text}"
    );
    assert!(text.contains("not resolved at 1 repeat(s)"), "{text}");
}

#[test]
fn a_swept_divisor_is_named_with_the_margin_and_in_the_command() {
    let mut rows = vec![row(1000, 0.3, 300), row(1000, 0.1, 300)];
    rows[0].heartbeat_divisor = 6;
    let text = lines(&rows, &[rec(1000, Some(0.3), 1)]).join("\n");
    assert!(text.contains("margin 0.30, heartbeat divisor 6"), "{text}");
    assert!(text.contains("--heartbeat-divisor 3,6"), "{text}");
}

#[test]
fn an_adaptive_only_run_recommends_nothing_and_keeps_its_policy_in_the_command() {
    let mut rows = vec![row(1000, 0.5, 300)];
    rows[0].margin_policy = "adaptive:k=3,floor=0.05,ceiling=0.5".into();
    let mut r = rec(1000, None, 1);
    r.cells = 0;
    let text = lines(&rows, &[r]).join("\n");
    assert!(text.contains("no fixed margin in this run"), "{text}");
    assert!(!text.contains("advice"), "{text}");
    assert!(
        text.contains("--margin-policy adaptive:k=3,floor=0.05,ceiling=0.5"),
        "{text}"
    );
}
