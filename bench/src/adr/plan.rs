//! The evidence plan of `bench adr`: the conditions every step runs under
//! (the network, the freezes, the adaptive policy), the sizes of the full
//! and the `--quick` plan, and [`plan`], the steps in order with those this
//! build or machine cannot run marked with the reason.

use std::path::{Path, PathBuf};

use bench_report::adr::pack::{Program, Step};

/// The realistic network the sweeps run under (`--net-delay`, round trip,
/// not scaled with the lease): a log-normal with a 2 ms median and a 40 ms
/// p99 — a cross-zone path in one cloud region with a congested tail (a
/// same-zone path is ~0.2–0.5 ms; a p99 of tens of ms is what a busy node's
/// network and a loaded kernel add). On a 1 s scaled lease it is 30× harsher
/// relative to the lease than in production, so trigger 1 is tested hard.
pub const NET_DELAY: &str = "lognormal:p50=2ms,p99=40ms";
/// The freeze sweep's `--server-pause`: the lock-server SIGSTOPped every 3 s
/// for each of four lengths, one cell per length.
pub const SERVER_PAUSE: &str = "3s:300ms,400ms,500ms,600ms";
/// The freeze sweep's heartbeat divisors (ADR-006's 3 and the next).
pub const FREEZE_DIVISORS: &str = "3,4";
/// The adaptive policy compared with the fixed margins.
pub const ADAPTIVE_POLICY: &str = "adaptive:k=3,floor=0.05,ceiling=0.5";
/// The long-hold step's payout work (`--hold`, production time): against
/// the 30 s production lease a median of 20 s and a p99 of 60 s, so a share
/// of payouts outlive their lease and finish only on renewals.
pub const LONG_HOLD: &str = "lognormal:p50=20s,p99=60s";
/// The long-hold step's steps per payout (`--steps`).
pub const LONG_HOLD_STEPS: &str = "3";
/// The long-hold step's margins (its TTL is 1 s).
pub const LONG_HOLD_MARGINS: &str = "0.1,0.3,0.5";
/// The margin the clock experiment's second run uses (ADR-006's default).
pub const ADR_MARGIN: &str = "0.3";

/// What this build and machine offer; decides which steps can run.
#[derive(Clone, Debug, Default)]
pub struct Features {
    /// `bench sweep --help` lists `--repeat`.
    pub sweep_repeat: bool,
    /// The `experiments` binary, if found.
    pub experiments: Option<PathBuf>,
    /// Subcommands `experiments --help` lists.
    pub experiment_commands: Vec<String>,
    /// `etcd` is on PATH.
    pub etcd: bool,
    /// `redis-server` is on PATH (or `FENCEPOST_REDIS` names it).
    pub redis: bool,
}

