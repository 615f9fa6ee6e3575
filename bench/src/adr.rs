//! `bench adr [--quick] --out DIR`: the ADR-006 revision pack.
//!
//! It runs the documented evidence plan ([`plan`]) end to end, each step a
//! child process of this binary (`bench sweep`, `bench peer`) or of the
//! `experiments` binary next to it, each into its own subdirectory of `DIR`,
//! and then writes `DIR/adr-006-evidence.md` as a pure function of the run
//! directory ([`evidence::write_pack`]: the document, the proposed revision
//! `DIR/adr-006-revision.md` beside it and the decision figure), judged under
//! the tolerances the `--tolerance-*` flags set ([`tolerances`]). A step whose command
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
//! Modules: `plan` (the steps and their sizes, [`plan`]), and from the
//! report crate [`evidence`] (the document) and the revision it derives.

mod plan;

pub use plan::{
    ADAPTIVE_POLICY, ADR_MARGIN, FREEZE_DIVISORS, Features, NET_DELAY, SERVER_PAUSE, plan,
};

use bench_report::adr::evidence::{self, LoadError, WriteError};
pub use bench_report::adr::pack::{
    ADR_MANIFEST, AdrManifest, EVIDENCE_MD, Program, REVISION_MD, Status, Step, StepRecord,
};
use bench_report::adr::revision::Tolerances;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Args;

use bench_analysis::manifest::now_rfc3339;

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

    /// Seed of every step (printed and recorded) [default: random, or the
    /// pack's with --resume].
    #[arg(long, value_parser = crate::values::whole::<u64>(0, u64::MAX))]
    pub seed: Option<u64>,

    /// Only re-render adr-006-evidence.md from an existing --out directory.
    #[arg(long)]
    pub render_only: bool,

    /// Tolerance: sessions lost per freeze exposure (lost ÷ freezes ×
    /// sessions open) a (margin, divisor) may show, as a fraction; a verdict
    /// needs 3 ÷ this many exposures. Works with --render-only.
    #[arg(
        long = "tolerance-lost-per-freeze",
        default_value_t = 0.001,
        value_name = "FRACTION",
        value_parser = fraction(false)
    )]
    pub tolerance_lost_per_freeze: f64,

    /// Tolerance: the longest freeze production must ride through (absolute
    /// time, e.g. 400ms). Works with --render-only [default: the longest
    /// freeze the pack's freeze cells injected].
    #[arg(long = "tolerance-freeze", value_parser = freeze_duration, value_name = "DURATION")]
    pub tolerance_freeze: Option<std::time::Duration>,

    /// Tolerance: the share of each heartbeat period D4 may refuse at the
    /// bottom of the sawtooth, as a fraction. Works with --render-only.
    #[arg(
        long = "tolerance-d4-refusal",
        default_value_t = 0.01,
        value_name = "FRACTION",
        value_parser = fraction(true)
    )]
    pub tolerance_d4_refusal: f64,

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

/// A tolerance fraction for clap: in (0, 1), or [0, 1) when `zero_ok`.
fn fraction(zero_ok: bool) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
    move |text: &str| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v < 1.0 && (*v > 0.0 || zero_ok && *v == 0.0))
            .ok_or_else(|| {
                format!(
                    "expected a fraction in {}0, 1)",
                    if zero_ok { "[" } else { "(" }
                )
            })
    }
}

