//! `bench adr [--quick] --out DIR`: the ADR-006 revision pack (issue 17).
//!
//! It runs the documented evidence plan ([`plan`]) end to end, each step a
//! child process of this binary (`bench sweep`, `bench peer`) or of the
//! `experiments` binary next to it, each into its own subdirectory of `DIR`,
//! and then writes `DIR/adr-006-evidence.md` as a pure function of the run
//! directory ([`evidence::load`] + [`evidence::render`]). A step whose command
//! or flag this build does not have (the experiments binary, `etcd` on PATH,
//! `bench sweep --repeat`, `experiments failover|chaos`) is recorded as
//! `not_available` with the reason, and its section of the document says
//! "not measured in this pack" — nothing is filled in.
//!
//! `DIR/adr-manifest.json` records the command, the seed (every step gets
//! it), each step's argv, status, exit code and wall seconds. A step that
//! fails does not stop the plan (its section says so); Ctrl-C stops it after
//! the running step has written what it finished, and the document is still
//! rendered from what exists. `--render-only` re-renders the document from an
//! existing directory (the committed reference run, after a code change).
//!
//! Modules: [`evidence`] (the document), [`revision`] (the proposed ADR-006
//! §6.2/§6.5 numbers, derived from the data).

use bench_report::adr::evidence::{self, LoadError};
pub use bench_report::adr::pack::{
    ADR_MANIFEST, AdrManifest, EVIDENCE_MD, Program, Status, Step, StepRecord,
};

use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Args;

use bench_analysis::manifest::now_rfc3339;

/// The realistic network the sweeps run under (`--net-delay`, round trip,
/// not scaled with the lease): a log-normal with a 2 ms median and a 40 ms
/// p99 — a cross-zone path in one cloud region with a congested tail (a
/// same-zone path is ~0.2–0.5 ms; a p99 of tens of ms is what a busy node's
/// network and a loaded kernel add). On a 1 s scaled lease it is 30× harsher
/// relative to the lease than in production, so trigger 1 is tested hard.
pub const NET_DELAY: &str = "lognormal:p50=2ms,p99=40ms";
/// The one `--server-pause` condition: the lock-server SIGSTOPped 400 ms every 3 s.
pub const SERVER_PAUSE: &str = "3s:400ms";
/// The adaptive policy compared with the fixed margins.
pub const ADAPTIVE_POLICY: &str = "adaptive:k=3,floor=0.05,ceiling=0.5";
/// The margin the clock experiment's second run uses (ADR-006's default).
pub const ADR_MARGIN: &str = "0.3";

/// The options of `bench adr`.
#[derive(Debug, Args, Clone)]
pub struct AdrArgs {
    /// A small plan (3 margins × 2 TTLs, short windows, one repeat) that runs
    /// in a few minutes and writes the same document shape.
    #[arg(long)]
    pub quick: bool,

    /// The pack's directory: one subdirectory per step and adr-006-evidence.md.
    #[arg(long)]
    pub out: PathBuf,

    /// Seed of every step; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Only re-render adr-006-evidence.md from an existing --out directory.
    #[arg(long)]
    pub render_only: bool,

    /// A heartbeat RTT distribution measured in production, for the
    /// production condition (the projection and the proposed revision)
    /// instead of the lab's RTTs: `prometheus:URL` (the fleet's
    /// lock_heartbeat_rtt_corrected_seconds buckets over --window), or a file
    /// of the SDK's /metrics text (scrapes concatenated are summed). Written
    /// into --out as production-rtt.json; works with --render-only.
    #[arg(long, value_name = "SRC")]
    pub rtt_from: Option<String>,

    /// With --rtt-from prometheus:URL: the window the buckets' increase is
    /// taken over.
    #[arg(long, default_value = "1h", requires = "rtt_from")]
    pub window: String,

