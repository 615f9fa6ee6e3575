//! API tokens, shared by the lock-server and the rail-stub: the
//! token file's format and parser, the bearer check, and the issuing of new
//! tokens. The file stores only SHA-256 hashes of the secrets; a presented
//! token is hashed once and compared with every entry in constant time
//! ([`subtle::ConstantTimeEq`]), all entries visited, none skipped on a match.
//!
//! The format, one token a line (`#` starts a comment, blank lines are skipped):
//!
//! ```text
//! # NAME   ROLE     sha256:HEX                                                              [PREFIX]
//! alice    client   sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 payout:
//! ops      admin    sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
//! ```
//!
//! NAME is the principal (1–64 characters of `[A-Za-z0-9._-]`); several lines
//! may share one NAME, which is how a secret is rotated (add the new line,
//! roll the clients, delete the old line, reload). ROLE is `client`, `admin`
//! or `monitor` ([`Role`]). PREFIX, for a `client`, limits the keys it may act
//! on to those that start with it; `admin` and `monitor` ignore it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

/// What every issued token starts with, so a leaked one is recognisable (and
/// found by secret scanners).
pub const TOKEN_PREFIX: &str = "fpt_";
/// Random bytes in an issued token.
pub const TOKEN_BYTES: usize = 32;
/// Longest principal name.
pub const MAX_NAME_CHARS: usize = 64;
/// The scheme of the `Authorization` header.
pub const BEARER: &str = "Bearer";

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sessions and grants on the keys in its scope (L1–L7 within its prefix).
    Client,
    /// Everything: L8 revoke, any key, `/metrics`, `/v1/config`.
    Admin,
    /// Read-only scraping: `/metrics` and `/v1/config`, nothing else (for
    /// Prometheus and the bench's scrapers).
    Monitor,
}

impl Role {
    /// The role as written in the token file.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Admin => "admin",
            Role::Monitor => "monitor",
        }
    }

    /// Parses `client`, `admin` or `monitor`.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "client" => Some(Role::Client),
            "admin" => Some(Role::Admin),
            "monitor" => Some(Role::Monitor),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a request comes from: the token's NAME, role and scope. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The token's NAME: what sessions are bound to.
    pub name: Arc<str>,
    /// What it may do.
    pub role: Role,
    /// For a `client`: the key prefix it is limited to (`None`: every key).
    pub prefix: Option<Arc<str>>,
}

impl Principal {
    /// Whether this principal may act on `key` with a client operation
    /// (sessions' acquire, renew, release; L7): an admin always, a client
    /// when the key is in its scope, a monitor never.
    pub fn may_use_key(&self, key: &str) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Client => self.prefix.as_deref().is_none_or(|p| key.starts_with(p)),
            Role::Monitor => false,
        }
    }

    /// Whether this principal may open and use sessions (client or admin).
    pub fn may_use_sessions(&self) -> bool {
        matches!(self.role, Role::Client | Role::Admin)
    }

    /// Whether this principal may read `/metrics` and `/v1/config`.
    pub fn may_monitor(&self) -> bool {
        matches!(self.role, Role::Admin | Role::Monitor)
    }

    /// Whether this principal is an admin.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// One line of a token file.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenEntry {
    /// Who the token stands for.
    pub principal: Principal,
    /// SHA-256 of the secret.
    pub hash: [u8; 32],
}

impl fmt::Debug for TokenEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hash is not the secret, but there is no reason to print it.
        f.debug_struct("TokenEntry")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// Why a token file was refused. Every message names the file, and a line's
/// problem names its number and the field.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line does not follow `NAME ROLE sha256:HEX [PREFIX]`.
    #[error("{path}:{line}: bad {field}: {why} (expected NAME ROLE sha256:HEX [PREFIX])")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// Which field: `NAME`, `ROLE`, `HASH`, `PREFIX` or `line`.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The file holds no token: nobody could call the service.
    #[error(
        "the token file {path} holds no token; add a line NAME ROLE sha256:HEX (see `token new`)"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// A parsed token file: the entries, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenSet {
    entries: Vec<TokenEntry>,
}

/// Whether `name` is a valid principal name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// SHA-256 of a secret.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    let digest = Sha256::digest(secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_slice());
    out
}

