//! Printing an error with its causes: [`Chain`] shows `error: cause: cause`,
//! as the command line's alternate (`{:#}`) form of an error does, for any
//! `std::error::Error`. The libraries return typed errors whose message is
//! their own context ("writing results.csv") and whose `source()` is the
//! cause (the OS error); a caller that logs or records one as text uses
//! `Chain` so no cause is lost. [`Flat`] wraps a foreign error whose message
//! already spells out its own cause, so a chain does not say it twice.

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

/// A foreign error shown by its message alone: `source()` is `None`. For
/// errors whose `Display` already includes their cause (hdrhistogram's
/// `DeserializeError` prints "An i/o operation failed: <the io error>" and
/// also returns that io error as its source), so a [`Chain`] through them
/// reads as it did when the error was formatted into text. The wrapped
/// error is still there for a caller that matches on it.
#[derive(Debug)]
pub struct Flat<E>(pub E);

impl<E: fmt::Display> fmt::Display for Flat<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: fmt::Debug + fmt::Display> Error for Flat<E> {}

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

    /// An error that prints its cause and also returns it as its source.
    #[derive(Debug, thiserror::Error)]
    #[error("read failed: {source}")]
    struct Spelled {
        source: std::io::Error,
    }

    #[test]
    fn a_flat_error_says_its_cause_once() {
        let spelled = || Spelled {
            source: std::io::Error::other("short read"),
        };
        assert_eq!(
            Chain(&spelled()).to_string(),
            "read failed: short read: short read"
        );
        let flat = Flat(spelled());
        assert_eq!(Chain(&flat).to_string(), "read failed: short read");
        assert!(flat.source().is_none());
    }
}