    /// With --rtt-from prometheus:URL: label matchers of the SDK's series, e.g.
    /// namespace="payments".
    #[arg(long, default_value = "", requires = "rtt_from")]
    pub selector: String,

    /// Skip steps adr-manifest.json in --out records as ok (continue a pack).
    #[arg(long)]
    pub resume: bool,

    /// Delete the working files afterwards (per-cell service logs and stores
    /// under cells/, SQLite files, bench peer's server data, chaos's per-run
    /// histories and logs — chaos.json keeps each run's seed and schedule,
    /// `experiments chaos --only-run I` replays one): what is left is
    /// the committable pack (data/reference/ is made with it).
    #[arg(long)]
    pub prune: bool,
}

/// Deletes the working files of a pack (see `--prune`); returns the bytes freed.
pub fn prune(dir: &Path) -> std::io::Result<u64> {
    fn size(p: &Path) -> u64 {
        if p.is_dir() {
            std::fs::read_dir(p)
                .map(|rd| rd.flatten().map(|e| size(&e.path())).sum())
                .unwrap_or(0)
        } else {
            p.metadata().map(|m| m.len()).unwrap_or(0)
        }
    }
    let mut freed = 0;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let name = entry.file_name();
            let parent_is_peer = dir.file_name().is_some_and(|n| n == "peer");
            let parent_is_chaos = dir.file_name().is_some_and(|n| n == "chaos");
            // chaos/runs/: each run's history and service logs; chaos.json
            // keeps every run's seed and schedule (`--only-run I` replays it).
            if name == "cells"
                || (name == "servers" && parent_is_peer)
                || (name == "runs" && parent_is_chaos)
            {
                freed += size(&path);
                std::fs::remove_dir_all(&path)?;
            } else {
                freed += prune(&path)?;
            }
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".sqlite") || n.contains(".sqlite-"))
        {
            freed += size(&path);
            std::fs::remove_file(&path)?;
        }
    }
    Ok(freed)
}

/// What this build and machine offer; decides which steps can run.
#[derive(Clone, Debug, Default)]
pub struct Features {
    /// `bench sweep --help` lists `--repeat` (issue 13).
    pub sweep_repeat: bool,
    /// The `experiments` binary, if found.
    pub experiments: Option<PathBuf>,
    /// Subcommands `experiments --help` lists.
    pub experiment_commands: Vec<String>,
    /// `etcd` is on PATH.
    pub etcd: bool,
}