/// `--tolerance-freeze`: a duration greater than 0.
fn freeze_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "expected a duration greater than 0, e.g. 400ms".to_owned())
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
            // etcd-data/, redis-data/: a lock service's store (its WAL, its
            // append-only file) beside a step's results.
            if name == "cells"
                || name == "etcd-data"
                || name == "redis-data"
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
    let redis = bench_driver::backend::redis::server::redis_binary().is_ok();
    Features {
        sweep_repeat,
        experiments,
        experiment_commands,
        etcd,
        redis,
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
    /// The documents or the decision figure could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The tolerances `args` set, or why they are out of range.
pub fn tolerances(args: &AdrArgs) -> Result<Tolerances, String> {
    let fraction = |name: &str, v: f64, zero_ok: bool| {
        if v.is_finite() && v < 1.0 && (v > 0.0 || zero_ok && v == 0.0) {
            Ok(v)
        } else {
            Err(format!(
                "--{name} {v}: a fraction in {}0, 1)",
                if zero_ok { "[" } else { "(" }
            ))
        }
    };
    Ok(Tolerances {
        lost_per_exposure: fraction(
            "tolerance-lost-per-freeze",
            args.tolerance_lost_per_freeze,
            false,
        )?,
        freeze_ms: args.tolerance_freeze.map(|d| d.as_secs_f64() * 1e3),
        d4_refusal: fraction("tolerance-d4-refusal", args.tolerance_d4_refusal, true)?,
    })
}

/// Renders the documents and the decision figure from `dir` and prints where they are.
fn render(dir: &Path, tol: &Tolerances) -> Result<PathBuf, AdrError> {
    let [evidence, revision] = evidence::write_pack(dir, tol)?;
    println!("bench adr: evidence document {}", evidence.display());
    println!("bench adr: proposed revision {}", revision.display());
    Ok(evidence)
}

/// `bench adr`: checks the tolerances, then re-renders (`--render-only`) or
/// runs the plan step by step ([`run_step`]) and renders ([`finish`]).
async fn execute(args: &AdrArgs) -> Result<i32, AdrError> {
    let tol = match tolerances(args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bench adr: {e}");
            return Ok(2);
        }
    };
    if args.render_only {
        return render_only(args, &tol);
    }
    let out = &args.out;
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
    let mut manifest = new_manifest(args, seed, &steps, previous.as_ref());
    write_manifest(out, &manifest)?;
    eprintln!(
        "bench adr: seed {seed} (rerun with --seed {seed}), {} step(s), pack in {}",
        steps.len(),
        out.display()
    );
    let (mut interrupted, mut failed) = (false, false);
    for i in 0..steps.len() {
        match run_step(i, &mut manifest, previous.as_ref(), &features, out).await? {
            StepEnd::Next => {}
            StepEnd::Failed => failed = true,
            StepEnd::Interrupted => {
                interrupted = true;
                break;
            }
        }
    }
    finish(args, &mut manifest, &tol, interrupted, failed)
}

/// `--render-only`: the documents again from an existing pack (exit 2 when
/// `--out` is not one), after `--prune` if asked.
fn render_only(args: &AdrArgs, tol: &Tolerances) -> Result<i32, AdrError> {
    let out = &args.out;
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
    render(out, tol)?;
    Ok(0)
}

/// The pack's manifest before any step ran: the command to rerun it, the
/// seed, and every step not run yet.
fn new_manifest(
    args: &AdrArgs,
    seed: u64,
    steps: &[Step],
    previous: Option<&AdrManifest>,
) -> AdrManifest {
    let mut command = format!(
        "bench adr{} --seed {seed} --out {}",
        if args.quick { " --quick" } else { "" },
        args.out.display()
    );
    if args.prune {
        command.push_str(" --prune");
    }
    AdrManifest {
        command,
        seed,
        quick: args.quick,
        net_delay: NET_DELAY.into(),
        server_pause: SERVER_PAUSE.into(),
        // A resumed pack started when its first run did.
        started_at: previous.map_or_else(now_rfc3339, |p| p.started_at.clone()),
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
    }
}

/// Writes `adr-manifest.json` into `out`.
fn write_manifest(out: &Path, m: &AdrManifest) -> Result<(), AdrError> {
    std::fs::write(out.join(ADR_MANIFEST), serde_json::to_vec_pretty(m)?)?;
    Ok(())
}

/// How a step ended, for the plan's loop.
enum StepEnd {
    /// Ok, skipped or not available: go on.
    Next,
    /// It failed: go on, the pack exits 1.
    Failed,
    /// Ctrl-C: stop the plan.
    Interrupted,
}

