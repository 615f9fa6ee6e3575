//! One Redlock instance: the requests a round sends to it ([`Op`]: `SET NX
//! PX`, compare-value-and-`PEXPIRE`, compare-value-and-`DEL`, `PING`)
//! behind the small [`Instance`] trait, and [`RedisInstance`], the real one
//! on the `redis` crate. A round ([`super::round`]) is written against the
//! trait, so its tests run on scripted instances and a fake clock.
//!
//! [`RedisInstance`] keeps one multiplexed connection, made on first use and
//! dropped when it fails at the transport level, so a killed and restarted
//! redis-server is reached again by the next request. It applies no timeout
//! of its own: the round bounds every request with the per-instance timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script, Value};

/// A request of a round to one instance, with the key and value it is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `SET key value NX PX ttl_ms`: yes when the key was free and is now ours.
    Lock {
        /// The TTL, ms.
        ttl_ms: u64,
    },
    /// `PEXPIRE key ttl_ms` if the key's value is ours: yes when extended.
    Extend {
        /// The TTL, ms.
        ttl_ms: u64,
    },
    /// `DEL key` if the key's value is ours: yes when deleted.
    Unlock,
    /// `PING` (key and value unused): yes on `PONG`. The heartbeat round of a
    /// session that holds no lock: it measures a round and moves nothing.
    Ping,
}

/// Why one instance gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// The connection or the request failed (refused, reset, an error
    /// reply). The next request reconnects; nothing to do.
    #[error("redis at {url}: {cause}")]
    Redis {
        /// The instance's URL.
        url: String,
        /// What the `redis` crate said (in the message, so not a `source()`).
        cause: redis::RedisError,
    },
}

/// A boxed future of one instance's answer.
pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<bool, InstanceError>> + Send + 'a>>;

/// One instance a round can ask. Yes (`true`) means the instance did what
/// `op` asked; no (`false`) that the key was held by another value (or absent).
pub trait Instance: Send + Sync {
    /// Sends `op` about `key` holding `value`.
    fn call<'a>(&'a self, op: Op, key: &'a str, value: &'a str) -> Answer<'a>;
}

/// Compare-value-and-`PEXPIRE`: 1 when extended, 0 when the value is not ours.
const EXTEND: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
"#;

/// Compare-value-and-`DEL`: 1 when deleted, 0 when the value is not ours.
const UNLOCK: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
"#;

/// A redis-server reached by URL, with its connection and scripts.
pub struct RedisInstance {
    /// The URL, `redis://IP:PORT`, for errors.
    url: String,
    /// The client (no I/O until a connection is made).
    client: redis::Client,
    /// The bound on making a connection.
    connect_timeout: Duration,
    /// The live connection, if any: cloned out for each request (it is
    /// multiplexed), never held across an `.await`.
    conn: Mutex<Option<MultiplexedConnection>>,
    /// The extend script (EVALSHA, loaded again after a restart).
    extend: Script,
    /// The unlock script.
    unlock: Script,
}

impl std::fmt::Debug for RedisInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisInstance")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl RedisInstance {
    /// The instance at `url` (checked, not connected).
    pub fn new(url: &str, connect_timeout: Duration) -> Result<Self, InstanceError> {
        let client = redis::Client::open(url).map_err(|cause| InstanceError::Redis {
            url: url.to_string(),
            cause,
        })?;
        Ok(RedisInstance {
            url: url.to_string(),
            client,
            connect_timeout,
            conn: Mutex::new(None),
            extend: Script::new(EXTEND),
            unlock: Script::new(UNLOCK),
        })
    }

    /// The instance's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn slot(&self) -> MutexGuard<'_, Option<MultiplexedConnection>> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live connection, or a new one.
    async fn connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        if let Some(c) = self.slot().clone() {
            return Ok(c);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None);
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *self.slot() = Some(c.clone());
        Ok(c)
    }

    /// Sends `op`; a transport failure forgets the connection.
    async fn request(&self, op: Op, key: &str, value: &str) -> redis::RedisResult<bool> {
        let mut c = self.connection().await?;
        let answer = match op {
            Op::Lock { ttl_ms } => redis::cmd("SET")
                .arg(key)
                .arg(value)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async::<Value>(&mut c)
                .await
                .map(|v| !matches!(v, Value::Nil)),
            Op::Extend { ttl_ms } => self
                .extend
                .key(key)
                .arg(value)
                .arg(ttl_ms)
                .invoke_async::<i64>(&mut c)
                .await
                .map(|n| n == 1),
            Op::Ping => redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .map(|pong| pong == "PONG"),
            Op::Unlock => self
                .unlock
                .key(key)
                .arg(value)
                .invoke_async::<i64>(&mut c)
                .await
                .map(|n| n == 1),
        };
        if let Err(e) = &answer
            && (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error())
        {
            *self.slot() = None;
        }
        answer
    }
}

impl Instance for RedisInstance {
    fn call<'a>(&'a self, op: Op, key: &'a str, value: &'a str) -> Answer<'a> {
        Box::pin(async move {
            self.request(op, key, value)
                .await
                .map_err(|cause| InstanceError::Redis {
                    url: self.url.clone(),
                    cause,
                })
        })
    }
}
