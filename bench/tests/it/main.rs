//! bench integration tests: one binary (each links polars), one module per concern.

mod adr;
mod adr_plan;
mod axes;
mod driver;
mod etcd;
mod hold;
mod interrupt;
mod live;
mod measurement;
mod output;
mod peer;
mod prometheus;
mod promtool;
mod proxy;
mod redis;
mod redlock;
