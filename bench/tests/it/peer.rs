//! `bench peer` end to end with both HTTP clients: one short run against a
//! lock-server on SQLite and an etcd child. Pins what the comparison rests
//! on, never a speed: every measurement is a row naming its client, the
//! SDK's client and hyper's drive the same lock-server, the fencepost ÷ etcd
//! ratio is taken on the SDK's rows, and the report weighs the two clients.
//! Skipped without `etcd` on PATH, except under `CI=true`.

use std::process::Command;

use bench_analysis::peer::PEER_COLUMNS;
use bench_driver::backend::etcd::server::etcd_binary;
use bench_driver::backend::redis::server::redis_binary;

/// Whether `etcd` is on PATH (the test skips, saying so); under `CI=true`
/// a missing one is a failure, never a skip.
fn etcd_on_path() -> bool {
    match etcd_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no etcd for bench peer: {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// The column index of `name` in `peer.csv`.
fn col(name: &str) -> usize {
    PEER_COLUMNS.iter().position(|c| *c == name).unwrap()
}

/// Runs `bench peer ARGS` for one repeat of 300 ms on SQLite into `out`
/// and checks it exited 0: its output, `peer.csv`, and the rows' cells.
fn run_peer(args: &[&str], out: &std::path::Path) -> (String, String, Vec<Vec<String>>) {
    let run = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "peer",
            "--repeat",
            "1",
            "--duration",
            "300ms",
            "--stores",
            "sqlite",
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run bench peer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{text}");
    let csv = std::fs::read_to_string(out.join("peer.csv")).expect("peer.csv");
    let rows = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (text, csv, rows)
}

#[test]
fn a_run_with_both_http_clients_records_each_and_compares_them() {
    if !etcd_on_path() {
        return;
    }
    let out = std::env::temp_dir().join(format!(
        "fencepost-peer-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let run = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "peer",
            "--ops",
            "heartbeat",
            "--concurrency",
            "2",
            "--repeat",
            "2",
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--stores",
            "sqlite",
            "--http-client",
            "sdk,hyper-legacy",
            "--redis",
            "off",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run bench peer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{text}");

    let csv = std::fs::read_to_string(out.join("peer.csv")).expect("peer.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(PEER_COLUMNS.join(",").as_str()));
    let client = PEER_COLUMNS.iter().position(|c| *c == "client").unwrap();
    let ops = PEER_COLUMNS.iter().position(|c| *c == "ops").unwrap();
    let mut clients: Vec<(String, String)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert!(f[ops].parse::<u64>().unwrap() > 0, "no operation in {l}");
            (f[0].to_string(), f[client].to_string())
        })
        .collect();
    clients.sort();
    assert_eq!(
        clients,
        [
            ("etcd", "etcd-client"),
            ("etcd", "etcd-client"),
            ("fencepost", "hyper-legacy"),
            ("fencepost", "hyper-legacy"),
            ("fencepost", "sdk"),
            ("fencepost", "sdk"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
        "one row per (repeat, system, client)"
    );
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("## The SDK's HTTP client vs hyper's pooled client"),
        "{report}"
    );
    assert!(report.contains("## Ratios: fencepost ÷ etcd"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The physical limits: the floor under each heartbeat, the
/// fsync ceiling of each store's directory, and the flushes the servers
/// counted over each grant window, all in `peer.csv` and set against each
/// other in the report.
#[test]
fn a_run_with_the_floor_and_the_fsync_ceiling_records_both_and_the_flushes() {
    if !etcd_on_path() {
        return;
    }
    let out = std::env::temp_dir().join(format!(
        "fencepost-peer-limits-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let (_, csv, rows) = run_peer(
        &[
            "--ops",
            "heartbeat,floor,grant,fsync",
            "--concurrency",
            "4",
            "--warmup",
            "100ms",
            "--redis",
            "off",
            "--seed",
            "3",
        ],
        &out,
    );
    let of = |system: &str, op: &str| {
        rows.iter()
            .filter(|r| r[0] == system && r[col("op")] == op)
            .collect::<Vec<_>>()
    };
    for system in ["fencepost", "etcd"] {
        assert_eq!(of(system, "floor").len(), 1, "{system} floor\n{csv}");
        let fsync = of(system, "fsync");
        assert_eq!(fsync.len(), 1, "{system} fsync once per repeat\n{csv}");
        assert!(fsync[0][col("ops")].parse::<u64>().unwrap() > 0, "{csv}");
        let grant = of(system, "grant");
        let tx: u64 = grant[0][col("store_tx")].parse().unwrap_or(0);
        assert!(tx > 0, "{system}: no flush counted over the grants\n{csv}");
    }
    let grant = of("fencepost", "grant");
    let writes: u64 = grant[0][col("store_writes")].parse().unwrap();
    // Every grant is two store writes (L4, L6); the warm-up's are outside the window.
    let ops: u64 = grant[0][col("ops")].parse().unwrap();
    assert!(writes >= ops, "{writes} writes for {ops} grants\n{csv}");
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains("## Heartbeat ÷ floor"), "{report}");
    assert!(
        report.contains("## Grants against the fsync ceiling"),
        "{report}"
    );
    assert!(
        !std::fs::read_dir(out.join("servers/sqlite"))
            .unwrap()
            .any(|e| e.unwrap().file_name() == bench_core::fsync::PROBE_FILE),
        "the probe file was left behind"
    );
    // The servers' data is scratch (etcd's alone is over 100 MB after a
    // full run); their logs stay.
    assert!(
        !out.join("servers/etcd/etcd-data").exists(),
        "etcd's data directory was left in --out"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The live-sessions dimension: every (N, system) is a row of
/// `peer_sessions.csv` whose ticks all add up, kept alive without an error
/// against the real lock-server and etcd, and the report carries the
/// section with the scale target.
#[test]
fn a_sessions_run_keeps_every_session_and_lease_alive_and_counts_every_tick() {
    if !etcd_on_path() {
        return;
    }
    let out = std::env::temp_dir().join(format!(
        "fencepost-peer-sessions-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let run = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["peer", "--sessions", "50,200", "--duration", "2s"])
        .args([
            "--repeat",
            "1",
            "--stores",
            "sqlite",
            "--min-heartbeats",
            "0",
        ])
        .args(["--seed", "5", "--out"])
        .arg(&out)
        .output()
        .expect("run bench peer --sessions");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{text}");
    let rows = bench_analysis::peer_sessions::read_csv(&out).expect("peer_sessions.csv");
    let mut seen: Vec<(usize, String)> = rows.iter().map(|r| (r.sessions, r.label())).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (50, "etcd/bbolt"),
            (50, "fencepost/sqlite"),
            (200, "etcd/bbolt"),
            (200, "fencepost/sqlite"),
        ]
        .map(|(n, l)| (n, l.to_string())),
        "one row per (N, system)\n{text}"
    );
    for r in &rows {
        assert!(r.ok > 0, "no heartbeat answered: {r:?}");
        assert_eq!(
            (r.errors, r.timeouts, r.open_failed),
            (0, 0, 0),
            "{r:?}\n{text}"
        );
        assert_eq!(
            r.scheduled,
            r.ok + r.errors + r.timeouts + r.missed,
            "{r:?}"
        );
        assert!(
            r.samples >= r.ok,
            "a corrected sample per answered tick: {r:?}"
        );
        assert!(r.cpu_server_s.is_some() && r.rss_end_kb.is_some(), "{r:?}");
        assert!(r.fd_limit > 0);
    }
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("## The scale target: p99 at 10000 sessions ÷ p99 at 100"),
        "{report}"
    );
    assert!(out.join("peer_sessions.svg").exists(), "the plot");
    let _ = std::fs::remove_dir_all(&out);
}

/// Whether `redis-server` is on PATH (the test skips, saying so); under
/// `CI=true` a missing one is a failure, never a skip.
fn redis_on_path() -> bool {
    match redis_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no redis-server for bench peer: {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// Redis beside the others: one redis-server child per persistence mode,
/// each a system of its own whose every operation succeeded (the renew
/// found its key, each grant's acquire script returned a token its release
/// matched), its fsync ceiling measured only where it writes a file, and
/// the report's ratios over it.
#[test]
fn a_run_with_redis_records_each_persistence_mode_and_ratios_over_it() {
    if !etcd_on_path() || !redis_on_path() {
        return;
    }
    let out = std::env::temp_dir().join(format!(
        "fencepost-peer-redis-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let (text, csv, rows) = run_peer(
        &[
            "--ops",
            "heartbeat,grant,floor,fsync",
            "--concurrency",
            "2",
            "--warmup",
            "100ms",
            "--redis",
            "none,always",
            "--seed",
            "5",
        ],
        &out,
    );
    for store in ["memory", "aof-always"] {
        let mine: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| r[0] == "redis" && r[1] == store)
            .collect();
        let ops = |op: &str| mine.iter().filter(|r| r[col("op")] == op).count();
        for op in ["heartbeat", "grant", "floor"] {
            assert_eq!(ops(op), 1, "redis/{store} {op}\n{csv}");
        }
        let fsync = if store == "memory" { 0 } else { 1 };
        assert_eq!(
            ops("fsync"),
            fsync,
            "no file to fsync without persistence\n{csv}"
        );
        for r in mine.iter().filter(|r| r[col("op")] != "fsync") {
            assert_eq!(r[col("client")], "redis-rs", "{csv}");
            assert!(r[col("ops")].parse::<u64>().unwrap() > 0, "{csv}");
            assert_eq!(
                r[col("errors")],
                "0",
                "every renew and grant succeeded\n{text}"
            );
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("## Ratios: fencepost ÷ redis/aof-always"),
        "{report}"
    );
    assert!(
        report.contains("## Ratios: fencepost ÷ redis/memory"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The Redis client's checks fire: a renew after the key was taken from it
/// (expired, or another owner's) is an error, not a sample, and a grant on
/// a key someone else holds is refused with the key named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_renew_of_a_lost_key_and_a_grant_on_a_held_key_are_errors() {
    use bench_core::peer::PeerOp;
    use bench_driver::backend::redis::server::{RedisPersistence, RedisServer};
    use bench_driver::peer_redis::{RedisPeer, RedisPeerError};
    use std::time::Duration;

    if !redis_on_path() {
        return;
    }
    let dir = std::env::temp_dir().join(format!(
        "fencepost-peer-redis-checks-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let server = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let url = server.url();
    let t = Duration::from_secs(5);
    let mut hb = RedisPeer::open(&url, "k", 0, PeerOp::Heartbeat, 60_000, t)
        .await
        .unwrap();
    hb.op(PeerOp::Heartbeat).await.expect("its own key renews");
    let mut other = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lock = bench_driver::backend::redis::scripts::lock_key("k");
    let _: () = redis::cmd("SET")
        .arg(&lock)
        .arg("someone-else:9")
        .query_async(&mut other)
        .await
        .unwrap();
    let e = hb.op(PeerOp::Heartbeat).await.unwrap_err();
    assert!(
        matches!(
            e,
            RedisPeerError::NotOurs {
                script: "renew",
                ..
            }
        ),
        "{e}"
    );
    let mut grant = RedisPeer::open(&url, "k", 1, PeerOp::Grant, 60_000, t)
        .await
        .unwrap();
    let e = grant.op(PeerOp::Grant).await.unwrap_err();
    assert_eq!(e.to_string(), format!("acquire script: {lock} is held"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
