//! The sweep grid and the values of bench's flags: margin ranges
//! (`0.1..0.5[:STEP]`), TTL lists (`1s,2s`), margin policies, and the
//! `--server-pause EVERY:FOR` spec. Every parse error names the flag and the
//! bad text, and the CLI exits 2 on it.

use std::time::Duration;

use fencepost_api::duration::{format_duration, parse_duration};
use fencepost_sdk::MarginPolicy;

/// A refused flag value: `--flag VALUE: why`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {value:?}: {why}")]
pub struct FlagError {
    /// The flag, e.g. `--margin`.
    pub flag: &'static str,
    /// The text given.
    pub value: String,
    /// What is accepted.
    pub why: String,
}

fn flag_err(flag: &'static str, value: &str, why: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

/// One margin, checked: `0 ≤ m < 1`.
pub fn parse_margin(flag: &'static str, text: &str) -> Result<f64, FlagError> {
    let m: f64 = text
        .trim()
        .parse()
        .map_err(|_| flag_err(flag, text, "not a number; margins are fractions like 0.3"))?;
    if !(0.0..1.0).contains(&m) || !m.is_finite() {
        return Err(flag_err(flag, text, "a margin must satisfy 0 <= m < 1"));
    }
    Ok(m)
}

/// `--margin`: a single value (`0.3`), a list (`0.1,0.3`), or a range
/// `FROM..TO[:STEP]` (inclusive; step 0.1 by default). Values are rounded to
/// 1e-9 so `0.1..0.5:0.2` gives exactly 0.1, 0.3, 0.5.
pub fn parse_margins(text: &str) -> Result<Vec<f64>, FlagError> {
    const FLAG: &str = "--margin";
    let round = |x: f64| (x * 1e9).round() / 1e9;
    if let Some((from, rest)) = text.split_once("..") {
        let (to, step) = match rest.split_once(':') {
            Some((to, step)) => (to, Some(step)),
            None => (rest, None),
        };
        let from = parse_margin(FLAG, from)?;
        let to = parse_margin(FLAG, to)?;
        if to < from {
            return Err(flag_err(
                FLAG,
                text,
                format!("reversed range: {to} < {from}; write FROM..TO with FROM <= TO"),
            ));
        }
        let step = match step {
            Some(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| {
                    flag_err(FLAG, text, "the step after ':' must be a positive number")
                })?,
            None => 0.1,
        };
        let n = ((to - from) / step + 1e-9).floor() as usize;
        if n > 1000 {
            return Err(flag_err(
                FLAG,
                text,
                "more than 1000 margins; use a larger step",
            ));
        }
        return Ok((0..=n).map(|i| round(from + i as f64 * step)).collect());
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        out.push(round(parse_margin(FLAG, part)?));
    }
    Ok(out)
}

/// `--ttl`: one duration or a comma list (`1s,2s,30s`), each with a unit.
pub fn parse_ttls(text: &str) -> Result<Vec<Duration>, FlagError> {
    const FLAG: &str = "--ttl";
    let mut out = Vec::new();
    for part in text.split(',') {
        let d = parse_duration(part).map_err(|e| flag_err(FLAG, text, e.to_string()))?;
        if d < Duration::from_millis(100) || d > Duration::from_secs(600) {
            return Err(flag_err(
                FLAG,
                text,
                format!(
                    "{} is outside the server's 100ms..10m range",
                    format_duration(d)
                ),
            ));
        }
        out.push(d);
    }
    Ok(out)
}

/// A positive duration flag (`--duration 10s`).
pub fn parse_positive_duration(flag: &'static str, text: &str) -> Result<Duration, FlagError> {
    let d = parse_duration(text).map_err(|e| flag_err(flag, text, e.to_string()))?;
    if d.is_zero() {
        return Err(flag_err(flag, text, "must be greater than 0"));
    }
    Ok(d)
}

/// `--server-pause EVERY:FOR`: SIGSTOP the lock-server for FOR, every EVERY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseSpec {
    /// Time between the starts of two pauses.
    pub every: Duration,
    /// How long each pause lasts.
    pub pause_for: Duration,
}

impl std::fmt::Display for PauseSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}",
            format_duration(self.every),
            format_duration(self.pause_for)
        )
    }
}

