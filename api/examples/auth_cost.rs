//! What one API token check costs the server: the bearer header
//! parsed, the secret hashed once (SHA-256) and compared in constant time
//! with every line of token files of 1, 10 and 100 tokens, for a known and
//! an unknown token. Prints ns per check (the median of 7 rounds).
//!
//!     cargo run --release -p fencepost-api --example auth_cost
//!
//! This is the CPU the check adds to each request on the lock-server and the
//! rail-stub, apart from the network (a latency figure, not an expiry
//! decision, hence the real clock).

use std::path::Path;
use std::time::Instant;

use fencepost_api::auth::{Role, TokenSet, issue_token, parse_bearer};

fn main() {
    const CHECKS: u32 = 200_000;
    println!("tokens  known_ns  unknown_ns");
    for n in [1usize, 10, 100] {
        let issued: Vec<_> = (0..n)
            .map(|i| issue_token(&format!("p{i}"), Role::Client, None).expect("issue"))
            .collect();
        let file: String = issued.iter().map(|t| format!("{}\n", t.line)).collect();
        let set = TokenSet::parse(&file, Path::new("bench")).expect("parse");
        let known = format!("Bearer {}", issued[n - 1].secret).into_bytes();
        let unknown = format!("Bearer fpt_{}", "0".repeat(64)).into_bytes();
        let time = |header: &[u8]| {
            let mut rounds: Vec<f64> = (0..7)
                .map(|_| {
                    let start = Instant::now();
                    let mut hits = 0u32;
                    for _ in 0..CHECKS {
                        let secret = parse_bearer(std::hint::black_box(header)).expect("bearer");
                        hits += u32::from(set.authenticate(secret).is_some());
                    }
                    std::hint::black_box(hits);
                    start.elapsed().as_nanos() as f64 / f64::from(CHECKS)
                })
                .collect();
            rounds.sort_by(f64::total_cmp);
            rounds[3]
        };
        println!("{n:>6}  {:>8.0}  {:>10.0}", time(&known), time(&unknown));
    }
}
