//! The grid's parsers and its expansion: ranges, lists, policies, divisors,
//! freeze lengths, and the cell ids committed data depends on.

use super::*;

#[test]
fn margin_ranges_are_inclusive_and_exact() {
    assert_eq!(parse_margins("0.1..0.5:0.2").unwrap(), vec![0.1, 0.3, 0.5]);
    assert_eq!(
        parse_margins("0.1..0.5").unwrap(),
        vec![0.1, 0.2, 0.3, 0.4, 0.5]
    );
    assert_eq!(parse_margins("0.3").unwrap(), vec![0.3]);
    assert_eq!(parse_margins("0.1,0.25").unwrap(), vec![0.1, 0.25]);
}

#[test]
fn bad_margins_name_the_flag() {
    for bad in [
        "0.5..0.1",
        "1.0",
        "1.5",
        "-0.1",
        "abc",
        "0.1..0.5:0",
        "0.1..0.5:x",
    ] {
        let e = parse_margins(bad).unwrap_err();
        assert!(e.to_string().starts_with("--margin"), "{e}");
    }
    assert!(
        parse_margins("0.5..0.1")
            .unwrap_err()
            .to_string()
            .contains("reversed")
    );
}

#[test]
fn ttls_need_units_and_the_server_range() {
    assert_eq!(
        parse_ttls("1s,2s").unwrap(),
        vec![Duration::from_secs(1), Duration::from_secs(2)]
    );
    for bad in ["1", "1parsec", "50ms", "11m"] {
        assert!(
            parse_ttls(bad)
                .unwrap_err()
                .to_string()
                .starts_with("--ttl"),
            "{bad}"
        );
    }
}

#[test]
fn pause_and_policy_specs() {
    let p = parse_pause("2s:300ms").unwrap();
    assert_eq!(p.to_string(), "2s:300ms");
    assert!(parse_pause("1s:2s").is_err());
    assert_eq!(parse_policy("fixed").unwrap(), PolicySpec::Fixed);
    assert_eq!(
        parse_policy("adaptive:k=4,floor=0.1,ceiling=0.4").unwrap(),
        PolicySpec::Adaptive {
            k: 4.0,
            floor: 0.1,
            ceiling: 0.4
        }
    );
    assert!(
        parse_policy("adaptive:q=1")
            .unwrap_err()
            .to_string()
            .contains("--margin-policy")
    );
}

#[test]
fn cell_ids_are_stable() {
    let c = cells(&[Duration::from_secs(1)], &[0.3], &[PolicySpec::Fixed], 1);
    assert_eq!(c[0].id(), "ttl=1s_margin=0.30");
    // One freeze length and the default divisor: the same id.
    let one = Axes {
        divisors: vec![3],
        pause: Some(parse_pause_axis("3s:400ms").unwrap()),
    };
    let c = cells_with(
        &[Duration::from_secs(1)],
        &[0.3],
        &[PolicySpec::Fixed],
        2,
        &one,
    );
    assert_eq!(c[0].id(), "ttl=1s_margin=0.30_rep=0");
    assert_eq!(c[0].server_pause.unwrap().to_string(), "3s:400ms");
}

#[test]
fn divisors_and_freeze_lengths_are_grid_dimensions_named_in_the_id() {
    let axes = Axes {
        divisors: parse_divisors("3,4").unwrap(),
        pause: Some(parse_pause_axis("3s:300ms,600ms").unwrap()),
    };
    let c = cells_with(
        &[Duration::from_secs(1)],
        &[0.3],
        &[PolicySpec::Fixed],
        2,
        &axes,
    );
    assert_eq!(c.len(), 8, "2 repeats × 2 divisors × 2 freezes");
    let ids: Vec<String> = c.iter().take(4).map(Cell::id).collect();
    assert_eq!(
        ids,
        [
            "ttl=1s_margin=0.30_freeze=300ms_rep=0",
            "ttl=1s_margin=0.30_freeze=600ms_rep=0",
            "ttl=1s_margin=0.30_k=4_freeze=300ms_rep=0",
            "ttl=1s_margin=0.30_k=4_freeze=600ms_rep=0",
        ]
    );
    assert_eq!(c[2].heartbeat_divisor, 4);
    assert_eq!(group_of(&c[3].id()), "ttl=1s_margin=0.30_k=4_freeze=600ms");
    assert_eq!(c[4].repeat, 1);
}

#[test]
fn bad_divisors_and_freeze_lengths_name_the_flag_and_the_value() {
    for bad in ["1", "11", "three", "3,3", "", "2.5"] {
        let e = parse_divisors(bad).unwrap_err();
        assert!(e.to_string().starts_with("--heartbeat-divisor"), "{e}");
    }
    let e = parse_pause_axis("3s:300ms,3s").unwrap_err();
    assert!(e.to_string().starts_with("--server-pause"), "{e}");
    assert!(
        e.to_string()
            .contains("FOR 3s must be shorter than EVERY 3s"),
        "{e}"
    );
    for bad in ["3s", "3s:", "3s:300ms,x", "3s:300ms,300ms", "1s:2s"] {
        assert!(parse_pause_axis(bad).is_err(), "{bad}");
    }
    let a = parse_pause_axis("3s:300ms,400ms").unwrap();
    assert_eq!(a.to_string(), "3s:300ms,400ms");
    assert_eq!(a.single(), None);
    assert_eq!(
        parse_pause_axis("2s:300ms").unwrap().to_string(),
        "2s:300ms"
    );
}

#[test]
fn a_policy_list_is_a_grid_dimension_and_adaptive_runs_once_per_ttl() {
    let p = parse_policies("fixed,adaptive:k=4,floor=0.05,ceiling=0.5").unwrap();
    assert_eq!(
        p,
        vec![
            PolicySpec::Fixed,
            PolicySpec::Adaptive {
                k: 4.0,
                floor: 0.05,
                ceiling: 0.5
            }
        ]
    );
    let c = cells(&[Duration::from_secs(1)], &[0.1, 0.3], &p, 3);
    assert_eq!(c.len(), 9, "3 repeats × (2 fixed + 1 adaptive)");
    let ids: Vec<String> = c.iter().take(3).map(Cell::id).collect();
    assert_eq!(
        ids,
        [
            "ttl=1s_margin=0.10_rep=0",
            "ttl=1s_margin=0.30_rep=0",
            "ttl=1s_adaptive_k=4_floor=0.05_ceiling=0.50_rep=0"
        ]
    );
    assert_eq!(c[8].repeat, 2);
    assert_eq!(group_of(&c[0].id()), "ttl=1s_margin=0.10");
    assert_eq!(group_of("ttl=1s_margin=0.10"), "ttl=1s_margin=0.10");
    assert_eq!(c[2].margin, 0.5, "adaptive's margin column is its ceiling");
    for bad in ["", "fixed,k=3", "fixed,fixed", "adaptive:k=0", "sometimes"] {
        assert!(
            parse_policies(bad)
                .unwrap_err()
                .to_string()
                .starts_with("--margin-policy"),
            "{bad}"
        );
    }
    assert!(parse_repeat(0).is_err() && parse_repeat(3).is_ok());
}
