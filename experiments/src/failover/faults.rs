//! The faults of `experiments failover` and what they need: a fresh schema,
//! replicas started and polled until one leads, PostgreSQL restarted, a thawed
//! leader probed, and the [`Schedule`] that applies them during the window.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_driver::cell::{CellError, CellRun, Ended, Schedule};
use fencepost_harness::ChildService;
use tokio::time::Instant;

use crate::failover::error::{FailoverError, PgRestartError};
use crate::failover::model::{FaultRecord, LEADER_PATIENCE};

/// Creates a fresh schema `PREFIX_SEED_PID` in `pg_url`; returns the store URL that uses it.
pub(crate) async fn fresh_schema(
    pg_url: &str,
    prefix: &str,
    seed: u64,
) -> Result<String, FailoverError> {
    let schema = format!("{prefix}_{seed}_{}", std::process::id());
    let (client, conn) = tokio_postgres::connect(pg_url, tokio_postgres::NoTls)
        .await
        .map_err(|error| FailoverError::Connect {
            url: pg_url.to_string(),
            error,
        })?;
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .await?;
    let sep = if pg_url.contains('?') { '&' } else { '?' };
    Ok(format!("{pg_url}{sep}options=-csearch_path%3D{schema}"))
}

pub(crate) async fn spawn(
    package: &'static str,
    args: Vec<String>,
    log: PathBuf,
) -> Result<ChildService, FailoverError> {
    let started = tokio::task::spawn_blocking(move || {
        let bin = fencepost_harness::binary(package, package)?;
        ChildService::start(&bin, args, &log)
    })
    .await?;
    Ok(started?)
}

/// The replicas whose `/readyz` answers 200.
pub(crate) async fn ready(c: &reqwest::Client, urls: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, u) in urls.iter().enumerate() {
        if c.get(format!("{u}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            out.push(i);
        }
    }
    out
}

