//! bench's command line (C4): `run`, `sweep`, `report`, `triggers`, `rules`, `peer`, `adr`.

use std::path::PathBuf;

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use crate::values::whole;

/// bench — fencepost's M7 load driver: measure the heartbeat RTT and payout
/// throughput of real payout workers across safety margins and TTLs, and check
/// ADR-006 §6.5's revisit triggers.
///
/// By default (`--runtime process`) each cell starts a fresh lock-server
/// (embedded SQLite) and rail-stub as child processes on free loopback ports,
/// seeds a payout backlog, and runs N workers on the SDK. Production numbers
/// (30 s lease, 5 s rail read timeout, D4's +2 s, the rail latency) scale with
/// the cell's TTL, so `--ttl 1s` runs the ADR's arithmetic in seconds.
///
/// Examples:
///   bench sweep --margin 0.1..0.5:0.2 --ttl 1s,2s --duration 4s
///   bench run --margin 0.3 --ttl 1s --duration 10s --net-delay lognormal:p50=2ms,p99=40ms
///   bench run --ttl 2s --server-pause 3s:400ms
///   bench sweep --margin 0.1..0.5 --ttl 1s --margin-policy adaptive:k=3,floor=0.05,ceiling=0.5
///   bench run --runtime docker --duration 5s --pg-url postgres://postgres@127.0.0.1:54329/fencepost
///   bench run --runtime external --lock-url http://10.0.0.5:7070 --rail-url http://10.0.0.6:7080
///   bench run --backend etcd --ttl 2s --duration 4s            # the workers on etcd
///   bench sweep --backend fencepost,etcd --ttl 2s --margin 0.1..0.5:0.2
///   bench run --backend redis --ttl 1s --duration 6s           # one redis-server, counter tokens
///   bench run --backend redlock --ttl 1s --duration 6s         # Redlock on 3 redis-servers, no token
///   bench peer --duration 4s                  # fencepost vs etcd: heartbeats and grants
///   bench sweep ... --out data/runs/my-sweep --resume     # skip cells already done
///   bench report data/runs/my-sweep                       # redraw report.md and plots
///   bench triggers data/runs/my-sweep                     # exit 0: none fired, 3: one fired
///   bench rules --out deploy/prometheus/fencepost-rules.yaml   # the checks as Prometheus rules
///   bench triggers --prometheus http://prometheus:9090    # the same checks, live
///   bench sweep --margin 0.1,0.3 --ttl 1s --repeat 3 --margin-policy fixed,adaptive:k=4,floor=0.05,ceiling=0.5
///   bench replay data/runs/my-sweep --out data/runs/my-replay  # same (cell, seed) pairs again
///   bench adr --quick --out data/runs/adr-quick           # the ADR-006 evidence pack
///   bench adr --render-only --out data/reference          # rewrite adr-006-evidence.md
///
/// Exit codes: 0 ok, 1 a run failed (service, ledger invariant), 2 bad input,
/// 3 (`triggers`) a trigger fired, 130 interrupted.
#[derive(Debug, Parser)]
#[command(name = "bench", version, verbatim_doc_comment)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// bench's command line with every option's value allowed to start with a
/// hyphen, so `--ttl -1s` or `--margin -0.1` reach the flag's own check
/// (which names the flag and what is valid, exit 2) instead of clap reading
/// the value as an unknown flag `-1`.
pub fn command() -> clap::Command {
    fn hyphen_values(cmd: clap::Command) -> clap::Command {
        let cmd = cmd.mut_args(|a| {
            if a.get_long().is_some() && a.get_action().takes_values() {
                a.allow_hyphen_values(true)
            } else {
                a
            }
        });
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        subs.iter()
            .fold(cmd, |cmd, name| cmd.mut_subcommand(name, hyphen_values))
    }
    hyphen_values(Cli::command())
}

/// Parses the process's arguments with [`command`]; on an error prints it
/// and exits 2 (or 0 for `--help` and `--version`).
pub fn parse() -> Cli {
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
}

/// Parses `argv` with [`command`] (`bench replay` re-parses a recorded command line).
pub fn try_parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::from_arg_matches(&command().try_get_matches_from(argv)?)
}

