//! The redis adapter's three Lua scripts, the key names they work on, and
//! the decoding of their replies: plain values, no I/O.
//!
//! Keys. A lock on `K` (the worker's `payout:N`) is the key `lock:{K}`,
//! holding `OWNER:TOKEN` with a `PX` expiry; its fencing counter is
//! `fence:{K}`, a plain integer without expiry that only `INCR` touches.
//! The braces make `K` the hash tag of both, so they share a slot (a
//! script's keys must, on a Redis Cluster).

/// The key holding the lock on `key`.
pub fn lock_key(key: &str) -> String {
    format!("lock:{{{key}}}")
}

/// The fencing counter of `key`.
pub fn fence_key(key: &str) -> String {
    format!("fence:{{{key}}}")
}

/// The value a grant stores: the session's owner id and the token.
pub fn grant_value(owner: &str, token: u64) -> String {
    format!("{owner}:{token}")
}

/// L4 acquire. KEYS: the lock, its counter; ARGV: owner, lease ms.
/// `SET lock owner NX PX lease`; when that succeeds, `INCR` of the counter is
/// the token and the value becomes `owner:token` (TTL kept), and the token
/// is returned (an integer). Held: the holder's value is returned (a string),
/// so a caller whose earlier attempt timed out can recognise its own grant.
pub const ACQUIRE: &str = r"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('GET', KEYS[1])
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'XX', 'KEEPTTL')
return token
";

/// L5 renew, the heartbeat exchange. KEYS: the session's held locks (none
/// is fine); ARGV: lease ms, then each key's expected value. A key still
/// holding its value gets `PEXPIRE lease`; the reply is one integer per key,
/// 1 renewed, 0 refused (expired, or another holder's).
pub const RENEW: &str = r"
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[i + 1] then
    redis.call('PEXPIRE', k, ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
";

/// L6 release. KEYS: the lock; ARGV: its expected value. Deletes the key
/// only while it holds that value (never a successor's); 1 deleted, 0 not.
pub const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// What one acquire attempt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Granted with this token.
    Granted(u64),
    /// Held, with this value (`OWNER:TOKEN`).
    Held(String),
}

/// Decodes [`ACQUIRE`]'s reply; `None` for a reply of another shape.
pub fn decode_acquire(reply: &::redis::Value) -> Option<Acquired> {
    use ::redis::Value;
    match reply {
        Value::Int(t) => u64::try_from(*t).ok().map(Acquired::Granted),
        Value::BulkString(b) => Some(Acquired::Held(String::from_utf8_lossy(b).into_owned())),
        Value::SimpleString(s) => Some(Acquired::Held(s.clone())),
        _ => None,
    }
}

/// The token of a held `value` when `owner` wrote it (`OWNER:TOKEN`).
pub fn own_token(value: &str, owner: &str) -> Option<u64> {
    value.strip_prefix(owner)?.strip_prefix(':')?.parse().ok()
}

/// Decodes [`RENEW`]'s reply for `n` keys: per key, renewed or not; `None`
/// for a reply of another shape or length.
pub fn decode_renew(reply: &::redis::Value, n: usize) -> Option<Vec<bool>> {
    use ::redis::Value;
    let items: &[Value] = match reply {
        Value::Array(items) => items,
        // Redis turns an empty Lua table into an empty array, some clients into nil.
        Value::Nil if n == 0 => &[],
        _ => return None,
    };
    let flags: Option<Vec<bool>> = items
        .iter()
        .map(|v| match v {
            Value::Int(1) => Some(true),
            Value::Int(0) => Some(false),
            _ => None,
        })
        .collect();
    flags.filter(|f| f.len() == n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::redis::Value;

    #[test]
    fn a_lock_and_its_counter_share_the_hash_tag_of_the_key() {
        assert_eq!(lock_key("payout:7"), "lock:{payout:7}");
        assert_eq!(fence_key("payout:7"), "fence:{payout:7}");
        assert_eq!(grant_value("w-1#0", 42), "w-1#0:42");
    }

    #[test]
    fn an_acquire_reply_is_a_token_or_the_holders_value() {
        assert_eq!(decode_acquire(&Value::Int(3)), Some(Acquired::Granted(3)));
        assert_eq!(
            decode_acquire(&Value::BulkString(b"w-2#1:9".to_vec())),
            Some(Acquired::Held("w-2#1:9".into()))
        );
        assert_eq!(decode_acquire(&Value::Int(-1)), None);
        assert_eq!(decode_acquire(&Value::Nil), None);
    }

    #[test]
    fn only_our_own_value_yields_a_token() {
        assert_eq!(own_token("w-1#0:42", "w-1#0"), Some(42));
        assert_eq!(
            own_token("w-1#0:42", "w-1#01"),
            None,
            "a prefix is not the owner"
        );
        assert_eq!(own_token("w-1#01:42", "w-1#0"), None);
        assert_eq!(own_token("w-1#0", "w-1#0"), None, "no token yet");
    }

    #[test]
    fn a_renew_reply_has_one_flag_per_key() {
        let r = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert_eq!(decode_renew(&r, 2), Some(vec![true, false]));
        assert_eq!(decode_renew(&r, 3), None, "a short reply is not ours");
        assert_eq!(decode_renew(&Value::Array(vec![]), 0), Some(vec![]));
        assert_eq!(decode_renew(&Value::Nil, 0), Some(vec![]));
        assert_eq!(decode_renew(&Value::Int(1), 1), None);
    }
}
