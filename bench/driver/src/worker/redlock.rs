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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bench_core::backend::BackendKind;
    use fencepost_sdk::MarginPolicy;

    use crate::worker::build_worker;
    use crate::worker_process::{WorkerMode, WorkerSpec};

    /// A worker process's spec on redlock over `lock_url`.
    fn spec(lock_url: &str) -> WorkerSpec {
        WorkerSpec {
            idx: 1,
            backend: BackendKind::Redlock,
            lock_url: lock_url.into(),
            tls_ca: None,
            rail_url: "http://127.0.0.1:2".into(),
            lease: Duration::from_secs(1),
            session_ttl: Duration::from_secs(1),
            heartbeat_divisor: 3,
            margin: MarginPolicy::default(),
            rail_read_timeout: Duration::from_millis(166),
            worst_case_hop: Duration::from_millis(233),
            client_check: true,
            acquire_budget: Duration::from_millis(250),
            payout_prefix: "p".into(),
            seed: 7,
            mode: WorkerMode::Continuous { first: 1, count: 1 },
            history: None,
            freezes: Default::default(),
            shuffle_block: None,
            hold: None,
            steps: 1,
        }
    }

    #[tokio::test]
    async fn a_worker_process_spec_builds_a_redlock_worker_over_every_url() {
        let urls = "redis://127.0.0.1:1, redis://127.0.0.1:2,redis://127.0.0.1:3";
        let line = serde_json::to_string(&spec(urls)).unwrap();
        let back: WorkerSpec = serde_json::from_str(&line).unwrap();
        assert_eq!(back.backend, BackendKind::Redlock);
        assert!(build_worker(back.idx, back.env(None)).is_ok());
        let bad = spec("redis://127.0.0.1:1,not a url");
        let err = build_worker(bad.idx, bad.env(None)).err().expect("refused");
        assert!(err.to_string().contains("not a url"), "{err}");
    }
}
