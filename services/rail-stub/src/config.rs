//! The rail-stub's configuration: the C4 keys `rail.listen` and `rail.latency`,
//! plus `--seed` and `--ledger`, each settable by flag or environment variable
//! (flag wins). Bad values are refused by clap at start (exit 2) with a message
//! naming the flag.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use clap::Parser;
use fencepost_api::latency::LatencySpec;

use crate::store::LedgerSpec;

/// Long help for `--latency`: the three forms, with examples.
const LATENCY_HELP: &str = "\
Simulated rail latency for each submission (R3), C4 key rail.latency.
Forms (durations take ns, us, ms, s, m, h):
  fixed:5ms                       always 5 ms
  uniform:10ms..50ms              uniform between the bounds, inclusive
  lognormal:p50=40ms,p99=400ms    log-normal with that median and 99th percentile
Samples come from a ChaCha8 generator seeded by --seed, so a run replays.";

/// Long help for `--ledger`.
const LEDGER_HELP: &str = "\
Where the payout ledger lives.
  sqlite:PATH       an SQLite file (WAL), written before every reply and
                    reloaded on start, so PAID payouts and both fences survive
                    a restart. The default is one stable file:
                    $XDG_STATE_HOME/fencepost/rail-ledger.sqlite, else
                    $HOME/.local/state/fencepost/rail-ledger.sqlite, else
                    ./fencepost-rail-ledger.sqlite (sqlite: alone means it too).
                    One rail-stub at a time per file: a second one fails to start.
  memory            in memory only: forgets every payout, PAID state and fence
                    on restart (a WARN at start; /healthz says durable: false).
                    What a bench cell that wants a fresh ledger passes.";

/// Command line of `rail-stub`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "rail-stub",
    version,
    about = "fencepost rail-stub: the payout ledger and simulated payment rail, enforcing fence 1 (claim/release) and fence 2 (submit) and counting every stale or duplicate attempt.",
    after_help = "Once ready it prints exactly one line, `listening on http://IP:PORT`, on stdout; logs are JSON lines on stderr (RUST_LOG filters them). Stops cleanly on SIGTERM or Ctrl-C (logging rail_stub_stopped).\n\nExit codes: 0 stopped by a signal; 2 a refused flag, environment variable or --auth-tokens file (the message names the flag); 1 a start or serve that failed (the port is taken, the ledger cannot be opened).\n\nExample: rail-stub --listen 127.0.0.1:0 --latency uniform:10ms..50ms --seed 7 --ledger sqlite:/tmp/rail.db"
)]
pub struct Cli {
    /// Address to serve on (rail.listen); port 0 picks a free port.
    #[arg(
        long,
        env = "RAIL_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:7080",
        value_parser = parse_listen,
        allow_hyphen_values = true
    )]
    pub listen: SocketAddr,

    /// Simulated rail latency (rail.latency): fixed:5ms, uniform:10ms..50ms or lognormal:p50=40ms,p99=400ms.
    #[arg(
        long,
        env = "RAIL_LATENCY",
        value_name = "SPEC",
        default_value = "lognormal:p50=40ms,p99=400ms",
        long_help = LATENCY_HELP,
        allow_hyphen_values = true
    )]
    pub latency: LatencySpec,

    /// Seed for the latency samples; default: a random seed, logged at start.
    #[arg(
        long,
        env = "RAIL_SEED",
        value_name = "N",
        value_parser = parse_seed,
        allow_hyphen_values = true
    )]
    pub seed: Option<u64>,

    /// Where the ledger lives: sqlite:PATH (default: a stable file) or memory (forgets on restart).
    #[arg(
        long,
        env = "RAIL_LEDGER",
        value_name = "sqlite:PATH|memory",
        default_value_t = LedgerSpec::durable_default(),
        long_help = LEDGER_HELP,
        allow_hyphen_values = true
    )]
    pub ledger: LedgerSpec,

    /// TEST ONLY: `no-fences` turns both fences off (see --help). Never a
    /// default, no environment variable: only this flag, given explicitly.
    #[arg(long, value_name = "MODE", long_help = SABOTAGE_HELP, allow_hyphen_values = true)]
    pub sabotage: Option<Sabotage>,

    /// Whether fence 1 and fence 2 compare tokens: `on` (default) or `off`,
    /// for a lock service without fencing tokens (see --help). No
    /// environment variable: only this flag, given explicitly.
    #[arg(long, value_name = "on|off", default_value = "on", long_help = FENCES_HELP)]
    pub fences: Fences,

    /// API tokens for the writes: the same file as the
    /// lock-server's --auth-tokens (`NAME ROLE sha256:HEX [PREFIX]`; `lock-server
    /// token new` prints a line). Every POST then needs `Authorization: Bearer
    /// TOKEN` of a client or admin token (401 without one, 403 for a monitor
    /// token); reads (GET) stay open. SIGHUP re-reads the file.
    #[arg(
        long,
        env = "RAIL_AUTH_TOKENS",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub auth_tokens: Option<PathBuf>,
}

/// Long help for `--sabotage`.
const SABOTAGE_HELP: &str = "\
TEST ONLY — makes the rail-stub unsafe on purpose, so a checker can be seen
to fail (`experiments chaos --sabotage no-fences`). The only mode:
  no-fences   fence 1 and fence 2 are off: no token is compared on claim,
              submit or release, a submit need not hold the claim, and a
              submit on a PAID payout pays again. A stale holder pays.
Never on by default and not settable from the environment; logged as an
ERROR at start and shown in /healthz (`sabotage`).";

