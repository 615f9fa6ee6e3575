//! The sweep grid and the values of bench's flags: margin ranges
//! (`0.1..0.5[:STEP]`), TTL lists (`1s,2s`), margin policies, heartbeat
//! divisors (`2,3,4`), and the `--server-pause EVERY:FOR[,FOR…]` spec. Every parse error names the flag and the
//! bad text, and the CLI exits 2 on it.

use std::time::Duration;

use fencepost_api::duration::{format_duration, parse_duration};
use fencepost_sdk::MarginPolicy;
use fencepost_sdk::lease::{HEARTBEAT_DIVISOR, HEARTBEAT_DIVISORS};

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

/// A duration flag's value (`part` of its `text`): a negative one is refused
/// as such, naming what the flag takes (`valid`), where the duration parser
/// alone would call `-1s` a unit it does not know.
pub fn parse_flag_duration(
    flag: &'static str,
    text: &str,
    part: &str,
    valid: &str,
) -> Result<Duration, FlagError> {
    if part.trim_start().starts_with('-') {
        return Err(flag_err(
            flag,
            text,
            format!("a duration cannot be negative; {valid}"),
        ));
    }
    parse_duration(part).map_err(|e| flag_err(flag, text, e.to_string()))
}

/// `--ttl`: one duration or a comma list (`1s,2s,30s`), each with a unit.
pub fn parse_ttls(text: &str) -> Result<Vec<Duration>, FlagError> {
    const FLAG: &str = "--ttl";
    let mut out = Vec::new();
    for part in text.split(',') {
        let d = parse_flag_duration(FLAG, text, part, "expected 100ms..10m")?;
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
    let d = parse_flag_duration(flag, text, text, "expected one greater than 0, e.g. 10s")?;
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

/// `--server-pause EVERY:FOR[,FOR…]`: one schedule per freeze length, a grid
/// dimension when there are several (`3s:300ms,400ms`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseAxis {
    /// Time between the starts of two pauses, the same for every length.
    pub every: Duration,
    /// The freeze lengths, each shorter than `every`, in the order given.
    pub fors: Vec<Duration>,
}

impl PauseAxis {
    /// One schedule per freeze length.
    pub fn specs(&self) -> Vec<PauseSpec> {
        let every = self.every;
        self.fors
            .iter()
            .map(|&pause_for| PauseSpec { every, pause_for })
            .collect()
    }

    /// The schedule, when there is one freeze length only.
    pub fn single(&self) -> Option<PauseSpec> {
        match self.specs().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }
}

impl From<PauseSpec> for PauseAxis {
    fn from(p: PauseSpec) -> Self {
        PauseAxis {
            every: p.every,
            fors: vec![p.pause_for],
        }
    }
}

impl std::fmt::Display for PauseAxis {
    /// `EVERY:FOR[,FOR…]`; one length prints as its [`PauseSpec`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fors: Vec<String> = self.fors.iter().map(|d| format_duration(*d)).collect();
        write!(f, "{}:{}", format_duration(self.every), fors.join(","))
    }
}

/// Parses `EVERY:FOR[,FOR…]`, e.g. `3s:300ms,400ms`: every FOR shorter than
/// EVERY, none twice. An error names the flag and the value at fault.
pub fn parse_pause_axis(text: &str) -> Result<PauseAxis, FlagError> {
    const FLAG: &str = "--server-pause";
    let (every, fors) = text
        .split_once(':')
        .ok_or_else(|| flag_err(FLAG, text, "expected EVERY:FOR[,FOR…], e.g. 3s:300ms,400ms"))?;
    let every = parse_positive_duration(FLAG, every)?;
    let mut out: Vec<Duration> = Vec::new();
    for part in fors.split(',') {
        let d = parse_positive_duration(FLAG, part)?;
        if d >= every {
            return Err(flag_err(
                FLAG,
                text,
                format!(
                    "FOR {} must be shorter than EVERY {}",
                    part.trim(),
                    format_duration(every)
                ),
            ));
        }
        if out.contains(&d) {
            return Err(flag_err(
                FLAG,
                text,
                format!("names FOR {} twice", part.trim()),
            ));
        }
        out.push(d);
    }
    Ok(PauseAxis { every, fors: out })
}

/// `--heartbeat-divisor`: one whole number k or a comma list (`2,3,4`), each
/// in the SDK's accepted range (2..=10), none twice.
pub fn parse_divisors(text: &str) -> Result<Vec<u32>, FlagError> {
    const FLAG: &str = "--heartbeat-divisor";
    let mut out = Vec::new();
    for part in text.split(',') {
        let k = part
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|k| HEARTBEAT_DIVISORS.contains(k))
            .ok_or_else(|| {
                flag_err(
                    FLAG,
                    text,
                    format!("{:?} is not a whole number 2..10", part.trim()),
                )
            })?;
        if out.contains(&k) {
            return Err(flag_err(FLAG, text, format!("names {k} twice")));
        }
        out.push(k);
    }
    Ok(out)
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

