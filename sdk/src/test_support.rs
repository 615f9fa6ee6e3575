//! Shared by the SDK's unit tests: one proptest configuration with a fixed,
//! printed seed, so every property run replays exactly.

use proptest::test_runner::{Config, RngAlgorithm, RngSeed};

/// Cases per property (the property tests ask for at least 1,000).
pub(crate) const CASES: u32 = 2_000;

/// The seed used unless `FP_PROPTEST_SEED` names another.
const DEFAULT_SEED: u64 = 0x5eed_f00d;

/// The configuration of property `name`: [`CASES`] cases from a fixed seed
/// (printed), ChaCha, no regression files.
pub(crate) fn proptest_config(name: &str) -> Config {
    let seed = std::env::var("FP_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    eprintln!("{name}: {CASES} cases, seed {seed} (set FP_PROPTEST_SEED to replay another)");
    Config {
        cases: CASES,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    }
}