impl TokenSet {
    /// Reads and parses the token file at `path`.
    pub fn load(path: &Path) -> Result<TokenSet, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a token file's text; `path` names it in errors. A file with no
    /// token at all is refused ([`TokenFileError::Empty`]).
    pub fn parse(text: &str, path: &Path) -> Result<TokenSet, TokenFileError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let bad = |field: &'static str, why: String| TokenFileError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                field,
                why,
            };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            if !(3..=4).contains(&fields.len()) {
                return Err(bad("line", format!("{} fields, want 3 or 4", fields.len())));
            }
            let name = fields[0];
            if !valid_name(name) {
                return Err(bad(
                    "NAME",
                    format!("{name:?} is not 1-{MAX_NAME_CHARS} characters of [A-Za-z0-9._-]"),
                ));
            }
            let role = Role::parse(fields[1]).ok_or_else(|| {
                bad(
                    "ROLE",
                    format!("{:?} is not client, admin or monitor", fields[1]),
                )
            })?;
            let hex_text = fields[2].strip_prefix("sha256:").ok_or_else(|| {
                bad(
                    "HASH",
                    "must start with sha256: (the file stores hashes, never secrets)".into(),
                )
            })?;
            let mut hash = [0u8; 32];
            hex::decode_to_slice(hex_text, &mut hash)
                .map_err(|e| bad("HASH", format!("not 64 hex digits: {e}")))?;
            let prefix = match fields.get(3) {
                None => None,
                Some(p) if fencepost_key_chars(p) => Some(Arc::<str>::from(*p)),
                Some(p) => {
                    return Err(bad(
                        "PREFIX",
                        format!("{p:?} is not made of lock-key characters [A-Za-z0-9._:/-]"),
                    ));
                }
            };
            entries.push(TokenEntry {
                principal: Principal {
                    name: Arc::from(name),
                    role,
                    prefix,
                },
                hash,
            });
        }
        if entries.is_empty() {
            return Err(TokenFileError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(TokenSet { entries })
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &[TokenEntry] {
        &self.entries
    }

    /// How many tokens the set holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the set holds no token.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The principal a presented secret stands for, or `None`. The secret is
    /// hashed once and compared with every entry's hash in constant time;
    /// every entry is visited whether or not one matched (the first match wins).
    pub fn authenticate(&self, secret: &str) -> Option<&Principal> {
        let presented = words(&hash_secret(secret));
        // 0: no match; i + 1: entry i (the first that matched).
        let mut found: u32 = 0;
        for (i, e) in self.entries.iter().enumerate() {
            // The OR of the words' XORs is 0 exactly when all 32 bytes are
            // equal: no branch and no early exit on any byte (subtle's
            // byte-wise slice compare cost ~100 ns an entry; this a few).
            let w = words(&e.hash);
            let diff = (w[0] ^ presented[0])
                | (w[1] ^ presented[1])
                | (w[2] ^ presented[2])
                | (w[3] ^ presented[3]);
            let hit = diff.ct_eq(&0) & found.ct_eq(&0);
            found = u32::conditional_select(&found, &(i as u32 + 1), hit);
        }
        found
            .checked_sub(1)
            .map(|i| &self.entries[i as usize].principal)
    }
}

/// The token file a service runs with, re-read on demand (its SIGHUP):
/// [`reload`](Self::reload) swaps a good file in for every request from then
/// on, and keeps the set in force when the new file is bad.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    tokens: RwLock<Arc<TokenSet>>,
}

impl TokenFile {
    /// Reads the token file at `path`; an unreadable or bad file is refused.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let tokens = TokenSet::load(path)?;
        Ok(TokenFile {
            path: path.to_path_buf(),
            tokens: RwLock::new(Arc::new(tokens)),
        })
    }

    /// The token file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many tokens are in force.
    pub fn len(&self) -> usize {
        self.current().len()
    }

    /// True when no token is in force (never: an empty file is refused).
    pub fn is_empty(&self) -> bool {
        self.current().is_empty()
    }

    /// Re-reads the file. On success the new set is in force for every
    /// request from now on and its size is returned; on failure the set in
    /// force is kept and the error returned for the log.
    pub fn reload(&self) -> Result<usize, TokenFileError> {
        let fresh = TokenSet::load(&self.path)?;
        let n = fresh.len();
        *self.tokens.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
        Ok(n)
    }

    fn current(&self) -> Arc<TokenSet> {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The principal of an `Authorization` header value, or `None` when the
    /// header is missing, not `Bearer TOKEN`, or names no token in force.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Option<Principal> {
        let secret = parse_bearer(authorization?)?;
        self.current().authenticate(secret).cloned()
    }
}

/// A 32-byte hash as four words, for [`TokenSet::authenticate`]'s compare.
fn words(h: &[u8; 32]) -> [u64; 4] {
    let w = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    };
    [w(0), w(1), w(2), w(3)]
}

/// Whether `p` is made of lock-key characters (a prefix of a valid key).
fn fencepost_key_chars(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= crate::lock::MAX_KEY_BYTES
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
}

