//! The payout worker on Redlock: [`Worker::new_redlock`], which builds a
//! worker's Redlock client from its environment ([`build_worker`](super::build_worker)
//! calls it for `--backend redlock`).

use crate::backend::redlock::{RedlockBackend, RedlockConfig};
use crate::worker::env::WorkerEnv;
use crate::worker::payout::{BuildError, Worker, request_timeout};

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
        let mut config = RedlockConfig::new(urls, env.lease);
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
        let client = RedlockBackend::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}
