//! Starting a stack: the lock service and the rail-stub of one runtime, the
//! Prometheus targets, and the delay proxy in front of the lock service.
//! Each runtime has its own step; [`Stack::start`] runs the one `spec` names
//! and hands the services to the stack, which from then on stops them on
//! every exit path.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::error::StackError;
use super::launch::{self, spawn_child};
use super::tls::{self, CellTls};
use super::{REPLICA_LEADER_LEASE, Runtime, Services, Stack, StackSpec, await_ready, lock_addr};
use crate::backend::etcd::server::EtcdServer;
use crate::backend::redis::{RedisLaunch, RedisPersistence, server as redis_server};
use crate::backend::{BackendKind, RailFences};
use crate::docker::{self, DockerSpec, Postgres};
use crate::proxy::DelayProxy;
use crate::rail::RailClient;

/// What starting one runtime's services produced.
struct Started {
    services: Services,
    /// The lock service's URL(s), comma-separated for replicas.
    lock_url: String,
    rail_url: String,
    /// The lock-server's arguments (process runtime), to restart it on the same store.
    restart_args: Vec<String>,
    /// Per replica, its arguments.
    replica_args: Vec<Vec<String>>,
    /// Per replica, the delay proxy in front of its PostgreSQL.
    db_relays: Vec<DelayProxy>,
    /// The redis-servers started (redis runtime), to restart them in place.
    redis: Vec<RedisLaunch>,
}

impl Started {
    fn new(services: Services, lock_url: String, rail_url: String) -> Self {
        Self {
            services,
            lock_url,
            rail_url,
            restart_args: Vec::new(),
            replica_args: Vec::new(),
            db_relays: Vec::new(),
            redis: Vec::new(),
        }
    }
}

impl Stack {
    /// Starts the services of `spec`, with logs (and the embedded lock store) in `dir`.
    pub async fn start(spec: &StackSpec, dir: &Path) -> Result<Stack, StackError> {
        std::fs::create_dir_all(dir).map_err(StackError::Dir)?;
        let cell_tls = cell_tls(spec, dir)?;
        let tls_ca = cell_tls.as_ref().map(|t| t.ca.clone());
        let started = match &spec.runtime {
            Runtime::Process { store, replicas } => {
                start_processes(spec, store.as_deref(), *replicas, cell_tls.as_ref(), dir).await?
            }
            Runtime::Docker { .. } => start_containers(spec, dir).await?,
            Runtime::Etcd { etcd_url } => start_etcd(spec, etcd_url.as_deref(), dir).await?,
            Runtime::Redis {
                urls,
                instances,
                persistence,
                redlock,
            } => start_redis(spec, urls, *instances, *persistence, *redlock, dir).await?,
            Runtime::External { lock_url, rail_url } => {
                Started::new(Services::External, lock_url.clone(), rail_url.clone())
            }
        };
        let backend = runtime_backend(&spec.runtime);
        let metrics_targets = metrics_targets(backend, &started.lock_url, &started.rail_url);
        // From here on the stack owns the services, so every exit path stops them.
        let mut stack = Stack {
            services: Some(started.services),
            proxy: None,
            faults: spec.faults.clone(),
            fault_tasks: None,
            rail: RailClient::new(&started.rail_url, super::DRIVER_RAIL_TIMEOUT),
            lock_url: started.lock_url,
            rail_url: started.rail_url,
            backend,
            rail_fences: rail_fences(&rail_args(spec, backend)),
            redis: started.redis,
            dir: dir.to_path_buf(),
            lock_args: started.restart_args,
            replica_args: started.replica_args,
            db_relays: started.db_relays,
            lock_restarts: 0,
            metrics_targets,
            tls_ca,
        };
        let targets = stack.fault_targets();
        if let Some(why) = spec.faults.iter().find_map(|f| f.unsupported(&targets)) {
            return Err(StackError::UnsupportedFault(why));
        }
        if let Some(delay) = spec.net_delay {
            let proxy = DelayProxy::start(lock_addr(&stack.lock_url)?, delay, spec.seed)
                .await
                .map_err(StackError::Proxy)?;
            stack.lock_url = match backend {
                BackendKind::Redis | BackendKind::Redlock => format!("redis://{}", proxy.addr()),
                _ => proxy.url(),
            };
            stack.proxy = Some(proxy);
        }
        Ok(stack)
    }
}

/// The lock-server's arguments every runtime shares: the lease and the session TTL.
fn lock_args(spec: &StackSpec) -> Vec<String> {
    [
        "--default-ttl".to_string(),
        fencepost_api::format_duration(spec.lease),
        "--session-ttl".into(),
        fencepost_api::format_duration(spec.session_ttl),
    ]
    .into_iter()
    .chain(spec.lock_args.iter().cloned())
    .collect()
}

/// The lock service a runtime's workers use.
pub(super) fn runtime_backend(runtime: &Runtime) -> BackendKind {
    match runtime {
        Runtime::Etcd { .. } => BackendKind::Etcd,
        Runtime::Redis { redlock: false, .. } => BackendKind::Redis,
        Runtime::Redis { redlock: true, .. } => BackendKind::Redlock,
        _ => BackendKind::Fencepost,
    }
}

