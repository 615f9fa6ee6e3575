//! Value parsers the flags of every bench command share: a refused value
//! names its flag (clap adds it) and what is valid, and exits 2.

/// A whole-number flag value within `lo..=hi`, for clap: a value out of
/// range or not a number is refused naming the flag and the range (exit 2).
pub fn whole<T>(lo: u64, hi: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text: &str| {
        text.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| {
                if hi == u64::MAX {
                    format!("must be a whole number ≥ {lo}")
                } else {
                    format!("must be a whole number {lo}..={hi}")
                }
            })
    }
}