/// Waits until one replica other than `not` serves; its index and the wait.
pub(crate) async fn await_leader(
    c: &reqwest::Client,
    urls: &[String],
    not: Option<usize>,
) -> Option<(usize, Duration)> {
    let t = Instant::now();
    while t.elapsed() < LEADER_PATIENCE {
        if let Some(&i) = ready(c, urls).await.iter().find(|&&i| Some(i) != not) {
            return Some((i, t.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// `pg_ctl restart -m MODE` of the cluster in `dir` (the layout of
/// scripts/pg-test-cluster.sh): `fast` (a clean shutdown) or `immediate`
/// (a crash: no checkpoint, recovery from the WAL at start).
pub(crate) fn restart_postgres(dir: &Path, mode: &str) -> Result<(), PgRestartError> {
    let io = |path: &str| {
        let path = PathBuf::from(path);
        move |error| PgRestartError::Io { path, error }
    };
    let bindir = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(io("/usr/lib/postgresql"))?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .max()
        .ok_or(PgRestartError::NoPgCtl)?;
    let data = dir.join("data");
    let pg_ctl = bindir.join("pg_ctl");
    let me = std::fs::metadata("/proc/self").map_err(io("/proc/self"))?;
    let root = std::os::unix::fs::MetadataExt::uid(&me) == 0;
    let mut cmd = if root {
        let mut c = std::process::Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
        c
    } else {
        std::process::Command::new(&pg_ctl)
    };
    let out = cmd
        .arg("-D")
        .arg(&data)
        .args(["-m", mode, "-w", "-t", "60", "restart"])
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|error| PgRestartError::Io {
            path: pg_ctl.clone(),
            error,
        })?;
    if !out.status.success() {
        return Err(PgRestartError::Failed {
            data,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// How long a PostgreSQL container started again may take to accept a query
/// (pg_ctl restart's `-t 60` waits as long).
const PG_BACK_PATIENCE: Duration = Duration::from_secs(60);

/// Waits until the PostgreSQL at `addr` (user `postgres`, no password: the
/// run's own container) answers `SELECT 1`: after a crash it first replays
/// its WAL and refuses connections while it does ("the database system is
/// starting up"), as `pg_ctl restart -w` waits for.
pub(crate) async fn await_postgres(addr: std::net::SocketAddr) -> Result<(), PgRestartError> {
    let url = format!("postgres://postgres@{addr}/postgres?connect_timeout=2");
    let t = Instant::now();
    loop {
        let last = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
            Ok((client, conn)) => {
                let conn = tokio::spawn(conn);
                let ok = client.simple_query("SELECT 1").await;
                drop(client);
                conn.abort();
                match ok {
                    Ok(_) => return Ok(()),
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e.to_string(),
        };
        if t.elapsed() >= PG_BACK_PATIENCE {
            return Err(PgRestartError::NotBack {
                addr,
                patience: PG_BACK_PATIENCE,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Probes a thawed old leader with L1, L2 and L4; counts 2xx replies.
pub(crate) async fn probe_thawed(c: &reqwest::Client, url: &str) -> u64 {
    let sid = "00000000000000000000000000000000";
    let probes = [
        (
            format!("{url}/v1/sessions"),
            serde_json::json!({"owner_id": "probe", "ttl_ms": 1000}),
        ),
        (
            format!("{url}/v1/sessions/{sid}/heartbeat"),
            serde_json::json!({}),
        ),
        (
            format!("{url}/v1/locks/probe/acquire"),
            serde_json::json!({"session_id": sid}),
        ),
    ];
    let mut ok = 0;
    for (u, body) in probes {
        if let Ok(r) = c.post(u).json(&body).send().await
            && r.status().is_success()
        {
            ok += 1;
        }
    }
    ok
}

/// What the fault task shares with the run.
pub(crate) struct Faults {
    pub(crate) nodes: Arc<Mutex<Vec<ChildService>>>,
    pub(crate) urls: Vec<String>,
    pub(crate) pg_dir: Option<PathBuf>,
    pub(crate) phase: Duration,
    pub(crate) records: Arc<Mutex<Vec<FaultRecord>>>,
    pub(crate) opened: Instant,
}

impl Faults {
    fn node<T>(&self, i: usize, f: impl FnOnce(&mut ChildService) -> T) -> T {
        f(&mut self.nodes.lock().unwrap_or_else(|e| e.into_inner())[i])
    }

    fn record(&self, r: FaultRecord) {
        println!(
            "  {} at {:.2} s: leader {:?} -> {:?} after {}",
            r.fault,
            r.at_s,
            r.leader_before,
            r.leader_after,
            r.time_to_leader_ms
                .map_or_else(|| "no new leader".into(), |ms| format!("{ms:.0} ms"))
        );
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
    }

    async fn run(self) {
        let c = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .expect("client");
        let blank = |fault: &str, at: Instant, before| FaultRecord {
            fault: fault.into(),
            at_s: at.duration_since(self.opened).as_secs_f64(),
            leader_before: before,
            leader_after: None,
            time_to_leader_ms: None,
            min_throughput_per_s: None,
            below_half_s: None,
            thawed_2xx: None,
            skipped: None,
        };
        // 1. kill -9 of the leader.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("kill9_leader", at, leader);
        if let Some(l) = leader {
            self.node(l, |n| n.kill9());
            if let Some((new, took)) = await_leader(&c, &self.urls, Some(l)).await {
                r.leader_after = Some(new);
                r.time_to_leader_ms = Some(took.as_secs_f64() * 1e3);
            }
        } else {
            r.skipped = Some("no replica served before the fault".into());
        }
        self.record(r);
        // 2. SIGSTOP of the leader until another serves, then SIGCONT.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("sigstop_leader", at, leader);
        if let Some(l) = leader {
            let _ = self.node(l, |n| n.pause());
            let next = await_leader(&c, &self.urls, Some(l)).await;
            let _ = self.node(l, |n| n.resume());
            r.thawed_2xx = Some(probe_thawed(&c, &self.urls[l]).await);
            if let Some((new, took)) = next {
                r.leader_after = Some(new);
                r.time_to_leader_ms = Some(took.as_secs_f64() * 1e3);
            }
        } else {
            r.skipped = Some("no replica served before the fault".into());
        }
        self.record(r);
        // 3. A restart of PostgreSQL.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("restart_postgres", at, leader);
        match &self.pg_dir {
            None => {
                r.skipped = Some("no --pg-dir (FENCEPOST_PG_DIR): PostgreSQL not restarted".into())
            }
            Some(dir) => {
                let dir = dir.clone();
                match tokio::task::spawn_blocking(move || restart_postgres(&dir, "fast")).await {
                    Ok(Ok(())) => {
                        if let Some((new, took)) = await_leader(&c, &self.urls, None).await {
                            r.leader_after = Some(new);
                            r.time_to_leader_ms = Some(at.elapsed().max(took).as_secs_f64() * 1e3);
                        }
                    }
                    Ok(Err(e)) => r.skipped = Some(format!("{e}")),
                    Err(e) => r.skipped = Some(format!("{e}")),
                }
            }
        }
        self.record(r);
        tokio::time::sleep(self.phase).await;
    }
}

/// The load: seed, spawn the workers, warm up, open the window, run the
/// fault task to its end while the workers run.
pub(crate) struct FailoverSchedule {
    pub(crate) faults: Option<Faults>,
    pub(crate) opened: Arc<Mutex<Option<Instant>>>,
}

impl Schedule for FailoverSchedule {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> Result<Ended, CellError> {
        let backlog = run.seed_backlog(run.plan.payouts).await?;
        run.spawn_workers(backlog, 0..u64::from(run.plan.workers))?;
        if run.run_for(run.plan.warmup).await == Ended::Interrupted {
            return Ok(Ended::Interrupted);
        }
        run.open_window().await?;
        let opened = Instant::now();
        *self.opened.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened);
        let Some(mut faults) = self.faults.take() else {
            return Err(CellError::schedule(FailoverError::RunsOnce));
        };
        faults.opened = opened;
        let task = tokio::spawn(faults.run());
        while !task.is_finished() {
            if run.run_for(Duration::from_millis(200)).await == Ended::Interrupted {
                task.abort();
                return Ok(Ended::Interrupted);
            }
        }
        task.await.map_err(CellError::schedule)?;
        Ok(Ended::Completed)
    }
}
