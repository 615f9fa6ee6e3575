//! `bench peer`'s Redis client: one connection per client task, the lock
//! scripts the redis backend runs, and what each measured operation sends.
//! - heartbeat: the renew (compare-owner `PEXPIRE`) of a key the client
//!   acquired at set-up, one script call per operation;
//! - grant: the acquire script (`SET key owner NX PX` and the fencing
//!   counter's `INCR`, returning the token), then the release
//!   (compare-owner `DEL`): two round trips that write, like L4 + L6 and
//!   etcd's two txns;
//! - floor: `PING`, the cheapest request redis-server answers on the same
//!   connection.
//!
//! The connection's own response timeout is the driver's operation
//! timeout, so a slow reply is counted as the driver counts it on every
//! other system (the `redis` crate's default of 500 ms would turn it into
//! an error earlier than anywhere else).

use std::time::Duration;

use bench_core::peer::PeerOp;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script, Value};

use crate::backend::redis::scripts::{
    ACQUIRE, Acquired, RELEASE, RENEW, decode_acquire, decode_renew, fence_key, grant_value,
    lock_key,
};

/// Why a Redis peer operation (or its set-up) failed.
#[derive(Debug, thiserror::Error)]
pub enum RedisPeerError {
    /// redis-server refused or could not be reached: check that it serves
    /// (`--redis-url`), then rerun.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// The acquire script found the client's own key held: a key left over
    /// from an earlier run under the same tag; wait out its expiry.
    #[error("acquire script: {key} is held")]
    Held {
        /// The key.
        key: String,
    },
    /// The renew or release script found another owner on the key (or no
    /// key): its expiry ran out under the load, or someone else wrote it.
    #[error("{script} script: {key} is not ours")]
    NotOurs {
        /// `renew` or `release`.
        script: &'static str,
        /// The key.
        key: String,
    },
    /// A script answered with a reply of another shape: a redis-server
    /// running other scripts under the same keys, or a bug; report it.
    #[error("{script} script: unexpected reply {reply}")]
    Reply {
        /// `acquire` or `renew`.
        script: &'static str,
        /// The reply, as the client decoded it.
        reply: String,
    },
    /// `PING` was answered with something else than `PONG`: not a redis-server.
    #[error("PING answered {0:?}")]
    NotPong(String),
}

/// The redis backend's three scripts, hashed once per client task
/// (EVALSHA after the first call).
struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
}

/// One client task's connection, key and owner.
pub struct RedisPeer {
    /// One multiplexed connection (one TCP connection) of this task's own.
    conn: MultiplexedConnection,
    /// The lock scripts.
    scripts: Scripts,
    /// The lock's key (`lock:{peer:OP:I}`).
    lock: String,
    /// Its fencing counter's key.
    fence: String,
    /// The owner it writes into the key.
    owner: String,
    /// The value the key holds while it is ours (`OWNER:TOKEN`).
    held: Option<String>,
    /// How long the key lives: far longer than a run.
    lease_ms: u64,
}

impl RedisPeer {
    /// Connects client `i` to `url` for `op` (not timed); for the
    /// heartbeat it acquires its key first, so every renew has a key to renew.
    pub async fn open(
        url: &str,
        key: &str,
        i: usize,
        op: PeerOp,
        lease_ms: u64,
        timeout: Duration,
    ) -> Result<RedisPeer, RedisPeerError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut peer = RedisPeer {
            conn,
            scripts: Scripts {
                acquire: Script::new(ACQUIRE),
                renew: Script::new(RENEW),
                release: Script::new(RELEASE),
            },
            lock: lock_key(key),
            fence: fence_key(key),
            owner: format!("peer-{i}"),
            held: None,
            lease_ms,
        };
        if op == PeerOp::Heartbeat {
            peer.acquire().await?;
        }
        Ok(peer)
    }

    /// One operation (see the module doc).
    pub async fn op(&mut self, op: PeerOp) -> Result<(), RedisPeerError> {
        match op {
            PeerOp::Heartbeat => self.renew().await,
            PeerOp::Grant => {
                self.acquire().await?;
                self.release().await
            }
            PeerOp::Floor => {
                let pong: String = redis::cmd("PING").query_async(&mut self.conn).await?;
                if pong != "PONG" {
                    return Err(RedisPeerError::NotPong(pong));
                }
                Ok(())
            }
            // Refused by the caller before it gets here.
            PeerOp::Fsync => Ok(()),
        }
    }

    /// Releases the key if it is still ours (best effort).
    pub async fn close(mut self) {
        if self.held.is_some() {
            let _ = self.release().await;
        }
    }

    /// The acquire script: the key is ours with a new token, or
    /// [`RedisPeerError::Held`].
    async fn acquire(&mut self) -> Result<(), RedisPeerError> {
        let reply: Value = self
            .scripts
            .acquire
            .key(&self.lock)
            .key(&self.fence)
            .arg(&self.owner)
            .arg(self.lease_ms)
            .invoke_async(&mut self.conn)
            .await?;
        match decode_acquire(&reply) {
            Some(Acquired::Granted(token)) => {
                self.held = Some(grant_value(&self.owner, token));
                Ok(())
            }
            Some(Acquired::Held(_)) => Err(RedisPeerError::Held {
                key: self.lock.clone(),
            }),
            None => Err(RedisPeerError::Reply {
                script: "acquire",
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// The renew script on the held key: `Ok` when it was still ours.
    async fn renew(&mut self) -> Result<(), RedisPeerError> {
        let held = self.held.as_deref().unwrap_or_default();
        let reply: Value = self
            .scripts
            .renew
            .key(&self.lock)
            .arg(self.lease_ms)
            .arg(held)
            .invoke_async(&mut self.conn)
            .await?;
        match decode_renew(&reply, 1).as_deref() {
            Some([true]) => Ok(()),
            Some(_) => Err(self.not_ours("renew")),
            None => Err(RedisPeerError::Reply {
                script: "renew",
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// The release script on the held key: `Ok` when it was still ours.
    async fn release(&mut self) -> Result<(), RedisPeerError> {
        let held = self.held.take().unwrap_or_default();
        let deleted: i64 = self
            .scripts
            .release
            .key(&self.lock)
            .arg(held)
            .invoke_async(&mut self.conn)
            .await?;
        if deleted == 1 {
            Ok(())
        } else {
            Err(self.not_ours("release"))
        }
    }

    fn not_ours(&self, script: &'static str) -> RedisPeerError {
        RedisPeerError::NotOurs {
            script,
            key: self.lock.clone(),
        }
    }
}