/// The sizes of a plan. The full plan's are set by what the proposed
/// revision needs (`bench_report::adr::revision`): 10,000 corrected samples
/// behind every binding p99, and 3 ÷ tolerance (3,000 at 0.1 %) freeze
/// exposures behind every (margin, divisor, freeze) of the freeze sweep. The
/// idle sessions (`--sessions`) give both.
struct Sizes {
    margins: &'static str,
    ttls: &'static str,
    duration: &'static str,
    workers: &'static str,
    repeat: &'static str,
    /// Idle sessions per cell of the main and adaptive sweeps.
    sessions: &'static str,
    /// Margins, TTL and freezes of the freeze sweep.
    pause_margins: &'static str,
    pause_ttl: &'static str,
    pause_spec: &'static str,
    /// Window and idle sessions of the freeze sweep's cells: a 12 s window
    /// holds 4 freezes of a 3 s period, × (16 workers + 800 sessions) =
    /// 3,264 exposures per cell, above the 3,000 a 0.1 % verdict needs.
    pause_duration: &'static str,
    pause_sessions: &'static str,
    /// Worker processes of the throttle experiment.
    throttle_workers: &'static str,
    pauses: &'static str,
    clock_cases: &'static str,
    throttle_duration: &'static str,
    peer: [&'static str; 6],
}

const FULL: Sizes = Sizes {
    margins: "0.1..0.5:0.05",
    ttls: "1s,2s,5s",
    duration: "6s",
    workers: "16",
    repeat: "3",
    sessions: "100",
    pause_margins: "0.2,0.3,0.4",
    pause_ttl: "2s",
    pause_spec: SERVER_PAUSE,
    pause_duration: "12s",
    pause_sessions: "800",
    throttle_workers: "16",
    pauses: "5",
    clock_cases: "1000",
    throttle_duration: "90s",
    peer: ["--duration", "3s", "--concurrency", "16", "--repeat", "3"],
};

const QUICK: Sizes = Sizes {
    margins: "0.1,0.3,0.5",
    ttls: "1s,2s",
    duration: "3s",
    workers: "8",
    repeat: "1",
    sessions: "20",
    pause_margins: "0.3",
    pause_ttl: "2s",
    pause_spec: "3s:400ms",
    pause_duration: "6s",
    pause_sessions: "20",
    throttle_workers: "4",
    pauses: "2",
    clock_cases: "200",
    throttle_duration: "4s",
    peer: ["--duration", "1s", "--concurrency", "16", "--repeat", "1"],
};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The evidence plan for `quick` on a build and machine with `features`:
/// every step, in order, those that cannot run marked with the reason.
/// Step names are the subdirectories the document reads: the sweeps
/// ([`sweep_steps`]), the experiments ([`experiment_steps`]), then etcd
/// ([`peer_step`]); every step gets `--seed SEED --out DIR/<name>`.
pub fn plan(quick: bool, seed: u64, out: &Path, features: &Features) -> Vec<Step> {
    let s = if quick { &QUICK } else { &FULL };
    let seed = seed.to_string();
    let dir = |name: &str| out.join(name).display().to_string();
    let mut steps = sweep_steps(s, &seed, &dir, features);
    steps.extend(experiment_steps(s, &seed, &dir, features));
    steps.extend(service_pause_steps(s, &seed, &dir, features));
    steps.push(peer_step(s, &seed, &dir("peer"), features));
    steps
}

/// The four `bench sweep` steps under the realistic network: the fixed
/// margins, the freezes, the adaptive policy, long payouts.
fn sweep_steps(
    s: &Sizes,
    seed: &str,
    dir: &dyn Fn(&str) -> String,
    features: &Features,
) -> Vec<Step> {
    // (name, title, extra flags, (margins, TTLs), (duration, sessions))
    type Sweep<'a> = (
        &'a str,
        &'a str,
        Vec<&'a str>,
        (&'a str, &'a str),
        (&'a str, &'a str),
    );
    let sweeps: [Sweep<'_>; 4] = [
        (
            "sweep",
            "fixed margins × TTLs under the realistic network delay",
            vec![],
            (s.margins, s.ttls),
            (s.duration, s.sessions),
        ),
        (
            "freeze",
            "the lock-server frozen: margins × heartbeat divisors × freeze lengths",
            vec![
                "--heartbeat-divisor",
                FREEZE_DIVISORS,
                "--server-pause",
                s.pause_spec,
            ],
            (s.pause_margins, s.pause_ttl),
            (s.pause_duration, s.pause_sessions),
        ),
        (
            "adaptive",
            "the adaptive margin (V2) at the same TTLs",
            vec!["--margin-policy", ADAPTIVE_POLICY],
            ("0.5", s.ttls),
            (s.duration, s.sessions),
        ),
        (
            "long-hold",
            "long payouts: renewals and abandonment mid-payout per margin",
            vec!["--hold", LONG_HOLD, "--steps", LONG_HOLD_STEPS],
            (LONG_HOLD_MARGINS, "1s"),
            (s.duration, "0"),
        ),
    ];
    sweeps
        .into_iter()
        .map(
            |(name, title, extra, (margins, ttls), (duration, sessions))| {
                let mut args = strings(&[
                    "sweep",
                    "--margin",
                    margins,
                    "--ttl",
                    ttls,
                    "--duration",
                    duration,
                    "--workers",
                    s.workers,
                    "--sessions",
                    sessions,
                    "--net-delay",
                    NET_DELAY,
                    "--seed",
                    seed,
                    "--out",
                    &dir(name),
                ]);
                args.extend(strings(&extra));
                if features.sweep_repeat && s.repeat != "1" {
                    args.extend(strings(&["--repeat", s.repeat]));
                }
                Step {
                    name: name.into(),
                    title: title.into(),
                    program: Program::Bench,
                    args,
                    unavailable: None,
                }
            },
        )
        .collect()
}