/// The sizes of a plan. The full plan's are set by the sample floors the
/// proposed revision needs (`bench_report::adr::revision`): 10,000 corrected
/// samples behind every binding p99, and 10⁶ (1,000 beyond the rank) behind
/// the p99.9 of the server-pause stall. The idle sessions (`--sessions`) give
/// them; docs/evidence.md has the arithmetic and the time budget.
struct Sizes {
    margins: &'static str,
    ttls: &'static str,
    duration: &'static str,
    workers: &'static str,
    repeat: &'static str,
    /// Idle sessions per cell of the main and adaptive sweeps.
    sessions: &'static str,
    pause_margins: &'static str,
    pause_ttl: &'static str,
    /// Window and idle sessions of the server-pause sweep's cells.
    pause_duration: &'static str,
    pause_sessions: &'static str,
    /// The server-pause cells' sequential stop (`--min-samples`,
    /// `--max-duration`): each cell runs on until its corrected histogram
    /// holds a fifteenth of the stall's 10⁶ floor; `None` for no stop.
    pause_min_samples: Option<[&'static str; 2]>,
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
    pause_margins: "0.1..0.5:0.1",
    pause_ttl: "2s",
    pause_duration: "35s",
    pause_sessions: "800",
    pause_min_samples: Some(["70000", "120s"]),
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
    pause_duration: "3s",
    pause_sessions: "20",
    pause_min_samples: None,
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
/// Step names are the subdirectories the document reads.
pub fn plan(quick: bool, seed: u64, out: &Path, features: &Features) -> Vec<Step> {
    let s = if quick { &QUICK } else { &FULL };
    let seed = seed.to_string();
    let dir = |name: &str| out.join(name).display().to_string();
    let mut steps = Vec::new();
    let mut sweep = |name: &str,
                     title: &str,
                     extra: &[&str],
                     (margins, ttls): (&str, &str),
                     (duration, sessions): (&str, &str)| {
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
            &seed,
            "--out",
            &dir(name),
        ]);
        args.extend(strings(extra));
        if features.sweep_repeat && s.repeat != "1" {
            args.extend(strings(&["--repeat", s.repeat]));
        }
        steps.push(Step {
            name: name.into(),
            title: title.into(),
            program: Program::Bench,
            args,
            unavailable: None,
        });
    };
    sweep(
        "sweep",
        "fixed margins × TTLs under the realistic network delay",
        &[],
        (s.margins, s.ttls),
        (s.duration, s.sessions),
    );
    let mut pause_extra = vec!["--server-pause", SERVER_PAUSE];
    if let Some([k, max]) = s.pause_min_samples {
        pause_extra.extend(["--min-samples", k, "--max-duration", max]);
    }
    sweep(
        "sweep-pause",
        "the same with the lock-server paused (one --server-pause condition)",
        &pause_extra,
        (s.pause_margins, s.pause_ttl),
        (s.pause_duration, s.pause_sessions),
    );
    sweep(
        "adaptive",
        "the adaptive margin (V2) at the same TTLs",
        &["--margin-policy", ADAPTIVE_POLICY],
        ("0.5", s.ttls),
        (s.duration, s.sessions),
    );
    let no_experiments = features
        .experiments
        .is_none()
        .then(|| "the experiments binary was not found next to bench (cargo build --release -p experiments)".to_string());
    let mut experiment = |name: &str, title: &str, args: Vec<String>| {
        let sub = args[0].clone();
        let unavailable = no_experiments.clone().or_else(|| {
            (!features.experiment_commands.contains(&sub))
                .then(|| format!("`experiments {sub}` does not exist in this build"))
        });
        steps.push(Step {
            name: name.into(),
            title: title.into(),
            program: Program::Experiments,
            args,
            unavailable,
        });
    };
    experiment(
        "pause",
        "a worker frozen in its critical section, client check on (trigger 4)",
        strings(&[
            "pause",
            "--ttl",
            "1s",
            "--pauses",
            s.pauses,
            "--seed",
            &seed,
            "--out",
            &dir("pause"),
        ]),
    );
    experiment(
        "pause-uc03",
        "the same with the client check off (UC-03: the fences catch it)",
        strings(&[
            "pause",
            "--ttl",
            "1s",
            "--pauses",
            s.pauses,
            "--disable-client-check",
            "--seed",
            &seed,
            "--out",
            &dir("pause-uc03"),
        ]),
    );
    experiment(
        "clock",
        "simulated clock offset, drift, quantisation and steps vs the server's grace (margin 0)",
        strings(&[
            "clock",
            "--cases",
            s.clock_cases,
            "--seed",
            &seed,
            "--out",
            &dir("clock"),
        ]),
    );
    experiment(
        "clock-margin",
        "the same with ADR-006's client margin",
        strings(&[
            "clock",
            "--cases",
            s.clock_cases,
            "--margin",
            ADR_MARGIN,
            "--seed",
            &seed,
            "--out",
            &dir("clock-margin"),
        ]),
    );
    experiment(
        "throttle",
        "worker processes under a 10 % CPU quota vs unthrottled (trigger 5)",
        strings(&[
            "throttle",
            "--quota",
            "10%",
            "--ttl",
            "1s",
            "--duration",
            s.throttle_duration,
            "--workers",
            s.throttle_workers,
            "--seed",
            &seed,
            "--out",
            &dir("throttle"),
        ]),
    );
    experiment(
        "failover",
        "lock-server failover (issue 14)",
        strings(&["failover", "--seed", &seed, "--out", &dir("failover")]),
    );
    experiment(
        "chaos",
        "chaos schedule (issue 16)",
        strings(&["chaos", "--seed", &seed, "--out", &dir("chaos")]),
    );
    let mut peer = strings(&["peer"]);
    peer.extend(strings(&s.peer));
    peer.extend(strings(&["--seed", &seed, "--out", &dir("peer")]));
    steps.push(Step {
        name: "peer".into(),
        title: "fencepost vs etcd on this machine (bench peer)".into(),
        program: Program::Bench,
        args: peer,
        unavailable: (!features.etcd).then(|| "`etcd` is not on PATH".to_string()),
    });
    steps
}