/// Long help for `--fences`.
const FENCES_HELP: &str = "\
Whether the rail compares fencing tokens.
  on    fence 1 (claim, release) and fence 2 (submit) refuse a token lower
        than the highest one seen: a stale lock holder cannot pay. The default.
  off   no token is compared: for a lock service that issues no fencing
        token (redlock), so the measurement shows what the lock alone
        protects. Claims, releases and submits follow token-blind rules (a
        claim takes a PENDING or CLAIMED payout whoever holds it, a submit
        pays, also one already PAID): a stale holder pays. Logged as a WARN
        at start and shown in /healthz (`fences`).
Not settable from the environment.";

/// Whether the rail compares fencing tokens (`--fences`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Fences {
    /// Fence 1 and fence 2 refuse stale tokens.
    #[default]
    On,
    /// No token is compared (a lock service without fencing tokens).
    Off,
}

impl Fences {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Fences::On => "on",
            Fences::Off => "off",
        }
    }
}

/// A deliberate defect for tests of the checkers (`--sabotage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sabotage {
    /// Both fences off: every claim, release and submit is accepted by
    /// token-blind rules, and a submit on a PAID payout pays again.
    NoFences,
}

impl Sabotage {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Sabotage::NoFences => "no-fences",
        }
    }
}

/// Parses `--listen`: an `IP:PORT`, or `HOST:PORT` resolved now.
///
/// A host name is resolved once, at start; the first address wins.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!(
            "{text:?} is not an address to listen on; expected IP:PORT such as 127.0.0.1:7080 (port 0 picks a free one)"
        )
    };
    text.to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
}

/// Parses `--seed`: a whole number that fits 64 bits.
fn parse_seed(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "{text:?} is not a seed; expected a whole number from 0 to {}",
            u64::MAX
        )
    })
}

/// What the server needs besides its listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// R3's latency distribution.
    pub latency: LatencySpec,
    /// Seed of the latency generator; the same seed replays the same delays.
    pub seed: u64,
    /// Where the ledger lives.
    pub ledger: LedgerSpec,
    /// A deliberate defect (tests only); `None` in every real configuration.
    pub sabotage: Option<Sabotage>,
    /// Whether fence 1 and fence 2 compare tokens (`--fences`).
    pub fences: Fences,
    /// The API token file writes are checked against (`None`: writes are open).
    pub auth_tokens: Option<PathBuf>,
}

impl Default for Config {
    /// C4 defaults, seed 0, and a memory ledger (tests pick their own; the
    /// command line's default is the durable file).
    fn default() -> Self {
        Config {
            latency: LatencySpec::default(),
            seed: 0,
            ledger: LedgerSpec::Memory,
            sabotage: None,
            fences: Fences::On,
            auth_tokens: None,
        }
    }
}

impl Cli {
    /// The listen address and the server configuration; draws a random seed
    /// when none was given.
    pub fn into_config(self) -> (SocketAddr, Config) {
        let config = Config {
            latency: self.latency,
            seed: self.seed.unwrap_or_else(rand::random),
            ledger: self.ledger,
            sabotage: self.sabotage,
            fences: self.fences,
            auth_tokens: self.auth_tokens,
        };
        (self.listen, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_defaults_are_c4s() {
        let cli = Cli::try_parse_from(["rail-stub"]).unwrap();
        assert_eq!(cli.listen, "127.0.0.1:7080".parse().unwrap());
        assert_eq!(cli.latency, LatencySpec::default());
        assert_eq!(cli.ledger, LedgerSpec::durable_default());
        assert!(cli.ledger.to_string().ends_with("rail-ledger.sqlite"));
        assert_eq!(cli.sabotage, None, "sabotage is never a default");
        let cli = Cli::try_parse_from([
            "rail-stub",
            "--listen",
            "127.0.0.1:0",
            "--latency",
            "fixed:5ms",
            "--seed",
            "9",
            "--ledger",
            "sqlite:/tmp/r.db",
        ])
        .unwrap();
        let (addr, config) = cli.into_config();
        assert_eq!(addr.port(), 0);
        assert_eq!(config.seed, 9);
        assert_eq!(config.latency.to_string(), "fixed:5ms");
    }

    #[test]
    fn sabotage_is_only_the_explicit_flag() {
        let cli = Cli::try_parse_from(["rail-stub", "--sabotage", "no-fences"]).unwrap();
        assert_eq!(cli.into_config().1.sabotage, Some(Sabotage::NoFences));
        assert!(Cli::try_parse_from(["rail-stub", "--sabotage", "some"]).is_err());
    }

    #[test]
    fn fences_are_on_unless_turned_off_by_the_flag() {
        let cli = Cli::try_parse_from(["rail-stub"]).unwrap();
        assert_eq!(cli.into_config().1.fences, Fences::On);
        let cli = Cli::try_parse_from(["rail-stub", "--fences", "off"]).unwrap();
        assert_eq!(cli.into_config().1.fences, Fences::Off);
        let err = Cli::try_parse_from(["rail-stub", "--fences", "maybe"]).unwrap_err();
        assert!(err.to_string().contains("--fences"), "{err}");
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (flag, value) in [
            ("--latency", "gauss:5ms"),
            ("--listen", "nowhere"),
            ("--seed", "-1"),
            ("--ledger", "postgres://x"),
        ] {
            // `--seed=-1`, not `--seed -1`: clap would read `-1` as a flag.
            let err = Cli::try_parse_from(["rail-stub", &format!("{flag}={value}")]).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(flag), "{err}");
        }
    }
}
