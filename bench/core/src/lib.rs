//! `bench-core`: the vocabulary shared by every part of fencepost's
//! measurement — the driver that runs cells, the analysis of their results
//! and the reports. Nothing here runs a service or reads a results table:
//! these are the values a run is planned in ([`grid`], [`timebase`],
//! [`backend`]) and measured in ([`hist`], [`cpu`], [`overhead`], [`peer`], [`peer_sessions`],
//! [`tally`]), the experiments' result files every writer and reader shares
//! ([`results`]), and the commands' log set-up ([`logging`]).

pub mod backend;
pub mod blocks;
pub mod cpu;
pub mod error;
pub mod fsync;
pub mod grid;
pub mod hist;
pub mod logging;
pub mod overhead;
pub mod peer;
pub mod peer_sessions;
pub mod results;
pub mod tally;
pub mod timebase;