/// Parses `EVERY:FOR`, e.g. `2s:300ms`; FOR must be shorter than EVERY.
pub fn parse_pause(text: &str) -> Result<PauseSpec, FlagError> {
    const FLAG: &str = "--server-pause";
    let (every, pause_for) = text
        .split_once(':')
        .ok_or_else(|| flag_err(FLAG, text, "expected EVERY:FOR, e.g. 2s:300ms"))?;
    let every = parse_positive_duration(FLAG, every)?;
    let pause_for = parse_positive_duration(FLAG, pause_for)?;
    if pause_for >= every {
        return Err(flag_err(FLAG, text, "FOR must be shorter than EVERY"));
    }
    Ok(PauseSpec { every, pause_for })
}

/// The margin policy of a run: the C3 policies as bench flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolicySpec {
    /// `fixed`: the cell's margin.
    Fixed,
    /// `adaptive:k=K,floor=F,ceiling=C`: sized from the heartbeat RTT p99.
    Adaptive {
        /// Multiplier on p99 RTT.
        k: f64,
        /// Lowest margin.
        floor: f64,
        /// Highest margin (and the warm-up margin).
        ceiling: f64,
    },
}

impl PolicySpec {
    /// The SDK policy: `margin` for [`PolicySpec::Fixed`], the parameters otherwise.
    pub fn margin_policy(self, margin: f64) -> MarginPolicy {
        match self {
            PolicySpec::Fixed => MarginPolicy::Fixed(margin),
            PolicySpec::Adaptive { k, floor, ceiling } => {
                MarginPolicy::Adaptive { k, floor, ceiling }
            }
        }
    }

    /// The flag form of an SDK policy, with the fixed margin (or the adaptive ceiling).
    pub fn of(policy: MarginPolicy) -> (PolicySpec, f64) {
        match policy {
            MarginPolicy::Fixed(m) => (PolicySpec::Fixed, m),
            MarginPolicy::Adaptive { k, floor, ceiling } => {
                (PolicySpec::Adaptive { k, floor, ceiling }, ceiling)
            }
        }
    }
}

impl std::fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicySpec::Fixed => write!(f, "fixed"),
            PolicySpec::Adaptive { k, floor, ceiling } => {
                write!(f, "adaptive:k={k},floor={floor},ceiling={ceiling}")
            }
        }
    }
}

/// Parses `--margin-policy fixed | adaptive:k=3,floor=0.05,ceiling=0.5`.
pub fn parse_policy(text: &str) -> Result<PolicySpec, FlagError> {
    const FLAG: &str = "--margin-policy";
    let text_t = text.trim();
    if text_t == "fixed" {
        return Ok(PolicySpec::Fixed);
    }
    let Some(params) = text_t.strip_prefix("adaptive") else {
        return Err(flag_err(
            FLAG,
            text,
            "expected fixed or adaptive:k=K,floor=F,ceiling=C",
        ));
    };
    let (mut k, mut floor, mut ceiling) = (3.0, 0.05, 0.5);
    for kv in params
        .trim_start_matches(':')
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let (name, v) = kv
            .split_once('=')
            .ok_or_else(|| flag_err(FLAG, text, format!("{kv:?} is not NAME=VALUE")))?;
        match name.trim() {
            "k" => {
                k = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|k: &f64| *k > 0.0 && k.is_finite())
                    .ok_or_else(|| flag_err(FLAG, text, "k must be a positive number"))?
            }
            "floor" => floor = parse_margin(FLAG, v)?,
            "ceiling" => ceiling = parse_margin(FLAG, v)?,
            other => {
                return Err(flag_err(
                    FLAG,
                    text,
                    format!("unknown parameter {other:?}; use k, floor, ceiling"),
                ));
            }
        }
    }
    if floor > ceiling {
        return Err(flag_err(FLAG, text, "floor must not exceed ceiling"));
    }
    Ok(PolicySpec::Adaptive { k, floor, ceiling })
}

