//! The systems `bench peer` measures, started once per run and kept for
//! all of it: the lock-server as a child on each store (SQLite in the run
//! directory, PostgreSQL on a fresh schema), etcd as a child or at
//! `--etcd-url`, Redis as one redis-server child per persistence mode or at
//! `--redis-url`; each with what its CPU and store counters are read from.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bench_analysis::peer::{ETCD_CLIENT, PeerPlan, REDIS, REDIS_CLIENT, label};
use bench_driver::backend::etcd::server::EtcdServer;
use bench_driver::backend::redis::server::{RedisPersistence, RedisServer};
use bench_driver::peer::Target;
use fencepost_harness::ChildService;

use crate::peer_error::{PeerRunError, READY_TIMEOUT, written};

/// The block a SQLite WAL frame (a 4 KiB page) and etcd's WAL write.
pub(crate) const SQLITE_BLOCK: usize = 4096;
/// The block PostgreSQL's WAL writes.
const PG_BLOCK: usize = 8192;
/// The store name of a Redis system on a redis-server child with `mode`.
pub(crate) fn redis_store(mode: RedisPersistence) -> String {
    match mode {
        RedisPersistence::None => "memory".into(),
        other => format!("aof-{}", other.as_str()),
    }
}

/// What keeps a measured server running (dropped last: stops it).
pub(crate) enum Guard {
    /// A lock-server child.
    LockServer {
        /// Stopped when dropped.
        _child: ChildService,
    },
    /// An etcd child.
    Etcd {
        /// Stopped when dropped.
        _server: EtcdServer,
    },
    /// A redis-server child.
    Redis {
        /// Stopped when dropped.
        _server: RedisServer,
    },
    /// A server someone else runs.
    External,
}

/// The PostgreSQL backends serving one lock-server, found by its
/// `application_name`, for their CPU seconds.
pub(crate) struct PgBackends {
    /// A connection of the driver's own (not counted: another application name).
    client: tokio_postgres::Client,
    /// The lock-server's `application_name`.
    app: String,
    /// The connection task.
    _conn: tokio::task::JoinHandle<()>,
}

impl PgBackends {
    /// The backend pids serving the lock-server now.
    pub(crate) async fn pids(&self) -> Vec<i32> {
        match self
            .client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&self.app],
            )
            .await
        {
            Ok(rows) => rows.iter().map(|r| r.get::<_, i32>(0)).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the lock-server's PostgreSQL backends");
                Vec::new()
            }
        }
    }
}

/// One measured system: fencepost on one store, etcd, or Redis on one persistence mode.
pub(crate) struct System {
    /// `fencepost`, `etcd` or `redis`.
    pub(crate) system: &'static str,
    /// `sqlite`, `postgres` or `bbolt` (etcd's store, behind its raft WAL).
    pub(crate) store: String,
    /// The client library: `sdk`/`hyper-legacy` (fencepost), `etcd-client`.
    pub(crate) client: &'static str,
    /// Where the driver sends its load.
    pub(crate) target: Target,
    /// The server process (lock-server or etcd) when the bench started it.
    pub(crate) pid: Option<i32>,
    /// The PostgreSQL backends, for the postgres store (shared by the
    /// systems that drive one lock-server with different clients).
    pub(crate) pg: Option<Arc<PgBackends>>,
    /// Where its server's `/metrics` are (the store's flush and write counters).
    pub(crate) metrics: Option<String>,
    /// Its store's directory and the block its log writes, for the fsync
    /// ceiling (none for a server someone else runs).
    pub(crate) data_dir: Option<(PathBuf, usize)>,
    /// Keeps the server running (shared likewise; the last one stops it).
    _guard: Arc<Guard>,
}

impl System {
    pub(crate) fn label(&self) -> String {
        label(self.system, &self.store, self.client)
    }
}