/// bench's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// One configuration (one cell): prints a live line and a summary table.
    ///
    /// Ctrl-C (SIGINT) or SIGTERM closes the cell's measured window early and
    /// writes what it measured as a partial cell (`stopped_by` interrupted),
    /// then exits 130; a second one stops at once.
    Run(RunArgs),
    /// The grid: one run per (TTL, policy, margin) cell and repeat, resumable.
    ///
    /// Ctrl-C (SIGINT) or SIGTERM closes the running cell's window early and
    /// writes it as a partial cell beside the finished ones, then exits 130;
    /// a second one stops at once. `--resume` measures a partial cell again.
    Sweep(SweepArgs),
    /// Redraw a results directory's report: rewrites DIR's report.md,
    /// summary.csv, projection.csv, triggers.json and plots (its documented
    /// output) from the results table, histograms and manifest, which it
    /// only reads; says which cells are partial.
    Report {
        /// A results directory written by run or sweep.
        dir: PathBuf,
    },
    /// Re-run exactly the (cell, seed) pairs a results directory's
    /// manifest.json records (its argv, grid and seeds) into a new directory;
    /// refuses (exit 2) when this build would expand them differently.
    Replay {
        /// A results directory written by run or sweep.
        dir: PathBuf,
        /// The new results directory [default: DIR-replay].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Evaluate ADR-006 §6.5's revisit triggers; exit 0 if none fires, 3 if one does.
    ///
    /// On a results directory (DIR): the five triggers on every cell, printed
    /// (DIR is only read; --write also writes DIR/triggers.json, --out
    /// another directory's). With --prometheus URL instead: the six production
    /// checks (the five plus the lease-safety essay's clock check) as instant
    /// queries on a live Prometheus, the very expressions `bench rules` puts in
    /// its alerts, one row each (cell `prometheus:<window>`); the parameter
    /// flags below then say which configuration is in force.
    #[command(verbatim_doc_comment)]
    Triggers(TriggersArgs),
    /// Print (or write) the six production checks as a Prometheus rules file.
    ///
    /// Recording rules `fencepost:<check>:<term>` and, per check,
    /// an alert with severity page when it fires, a non-paging one (severity
    /// info) when the data cannot say ok, and for trigger 1 a non-paging
    /// "misconfigured" alert when the SDK's histogram lacks the budget's bucket.
    /// Every default is production's; deploy/prometheus/fencepost-rules.yaml is
    /// this command with no flags (docs/alerts.md).
    #[command(verbatim_doc_comment)]
    Rules(RulesArgs),
    /// fencepost (SQLite, PostgreSQL) vs etcd on this machine, one driver:
    /// heartbeats and durable grants at the same concurrency, interleaved and
    /// repeated; writes peer.csv, report.md (the ratios) and a plot.
    Peer(PeerArgs),
    /// The ADR-006 revision pack: the evidence plan end to end (sweeps, the
    /// experiments, etcd), then adr-006-evidence.md from the files alone.
    Adr(crate::adr::AdrArgs),
    /// Write DATA/docs-facts.json: every number the docs' generated blocks
    /// compute or decide (medians, intervals, ratios, verdicts), from the
    /// committed runs under DATA, for scripts/gen-docs.py to format.
    Docs(DocsArgs),
}

/// The options of `triggers`.
#[derive(Debug, Args, Clone)]
pub struct TriggersArgs {
    /// A results directory written by run or sweep (not with --prometheus).
    #[arg(required_unless_present = "prometheus", conflicts_with = "prometheus")]
    pub dir: Option<PathBuf>,

    /// Evaluate on the Prometheus at this base URL (http://HOST:9090) instead
    /// of a results directory; exit 2 naming the URL when it cannot be asked.
    #[arg(long)]
    pub prometheus: Option<String>,

    /// The configuration in force and how to look at it (with --prometheus).
    #[command(flatten)]
    pub checks: CheckArgs,

    /// With a results directory: also write the verdicts to DIR/triggers.json
    /// (what `bench report` and the end of a run write there).
    #[arg(long, requires = "dir", conflicts_with_all = ["out", "prometheus"])]
    pub write: bool,

