//! ADR-006 §6.5's triggers on constructed rows, and `bench triggers`' exit codes.

use bench_analysis::results::{BadInput, read_results, write_results};
use bench_analysis::triggers::{
    AUTOPILOT_THROTTLING, D4_UNSATISFIABLE, D4Window, FENCED_OUT_WITH_CLIENT_CHECK,
    MARGIN_DOMINANT_LIMITER, RTT_P99_VS_MARGIN, TRIGGERS, TriggersError, Verdict, evaluate,
    evaluate_row, run_triggers_command,
};
use bench_report::report::write_report;

use super::fixtures::*;

#[test]
fn each_trigger_fires_exactly_where_constructed_to() {
    let rows = trigger_rows();
    let results = evaluate(&rows);
    assert_eq!(results.len(), 5 * rows.len(), "five rows per cell");
    assert_eq!(
        fired(&results),
        vec![
            (AUTOPILOT_THROTTLING.to_owned(), "throttle=10%".to_owned()),
            (AUTOPILOT_THROTTLING.to_owned(), "throttle=none".to_owned()),
            (D4_UNSATISFIABLE.to_owned(), "d4".to_owned()),
            (FENCED_OUT_WITH_CLIENT_CHECK.to_owned(), "fenced".to_owned()),
            (MARGIN_DOMINANT_LIMITER.to_owned(), "margin".to_owned()),
            (RTT_P99_VS_MARGIN.to_owned(), "rtt".to_owned()),
        ]
    );
    for r in &results {
        assert_eq!(r.fired, r.verdict == Verdict::Fired, "{r:?}");
    }
    let verdict = |id: &str, cell: &str| {
        results
            .iter()
            .find(|r| r.trigger == id && r.cell == cell)
            .unwrap()
            .verdict
    };
    assert_eq!(
        verdict(FENCED_OUT_WITH_CLIENT_CHECK, "untraced"),
        Verdict::InsufficientData,
        "an untraced fence-1 refusal is not an ok"
    );
    assert_eq!(
        verdict(AUTOPILOT_THROTTLING, "none"),
        Verdict::NotEvaluated,
        "no throttle pair, no trigger 5"
    );
    let rtt = results
        .iter()
        .find(|r| r.trigger == RTT_P99_VS_MARGIN && r.cell == "rtt")
        .unwrap();
    assert_eq!(
        (rtt.observed, rtt.threshold, rtt.unit.as_str()),
        (150.0, 100.0, "ms")
    );
    assert!(
        rtt.action
            .starts_with("Raise the margin or shorten the heartbeat period")
    );
}

#[test]
fn margin_is_dominant_only_when_it_causes_half_the_loss_and_the_loss_is_material() {
    // Exactly at both thresholds: 5 of 10 lost to the margin, 10 of 200 attempts lost.
    let mut edge = healthy("edge", 0.30, 1000);
    (
        edge.abandoned_insufficient_lease,
        edge.acquire_failed,
        edge.abandoned_lost,
    ) = (5, 5, 0);
    // Dominant but immaterial: all 4 lost to the margin, 4 of 200 attempts.
    let mut small = healthy("small", 0.30, 1000);
    (
        small.abandoned_insufficient_lease,
        small.acquire_failed,
        small.abandoned_lost,
    ) = (4, 0, 0);
    // Material but not dominant: 20 of 42 lost to the margin.
    let mut shared = healthy("shared", 0.30, 1000);
    (
        shared.abandoned_insufficient_lease,
        shared.acquire_failed,
        shared.lock_lost,
    ) = (20, 20, 1);
    let results = evaluate(&[edge, small, shared]);
    let margin: Vec<_> = fired(&results);
    assert_eq!(
        margin,
        vec![(MARGIN_DOMINANT_LIMITER.to_owned(), "edge".to_owned())]
    );
}

#[test]
fn fence_outs_without_the_client_check_are_the_uc03_demo_not_a_violation() {
    let results = evaluate(&trigger_rows());
    let demo = results
        .iter()
        .find(|r| r.trigger == FENCED_OUT_WITH_CLIENT_CHECK && r.cell == "uc03")
        .unwrap();
    assert!(!demo.fired);
    assert_eq!(demo.verdict, Verdict::NotEvaluated);
    assert_eq!(demo.observed, 0.0, "nothing was believed");
    assert!(demo.detail.contains("client check off"));
}

