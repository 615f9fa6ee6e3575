//! `bench run --runtime docker` for real: one short cell against the
//! lock-server and rail-stub images (scripts/build-images.sh) on a private
//! network, the lock-server on PostgreSQL ($FENCEPOST_TEST_PG_URL). It checks
//! the results (no duplicates, ledger holds) and that nothing the run started
//! is left behind.
//!
//! Ignored by `cargo test --workspace` (the images are built after it); CI runs
//! `cargo test -p bench --test docker -- --ignored` after building them. Outside
//! CI a missing Docker engine, image or database skips it with a message; with
//! `CI=true` each of those fails it.

use std::path::PathBuf;
use std::process::Command;

use bench::cli::{Cli, Command as BenchCommand};
use bench_driver::docker::{DEFAULT_LOCK_IMAGE, DEFAULT_RAIL_IMAGE, LABEL_RUN};
use clap::Parser;

/// Skips (prints why and returns `None`) outside CI; panics with `CI=true`.
fn require(what: &str, ok: bool) -> Option<()> {
    if ok {
        return Some(());
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but {what}: .ci/run must provide it");
    }
    eprintln!("skipping the docker-runtime test: {what}");
    None
}

/// The `docker` CLI against the engine itself (the run points this process's
/// `DOCKER_HOST` at its API shim, which children would inherit).
fn docker() -> Command {
    let mut cmd = Command::new("docker");
    if let Some(host) = bench_driver::docker::engine_docker_host() {
        cmd.env("DOCKER_HOST", host);
    }
    cmd
}

fn docker_ok(args: &[&str]) -> bool {
    docker()
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `docker <args>` → the ids it lists.
fn docker_ids(args: &[&str]) -> Vec<String> {
    let out = docker().args(args).output().expect("docker runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// A results directory removed at the end of the test.
struct TempOut(PathBuf);

impl Drop for TempOut {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Docker and the images (scripts/build-images.sh); CI runs it with --ignored"]
async fn a_docker_run_pays_without_duplicates_and_leaves_no_container_behind() {
    let pg_url = std::env::var("FENCEPOST_TEST_PG_URL").unwrap_or_default();
    if require(
        "the Docker engine is not reachable (docker info failed)",
        docker_ok(&["info"]),
    )
    .is_none()
        || require(
            "the images are missing (run scripts/build-images.sh)",
            docker_ok(&["image", "inspect", DEFAULT_LOCK_IMAGE, DEFAULT_RAIL_IMAGE]),
        )
        .is_none()
        || require(
            "FENCEPOST_TEST_PG_URL is not set (eval \"$(scripts/pg-test-cluster.sh start)\")",
            !pg_url.is_empty(),
        )
        .is_none()
    {
        return;
    }

    let out =
        TempOut(std::env::temp_dir().join(format!("fencepost-docker-test-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&out.0);
    let out_arg = out.0.display().to_string();
    let cli = Cli::try_parse_from([
        "bench",
        "run",
        "--runtime",
        "docker",
        "--pg-url",
        &pg_url,
        "--ttl",
        "1s",
        "--duration",
        "3s",
        "--workers",
        "4",
        "--payouts",
        "5000",
        "--seed",
        "7",
        "--out",
        &out_arg,
    ])
    .expect("valid flags");
    let BenchCommand::Run(args) = cli.command else {
        unreachable!("parsed a run")
    };
    let plan = bench::drive::resolve(&args, None).expect("flags resolve");
    let code = bench::drive::execute(plan)
        .await
        .expect("the run completes");
    assert_eq!(code, 0, "bench run --runtime docker exit code");

    let rows = bench_analysis::results::read_results(&out.0).expect("results written");
    assert_eq!(rows.len(), 1, "one cell");
    let row = &rows[0];
    assert!(row.payouts_paid > 0, "the run paid nothing: {row:?}");
    assert_eq!(row.duplicate_attempted, 0, "duplicates: {row:?}");
    assert_eq!(row.paid_twice, 0, "paid twice: {row:?}");
    assert!(row.ledger_ok, "ledger invariant: {row:?}");
    let cell_dir = out.0.join("cells").join(&row.cell);
    let lock_log = std::fs::read_to_string(cell_dir.join("lock-server.log")).unwrap_or_default();
    assert!(
        !lock_log.is_empty(),
        "the lock-server container's log was captured"
    );

    let label = format!("label={LABEL_RUN}={}", bench_driver::docker::run_id());
    assert_eq!(
        docker_ids(&["ps", "-aq", "--filter", &label]),
        Vec::<String>::new(),
        "containers left behind"
    );
    assert_eq!(
        docker_ids(&["network", "ls", "-q", "--filter", &label]),
        Vec::<String>::new(),
        "networks left behind"
    );
}