/// Whether a rail-stub started with `args` compares tokens: off with
/// `--fences off` (or the chaos experiment's `--sabotage no-fences`).
fn rail_fences(args: &[String]) -> RailFences {
    let off = args.windows(2).any(|w| {
        (w[0] == "--fences" && w[1] == "off") || (w[0] == "--sabotage" && w[1] == "no-fences")
    });
    if off { RailFences::Off } else { RailFences::On }
}

/// The rail-stub's arguments: the cell's latency and seed, a fresh ledger,
/// and its fences off on a backend without fencing tokens (redlock).
fn rail_args(spec: &StackSpec, backend: BackendKind) -> Vec<String> {
    let fences = (!backend.has_fencing_tokens()).then(|| ["--fences".to_string(), "off".into()]);
    base_rail_args(spec)
        .into_iter()
        .chain(fences.into_iter().flatten())
        .collect()
}

/// The rail-stub's arguments every backend shares.
fn base_rail_args(spec: &StackSpec) -> Vec<String> {
    [
        "--latency".to_string(),
        spec.rail_latency.to_string(),
        "--seed".into(),
        spec.seed.to_string(),
        // A fresh ledger per cell: the rail-stub's default is a durable
        // file, which a second cell (or run) would share.
        "--ledger".into(),
        "memory".into(),
    ]
    .into_iter()
    .chain(spec.rail_args.iter().cloned())
    .collect()
}

/// The certificate the lock-server serves, when the stack serves TLS.
fn cell_tls(spec: &StackSpec, dir: &Path) -> Result<Option<CellTls>, StackError> {
    match (&spec.runtime, spec.tls) {
        (_, false) => Ok(None),
        (_, true) if spec.net_delay.is_some() => Err(StackError::TlsUnsupported(
            "does not go through the --net-delay proxy yet",
        )),
        (Runtime::Process { .. }, true) => Ok(Some(tls::make(dir)?)),
        (_, true) => Err(StackError::TlsUnsupported("needs --runtime process")),
    }
}

/// Child processes: `replicas` lock-servers on `store` (SQLite in `dir`
/// when `None`) and a rail-stub.
async fn start_processes(
    spec: &StackSpec,
    store: Option<&str>,
    replicas: u32,
    cell_tls: Option<&CellTls>,
    dir: &Path,
) -> Result<Started, StackError> {
    let store = store.map_or_else(
        || format!("sqlite:{}", dir.join("lock.sqlite").display()),
        str::to_owned,
    );
    let replicated = store.starts_with("postgres://") || store.starts_with("postgresql://");
    if replicas > 1 && !replicated {
        return Err(StackError::ReplicasNeedPostgres { replicas });
    }
    if replicas > 1 && spec.net_delay.is_some() {
        return Err(StackError::NetDelayNeedsOneReplica);
    }
    let mut args = vec!["--store".to_string(), store];
    args.extend(lock_args(spec));
    if let Some(t) = cell_tls {
        args.extend(t.args.iter().cloned());
    }
    if replicated {
        args.extend([
            "--leader-lease".to_string(),
            fencepost_api::format_duration(REPLICA_LEADER_LEASE),
        ]);
    }
    let relays = replicated && spec.db_relays;
    let spawned = launch::spawn(&args, replicas, relays, spec.seed, dir).await?;
    let (lock, standbys) = (spawned.lock, spawned.standbys);
    let rail = spawn_child(
        "rail-stub",
        rail_args(spec, BackendKind::Fencepost),
        dir.join("rail-stub.log"),
    )
    .await?;
    let lock_urls: Vec<String> = std::iter::once(lock.url())
        .chain(standbys.iter().map(|s| s.url()))
        .collect();
    if replicated {
        await_ready(&lock_urls, cell_tls.map(|t| t.ca.as_path())).await?;
    }
    let rail_url = rail.url();
    let services = Services::Process {
        lock: Arc::new(Mutex::new(lock)),
        rail,
        standbys,
    };
    Ok(Started {
        restart_args: args,
        replica_args: spawned.args,
        db_relays: spawned.relays,
        ..Started::new(services, lock_urls.join(","), rail_url)
    })
}