/// The `experiments` steps: a worker frozen in its critical section (client
/// check on and off), the clock, the CPU throttle, failover and chaos; each
/// not available without the binary or its subcommand.
fn experiment_steps(
    s: &Sizes,
    seed: &str,
    dir: &dyn Fn(&str) -> String,
    features: &Features,
) -> Vec<Step> {
    // (name, title, the experiment's arguments before --seed and --out)
    let experiments: [(&str, &str, Vec<&str>); 7] = [
        (
            "pause",
            "a worker frozen in its critical section, client check on (trigger 4)",
            vec!["pause", "--ttl", "1s", "--pauses", s.pauses],
        ),
        (
            "pause-uc03",
            "the same with the client check off (UC-03: the fences catch it)",
            vec![
                "pause",
                "--ttl",
                "1s",
                "--pauses",
                s.pauses,
                "--disable-client-check",
            ],
        ),
        (
            "clock",
            "simulated clock offset, drift, quantisation and steps vs the server's grace (margin 0)",
            vec!["clock", "--cases", s.clock_cases],
        ),
        (
            "clock-margin",
            "the same with ADR-006's client margin",
            vec!["clock", "--cases", s.clock_cases, "--margin", ADR_MARGIN],
        ),
        (
            "throttle",
            "worker processes under a 10 % CPU quota vs unthrottled (trigger 5)",
            vec![
                "throttle",
                "--quota",
                "10%",
                "--ttl",
                "1s",
                "--duration",
                s.throttle_duration,
                "--workers",
                s.throttle_workers,
            ],
        ),
        (
            "failover",
            "lock-server failover through kill -9, SIGSTOP and a database restart",
            vec!["failover"],
        ),
        (
            "chaos",
            "seeded fault schedules, every operation checked",
            vec!["chaos"],
        ),
    ];
    let no_experiments = features
        .experiments
        .is_none()
        .then(|| "the experiments binary was not found next to bench (cargo build --release -p experiments)".to_string());
    experiments
        .into_iter()
        .map(|(name, title, head)| {
            let mut args = strings(&head);
            args.extend(strings(&["--seed", seed, "--out", &dir(name)]));
            let sub = head[0];
            let unavailable = no_experiments.clone().or_else(|| {
                (!features.experiment_commands.iter().any(|c| c == sub))
                    .then(|| format!("`experiments {sub}` does not exist in this build"))
            });
            Step {
                name: name.into(),
                title: title.into(),
                program: Program::Experiments,
                args,
                unavailable,
            }
        })
        .collect()
}

/// The `pause` and `pause-uc03` steps again on the other lock services
/// (`pause-SERVICE`, `pause-SERVICE-uc03`), the same schedule and seed, for
/// the lock services side by side (`bench_report::lock_services`); each not
/// available without the experiments binary or the service's server.
fn service_pause_steps(
    s: &Sizes,
    seed: &str,
    dir: &dyn Fn(&str) -> String,
    features: &Features,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for (service, here) in [
        (
            "etcd",
            features.etcd.then_some(()).ok_or("`etcd` is not on PATH"),
        ),
        (
            "redis",
            features
                .redis
                .then_some(())
                .ok_or("`redis-server` is not on PATH"),
        ),
        (
            "redlock",
            features
                .redis
                .then_some(())
                .ok_or("`redis-server` is not on PATH"),
        ),
    ] {
        for (suffix, check) in [("", "on"), ("-uc03", "off")] {
            let name = format!("pause-{service}{suffix}");
            let mut args = strings(&["pause", "--ttl", "1s", "--pauses", s.pauses]);
            args.extend(strings(&["--backend", service]));
            if check == "off" {
                args.push("--disable-client-check".into());
            }
            args.extend(strings(&["--seed", seed, "--out", &dir(&name)]));
            let unavailable = match (&features.experiments, here) {
                (None, _) => Some(
                    "the experiments binary was not found next to bench (cargo build --release -p experiments)"
                        .to_string(),
                ),
                (Some(_), Err(why)) => Some(why.to_string()),
                (Some(_), Ok(())) => None,
            };
            steps.push(Step {
                name,
                title: format!(
                    "the same worker frozen, on {service}, client check {check} (lock services side by side)"
                ),
                program: Program::Experiments,
                args,
                unavailable,
            });
        }
    }
    steps
}

/// `bench peer`: fencepost against etcd on this machine; not available
/// without `etcd` on PATH.
fn peer_step(s: &Sizes, seed: &str, dir: &str, features: &Features) -> Step {
    let mut args = strings(&["peer"]);
    args.extend(strings(&s.peer));
    args.extend(strings(&["--seed", seed, "--out", dir]));
    Step {
        name: "peer".into(),
        title: "fencepost vs etcd on this machine (bench peer)".into(),
        program: Program::Bench,
        args,
        unavailable: (!features.etcd).then(|| "`etcd` is not on PATH".to_string()),
    }
}
