use super::input::{split_csv, spread_of};
use super::*;

#[test]
fn a_quoted_cell_keeps_its_commas_and_quotes() {
    assert_eq!(
        split_csv(r#"fencepost,"adaptive:k=3,floor=0.05",1000,"say ""hi""",,x"#),
        [
            "fencepost",
            "adaptive:k=3,floor=0.05",
            "1000",
            r#"say "hi""#,
            "",
            "x"
        ]
    );
    assert_eq!(split_csv(""), [""]);
}

#[test]
fn a_spread_is_written_with_its_interval_or_null() {
    let v = spread_of(&[1.0, 2.0, 3.0]);
    assert_eq!(
        (v["n"].as_u64(), v["median"].as_f64()),
        (Some(3), Some(2.0))
    );
    let ci = v["ci95"].as_array().unwrap();
    // mean 2, s = 1, t(0.975, 2) = 4.303: 2 ± 2.484
    assert!((ci[0].as_f64().unwrap() + 0.484).abs() < 1e-3, "{v}");
    assert!(spread_of(&[5.0])["ci95"].is_null());
    assert!(spread_of(&[]).is_null());
}

#[test]
fn a_missing_input_makes_its_section_unavailable_not_the_file() {
    let dir = std::env::temp_dir().join(format!("docs-facts-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = render(&dir);
    std::fs::remove_dir_all(&dir).ok();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["peer_wrk"]["unavailable"],
        "data/peer-limits/wrk-pairs.csv is missing"
    );
    assert!(v["pack_run"]["unavailable"].is_string());
    assert!(text.ends_with("}\n"));
}

#[test]
fn the_wrk_ratio_is_spread_over_its_pairs() {
    let dir = std::env::temp_dir().join(format!("docs-facts-wrk-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("peer-limits")).unwrap();
    std::fs::write(
        dir.join("peer-limits/wrk-pairs.csv"),
        "pair,heartbeat_per_s,healthz_per_s,ratio\n1,9,10,0.9\n2,8,10,0.8\n3,9.5,10,0.95\n",
    )
    .unwrap();
    let v = super::pairs::peer_wrk(&dir).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(v["ratio"]["median"].as_f64(), Some(0.9));
    assert_eq!(v["ratio"]["min"].as_f64(), Some(0.8));
}
