//! The proptest strategies that draw [`Step`]s: weights that keep most
//! requests on real sessions, hot keys and right tokens, and the rest
//! garbage.

use proptest::collection::vec;
use proptest::prelude::*;

use super::vocabulary::{
    Advance, Call, HOT_KEYS, JUNK_METHODS, JUNK_PATHS, LOOSE_TEXT, LooseBody, NOT_OBJECT,
    ODD_SESSIONS, OPS_PATHS, Sess, Shape, Step, TOKEN_RAW, TTL_RAW, Tok, Ttl, WRONG_TYPE, key_pool,
};

pub(super) fn key_idx() -> impl Strategy<Value = usize> {
    let n = key_pool().len();
    prop_oneof![8 => 0..HOT_KEYS, 2 => 0..n]
}

pub(super) fn sess(holder: u32) -> impl Strategy<Value = Sess> {
    prop_oneof![
        6 => (0usize..8).prop_map(Sess::Pool),
        4 => Just(Sess::Latest),
        holder => Just(Sess::Holder),
        1 => any::<u128>().prop_map(Sess::Unknown),
        1 => (0..ODD_SESSIONS.len()).prop_map(Sess::Odd),
        1 => (0..WRONG_TYPE.len()).prop_map(Sess::WrongType),
    ]
}

pub(super) fn tok() -> impl Strategy<Value = Tok> {
    prop_oneof![
        24 => Just(Tok::Right),
        1 => Just(Tok::Prev),
        1 => Just(Tok::Next),
        1 => Just(Tok::Zero),
        1 => Just(Tok::Max),
        1 => (0u64..6).prop_map(Tok::Small),
        2 => (0..TOKEN_RAW.len()).prop_map(Tok::Raw),
    ]
}

pub(super) fn ttl() -> impl Strategy<Value = Ttl> {
    prop_oneof![
        3 => Just(Ttl::Absent),
        6 => (0u64..3_000).prop_map(Ttl::Ms),
        1 => (0u64..700_000).prop_map(Ttl::Ms),
        1 => (0..TTL_RAW.len()).prop_map(Ttl::Raw),
    ]
}

pub(super) fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        60 => Just(Shape::Valid),
        3 => Just(Shape::Extra),
        2 => (0usize..3).prop_map(Shape::Drop),
        1 => Just(Shape::Dup),
        1 => any::<usize>().prop_map(Shape::Truncate),
        1 => (0..NOT_OBJECT.len()).prop_map(Shape::NotObject),
        1 => Just(Shape::Empty),
        1 => Just(Shape::Deep),
        1 => any::<bool>().prop_map(|over| Shape::Padded { over }),
        1 => vec(any::<u8>(), 0..40).prop_map(Shape::Garbage),
    ]
}

pub(super) fn loose_body() -> impl Strategy<Value = LooseBody> {
    prop_oneof![
        6 => Just(LooseBody::Empty),
        4 => (0..LOOSE_TEXT.len()).prop_map(|i| LooseBody::Text(LOOSE_TEXT[i])),
        1 => any::<bool>().prop_map(|over| LooseBody::Padded { over }),
        1 => Just(LooseBody::Huge),
        1 => vec(any::<u8>(), 0..40).prop_map(LooseBody::Bytes),
    ]
}

pub(super) fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        10 => (prop_oneof![8 => 0usize..3, 3 => 0usize..11], ttl(), shape())
            .prop_map(|(owner, ttl, shape)| Call::Open { owner, ttl, shape }),
        10 => (sess(1), loose_body()).prop_map(|(sess, body)| Call::Heartbeat { sess, body }),
        2 => sess(1).prop_map(|sess| Call::Delete { sess }),
        20 => (key_idx(), sess(1), ttl(), shape())
            .prop_map(|(key, sess, ttl, shape)| Call::Acquire { key, sess, ttl, shape }),
        14 => (key_idx(), sess(24), tok(), ttl(), shape()).prop_map(
            |(key, sess, tok, ttl, shape)| Call::Renew { key, sess, tok, ttl, shape }
        ),
        10 => (key_idx(), sess(24), tok(), shape())
            .prop_map(|(key, sess, tok, shape)| Call::Release { key, sess, tok, shape }),
        10 => key_idx().prop_map(|key| Call::Info { key }),
        3 => (key_idx(), 0usize..8, shape())
            .prop_map(|(key, reason, shape)| Call::Revoke { key, reason, shape }),
        2 => (0..OPS_PATHS.len()).prop_map(|path| Call::Ops { path }),
        5 => (0..JUNK_METHODS.len(), 0..JUNK_PATHS.len(), loose_body())
            .prop_map(|(method, path, body)| Call::Junk { method, path, body }),
    ]
}

pub(super) fn step() -> impl Strategy<Value = Step> {
    let advance = prop_oneof![
        16 => Just(Advance::None),
        2 => (0u64..=300).prop_map(Advance::Ms),
        1 => (0u64..=20_000).prop_map(Advance::Ms),
        2 => (0..HOT_KEYS, 0u64..=60).prop_map(|(key, ms)| Advance::PastLease { key, ms }),
    ];
    (advance, any::<bool>(), call()).prop_map(|(advance, content_length, call)| Step {
        advance,
        content_length,
        call,
    })
}