/// One cell of the grid: a (TTL, policy, margin, divisor, freeze) point and
/// its repetition.
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
    /// The heartbeat divisor k of the cell's sessions (`--heartbeat-divisor`).
    pub heartbeat_divisor: u32,
    /// The lock-server's freeze schedule (`--server-pause`), if any.
    pub server_pause: Option<PauseSpec>,
    /// Whether the run gave several freeze lengths (then the id names this one's).
    pub freeze_axis: bool,
}

impl Cell {
    /// A fixed-margin cell, not repeated, at the default divisor, no freeze.
    pub fn fixed(lease: Duration, margin: f64) -> Self {
        Cell {
            lease,
            margin,
            policy: PolicySpec::Fixed,
            repeat: 0,
            repeated: false,
            heartbeat_divisor: HEARTBEAT_DIVISOR,
            server_pause: None,
            freeze_axis: false,
        }
    }

    /// The id of the cell's point, without the repeat: `ttl=1s_margin=0.30`
    /// (fixed) or `ttl=1s_adaptive_k=4_floor=0.05_ceiling=0.50`, then `_k=4`
    /// for a heartbeat divisor other than 3 and `_freeze=400ms` when the run
    /// has several freeze lengths. At the default divisor and one freeze
    /// length (or none) the ids are those of runs from before these axes.
    pub fn group_id(&self) -> String {
        let ttl = format_duration(self.lease);
        let mut id = match self.policy {
            PolicySpec::Fixed => format!("ttl={ttl}_margin={:.2}", self.margin),
            PolicySpec::Adaptive { k, floor, ceiling } => {
                format!("ttl={ttl}_adaptive_k={k}_floor={floor:.2}_ceiling={ceiling:.2}")
            }
        };
        if self.heartbeat_divisor != HEARTBEAT_DIVISOR {
            id.push_str(&format!("_k={}", self.heartbeat_divisor));
        }
        if let Some(p) = self.server_pause.filter(|_| self.freeze_axis) {
            id.push_str(&format!("_freeze={}", format_duration(p.pause_for)));
        }
        id
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

/// The grid's dimensions beyond (TTL, policy, margin): heartbeat divisors
/// and the freeze lengths of `--server-pause`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axes {
    /// `--heartbeat-divisor`: at least one.
    pub divisors: Vec<u32>,
    /// `--server-pause`: no freeze, or one schedule per freeze length.
    pub pause: Option<PauseAxis>,
}

impl Default for Axes {
    /// The default divisor (3), no freeze.
    fn default() -> Self {
        Axes {
            divisors: vec![HEARTBEAT_DIVISOR],
            pause: None,
        }
    }
}

/// [`cells_with`] at the default [`Axes`].
pub fn cells(
    ttls: &[Duration],
    margins: &[f64],
    policies: &[PolicySpec],
    repeats: u32,
) -> Vec<Cell> {
    cells_with(ttls, margins, policies, repeats, &Axes::default())
}

/// The grid in run order: TTLs outer, then the repeats, then the policies
/// (fixed: one cell per margin; adaptive: one cell per TTL, the margin list
/// does not apply, its margin column is the ceiling), then the divisors,
/// then the freeze lengths. Within a TTL every repeat runs all
/// configurations before the next starts (A B A B …), so a comparison is
/// taken across interleaved runs, not runs minutes apart.
pub fn cells_with(
    ttls: &[Duration],
    margins: &[f64],
    policies: &[PolicySpec],
    repeats: u32,
    axes: &Axes,
) -> Vec<Cell> {
    let pauses: Vec<Option<PauseSpec>> = match &axes.pause {
        Some(a) => a.specs().into_iter().map(Some).collect(),
        None => vec![None],
    };
    let mut out = Vec::new();
    for &lease in ttls {
        for repeat in 0..repeats {
            for &policy in policies {
                let points: Vec<f64> = match policy {
                    PolicySpec::Fixed => margins.to_vec(),
                    PolicySpec::Adaptive { ceiling, .. } => vec![ceiling],
                };
                for margin in points {
                    for &heartbeat_divisor in &axes.divisors {
                        out.extend(pauses.iter().map(|&server_pause| Cell {
                            lease,
                            margin,
                            policy,
                            repeat,
                            repeated: repeats > 1,
                            heartbeat_divisor,
                            server_pause,
                            freeze_axis: pauses.len() > 1,
                        }));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
