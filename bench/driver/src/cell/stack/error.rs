//! Why a stack could not start its services, or restart one of them.

use crate::backend::etcd::server::EtcdServerError;
use crate::backend::redis::RedisServerError;
use crate::docker::DockerError;
use fencepost_harness::HarnessError;
use std::time::Duration;

/// How long a started lock-server may take to serve (`/readyz`).
pub(super) const READY_PATIENCE: Duration = Duration::from_secs(60);

/// Why a [`Stack`] could not start its services, or restart its lock-server.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// The stack's directory could not be made: fix its path or permissions.
    #[error(transparent)]
    Dir(std::io::Error),
    /// A service's binary is missing, or its child did not start: the
    /// harness's error names the binary and ends with the child's stderr.
    /// Build the services, or read the service's log in the stack's directory.
    #[error(transparent)]
    Child(#[from] HarnessError),
    /// The thread starting a child panicked or was cancelled (the runtime is
    /// shutting down): nothing to retry.
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
    /// `--replicas` above 1 on a single-node store: pass a `postgres://` `--store`.
    #[error(
        "--replicas {replicas} needs a postgres:// --store (memory: and sqlite: are single-node)"
    )]
    ReplicasNeedPostgres {
        /// The replicas asked for.
        replicas: u32,
    },
    /// `--net-delay` with replicas: the proxy fronts one lock-server; drop one of the two.
    #[error("--net-delay proxies one lock-server; it needs --replicas 1")]
    NetDelayNeedsOneReplica,
    /// The readiness client could not be built (a broken installation): report it.
    #[error(transparent)]
    Client(#[from] reqwest::Error),
    /// `--tls` on a runtime or with a fault it does not support yet (it needs
    /// `--runtime process`, the fencepost backend and no `--net-delay`).
    #[error("--tls {0}")]
    TlsUnsupported(&'static str),
    /// The TLS probe client could not be built from the cell's CA.
    #[error("--tls: {0}")]
    TlsClient(#[from] fencepost_sdk::ConfigError),
    /// No replica served `/readyz` in time: check the lock-servers' logs and
    /// the PostgreSQL they share.
    #[error("no lock-server of {urls:?} served within {READY_PATIENCE:?}")]
    NotReady {
        /// The replicas' URLs.
        urls: Vec<String>,
    },
    /// The docker runtime could not start its containers; its own doc says what to do.
    #[error(transparent)]
    Docker(#[from] DockerError),
    /// etcd could not be found or started; its own doc says what to do.
    #[error(transparent)]
    Etcd(#[from] EtcdServerError),
    /// redis-server could not be found or started; its own doc says what to do.
    #[error(transparent)]
    Redis(#[from] RedisServerError),
    /// A single-instance redis stack asked for more (or fewer) than one
    /// redis-server: pass one instance, or run redlock.
    #[error("the redis backend runs on one redis-server, not {instances}; redlock runs on several")]
    RedisInstances {
        /// The instances asked for.
        instances: u32,
    },
    /// A fault of the spec cannot act on this runtime (the message says what
    /// it needs): change the runtime or drop the fault.
    #[error("{0}")]
    UnsupportedFault(&'static str),
    /// The lock-server's URL could not be resolved to a socket address (the
    /// OS error says why): pass an `http://IP:PORT` URL.
    #[error(transparent)]
    Resolve(std::io::Error),
    /// The lock-server's URL resolves to no address: pass an `http://IP:PORT` URL.
    #[error("cannot resolve {url}")]
    Unresolved {
        /// The URL.
        url: String,
    },
    /// The delay proxy could not listen on loopback: free a port and retry.
    #[error(transparent)]
    Proxy(std::io::Error),
    /// A lock-server restart was asked of a stack that cannot do it: it needs
    /// the process runtime and the delay proxy (`--net-delay`).
    #[error("a lock-server restart needs --runtime process and the proxy in front of it")]
    RestartNeedsProxy,
    /// A replica's PostgreSQL relay could not listen on loopback.
    #[error("the PostgreSQL relay of a lock-server replica could not listen on 127.0.0.1: {0}")]
    Relay(std::io::Error),
    /// A replica fault named a replica the stack does not have (or a stack
    /// of another runtime): a bug in the fault schedule.
    #[error("lock-server replica {replica} is not one of this stack's (process runtime only)")]
    NoSuchReplica {
        /// The index asked for.
        replica: usize,
    },
}