/// The token of an `Authorization: Bearer TOKEN` header value, or `None` when
/// the value is not one (wrong scheme, empty, not visible ASCII).
pub fn parse_bearer(value: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case(BEARER) {
        return None;
    }
    let token = token.trim();
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())).then_some(token)
}

/// A newly issued token: the secret (shown once) and its file line.
pub struct IssuedToken {
    /// The bearer secret, `fpt_` and 64 hex digits.
    pub secret: String,
    /// The line to append to the token file.
    pub line: String,
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("secret", &"<redacted>")
            .field("line", &self.line)
            .finish()
    }
}

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The name is not a valid principal name.
    #[error("--name {0:?}: must be 1-64 characters of [A-Za-z0-9._-]")]
    Name(String),
    /// The prefix is not made of key characters.
    #[error("--prefix {0:?}: must be lock-key characters [A-Za-z0-9._:/-]")]
    Prefix(String),
}

/// Issues a token for `name` with `role` and an optional key `prefix`:
/// [`TOKEN_BYTES`] bytes from the operating system's generator, hex-encoded
/// after [`TOKEN_PREFIX`], and the token file line that accepts it.
pub fn issue_token(
    name: &str,
    role: Role,
    prefix: Option<&str>,
) -> Result<IssuedToken, IssueError> {
    if !valid_name(name) {
        return Err(IssueError::Name(name.to_string()));
    }
    if let Some(p) = prefix.filter(|p| !fencepost_key_chars(p)) {
        return Err(IssueError::Prefix(p.to_string()));
    }
    // The thread generator is a CSPRNG seeded from the operating system.
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let hash = hex::encode(hash_secret(&secret));
    let mut line = format!("{name} {role} sha256:{hash}");
    if let Some(p) = prefix {
        line.push(' ');
        line.push_str(p);
    }
    Ok(IssuedToken { secret, line })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TokenSet, TokenFileError> {
        TokenSet::parse(text, Path::new("tokens.txt"))
    }

    fn line_for(name: &str, role: &str, secret: &str, prefix: &str) -> String {
        format!(
            "{name} {role} sha256:{} {prefix}\n",
            hex::encode(hash_secret(secret))
        )
    }

    #[test]
    fn a_file_with_comments_blank_lines_and_a_rotation_parses() {
        let text = format!(
            "# tokens\n\n{}{}   {}",
            line_for("alice", "client", "old", "payout:"),
            line_for("alice", "client", "new", "payout:"),
            line_for("ops", "admin", "root", "# no prefix"),
        );
        let set = parse(&text).unwrap();
        assert_eq!(set.len(), 3);
        let old = set.authenticate("old").unwrap().clone();
        let new = set.authenticate("new").unwrap().clone();
        assert_eq!(old, new, "both secrets of a rotation are one principal");
        assert_eq!(&*old.name, "alice");
        assert_eq!(old.prefix.as_deref(), Some("payout:"));
        let ops = set.authenticate("root").unwrap();
        assert_eq!(ops.role, Role::Admin);
        assert_eq!(ops.prefix, None);
        assert!(set.authenticate("nope").is_none());
        assert!(set.authenticate("").is_none());
    }

    #[test]
    fn bad_lines_name_the_file_the_line_and_the_field() {
        let good = line_for("a", "client", "s", "");
        let cases = [
            ("bad name!", "NAME"),
            ("alice root sha256:00", "ROLE"),
            ("alice client 9f86d081", "HASH"),
            ("alice client sha256:xyz", "HASH"),
            ("alice client sha256:00", "HASH"),
            ("alice", "line"),
            ("a b c d e", "line"),
        ];
        for (bad, field) in cases {
            let bad = if field == "NAME" {
                format!("bad!name client sha256:{}", "0".repeat(64))
            } else {
                bad.to_string()
            };
            let e = parse(&format!("{good}\n{bad}\n")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("tokens.txt:3: bad "), "{msg}");
            assert!(msg.contains(&format!("bad {field}:")), "{field}: {msg}");
        }
        let e = parse(&format!("alice client sha256:{} pay out\n", "0".repeat(64))).unwrap_err();
        assert!(e.to_string().contains("bad line"), "{e}");
        let e = parse(&format!("alice client sha256:{} pay$\n", "0".repeat(64))).unwrap_err();
        assert!(e.to_string().contains("tokens.txt:1: bad PREFIX"), "{e}");
        let e = parse("# only comments\n\n").unwrap_err();
        assert!(matches!(e, TokenFileError::Empty { .. }), "{e}");
        let long = "n".repeat(MAX_NAME_CHARS + 1);
        let e = parse(&format!("{long} client sha256:{}\n", "0".repeat(64))).unwrap_err();
        assert!(e.to_string().contains("bad NAME"), "{e}");
    }

    #[test]
    fn matching_visits_every_entry_and_the_first_match_wins() {
        // Two lines with the same hash (a copy-paste): the first one's
        // principal is the answer, whatever comes after.
        let text = format!(
            "{}{}{}",
            line_for("first", "client", "dup", ""),
            line_for("second", "admin", "dup", ""),
            line_for("third", "client", "other", ""),
        );
        let set = parse(&text).unwrap();
        assert_eq!(&*set.authenticate("dup").unwrap().name, "first");
        assert_eq!(&*set.authenticate("other").unwrap().name, "third");
        // A hash is not a secret: presenting the hex of the hash fails.
        let hash = hex::encode(hash_secret("dup"));
        assert!(set.authenticate(&hash).is_none());
        assert!(set.authenticate(&format!("sha256:{hash}")).is_none());
    }

    #[test]
    fn a_hash_that_differs_in_any_one_byte_does_not_match() {
        let good = hash_secret("s");
        for at in 0..32 {
            for bit in [0x01u8, 0x80] {
                let mut h = good;
                h[at] ^= bit;
                let set = parse(&format!("x client sha256:{}\n", hex::encode(h))).unwrap();
                assert!(set.authenticate("s").is_none(), "byte {at} bit {bit:#x}");
            }
        }
        let set = parse(&format!("x client sha256:{}\n", hex::encode(good))).unwrap();
        assert!(set.authenticate("s").is_some());
    }

    #[test]
    fn scope_roles_and_key_prefixes() {
        let p = |role, prefix: Option<&str>| Principal {
            name: Arc::from("x"),
            role,
            prefix: prefix.map(Arc::from),
        };
        let scoped = p(Role::Client, Some("payout:"));
        assert!(scoped.may_use_key("payout:1"));
        assert!(scoped.may_use_key("payout:"));
        assert!(!scoped.may_use_key("payou"));
        assert!(!scoped.may_use_key("refund:1"));
        assert!(!scoped.is_admin() && !scoped.may_monitor() && scoped.may_use_sessions());
        let any = p(Role::Client, None);
        assert!(any.may_use_key("refund:1"));
        let admin = p(Role::Admin, Some("payout:"));
        assert!(admin.may_use_key("refund:1"), "admin ignores the prefix");
        assert!(admin.is_admin() && admin.may_monitor() && admin.may_use_sessions());
        let mon = p(Role::Monitor, None);
        assert!(!mon.may_use_key("payout:1") && !mon.may_use_sessions() && mon.may_monitor());
    }

    #[test]
    fn bearer_headers_parse_strictly() {
        assert_eq!(parse_bearer(b"Bearer fpt_abc"), Some("fpt_abc"));
        assert_eq!(parse_bearer(b"bearer  fpt_abc "), Some("fpt_abc"));
        assert_eq!(parse_bearer(b"Basic fpt_abc"), None);
        assert_eq!(parse_bearer(b"Bearer"), None);
        assert_eq!(parse_bearer(b"Bearer "), None);
        assert_eq!(parse_bearer(b"Bearer a b"), None);
        assert_eq!(parse_bearer(b"fpt_abc"), None);
        assert_eq!(parse_bearer(&[0x42, 0xff, 0x20, 0x41]), None);
    }

    #[test]
    fn issued_tokens_are_random_recognisable_and_accepted_by_their_line() {
        let a = issue_token("alice", Role::Client, Some("payout:")).unwrap();
        let b = issue_token("alice", Role::Client, Some("payout:")).unwrap();
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with(TOKEN_PREFIX));
        assert_eq!(a.secret.len(), TOKEN_PREFIX.len() + 2 * TOKEN_BYTES);
        assert!(!a.line.contains(&a.secret), "the line stores only the hash");
        assert!(
            !format!("{a:?}").contains(&a.secret),
            "Debug redacts the secret"
        );
        let set = parse(&format!("{}\n{}\n", a.line, b.line)).unwrap();
        let p = set.authenticate(&a.secret).unwrap();
        assert_eq!((&*p.name, p.role), ("alice", Role::Client));
        assert_eq!(p.prefix.as_deref(), Some("payout:"));
        assert!(set.authenticate(&b.secret).is_some());
        assert!(issue_token("bad name", Role::Admin, None).is_err());
        assert!(issue_token("ok", Role::Client, Some("bad prefix")).is_err());
    }
}