/// `--margin-policy`: a comma list of policies, e.g.
/// `fixed,adaptive:k=4,floor=0.05,ceiling=0.5`. A `NAME=VALUE` part belongs
/// to the adaptive policy before it; each policy may appear once.
pub fn parse_policies(text: &str) -> Result<Vec<PolicySpec>, FlagError> {
    const FLAG: &str = "--margin-policy";
    let mut groups: Vec<String> = Vec::new();
    for part in text.split(',').map(str::trim) {
        let starts_policy = part == "fixed" || part.starts_with("adaptive");
        match groups.last_mut() {
            Some(g) if !starts_policy && part.contains('=') => {
                g.push(',');
                g.push_str(part);
            }
            _ if starts_policy => groups.push(part.to_string()),
            _ => {
                return Err(flag_err(
                    FLAG,
                    text,
                    format!(
                        "{part:?} is not a policy; expected fixed or adaptive:k=K,floor=F,ceiling=C"
                    ),
                ));
            }
        }
    }
    let mut out: Vec<PolicySpec> = Vec::new();
    for g in groups {
        let p = parse_policy(&g)?;
        if out.contains(&p) {
            return Err(flag_err(FLAG, text, format!("names {p} twice")));
        }
        out.push(p);
    }
    Ok(out)
}

/// `--repeat N`: 1..=100 repetitions of every cell.
pub fn parse_repeat(n: u32) -> Result<u32, FlagError> {
    if !(1..=100).contains(&n) {
        return Err(flag_err(
            "--repeat",
            &n.to_string(),
            "must be 1..100 (each repeat runs every cell once more)",
        ));
    }
    Ok(n)
}

/// One cell of the grid: a (TTL, policy, margin) point and its repetition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// The lease requested (and, with the default clamps, granted).
    pub lease: Duration,
    /// The margin (for adaptive: its ceiling, used until warmed up).
    pub margin: f64,
    /// The margin policy of the cell's workers.
    pub policy: PolicySpec,
    /// The repetition index, 0-based; its seed is the run's seed + `repeat`.
    pub repeat: u32,
    /// Whether the run repeats its cells (then the id names the repeat).
    pub repeated: bool,
}

impl Cell {
    /// A fixed-margin cell, not repeated.
    pub fn fixed(lease: Duration, margin: f64) -> Self {
        Cell {
            lease,
            margin,
            policy: PolicySpec::Fixed,
            repeat: 0,
            repeated: false,
        }
    }

    /// The id of the (TTL, policy, margin) point, without the repeat:
    /// `ttl=1s_margin=0.30` (fixed) or `ttl=1s_adaptive_k=4_floor=0.05_ceiling=0.50`.
    pub fn group_id(&self) -> String {
        let ttl = format_duration(self.lease);
        match self.policy {
            PolicySpec::Fixed => format!("ttl={ttl}_margin={:.2}", self.margin),
            PolicySpec::Adaptive { k, floor, ceiling } => {
                format!("ttl={ttl}_adaptive_k={k}_floor={floor:.2}_ceiling={ceiling:.2}")
            }
        }
    }

    /// A stable id for file names and `--resume`: the [`Cell::group_id`],
    /// with `_rep=I` when the run repeats its cells.
    pub fn id(&self) -> String {
        if self.repeated {
            format!("{}_rep={}", self.group_id(), self.repeat)
        } else {
            self.group_id()
        }
    }
}

/// The (policy, TTL, margin) point of a cell id: the id without its `_rep=I` suffix.
pub fn group_of(id: &str) -> &str {
    match id.rsplit_once("_rep=") {
        Some((group, rep)) if !rep.is_empty() && rep.bytes().all(|b| b.is_ascii_digit()) => group,
        _ => id,
    }
}

/// The grid in run order: TTLs outer, then the repeats, then the policies
/// (fixed: one cell per margin; adaptive: one cell per TTL, the margin list
/// does not apply, its margin column is the ceiling). Within a TTL every
/// repeat runs all configurations before the next starts (A B A B …), so a
/// comparison is taken across interleaved runs, not runs minutes apart.
pub fn cells(
    ttls: &[Duration],
    margins: &[f64],
    policies: &[PolicySpec],
    repeats: u32,
) -> Vec<Cell> {
    let mut out = Vec::new();
    for &lease in ttls {
        for repeat in 0..repeats {
            for &policy in policies {
                let base = Cell {
                    lease,
                    margin: 0.0,
                    policy,
                    repeat,
                    repeated: repeats > 1,
                };
                match policy {
                    PolicySpec::Fixed => {
                        out.extend(margins.iter().map(|&margin| Cell { margin, ..base }))
                    }
                    PolicySpec::Adaptive { ceiling, .. } => out.push(Cell {
                        margin: ceiling,
                        ..base
                    }),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