/// Containers on a private network: lock-server replicas on PostgreSQL and a rail-stub.
async fn start_containers(spec: &StackSpec, dir: &Path) -> Result<Started, StackError> {
    let Runtime::Docker {
        pg_url,
        lock_image,
        rail_image,
        pg_image,
        replicas,
    } = &spec.runtime
    else {
        unreachable!("start_containers is called on the docker runtime");
    };
    if *replicas > 1 && spec.net_delay.is_some() {
        return Err(StackError::NetDelayNeedsOneReplica);
    }
    let mut lock_args = lock_args(spec);
    // Always on PostgreSQL, so always elected: a short lease, so a
    // lock-server started again after a kill serves soon.
    lock_args.extend([
        "--leader-lease".to_string(),
        fencepost_api::format_duration(REPLICA_LEADER_LEASE),
    ]);
    let d = docker::start(&DockerSpec {
        lock_image: lock_image.clone(),
        rail_image: rail_image.clone(),
        postgres: match pg_url {
            Some(url) => Postgres::Url(url.clone()),
            None => Postgres::Container {
                image: pg_image.clone(),
            },
        },
        replicas: (*replicas).max(1),
        db_relays: spec.db_relays,
        seed: spec.seed,
        lock_args,
        rail_args: rail_args(spec, BackendKind::Fencepost),
        log_dir: dir.to_path_buf(),
    })
    .await?;
    await_ready(&d.replica_urls(), None).await?;
    let (lock_url, rail_url) = (d.lock_url.clone(), d.rail_url.clone());
    Ok(Started::new(
        Services::Docker(Box::new(d)),
        lock_url,
        rail_url,
    ))
}

/// etcd as the lock service (a child, unless `etcd_url` names one) and a rail-stub child.
async fn start_etcd(
    spec: &StackSpec,
    etcd_url: Option<&str>,
    dir: &Path,
) -> Result<Started, StackError> {
    let rail = spawn_child(
        "rail-stub",
        rail_args(spec, BackendKind::Fencepost),
        dir.join("rail-stub.log"),
    )
    .await?;
    let rail_url = rail.url();
    Ok(match etcd_url {
        Some(url) => Started::new(Services::RailOnly(rail), url.to_owned(), rail_url),
        None => {
            let etcd = EtcdServer::start(dir).await?;
            let url = etcd.url().to_string();
            let services = Services::Process {
                lock: Arc::new(Mutex::new(etcd.into_child())),
                rail,
                standbys: Vec::new(),
            };
            Started::new(services, url, rail_url)
        }
    })
}

/// The services' own addresses (never the proxy's), by Prometheus job.
fn metrics_targets(
    backend: BackendKind,
    lock_url: &str,
    rail_url: &str,
) -> Vec<(&'static str, String)> {
    let lock_job = match backend {
        BackendKind::Etcd => "etcd",
        BackendKind::Fencepost => "lock-server",
        // redis-server serves no Prometheus text: only the rail-stub is scraped.
        BackendKind::Redis | BackendKind::Redlock => "",
    };
    lock_url
        .split(',')
        .filter(|_| !lock_job.is_empty())
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| (lock_job, u.to_owned()))
        .chain(std::iter::once(("rail-stub", rail_url.to_owned())))
        .collect()
}

/// Redis as the lock service (`instances` redis-server children, unless
/// `urls` names running ones) and a rail-stub child, its fences off for redlock.
async fn start_redis(
    spec: &StackSpec,
    urls: &[String],
    instances: u32,
    persistence: RedisPersistence,
    redlock: bool,
    dir: &Path,
) -> Result<Started, StackError> {
    if !redlock && urls.len() > 1 || !redlock && urls.is_empty() && instances != 1 {
        let instances = if urls.is_empty() {
            instances
        } else {
            urls.len() as u32
        };
        return Err(StackError::RedisInstances { instances });
    }
    let backend = if redlock {
        BackendKind::Redlock
    } else {
        BackendKind::Redis
    };
    let rail = spawn_child(
        "rail-stub",
        rail_args(spec, backend),
        dir.join("rail-stub.log"),
    )
    .await?;
    let rail_url = rail.url();
    if !urls.is_empty() {
        return Ok(Started::new(
            Services::RailOnly(rail),
            urls.join(","),
            rail_url,
        ));
    }
    let servers = if redlock {
        redis_server::start_n(dir, instances, persistence).await?
    } else {
        vec![redis_server::RedisServer::start(dir, persistence).await?]
    };
    let (children, launches): (Vec<_>, Vec<_>) =
        servers.into_iter().map(|s| s.into_parts()).unzip();
    record_redis(dir, persistence, &launches)?;
    let lock_url = launches
        .iter()
        .map(RedisLaunch::url)
        .collect::<Vec<_>>()
        .join(",");
    let mut children = children.into_iter();
    let lock = children
        .next()
        .ok_or(StackError::RedisInstances { instances })?;
    let services = Services::Process {
        lock: Arc::new(Mutex::new(lock)),
        rail,
        standbys: children.collect(),
    };
    Ok(Started {
        redis: launches,
        ..Started::new(services, lock_url, rail_url)
    })
}

/// Writes `redis-server.json` into the stack's directory: each started
/// instance's URL and flags, and the persistence mode, so a run records how
/// its Redis ran.
fn record_redis(
    dir: &Path,
    persistence: RedisPersistence,
    launches: &[RedisLaunch],
) -> Result<(), StackError> {
    let instances: Vec<serde_json::Value> = launches
        .iter()
        .map(|l| serde_json::json!({"url": l.url(), "args": l.args()}))
        .collect();
    let record = serde_json::json!({
        "binary": redis_server::redis_binary()?.display().to_string(),
        "persistence": persistence.as_str(),
        "instances": instances,
    });
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    std::fs::write(dir.join("redis-server.json"), text).map_err(StackError::Dir)
}