    /// Also write the verdicts to OUT/triggers.json (OUT is created).
    #[arg(long, value_name = "OUT")]
    pub out: Option<PathBuf>,
}

/// The options of `rules`.
#[derive(Debug, Args, Clone)]
pub struct RulesArgs {
    /// The configuration in force and how to look at it.
    #[command(flatten)]
    pub checks: CheckArgs,

    /// How long a condition must hold before its alert fires (the alerts'
    /// `for:`). Production: 10m, so a burst at the edge of the window does not
    /// page (the promtool tests use 1m, the live test 0s).
    #[arg(long = "for", default_value = "10m")]
    pub for_: String,

    /// Write the rules file here [default: stdout].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The parameters of the production checks, shared by `rules` and `triggers
/// --prometheus`. The defaults are production's (ADR-006, C4).
#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// lock.default.ttl in force: the lease every acquire asks for. Trigger 1's
    /// budget is min(lease, session TTL) × margin / 3 (1.5 s at the defaults).
    #[arg(long, default_value = "30s")]
    pub lease: String,

    /// lock.session.ttl in force.
    #[arg(long, default_value = "15s")]
    pub session_ttl: String,

    /// lock.client.safety-margin in force (a fixed margin, 0 <= m < 1). The
    /// SDK's histogram must have a bucket at the budget this gives, else
    /// trigger 1 is "misconfigured".
    #[arg(long, default_value = "0.3")]
    pub margin: String,

    /// The worst-case rail hop D4 requires of the remaining lease: the
    /// workers' rail.read.timeout + 2 s (trigger 3).
    #[arg(long, default_value = "7s")]
    pub hop: String,

    /// lock.clock.offset-max in force, θ_max of the server's grace (the clock
    /// check fires when a host's maxerror exceeds it).
    #[arg(long, default_value = "50ms")]
    pub offset_max: String,

    /// The rate window of every increase() and rate(). Production: 1h, the
    /// shortest window in which one SDK client at the defaults (a heartbeat
    /// every 3.5 s) sends the 1,000 heartbeats a p99 needs.
    #[arg(long, default_value = "1h")]
    pub window: String,

    /// Label matchers added to every selector, e.g. namespace="payments". The
    /// checks read the SDK's, lock-server's, rail-stub's and cAdvisor's series,
    /// so select the deployment, not one job; empty: every series.
    #[arg(long, default_value = "")]
    pub selector: String,
}

/// The options of `peer`.
#[derive(Debug, Args, Clone)]
pub struct PeerArgs {
    /// Measured window of each (repeat, op, concurrency, system).
    #[arg(long, default_value = "4s")]
    pub duration: String,

    /// Unmeasured warm-up before each window (connections, caches).
    #[arg(long, default_value = "1s")]
    pub warmup: String,

    /// Concurrent clients, each its own connection and session or lease: a list.
    #[arg(long, default_value = "1,16,64")]
    pub concurrency: String,

    /// Repeats of the whole interleaved sequence (ratios are taken per repeat), 1..=100.
    #[arg(long, default_value_t = 3, value_parser = whole::<u32>(1, 100))]
    pub repeat: u32,

    /// Operations: heartbeat (L2 vs LeaseKeepAlive), grant (L4+L6 vs
    /// txn+delete), floor (the cheapest request through the same client:
    /// GET /healthz vs a serializable Range of a missing key; report.md
    /// divides each system's heartbeat by its floor), fsync (the fsync
    /// ceiling of each store's directory, once per repeat; report.md sets
    /// the grants against it with the flushes the servers counted).
    #[arg(long, default_value = "heartbeat,grant,floor,fsync")]
    pub ops: String,

    /// The HTTP client that drives the lock-server: sdk (the SDK's own,
    /// what an SDK user gets), hyper-legacy (hyper_util's pooled client), or
    /// both, `sdk,hyper-legacy`: every lock-server is then measured with each,
    /// interleaved, and report.md weighs them per client CPU-second. The
    /// fencepost ÷ etcd ratios always use the SDK's client.
    #[arg(long, default_value = "sdk")]
    pub http_client: String,

