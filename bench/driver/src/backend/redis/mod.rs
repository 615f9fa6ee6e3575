//! The Redis backend: one redis-server as the lock service, through the
//! `redis` crate. [`server`] starts redis-server as a child (one instance,
//! or the N independent ones Redlock needs), with its persistence setting.
//! The adapter itself follows.

pub mod server;

pub use server::{RedisLaunch, RedisPersistence, RedisServer, RedisServerError};
