//! Lost-lock listeners (C3 `on_lock_lost`): registration in order, exactly
//! one call per lost handle, a late listener replayed every loss already
//! reported, and a panicking or failing listener caught and logged.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use tracing::{error, warn};

use super::mutex::lock;
use crate::error::LostReason;

/// What a lost-lock listener is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockLostEvent {
    /// The lost grant's key.
    pub key: Arc<str>,
    /// The lost grant's fencing token.
    pub token: u64,
    /// The session that held it.
    pub session_id: Arc<str>,
    /// Why it was lost.
    pub reason: LostReason,
}

/// What a listener may return: `()`, or a `Result` whose `Err` is logged.
pub trait ListenerOutcome {
    /// `Some(message)` when the listener reports a failure (logged, never
    /// propagated).
    fn into_failure(self) -> Option<String>;
}

impl ListenerOutcome for () {
    fn into_failure(self) -> Option<String> {
        None
    }
}

impl<E: fmt::Display> ListenerOutcome for Result<(), E> {
    fn into_failure(self) -> Option<String> {
        self.err().map(|e| e.to_string())
    }
}

/// A registered listener, type-erased.
type Listener = Arc<dyn Fn(&LockLostEvent) -> Option<String> + Send + Sync>;

/// Listeners and the losses already reported.
#[derive(Default)]
struct State {
    listeners: Vec<Listener>,
    reported: Vec<LockLostEvent>,
}

/// A session's listeners, under one mutex so that a listener registered
/// concurrently with a report sees each loss exactly once. The mutex is held
/// only to copy the lists; listeners run outside it.
#[derive(Default)]
pub(crate) struct Listeners {
    state: Mutex<State>,
}

impl Listeners {
    /// Registers `listener`; it is called at once (on this thread) for every
    /// loss already reported, then for each later one.
    pub(crate) fn register<F, R>(&self, listener: F)
    where
        F: Fn(&LockLostEvent) -> R + Send + Sync + 'static,
        R: ListenerOutcome,
    {
        let listener: Listener = Arc::new(move |e: &LockLostEvent| listener(e).into_failure());
        let already = {
            let mut st = lock(&self.state);
            st.listeners.push(listener.clone());
            st.reported.clone()
        };
        for event in &already {
            call(&listener, event);
        }
    }

    /// Records `event` as reported and calls every listener, in registration order.
    pub(crate) fn report(&self, event: LockLostEvent) {
        let listeners = {
            let mut st = lock(&self.state);
            st.reported.push(event.clone());
            st.listeners.clone()
        };
        for l in &listeners {
            call(l, &event);
        }
    }
}

/// Runs one listener; a panic or an `Err` is logged and goes no further.
fn call(listener: &Listener, event: &LockLostEvent) {
    match catch_unwind(AssertUnwindSafe(|| listener(event))) {
        Ok(None) => {}
        Ok(Some(failure)) => warn!(
            key = %event.key, token = event.token, error = %failure,
            "on_lock_lost listener failed"
        ),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            error!(key = %event.key, token = event.token, panic = %msg, "on_lock_lost listener panicked");
        }
    }
}
