//! Typed validation errors for the identifiers that cross the wire: lock keys
//! and owner ids (C1), payout ids and currencies (C2). Each variant names the
//! field and the rule it breaks, so the server can put it straight into a
//! `400 BAD_REQUEST` message and a client can tell its caller what to fix.

/// Why a field of a request was refused. `Display` is one line a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The field is empty; give a value that follows `rule`.
    #[error("{field} is empty; {rule}")]
    Empty {
        /// The field, e.g. `lock key`.
        field: &'static str,
        /// The rule in words.
        rule: &'static str,
    },
    /// The field is longer than its limit; shorten it.
    #[error("{field} is {len} {unit}; {rule}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// `bytes` or `characters`.
        unit: &'static str,
        /// The rule in words.
        rule: &'static str,
    },
    /// The field holds a character outside its alphabet; remove or replace it.
    #[error("{field} contains {ch:?}; {rule}")]
    BadChar {
        /// The field.
        field: &'static str,
        /// The first offending character.
        ch: char,
        /// The rule in words.
        rule: &'static str,
    },
    /// The value is reserved (a path segment a URL would normalise away, or a route); choose another.
    #[error("{field} {value:?} is reserved: {why}")]
    Reserved {
        /// The field.
        field: &'static str,
        /// The value given.
        value: String,
        /// Why it cannot be used.
        why: &'static str,
    },
    /// A currency that is not three capital letters; use an ISO 4217 code such as `EUR`.
    #[error("currency {0:?} is not three capital letters (e.g. \"EUR\")")]
    Currency(String),
}
