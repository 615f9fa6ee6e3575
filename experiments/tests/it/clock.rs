//! The clock simulation reproduces the essay's boundary and the step hazards.

use experiments::clock::{Scenario, SimParams, findings, sweep};

fn params() -> SimParams {
    SimParams {
        lease_ns: 10_000_000_000,
        theta_ns: 50_000_000,
        drift_ppm: 100,
        quantum_ns: 1_000_000,
        step_ns: 25_000_000,
        max_delay_ns: 5_000_000,
        margin: 0.0,
    }
}

#[test]
fn zero_violations_at_the_bound_and_some_below_it_for_a_seed_set() {
    for seed in [1, 2, 3] {
        let rows = sweep(
            &params(),
            &[Scenario::Offset],
            &[0.5, 0.9, 1.0, 1.1, 2.0],
            1000,
            seed,
        );
        let v = |f: f64| {
            rows.iter()
                .find(|r| r.grace_fraction == f)
                .unwrap()
                .violations
        };
        assert_eq!(v(1.0), 0, "seed {seed}: violations at grace = bound");
        assert_eq!(v(1.1), 0);
        assert_eq!(v(2.0), 0);
        assert!(v(0.9) > 0, "seed {seed}: none just below the bound");
        assert!(v(0.5) > v(0.9));
    }
}

#[test]
fn the_sdk_reading_at_send_needs_no_offset_term() {
    let rows = sweep(&params(), &[Scenario::SdkD2], &[0.25, 1.0], 1000, 7);
    assert!(rows.iter().all(|r| r.violations == 0), "{rows:?}");
}

#[test]
fn a_forward_server_step_and_a_backward_client_step_are_the_hazards() {
    let rows = sweep(
        &params(),
        &[
            Scenario::Offset,
            Scenario::ServerStepForward,
            Scenario::ServerStepBackward,
            Scenario::ClientStepForward,
            Scenario::ClientStepBackward,
        ],
        &[1.0],
        1000,
        11,
    );
    let f = findings(&rows);
    assert_eq!(f.server_hazardous_step, "forward");
    assert_eq!(f.client_hazardous_step, "backward");
    assert!(!f.agrees_with_essay_on_server_step);
    let v = |s: &str| rows.iter().find(|r| r.scenario == s).unwrap().violations;
    assert_eq!(v("server-step-backward"), 0);
    assert_eq!(v("client-step-forward"), 0);
}

#[test]
fn a_client_margin_covers_a_grace_of_zero() {
    let mut p = params();
    p.margin = 0.3;
    let rows = sweep(
        &p,
        &[Scenario::Offset, Scenario::ClientStepBackward],
        &[0.0],
        500,
        5,
    );
    assert!(rows.iter().all(|r| r.violations == 0), "{rows:?}");
}

#[test]
fn the_same_seed_gives_the_same_table() {
    let a = sweep(&params(), &[Scenario::Offset], &[0.75], 200, 42);
    let b = sweep(&params(), &[Scenario::Offset], &[0.75], 200, 42);
    assert_eq!(a, b);
}
