//! One constructor per lock service other than fencepost's own: a
//! [`Worker`] on the etcd, redis or Redlock adapter, configured from its
//! [`WorkerEnv`] the way `Worker::new` configures the SDK.

use crate::backend::etcd::{EtcdBackend, EtcdConfig};
use crate::backend::redis::{RedisBackend, RedisConfig};
use crate::backend::redlock::{RedlockBackend, RedlockConfig};
use crate::worker::env::WorkerEnv;
use crate::worker::payout::{BuildError, Worker, request_timeout};

impl Worker<EtcdBackend> {
    /// Builds worker `idx` on etcd (`env.lock_url` is etcd's client URL).
    /// Its sessions are etcd leases of `min(lease, session TTL)`, rounded up
    /// to whole seconds. Fails only on a configuration error; connects at
    /// the first session.
    pub fn new_etcd(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let mut config = EtcdConfig::new(env.lock_url.clone(), env.lease.min(env.session_ttl));
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
        let client = EtcdBackend::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}

impl Worker<RedisBackend> {
    /// Builds worker `idx` on one Redis instance (`env.lock_url`, a
    /// `redis://` URL): every lock's `PX` is the cell's lease. Fails only on
    /// a configuration error (the margin policy, the URL); connects at the
    /// first session.
    pub fn new_redis(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let mut config = RedisConfig::new(env.lock_url.clone(), env.lease);
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
        let client = RedisBackend::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}

impl Worker<RedlockBackend> {
    /// Builds worker `idx` on Redlock (`env.lock_url` is the instances'
    /// URLs, comma-separated). Its locks have the cell's lease as TTL; its
    /// token is always 0. Fails only on a configuration error; connects at
    /// the first round.
    pub fn new_redlock(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let urls = env
            .lock_url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty());
        let mut config = RedlockConfig::new(urls);
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
        let client = RedlockBackend::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}
