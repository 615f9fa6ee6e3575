//! Printing an error with its causes: [`Chain`] shows `error: cause: cause`,
//! the way `anyhow` prints `{:#}`, for any `std::error::Error`. The libraries
//! return typed errors whose message is their own context ("writing
//! results.csv") and whose `source()` is the cause (the OS error); a caller
//! that logs or records one as text uses `Chain` so no cause is lost.

use std::error::Error;
use std::fmt;

/// Displays an error and every `source()` below it, joined by `": "`.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("writing {path}")]
    struct Writing {
        path: String,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_chain_shows_the_context_then_every_cause() {
        let e = Writing {
            path: "results.csv".into(),
            source: std::io::Error::other("disk full"),
        };
        assert_eq!(Chain(&e).to_string(), "writing results.csv: disk full");
        assert_eq!(
            e.to_string(),
            "writing results.csv",
            "the cause is not repeated"
        );
    }
}