    /// fencepost stores to measure: sqlite, postgres [default: sqlite,postgres];
    /// by default postgres is skipped (and said so) when no PostgreSQL is given.
    #[arg(long)]
    pub stores: Option<String>,

    /// PostgreSQL for the postgres store (a fresh schema is created)
    /// [default: $FENCEPOST_TEST_PG_URL].
    #[arg(long, env = "FENCEPOST_PG_URL")]
    pub pg_url: Option<String>,

    /// The PostgreSQL cluster's directory (scripts/pg-test-cluster.sh's
    /// FENCEPOST_PG_DIR): `--ops fsync` measures the postgres store's fsync
    /// ceiling in its data directory; without it that ceiling is skipped.
    #[arg(long, env = "FENCEPOST_PG_DIR")]
    pub pg_dir: Option<std::path::PathBuf>,

    /// An etcd to measure (its client URL) [default: `etcd` from PATH, started].
    #[arg(long)]
    pub etcd_url: Option<String>,

    /// Redis beside them: a list of redis-server persistence modes, one
    /// redis-server child (and one system) each: none (memory only),
    /// everysec (append-only file fsynced once a second), always (fsynced
    /// before every reply: the durability the lock-server and etcd give a
    /// grant); or off. heartbeat = the renew script (compare-owner PEXPIRE),
    /// grant = the acquire script (SET NX PX and the fencing counter's INCR)
    /// then the compare-owner DEL, floor = PING [default: none,always, or
    /// skipped and said so when redis-server is not on PATH].
    #[arg(long, conflicts_with = "redis_url")]
    pub redis: Option<String>,

    /// A Redis to measure (redis://HOST:PORT) instead of starting one.
    #[arg(long)]
    pub redis_url: Option<String>,

    /// Seed of the order of the systems within each group (printed and
    /// recorded) [default: random].
    #[arg(long, value_parser = whole::<u64>(0, u64::MAX))]
    pub seed: Option<u64>,

    /// Results directory [default: data/runs/<timestamp>-peer/].
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// The live-sessions dimension: a list of live-session
    /// counts, e.g. 100,1000,10000,100000. For each count, each system and
    /// each repeat (systems in a seeded order), N fencepost sessions and N
    /// etcd leases are opened and kept alive on the SDK's schedule (a
    /// heartbeat every --session-ttl × (1 − --margin) / 3, each session on
    /// its own phase, open loop) over --connections connections, on fresh
    /// servers; the heartbeat p50/p99 (raw and corrected), the server's CPU
    /// and RSS per 1,000 sessions and what bounded the box go to
    /// peer_sessions.csv and report.md. Replaces --ops/--concurrency.
    #[arg(long)]
    pub sessions: Option<String>,

    /// With --sessions: the session TTL (fencepost) and lease TTL (etcd,
    /// rounded up to whole seconds).
    #[arg(long, default_value = "15s")]
    pub session_ttl: String,

    /// With --sessions: the SDK's safety margin, 0 <= m < 1; the heartbeat
    /// period is --session-ttl × (1 − m) / 3 (3.5 s at the defaults).
    #[arg(long, default_value = "0.30")]
    pub margin: String,

    /// With --sessions: the connections (fencepost) and keep-alive streams,
    /// each on its own connection (etcd), the sessions are dealt over, 1..=4096.
    #[arg(long, default_value_t = 64, value_parser = whole::<usize>(1, 4096))]
    pub connections: usize,

    /// With --sessions: each window lasts at least --duration and at least
    /// long enough for this many scheduled heartbeats (a p99 needs 1,000;
    /// 100 sessions at 3.5 s take 35 s).
    #[arg(long, default_value_t = 1000, value_parser = whole::<u64>(0, u64::MAX))]
    pub min_heartbeats: u64,
}

/// The options of `sweep`: `run`'s, and the two only a grid has.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    /// The options `run` has too.
    #[command(flatten)]
    pub run: RunArgs,

    /// The repeats and the resume.
    #[command(flatten)]
    pub grid: SweepOnly,
}

