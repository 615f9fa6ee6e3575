//! Scripted instances for the tests of rounds and sessions: each answers
//! as told, advances a shared fake clock by its delay first (the time its
//! answer took), and logs every request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_sdk::FakeClock;

use super::instance::{Answer, Instance, InstanceError, Op};

/// How a scripted instance answers a lock or extend (an unlock always
/// succeeds; a ping succeeds unless the instance fails or hangs).
#[derive(Clone, Copy, Debug)]
pub enum Script {
    /// Yes.
    Yes,
    /// No: the key is another value's.
    No,
    /// A failed request.
    Fail,
    /// No answer, ever.
    Hang,
}

/// A scripted instance.
pub struct Scripted {
    /// How it answers now.
    script: Mutex<Script>,
    /// How long each answer takes on the fake clock.
    delay: Duration,
    /// The clock it advances.
    clock: Arc<FakeClock>,
    /// Every request, in order.
    log: Mutex<Vec<Op>>,
}

impl Scripted {
    /// From now on, answers locks and extends as `script` says.
    pub fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }
}

impl Instance for Scripted {
    fn call<'a>(&'a self, op: Op, _key: &'a str, _value: &'a str) -> Answer<'a> {
        self.log.lock().unwrap().push(op);
        let script = *self.script.lock().unwrap();
        Box::pin(async move {
            self.clock.advance(self.delay);
            match (op, script) {
                (Op::Unlock, _) | (_, Script::Yes) => Ok(true),
                (Op::Ping, Script::No) => Ok(true),
                (_, Script::No) => Ok(false),
                (_, Script::Fail) => Err(InstanceError::Redis {
                    url: "redis://scripted".into(),
                    cause: redis::RedisError::from(std::io::Error::other("refused")),
                }),
                (_, Script::Hang) => std::future::pending().await,
            }
        })
    }
}

/// One scripted instance per `(script, delay)`, on `clock`.
pub fn instances(clock: &Arc<FakeClock>, scripts: &[(Script, Duration)]) -> Vec<Arc<Scripted>> {
    scripts
        .iter()
        .map(|&(script, delay)| {
            Arc::new(Scripted {
                script: Mutex::new(script),
                delay,
                clock: clock.clone(),
                log: Mutex::new(Vec::new()),
            })
        })
        .collect()
}

/// The same instances as a round takes them.
pub fn dyns(v: &[Arc<Scripted>]) -> Vec<Arc<dyn Instance>> {
    v.iter().map(|i| i.clone() as Arc<dyn Instance>).collect()
}

/// How many unlocks `i` was sent.
pub fn unlocks(i: &Scripted) -> usize {
    i.log
        .lock()
        .unwrap()
        .iter()
        .filter(|op| **op == Op::Unlock)
        .count()
}

/// How many extends `i` was sent.
pub fn extends(i: &Scripted) -> usize {
    i.log
        .lock()
        .unwrap()
        .iter()
        .filter(|op| matches!(op, Op::Extend { .. }))
        .count()
}

/// How many pings `i` was sent.
pub fn pings(i: &Scripted) -> usize {
    i.log
        .lock()
        .unwrap()
        .iter()
        .filter(|op| **op == Op::Ping)
        .count()
}