/// Probes this build and machine for [`Features`].
pub fn probe() -> Features {
    let bench = std::env::current_exe().ok();
    let help = |exe: &Path, args: &[&str]| {
        std::process::Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let sweep_repeat = bench
        .as_deref()
        .is_some_and(|b| help(b, &["sweep", "--help"]).contains("--repeat"));
    let experiments = std::env::var_os("FENCEPOST_EXPERIMENTS_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            bench
                .as_deref()
                .and_then(|b| b.parent())
                .map(|d| d.join("experiments"))
        })
        .filter(|p| p.is_file());
    let experiment_commands = experiments
        .as_deref()
        .map(|e| help(e, &["--help"]))
        .map(|text| subcommands(&text))
        .unwrap_or_default();
    let etcd = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("etcd").is_file()));
    Features {
        sweep_repeat,
        experiments,
        experiment_commands,
        etcd,
    }
}

/// The subcommand names of a clap `--help` text (its `Commands:` section).
pub fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.trim_start().starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// `bench adr`: its exit code (0 every available step ok, 1 a step failed,
/// 2 bad input, 130 interrupted).
pub fn main(args: &AdrArgs) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(execute(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench adr: {}", bench_core::error::Chain(&e));
            1
        }
    }
}

/// Why `bench adr` stopped (exit 1); each variant prints its cause as it is.
#[derive(Debug, thiserror::Error)]
pub enum AdrError {
    /// The pack directory could not be read into the document's input.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A file of the pack could not be written, or a step's process not run.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// `adr-manifest.json` could not be written as JSON (a bug).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Renders the document from `dir` and prints where it is.
fn render(dir: &Path) -> Result<PathBuf, AdrError> {
    let ev = evidence::load(dir)?;
    let path = dir.join(EVIDENCE_MD);
    std::fs::write(&path, evidence::render(&ev))?;
    println!("bench adr: evidence document {}", path.display());
    Ok(path)
}

async fn execute(args: &AdrArgs) -> Result<i32, AdrError> {
    let out = &args.out;
    if args.render_only {
        if !out.join(ADR_MANIFEST).is_file() {
            eprintln!(
                "bench adr: --render-only needs a pack directory; {} has no {ADR_MANIFEST}",
                out.display()
            );
            return Ok(2);
        }
        if args.prune {
            prune(out)?;
        }
        render(out)?;
        return Ok(0);
    }
    std::fs::create_dir_all(out)?;
    let previous: Option<AdrManifest> = if args.resume {
        std::fs::read(out.join(ADR_MANIFEST))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    } else {
        None
    };
    let seed = args
        .seed
        .or(previous.as_ref().map(|p| p.seed))
        .unwrap_or_else(rand::random);
    let features = probe();
    let steps = plan(args.quick, seed, out, &features);
    let mut command = format!(
        "bench adr{} --seed {seed} --out {}",
        if args.quick { " --quick" } else { "" },
        out.display()
    );
    if args.prune {
        command.push_str(" --prune");
    }
    let mut manifest = AdrManifest {
        command,
        seed,
        quick: args.quick,
        net_delay: NET_DELAY.into(),
        server_pause: SERVER_PAUSE.into(),
        // A resumed pack started when its first run did.
        started_at: previous
            .as_ref()
            .map_or_else(now_rfc3339, |p| p.started_at.clone()),
        finished_at: None,
        steps: steps
            .iter()
            .map(|s| StepRecord {
                step: s.clone(),
                status: Status::NotRun,
                exit_code: None,
                seconds: 0.0,
                note: String::new(),
            })
            .collect(),
    };
    let write = |m: &AdrManifest| -> Result<(), AdrError> {
        std::fs::write(out.join(ADR_MANIFEST), serde_json::to_vec_pretty(m)?)?;
        Ok(())
    };
    write(&manifest)?;
    eprintln!(
        "bench adr: seed {seed} (rerun with --seed {seed}), {} step(s), pack in {}",
        steps.len(),
        out.display()
    );
    let total = steps.len();
    let mut interrupted = false;
    let mut failed = false;
    for i in 0..total {
        let step = manifest.steps[i].step.clone();
        let label = format!("[{}/{total}] {}", i + 1, step.name);
        if let Some(prev) = previous.as_ref().and_then(|p| {
            p.steps
                .iter()
                .find(|r| r.step == step && r.status == Status::Ok)
        }) {
            eprintln!("bench adr: {label}: ok in a previous run, skipped (--resume)");
            manifest.steps[i] = prev.clone();
            continue;
        }
        if let Some(why) = &step.unavailable {
            eprintln!("bench adr: {label}: not available: {why}");
            manifest.steps[i].status = Status::NotAvailable;
            manifest.steps[i].note = why.clone();
            write(&manifest)?;
            continue;
        }
        let exe = match step.program {
            Program::Bench => std::env::current_exe()?,
            Program::Experiments => features
                .experiments
                .clone()
                .expect("an experiments step is available only with the binary"),
        };
        eprintln!(
            "bench adr: {label}: {} — {} {}",
            step.title,
            exe.display(),
            step.args.join(" ")
        );
        let started = std::time::Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args(&step.args)
            .stdin(Stdio::null())
            .kill_on_drop(false)
            .spawn()?;
        // The child shares the terminal's process group, so Ctrl-C reaches
        // it too: wait for it to write what it finished, then stop.
        let status = tokio::select! {
            s = child.wait() => s?,
            _ = tokio::signal::ctrl_c() => {
                interrupted = true;
                eprintln!("\nbench adr: interrupted; waiting for {} to stop", step.name);
                child.wait().await?
            }
        };
        let rec = &mut manifest.steps[i];
        rec.seconds = started.elapsed().as_secs_f64();
        rec.exit_code = status.code();
        rec.status = match status.code() {
            _ if interrupted => Status::Interrupted,
            Some(0) => Status::Ok,
            // experiments throttle: no cgroup can be written here.
            Some(4) if step.args[0] == "throttle" => {
                rec.note = "no CPU quota can be applied on this machine (exit 4)".into();
                Status::NotAvailable
            }
            Some(130) => {
                interrupted = true;
                Status::Interrupted
            }
            code => {
                failed = true;
                rec.note = format!(
                    "exit code {}",
                    code.map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string())
                );
                Status::Failed
            }
        };
        eprintln!(
            "bench adr: {label}: {} after {:.0} s",
            rec.status.as_str(),
            rec.seconds
        );
        write(&manifest)?;
        if interrupted {
            break;
        }
    }
    if !interrupted {
        manifest.finished_at = Some(now_rfc3339());
    }
    write(&manifest)?;
    if args.prune {
        let freed = prune(out)?;
        eprintln!(
            "bench adr: --prune removed {:.1} MB of working files",
            freed as f64 / 1e6
        );
    }
    render(out)?;
    Ok(if interrupted {
        eprintln!(
            "bench adr: interrupted; continue with: {} --resume",
            manifest.command
        );
        130
    } else if failed {
        1
    } else {
        0
    })
}