/// The options only `sweep` has.
#[derive(Debug, Args, Clone, Copy)]
pub struct SweepOnly {
    /// Run every cell N times, with seeds seed, seed+1, … (column `repeat`);
    /// summary.csv gives each (policy, TTL, margin) its median and 95 % interval. 1..=100.
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 100))]
    pub repeat: u32,

    /// Continue a sweep in --out, skipping cells it already finished (same
    /// configuration and seed); a partial cell (interrupted) is measured again.
    #[arg(long)]
    pub resume: bool,
}

impl Default for SweepOnly {
    /// `bench run`: one repeat, no resume.
    fn default() -> Self {
        SweepOnly {
            repeat: 1,
            resume: false,
        }
    }
}

/// The options of `run` (and of `sweep`, which adds [`SweepOnly`]).
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// lock.client.safety-margin: one value (run), or a list/range for sweep:
    /// `0.3`, `0.1,0.3`, `0.1..0.5` (step 0.1), `0.1..0.5:0.2`. 0 <= m < 1.
    #[arg(long, env = "LOCK_CLIENT_SAFETY_MARGIN", default_value = "0.3")]
    pub margin: String,

    /// A list of policies, each a grid dimension: `fixed` (one cell per
    /// --margin), `adaptive:k=K,floor=F,ceiling=C` (margin = clamp(k * p99 RTT
    /// / lease, F, C); one cell per TTL, --margin does not apply), or both:
    /// `fixed,adaptive:k=4,floor=0.05,ceiling=0.5`.
    #[arg(long, default_value = "fixed")]
    pub margin_policy: String,

    /// projection.csv: the production lease the measured (unscaled) RTT is projected onto.
    #[arg(long, default_value = "30s")]
    pub projection_lease: String,

    /// projection.csv: the production session TTL.
    #[arg(long, default_value = "15s")]
    pub projection_session_ttl: String,

    /// projection.csv: the production rail read timeout (D4's hop = it + 2 s).
    #[arg(long, default_value = "5s")]
    pub projection_read_timeout: String,

    /// projection.csv: the production margin whose headroom is reported (ADR-006: 0.30);
    /// every fixed margin of the run is projected too.
    #[arg(long, default_value = "0.3")]
    pub projection_margin: String,

    /// Lease TTL(s) requested by every acquire: `1s`, or a list for sweep: `1s,2s,30s`.
    #[arg(long, default_value = "1s")]
    pub ttl: String,

    /// Session TTL [default: production's 15 s scaled with the TTL (7.5 s at
    /// --ttl 15s, 500 ms at 1s); 15s with --no-time-scale].
    #[arg(long)]
    pub session_ttl: Option<String>,

    /// Concurrent payout workers (each its own SDK client and session), 1..=1024.
    #[arg(long, default_value_t = 8, value_parser = whole::<u32>(1, 1024))]
    pub workers: u32,

    /// How long each cell runs (with --min-samples: at least this long).
    #[arg(long, default_value = "10s")]
    pub duration: String,

    /// Idle SDK sessions per cell, heartbeating beside the workers on one
    /// client of their own (no locks): real sessions on the wire, opened
    /// spread over one heartbeat period before the warm-up, closed after the
    /// window. They multiply the heartbeat samples a cell records (a 5 s-TTL
    /// cell's 16 workers give ~200; 1,000 sessions ~10,000 more) and load the
    /// lock-server like a fleet would. 0..=100000; fencepost backend only.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = whole::<u32>(0, 100_000))]
    pub sessions: u32,

    /// Sequential stop: after --duration, a cell runs on until its corrected
    /// heartbeat histogram holds K samples, or until --max-duration; the
    /// `stopped_by` column says which. Counted every 500 ms. K ≥ 1 [default: none].
    #[arg(long, value_name = "K", value_parser = whole::<u64>(1, u64::MAX))]
    pub min_samples: Option<u64>,

    /// The longest a cell with --min-samples runs (its window) [default: 10m,
    /// or --duration when that is longer].
    #[arg(long, value_name = "DURATION")]
    pub max_duration: Option<String>,

    /// Payouts seeded into the backlog per cell (R7), 1..=1000000.
    #[arg(long, default_value_t = 200_000, value_parser = whole::<u64>(1, 1_000_000))]
    pub payouts: u64,

    /// rail.latency in production time (scaled with the TTL): fixed:5ms,
    /// uniform:10ms..50ms, lognormal:p50=40ms,p99=400ms.
    #[arg(
        long,
        env = "RAIL_LATENCY",
        default_value = "lognormal:p50=40ms,p99=400ms"
    )]
    pub rail_latency: String,

    /// The work each payout does while it holds its lock, in production
    /// time (scaled with the TTL like --rail-latency), drawn per attempt from
    /// a seeded RNG and split evenly over its --steps: fixed:20s,
    /// uniform:5s..40s, lognormal:p50=20s,p99=60s. Against a 30 s production
    /// lease, lognormal:p50=20s,p99=60s makes a share of payouts outlive the
    /// lease, so they need renewals (L5) to finish [default: none, the rail
    /// calls alone].
    #[arg(long, value_name = "SPEC")]
    pub hold: Option<String>,

    /// Steps of one payout, 1..=100: K ledger payouts ("legs") paid under one
    /// lock grant, each claimed, worked (hold / K), checked (D4) and
    /// submitted in turn; the backlog seeds payouts × K ledger payouts. A D4
    /// refusal before a later leg abandons the payout mid-way (column
    /// abandoned_mid_payout) and a later holder resumes at its first unpaid
    /// leg, e.g. --steps 3 [default: 1].
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = whole::<u32>(1, 100))]
    pub steps: u32,

    /// Run this long before each cell's measured window opens, excluded from
    /// every figure (connection set-up, first heartbeats) [default: three
    /// heartbeat periods of the cell at divisor 3, whatever
    /// --heartbeat-divisor (350 ms at --ttl 1s, margin 0.3)].
    #[arg(long)]
    pub warmup: Option<String>,

    /// rail.read.timeout in production time (scaled); D4 requires timeout + 2 s of lease.
    #[arg(long, env = "RAIL_READ_TIMEOUT", default_value = "5s")]
    pub rail_read_timeout: String,

    /// Use the rail latency, read timeout and session TTL as given, unscaled.
    #[arg(long)]
    pub no_time_scale: bool,

    /// Extra round-trip delay between workers and the lock-server, through an
    /// in-process TCP proxy (not scaled), e.g. lognormal:p50=2ms,p99=40ms [default: none].
    #[arg(long)]
    pub net_delay: Option<String>,

    /// SIGSTOP the lock-server for FOR every EVERY (process runtime), e.g.
    /// 3s:400ms, inside the measured window (column server_pauses). sweep: a
    /// list of freeze lengths, EVERY:FOR,FOR,… (3s:300ms,400ms,500ms), each
    /// shorter than EVERY, is a grid dimension (cell ids end `_freeze=FOR`) [default: none].
    #[arg(long)]
    pub server_pause: Option<String>,

    /// lock.client.heartbeat-divisor k of every session of a cell (workers'
    /// and --sessions'; etcd: the keep-alive schedule): heartbeats every
    /// min(lease, session TTL) × (1 − margin) / k. 2..=10; run: one value,
    /// sweep: a list (2,3,4), a grid dimension (cell ids end `_k=K` for k ≠ 3).
    #[arg(long, default_value = "3", value_name = "K")]
    pub heartbeat_divisor: String,

    /// Serve the lock-server over TLS: each cell makes a CA and a
    /// certificate for 127.0.0.1 in its directory (cells/<id>/tls/), the
    /// lock-server gets --tls-cert/--tls-key, every SDK client trusts that CA
    /// alone. The results' `tls` column and the manifest's config say so.
    /// Process runtime, fencepost backend, no --net-delay.
    #[arg(long)]
    pub tls: bool,

    /// Turn off check_still_held/ensure_time_for before the submit (UC-03: lets stale writes reach the fences).
    #[arg(long)]
    pub disable_client_check: bool,

    /// process (child processes, embedded SQLite), docker (containers, PostgreSQL: --pg-url),
    /// or external (--lock-url/--rail-url).
    #[arg(long, default_value = "process")]
    pub runtime: String,

    /// lock.store for the process runtime's lock-server [default: SQLite in the cell's directory].
    #[arg(long)]
    pub store: Option<String>,

    /// Lock-server replicas for the process runtime: N > 1 needs a
    /// postgres:// --store; they elect one leader (leader lease 1 s) and the
    /// workers get every URL and follow NOT_LEADER.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub replicas: u32,

    /// The lock service the workers run on: fencepost, etcd, redis,
    /// redlock, or a list (`fencepost,etcd,redis`: every cell runs on each,
    /// one after the other, and the report compares them cell by cell). etcd
    /// runs as a child process (`etcd` on PATH) unless --etcd-url names one;
    /// its lease TTL is min(--ttl, session TTL) rounded up to whole seconds.
    /// redis runs one redis-server child (`redis-server` on PATH) unless
    /// --redis-url names one; every lock's PX is --ttl. redlock runs
    /// --redlock-instances redis-server children (3) unless --redis-url names
    /// them; a lock is a majority of them, it has no fencing token, and the
    /// rail runs with its fences off.
    #[arg(long, default_value = "fencepost")]
    pub backend: String,

    /// An etcd to use for --backend etcd instead of starting one (its client URL).
    #[arg(long)]
    pub etcd_url: Option<String>,

    /// A Redis to use for --backend redis instead of starting one
    /// (redis://HOST:PORT; comma-separated instances for redlock). Not with
    /// --server-pause, which signals a server the bench started.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// How the redis-servers the bench starts persist: none (nothing on
    /// disk: a restart forgets every lock and fencing counter), everysec
    /// (append-only file fsynced every second), always (fsync before every
    /// reply) [default: everysec: Redis's suggested policy; a killed server
    /// keeps its keys and counters, and locks do not pay an fsync per
    /// request].
    #[arg(long, value_name = "none|everysec|always")]
    pub redis_persistence: Option<String>,

    /// How many independent redis-servers --backend redlock runs on: odd, at
    /// least 3; a lock needs a majority of them [default: 3, or as many as
    /// --redis-url names].
    #[arg(long, value_name = "N")]
    pub redlock_instances: Option<u32>,

    /// PostgreSQL for --runtime docker's lock-server, as this machine reaches it
    /// (relayed into the containers' network) [default: $FENCEPOST_TEST_PG_URL].
    #[arg(long, env = "FENCEPOST_PG_URL")]
    pub pg_url: Option<String>,

    /// The lock-server image for --runtime docker (scripts/build-images.sh builds it).
    #[arg(long, default_value = bench_driver::docker::DEFAULT_LOCK_IMAGE)]
    pub lock_image: String,

    /// The rail-stub image for --runtime docker (scripts/build-images.sh builds it).
    #[arg(long, default_value = bench_driver::docker::DEFAULT_RAIL_IMAGE)]
    pub rail_image: String,

    /// The lock-server for --runtime external.
    #[arg(long)]
    pub lock_url: Option<String>,

    /// The rail-stub for --runtime external.
    #[arg(long)]
    pub rail_url: Option<String>,

    /// The seed for workers, backoff jitter, rail latency and the delay proxy
    /// (printed and recorded) [default: random].
    #[arg(long, value_parser = whole::<u64>(0, u64::MAX))]
    pub seed: Option<u64>,

    /// Results directory (created; exit 2 naming --out when it cannot be
    /// written) [default: data/runs/<timestamp>-<run|sweep>/].
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Serve Prometheus metrics while the run goes on, at ADDR (e.g.
    /// 127.0.0.1:9464; port 0 picks one, printed): GET /metrics has the running
    /// cell's SDK metrics (all workers' clients, one set of families, buckets
    /// built for the cell's lease, session TTL and margin), GET /sd the cell's
    /// lock-server(s) and rail-stub as Prometheus HTTP service discovery
    /// targets (jobs lock-server and rail-stub). Point a Prometheus loaded with
    /// `bench rules` at both to try the alerts on a live run (docs/alerts.md).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// The options of `docs`.
#[derive(Debug, Args, Clone)]
pub struct DocsArgs {
    /// The directory of the committed runs (the repository's data/).
    #[arg(default_value = "data")]
    pub data: PathBuf,

    /// Write nothing: exit 0 when DATA/docs-facts.json is what this command
    /// would write now, 1 when it is not.
    #[arg(long)]
    pub check: bool,
}