/// Trigger 1 says ok only on 1,000 corrected samples; with fewer it says
/// insufficient_data, unless more than 10 of them exceed the budget (then the
/// p99 of any 1,000 samples would too, and it fires).
#[test]
fn trigger_1_needs_a_thousand_samples_to_say_ok() {
    let mut few = healthy("few", 0.30, 1000);
    few.hb_corrected_count = 400;
    let t1 = &evaluate_row(&few, &[])[0];
    assert_eq!(t1.verdict, Verdict::InsufficientData, "{t1:?}");
    few.hb_corrected_over_budget = 10;
    few.hb_rtt_corrected_p99_us = 120_000;
    assert_eq!(
        evaluate_row(&few, &[])[0].verdict,
        Verdict::InsufficientData,
        "10 of 400 above: a 1,000-sample p99 could still be within budget"
    );
    few.hb_corrected_over_budget = 11;
    let t1 = &evaluate_row(&few, &[])[0];
    assert_eq!(t1.verdict, Verdict::Fired, "{t1:?}");
    assert!(
        t1.detail.contains("fewer than 1000 samples"),
        "{}",
        t1.detail
    );
    // The budget is min(lease, session TTL) × margin / 3: a 500 ms session halves it.
    let mut session = healthy("session", 0.30, 1000);
    session.session_ttl_ms = 500;
    session.hb_rtt_corrected_p99_us = 60_000;
    let t1 = &evaluate_row(&session, &[])[0];
    assert_eq!((t1.threshold, t1.verdict), (50.0, Verdict::Fired));
    // The raw p99 alone never decides: the corrected one does.
    let mut raw_only = healthy("raw", 0.30, 1000);
    raw_only.hb_rtt_p99_us = 150_000;
    assert_eq!(evaluate_row(&raw_only, &[])[0].verdict, Verdict::Ok);
}

/// At the ADR's own production defaults (30 s lease, 15 s session, 0.30,
/// 5 s + 2 s hop) the window just before a heartbeat is 7 s − RTT < 7 s:
/// trigger 3 fires, and D4 refuses in a sliver of every period.
#[test]
fn trigger_3_fires_at_the_adr_defaults_and_reports_the_refused_fraction() {
    let mut adr = healthy("adr", 0.30, 30_000);
    adr.session_ttl_ms = 15_000;
    adr.worst_case_hop_ms = 7_000;
    let t3 = &evaluate_row(&adr, &[])[2];
    assert_eq!(t3.verdict, Verdict::Fired, "{t3:?}");
    let w = D4Window::of(&adr);
    assert_eq!((w.usable_ms, w.period_ms), (10_500.0, 3_500.0));
    let f = w.refusal_fraction();
    assert!(f > 0.0 && f < 0.001, "0.9 ms of a 3.5 s period: {f}");
    assert!(t3.detail.contains("D4 refuses in 0.0 %"), "{}", t3.detail);
    // A scaled 1 s cell at margin 0.10: 450 − 150 − 0.9 ms left, above the 233 ms hop.
    let mut ok = healthy("ok", 0.10, 1000);
    ok.session_ttl_ms = 500;
    ok.worst_case_hop_ms = 233;
    let t3 = &evaluate_row(&ok, &[])[2];
    assert_eq!(t3.verdict, Verdict::Ok, "{t3:?}");
    assert_eq!(D4Window::of(&ok).refusal_fraction(), 0.0);
}