/// Starts a lock-server child on `store` with its log in `dir`, and waits
/// until it serves (`/readyz`: on PostgreSQL it must hold the leader lease).
async fn start_lock_server(store: &str, dir: &Path) -> Result<ChildService, PeerRunError> {
    written(dir, std::fs::create_dir_all(dir))?;
    let args = vec!["--store".to_string(), store.to_string()];
    let child =
        bench_driver::cell::stack::spawn_child("lock-server", args, dir.join("lock-server.log"))
            .await?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(PeerRunError::Poll)?;
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(r) = http.get(format!("{}/readyz", child.url())).send().await
            && r.status().is_success()
        {
            return Ok(child);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(PeerRunError::NotReady {
                store: redact(store),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A store URL for messages: no user, password or query (`postgres://***@HOST/DB`).
fn redact(url: &str) -> String {
    let url = url.split('?').next().unwrap_or(url);
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***{}", &url[at..]),
        _ => url.to_string(),
    }
}

/// Connects to PostgreSQL (the driver's own connection).
async fn pg_connect(
    url: &str,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), PeerRunError> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|source| PeerRunError::PgConnect {
            url: redact(url),
            source,
        })?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((client, task))
}

/// Starts (or connects to) every system of the plan: each lock-server once,
/// driven by each of the plan's HTTP clients (one system per client), and etcd.
pub(crate) async fn start_systems(plan: &PeerPlan) -> Result<Vec<System>, PeerRunError> {
    let dir = plan.out.join("servers");
    let mut systems = Vec::new();
    for store in &plan.stores {
        let (child, pg, data_dir) = match store.as_str() {
            "sqlite" => {
                let d = dir.join("sqlite");
                written(&d, std::fs::create_dir_all(&d))?;
                let url = format!("sqlite:{}", d.join("lock.sqlite").display());
                // A WAL frame is one 4 KiB page (and a 24-byte header).
                let data = Some((d.clone(), SQLITE_BLOCK));
                (start_lock_server(&url, &d).await?, None, data)
            }
            _ => {
                let base = plan.pg_url.as_deref().ok_or(PeerRunError::NoPgUrl)?;
                let (client, conn) = pg_connect(base).await?;
                let tag = format!(
                    "fencepost_peer_{}_{}",
                    std::process::id(),
                    plan.seed % 1_000_000
                );
                client
                    .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {tag}"))
                    .await
                    .map_err(|source| PeerRunError::PgSchema {
                        schema: tag.clone(),
                        source,
                    })?;
                let sep = if base.contains('?') { '&' } else { '?' };
                let url =
                    format!("{base}{sep}options=-csearch_path%3D{tag}&application_name={tag}");
                let child = start_lock_server(&url, &dir.join("postgres")).await?;
                let pg = PgBackends {
                    client,
                    app: tag,
                    _conn: conn,
                };
                // PostgreSQL's WAL is written in 8 KiB pages.
                let data = plan.pg_dir.as_ref().map(|d| (d.join("data"), PG_BLOCK));
                (child, Some(Arc::new(pg)), data)
            }
        };
        let (base, pid) = (child.url(), child.pid());
        let guard = Arc::new(Guard::LockServer { _child: child });
        for &client in &plan.http_clients {
            systems.push(System {
                system: "fencepost",
                store: store.clone(),
                client: client.as_str(),
                target: Target::Fencepost {
                    base: base.clone(),
                    client,
                },
                pid: Some(pid),
                pg: pg.clone(),
                metrics: Some(format!("{base}/metrics")),
                data_dir: data_dir.clone(),
                _guard: guard.clone(),
            });
        }
    }
    let etcd = match &plan.etcd_url {
        Some(url) => System {
            system: "etcd",
            store: "bbolt".into(),
            client: ETCD_CLIENT,
            target: Target::Etcd(url.clone()),
            pid: None,
            pg: None,
            metrics: Some(format!("{}/metrics", url.trim_end_matches('/'))),
            data_dir: None,
            _guard: Arc::new(Guard::External),
        },
        None => {
            let server = EtcdServer::start(&dir.join("etcd")).await?;
            System {
                system: "etcd",
                store: "bbolt".into(),
                client: ETCD_CLIENT,
                target: Target::Etcd(server.url().to_string()),
                pid: Some(server.pid()),
                pg: None,
                metrics: Some(format!("{}/metrics", server.url().trim_end_matches('/'))),
                // Its WAL directory, written in 4 KiB pages.
                data_dir: Some((dir.join("etcd").join("etcd-data"), SQLITE_BLOCK)),
                _guard: Arc::new(Guard::Etcd { _server: server }),
            }
        }
    };
    systems.push(etcd);
    systems.extend(redis_systems(plan, &dir).await?);
    Ok(systems)
}

/// The Redis systems of the plan: one per redis-server child (its store its
/// persistence mode), or the one at `--redis-url`.
async fn redis_systems(plan: &PeerPlan, dir: &Path) -> Result<Vec<System>, PeerRunError> {
    let system = |store: &str, url: String, pid, data_dir, guard| System {
        system: REDIS,
        store: store.to_string(),
        client: REDIS_CLIENT,
        target: Target::Redis(url),
        pid,
        pg: None,
        metrics: None,
        data_dir,
        _guard: Arc::new(guard),
    };
    if let Some(url) = &plan.redis_url {
        return Ok(vec![system(
            "external",
            url.clone(),
            None,
            None,
            Guard::External,
        )]);
    }
    let mut out = Vec::new();
    for store in &plan.redis_stores {
        let mode = RedisPersistence::ALL
            .into_iter()
            .find(|m| redis_store(*m) == *store)
            .unwrap_or(RedisPersistence::Always);
        let d = dir.join(format!("redis-{store}"));
        let server = RedisServer::start(&d, mode).await?;
        // Its append-only file, written in 4 KiB pages; nothing to fsync without one.
        let data_dir =
            (mode != RedisPersistence::None).then(|| (d.join("redis-data"), SQLITE_BLOCK));
        let (url, pid) = (server.url(), Some(server.pid()));
        out.push(system(
            store,
            url,
            pid,
            data_dir,
            Guard::Redis { _server: server },
        ));
    }
    Ok(out)
}
