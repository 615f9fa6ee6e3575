//! Starting the stack's child processes: one service, or a set of
//! lock-server replicas (each, when asked, behind a PostgreSQL relay of
//! its own).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use fencepost_api::latency::LatencySpec;
use fencepost_harness::ChildService;

use super::error::StackError;
use crate::docker::pg_relay::{pg_addr, rewrite_pg_url};
use crate::proxy::DelayProxy;

fn start_child(
    package: &str,
    args: Vec<String>,
    log: PathBuf,
    listen: Option<SocketAddr>,
) -> Result<ChildService, StackError> {
    let bin = fencepost_harness::binary(package, package)?;
    Ok(match listen {
        Some(addr) => ChildService::start_on(&bin, args, &log, addr)?,
        None => ChildService::start(&bin, args, &log)?,
    })
}

/// Starts a child on a blocking thread (it waits for the `listening on` line).
/// The harness forks from one long-lived thread of its own, so
/// `PR_SET_PDEATHSIG` does not fire when this pool thread retires.
pub async fn spawn_child(
    package: &'static str,
    args: Vec<String>,
    log: PathBuf,
) -> Result<ChildService, StackError> {
    tokio::task::spawn_blocking(move || start_child(package, args, log, None)).await?
}

/// [`spawn_child`] listening on `addr` (a replica restarted in its place).
pub async fn spawn_child_on(
    package: &'static str,
    args: Vec<String>,
    log: PathBuf,
    addr: SocketAddr,
) -> Result<ChildService, StackError> {
    tokio::task::spawn_blocking(move || start_child(package, args, log, Some(addr))).await?
}

/// The replicas a stack starts, and what each was started with.
pub(super) struct Spawned {
    /// Replica 0 (the first started: the leader at start).
    pub(super) lock: ChildService,
    /// Replicas 1…
    pub(super) standbys: Vec<ChildService>,
    /// Per replica, the proxy in front of its PostgreSQL (empty without relays).
    pub(super) relays: Vec<DelayProxy>,
    /// Per replica, its arguments.
    pub(super) args: Vec<Vec<String>>,
}

/// Starts `n` lock-servers with `args` (`--store URL` first); with `relays`,
/// each one's store URL names a zero-delay proxy of its own in front of
/// that PostgreSQL, so a fault can cut or delay one replica's database.
pub(super) async fn spawn(
    args: &[String],
    n: u32,
    relays: bool,
    seed: u64,
    dir: &Path,
) -> Result<Spawned, StackError> {
    let (mut children, mut relays_out, mut all_args) = (Vec::new(), Vec::new(), Vec::new());
    let store = args.get(1).cloned().unwrap_or_default();
    for i in 0..n {
        let mut mine = args.to_vec();
        if relays {
            let upstream = pg_addr(&store).await?;
            let relay = DelayProxy::start(
                upstream,
                LatencySpec::Fixed(Default::default()),
                seed ^ u64::from(i),
            )
            .await
            .map_err(StackError::Relay)?;
            mine[1] = rewrite_pg_url(&store, relay.addr())?;
            relays_out.push(relay);
        }
        let log = dir.join(if i == 0 {
            "lock-server.log".to_string()
        } else {
            format!("lock-server-{i}.log")
        });
        children.push(spawn_child("lock-server", mine.clone(), log).await?);
        all_args.push(mine);
    }
    let mut children = children.into_iter();
    let lock = children
        .next()
        .ok_or(StackError::NoSuchReplica { replica: 0 })?;
    Ok(Spawned {
        lock,
        standbys: children.collect(),
        relays: relays_out,
        args: all_args,
    })
}