/// Step `i` of the plan: skipped when a previous run did it (`--resume`),
/// recorded as not available with the reason, or run as a child process
/// and recorded with its status; the manifest is written after it.
async fn run_step(
    i: usize,
    manifest: &mut AdrManifest,
    previous: Option<&AdrManifest>,
    features: &Features,
    out: &Path,
) -> Result<StepEnd, AdrError> {
    let step = manifest.steps[i].step.clone();
    let label = format!("[{}/{}] {}", i + 1, manifest.steps.len(), step.name);
    if let Some(prev) = previous.and_then(|p| {
        p.steps
            .iter()
            .find(|r| r.step == step && r.status == Status::Ok)
    }) {
        eprintln!("bench adr: {label}: ok in a previous run, skipped (--resume)");
        manifest.steps[i] = prev.clone();
        return Ok(StepEnd::Next);
    }
    if let Some(why) = &step.unavailable {
        eprintln!("bench adr: {label}: not available: {why}");
        manifest.steps[i].status = Status::NotAvailable;
        manifest.steps[i].note = why.clone();
        write_manifest(out, manifest)?;
        return Ok(StepEnd::Next);
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
    let (status, interrupted) = run_child(&exe, &step).await?;
    let rec = &mut manifest.steps[i];
    rec.seconds = started.elapsed().as_secs_f64();
    rec.exit_code = status.code();
    let end = record_status(rec, status.code(), interrupted);
    eprintln!(
        "bench adr: {label}: {} after {:.0} s",
        rec.status.as_str(),
        rec.seconds
    );
    write_manifest(out, manifest)?;
    Ok(end)
}

/// Runs a step's program to its end; `true` beside its status when Ctrl-C
/// came meanwhile. The child shares the terminal's process group, so Ctrl-C
/// reaches it too: it is waited for, so it writes what it finished.
async fn run_child(exe: &Path, step: &Step) -> Result<(std::process::ExitStatus, bool), AdrError> {
    let mut child = tokio::process::Command::new(exe)
        .args(&step.args)
        .stdin(Stdio::null())
        .kill_on_drop(false)
        .spawn()?;
    Ok(tokio::select! {
        s = child.wait() => (s?, false),
        _ = tokio::signal::ctrl_c() => {
            eprintln!("\nbench adr: interrupted; waiting for {} to stop", step.name);
            (child.wait().await?, true)
        }
    })
}

/// A step's status from its exit code (130 or Ctrl-C: interrupted; the
/// throttle experiment's 4: no CPU quota here, not available).
fn record_status(rec: &mut StepRecord, code: Option<i32>, interrupted: bool) -> StepEnd {
    let (status, end) = match code {
        _ if interrupted => (Status::Interrupted, StepEnd::Interrupted),
        Some(0) => (Status::Ok, StepEnd::Next),
        // experiments throttle: no cgroup can be written here.
        Some(4) if rec.step.args[0] == "throttle" => {
            rec.note = "no CPU quota can be applied on this machine (exit 4)".into();
            (Status::NotAvailable, StepEnd::Next)
        }
        Some(130) => (Status::Interrupted, StepEnd::Interrupted),
        code => {
            rec.note = format!(
                "exit code {}",
                code.map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string())
            );
            (Status::Failed, StepEnd::Failed)
        }
    };
    rec.status = status;
    end
}

/// The end of a pack: the manifest stamped finished unless interrupted,
/// `--prune`, the documents rendered from what exists, the exit code.
fn finish(
    args: &AdrArgs,
    manifest: &mut AdrManifest,
    tol: &Tolerances,
    interrupted: bool,
    failed: bool,
) -> Result<i32, AdrError> {
    let out = &args.out;
    if !interrupted {
        manifest.finished_at = Some(now_rfc3339());
    }
    write_manifest(out, manifest)?;
    if args.prune {
        let freed = prune(out)?;
        eprintln!(
            "bench adr: --prune removed {:.1} MB of working files",
            freed as f64 / 1e6
        );
    }
    render(out, tol)?;
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