/// Trigger 5 reads the pair off the table; it needs both runs, a release
/// build, 1,000 samples each and separated intervals.
#[test]
fn trigger_5_needs_a_resolved_release_pair() {
    let pair = throttle_pair();
    let t5 = &evaluate_row(&pair[1], &pair)[4];
    assert_eq!(t5.verdict, Verdict::Fired, "{t5:?}");
    assert!((t5.observed - 0.24).abs() < 1e-9, "{t5:?}");
    assert!(t5.detail.contains("reducible"), "{}", t5.detail);
    // Alone, a throttled run says nothing.
    assert_eq!(
        evaluate_row(&pair[1], &pair[1..])[4].verdict,
        Verdict::NotEvaluated
    );
    // Overlapping intervals: not resolved.
    let mut close = pair.clone();
    close[1].hb_rtt_corrected_p99_us = 5_200;
    (
        close[1].hb_rtt_corrected_p99_lo_us,
        close[1].hb_rtt_corrected_p99_hi_us,
    ) = (4_800, 5_600);
    let t5 = &evaluate_row(&close[0], &close)[4];
    assert_eq!(t5.verdict, Verdict::InsufficientData, "{t5:?}");
    assert!(t5.detail.contains("not resolved"), "{}", t5.detail);
    // The unthrottled run needs more than the margin in force: not reducible.
    let mut tight = pair.clone();
    tight[0].hb_rtt_corrected_p99_us = 110_000;
    (
        tight[0].hb_rtt_corrected_p99_lo_us,
        tight[0].hb_rtt_corrected_p99_hi_us,
    ) = (105_000, 115_000);
    tight[1].hb_rtt_corrected_p99_us = 200_000;
    (
        tight[1].hb_rtt_corrected_p99_lo_us,
        tight[1].hb_rtt_corrected_p99_hi_us,
    ) = (190_000, 210_000);
    assert_eq!(evaluate_row(&tight[0], &tight)[4].verdict, Verdict::Ok);
    // Too few samples, or a debug build.
    let mut few = pair.clone();
    few[0].hb_corrected_count = 999;
    assert_eq!(
        evaluate_row(&few[1], &few)[4].verdict,
        Verdict::InsufficientData
    );
    let mut debug = pair.clone();
    debug[1].build_profile = "debug".into();
    let t5 = &evaluate_row(&debug[0], &debug)[4];
    assert_eq!(t5.verdict, Verdict::NotEvaluated, "{t5:?}");
    assert!(t5.detail.contains("debug build"));
}

#[test]
fn triggers_command_exits_0_when_none_fires_and_3_when_one_does() {
    let quiet = Scratch::new("quiet");
    write_results(
        quiet.path(),
        &[healthy("a", 0.3, 1000), healthy("b", 0.4, 1000)],
    )
    .unwrap();
    assert_eq!(run_triggers_command(quiet.path(), None).unwrap(), 0);
    // A directory is only read unless asked to write.
    assert!(!quiet.path().join("triggers.json").exists());

    let loud = Scratch::new("loud");
    write_results(loud.path(), &trigger_rows()).unwrap();
    assert_eq!(
        run_triggers_command(loud.path(), Some(loud.path())).unwrap(),
        3
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(loud.path().join("triggers.json")).unwrap())
            .unwrap();
    let items = json.as_array().unwrap();
    assert_eq!(items.len(), 5 * trigger_rows().len());
    for key in [
        "trigger",
        "cell",
        "fired",
        "verdict",
        "observed",
        "threshold",
        "action",
    ] {
        assert!(
            items.iter().all(|i| i.get(key).is_some()),
            "{key} in every item"
        );
    }
    assert_eq!(items.iter().filter(|i| i["fired"] == true).count(), 6);
    let verdicts: std::collections::BTreeSet<&str> =
        items.iter().filter_map(|i| i["verdict"].as_str()).collect();
    assert_eq!(
        verdicts.into_iter().collect::<Vec<_>>(),
        ["fired", "insufficient_data", "not_evaluated", "ok"]
    );
    // Every trigger id of C4, five rows per cell.
    for t in TRIGGERS {
        assert_eq!(
            items.iter().filter(|i| i["trigger"] == t.id).count(),
            trigger_rows().len()
        );
    }
}

#[test]
fn bad_input_is_an_error_the_cli_maps_to_exit_2() {
    let missing = std::env::temp_dir().join("fencepost-output-does-not-exist");
    let err = run_triggers_command(&missing, None).unwrap_err();
    assert!(matches!(err, TriggersError::BadInput(BadInput::NoDir(_))));
    assert!(write_report(&missing).is_err());

    let empty = Scratch::new("empty");
    let err = run_triggers_command(empty.path(), None).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::NoResults(_))
    ));

    std::fs::write(
        empty.path().join("results.csv"),
        "run_id,margin\nx,notanumber\n",
    )
    .unwrap();
    let err = run_triggers_command(empty.path(), None).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::Unreadable { .. })
    ));

    std::fs::write(empty.path().join("results.parquet"), b"PAR1 truncated").unwrap();
    let err = run_triggers_command(empty.path(), None).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::Unreadable { .. })
    ));

    let none = Scratch::new("norows");
    write_results(none.path(), &[]).unwrap();
    assert!(read_results(none.path()).unwrap().is_empty());
    let err = run_triggers_command(none.path(), None).unwrap_err();
    assert!(matches!(err, TriggersError::BadInput(BadInput::Empty(_))));
}
