//! A client-side operation history, Jepsen style (issue 16): every step a
//! payout worker takes — session opened, lock granted, the client check's
//! verdict, claim (fence 1), submit (fence 2), rail release, lock release —
//! is recorded as an *invocation* and, when it returns, a *completion*, both
//! stamped on one monotonic clock that every process on the machine shares
//! (`CLOCK_MONOTONIC`, [`mono_ns`]). A worker killed with SIGKILL leaves its
//! invocations without completions: they stay in the history as
//! indeterminate operations, never dropped.
//!
//! A worker records through a [`Recorder`] (the observer seam in
//! `crate::worker::WorkerEnv::history`), which appends one JSON line per
//! [`Event`] to its own file, unbuffered, so a kill loses nothing written.
//! [`load`] joins the lines of many files into [`Op`]s; [`check`] is the pure
//! checker over those ops and the rail's final ledger.

pub mod check;

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use fencepost_api::rail::RailErrorCode;
use serde::{Deserialize, Serialize};

use crate::rail::RailOutcome;

/// Nanoseconds of `CLOCK_MONOTONIC`: one time base for every process on the
/// machine (the driver, each worker process), unaffected by wall-clock steps.
/// The history's only clock.
pub fn mono_ns() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// What an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// L1: a session opened (its `client_check` says how the worker runs).
    Session,
    /// L4: acquire; completes `ok` with the token when the grant's reply arrived.
    Grant,
    /// `check_still_held` + `ensure_time_for` before the submit; `ok` = passed.
    Check,
    /// R2: claim (fence 1).
    Claim,
    /// R3: submit (fence 2), the irreversible step.
    Submit,
    /// R4: the rail release of an abandoned claim (fence 1).
    RailRelease,
    /// L6: the lock released (the end of the client's belief).
    Release,
    /// A fault, not a request: the process froze itself (SIGSTOP) at a step
    /// of this payout; completes when it runs again. The checker skips it.
    Freeze,
}

/// How an operation completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Succeeded (granted, passed, accepted, paid).
    Ok,
    /// A fence refused it (`FENCED_OUT`).
    FencedOut,
    /// R2/R4 on a PAID payout.
    AlreadyPaid,
    /// R3 on a PAID payout.
    Duplicate,
    /// R3 by a token that does not hold the claim.
    NotClaimed,
    /// The client check found the lock lost.
    Lost,
    /// The client check found too little lease for the rail hop (D4).
    InsufficientLease,
    /// Refused or failed otherwise (acquire gave up, another rail code).
    Failed,
    /// No answer (transport error, timeout): the effect is unknown.
    Unknown,
}

impl Outcome {
    /// The outcome of a rail call.
    pub fn of_rail(r: &RailOutcome) -> Outcome {
        match r {
            RailOutcome::Ok => Outcome::Ok,
            RailOutcome::Refused(RailErrorCode::FencedOut) => Outcome::FencedOut,
            RailOutcome::Refused(RailErrorCode::AlreadyPaid) => Outcome::AlreadyPaid,
            RailOutcome::Refused(RailErrorCode::DuplicateSubmission) => Outcome::Duplicate,
            RailOutcome::Refused(RailErrorCode::NotClaimed) => Outcome::NotClaimed,
            RailOutcome::Refused(_) => Outcome::Failed,
            RailOutcome::Transport(_) => Outcome::Unknown,
        }
    }
}

/// One line of a history file: an invocation (`outcome` absent) or the
/// completion of the invocation with the same `proc` and `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The recording process (`w<idx>` plus a generation, e.g. `w2.1`).
    pub proc: String,
    /// The operation's number within `proc`.
    pub id: u64,
    /// [`mono_ns`] at this event.
    pub t_ns: u64,
    /// What it is (invocations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<OpKind>,
    /// The session, `<proc>/s<n>` (invocations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The payout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<String>,
    /// The fencing token (on a grant: in its completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The completion's outcome; absent on an invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// On a grant or a check: the client's deadline for the lease then, in
    /// [`mono_ns`] (`now + remaining`): the end of what the client believed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// On a session: whether its worker runs the client check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_check: Option<bool>,
}

/// One operation: an invocation joined with its completion, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The recording process.
    pub proc: String,
    /// Its number in `proc`.
    pub id: u64,
    /// What it is.
    pub kind: OpKind,
    /// The session it ran in.
    pub session: String,
    /// The payout, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<String>,
    /// The fencing token, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Invoked at, [`mono_ns`].
    pub inv_ns: u64,
    /// Completed at; `None`: never completed (the process was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_ns: Option<u64>,
    /// How it completed; `None` with `ok_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The client's deadline reported with a grant or a check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// On a session: whether its worker runs the client check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_check: Option<bool>,
}

impl Op {
    /// True when it completed with `outcome`.
    pub fn is(&self, outcome: Outcome) -> bool {
        self.outcome == Some(outcome)
    }
}

/// A worker's history writer: one JSON line per event, appended to a file
/// and written through at once (a SIGKILL loses nothing already recorded).
#[derive(Debug)]
pub struct Recorder {
    /// The process name written on every line.
    proc: String,
    /// The next operation number.
    next: AtomicU64,
    /// The next session number.
    sessions: AtomicU64,
    /// The file; a mutex keeps lines whole across tasks.
    file: Mutex<std::fs::File>,
}

/// An invocation in progress; [`Recorder::complete`] ends it.
#[derive(Clone, Debug)]
pub struct Pending {
    /// The operation's number.
    id: u64,
}

impl Recorder {
    /// Appends to `path` (created if missing) as process `proc`.
    pub fn create(path: &Path, proc: &str) -> std::io::Result<Recorder> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Recorder {
            proc: proc.to_string(),
            next: AtomicU64::new(1),
            sessions: AtomicU64::new(1),
            file: Mutex::new(file),
        })
    }

    /// A fresh session name, `<proc>/s<n>`.
    pub fn session_name(&self) -> String {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed);
        format!("{}/s{n}", self.proc)
    }

    fn write(&self, e: &Event) {
        let Ok(mut line) = serde_json::to_vec(e) else {
            return;
        };
        line.push(b'\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = f.write_all(&line) {
            tracing::warn!(error = %err, "cannot write the history");
        }
    }

    /// Records the invocation of `kind` in `session` (now).
    pub fn invoke(
        &self,
        kind: OpKind,
        session: &str,
        payout: Option<&str>,
        token: Option<u64>,
    ) -> Pending {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.write(&Event {
            proc: self.proc.clone(),
            id,
            t_ns: mono_ns(),
            kind: Some(kind),
            session: Some(session.to_string()),
            payout: payout.map(str::to_string),
            token,
            outcome: None,
            deadline_ns: None,
            client_check: None,
        });
        Pending { id }
    }

    /// Records a session opened (invocation and completion at once).
    pub fn session(&self, session: &str, client_check: bool, inv_ns: u64) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut e = Event {
            proc: self.proc.clone(),
            id,
            t_ns: inv_ns,
            kind: Some(OpKind::Session),
            session: Some(session.to_string()),
            payout: None,
            token: None,
            outcome: None,
            deadline_ns: None,
            client_check: Some(client_check),
        };
        self.write(&e);
        e.kind = None;
        e.session = None;
        e.t_ns = mono_ns();
        e.outcome = Some(Outcome::Ok);
        self.write(&e);
    }

    /// Records the completion of `p` (now) with `outcome`; `token` and the
    /// client's `remaining` lease (turned into a deadline) when known.
    pub fn complete(
        &self,
        p: Pending,
        outcome: Outcome,
        token: Option<u64>,
        remaining: Option<std::time::Duration>,
    ) {
        let t_ns = mono_ns();
        self.write(&Event {
            proc: self.proc.clone(),
            id: p.id,
            t_ns,
            kind: None,
            session: None,
            payout: None,
            token,
            outcome: Some(outcome),
            deadline_ns: remaining.map(|r| t_ns + r.as_nanos() as u64),
            client_check: None,
        });
    }
}

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not an [`Event`] (a torn last line of a killed process is
    /// skipped, not refused: only one *before* the last is an error).
    #[error("{path} line {line}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A completion without its invocation.
    #[error("{proc} op {id}: a completion without an invocation")]
    Orphan {
        /// The process.
        proc: String,
        /// The operation number.
        id: u64,
    },
}

/// Reads the events of every file in `paths`, in file order.
pub fn read_events(paths: &[std::path::PathBuf]) -> Result<Vec<Event>, HistoryError> {
    let mut out = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|source| HistoryError::Io {
            path: shown.clone(),
            source,
        })?;
        let lines: Vec<String> = std::io::BufReader::new(f)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|source| HistoryError::Io {
                path: shown.clone(),
                source,
            })?;
        let n = lines.len();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Event>(line) {
                Ok(e) => out.push(e),
                // The last line of a killed writer may be torn.
                Err(_) if i + 1 == n => {}
                Err(source) => {
                    return Err(HistoryError::Parse {
                        path: shown,
                        line: i + 1,
                        source,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Joins invocations with their completions into operations, ordered by
/// invocation time; an invocation without a completion stays (`ok_ns: None`).
pub fn load(events: &[Event]) -> Result<Vec<Op>, HistoryError> {
    let mut ops: Vec<Op> = Vec::new();
    let mut index: HashMap<(String, u64), usize> = HashMap::new();
    for e in events {
        match (e.outcome, e.kind) {
            (None, Some(kind)) => {
                index.insert((e.proc.clone(), e.id), ops.len());
                ops.push(Op {
                    proc: e.proc.clone(),
                    id: e.id,
                    kind,
                    session: e.session.clone().unwrap_or_default(),
                    payout: e.payout.clone(),
                    token: e.token,
                    inv_ns: e.t_ns,
                    ok_ns: None,
                    outcome: None,
                    deadline_ns: None,
                    client_check: e.client_check,
                });
            }
            (Some(outcome), _) => {
                let Some(&i) = index.get(&(e.proc.clone(), e.id)) else {
                    return Err(HistoryError::Orphan {
                        proc: e.proc.clone(),
                        id: e.id,
                    });
                };
                let op = &mut ops[i];
                op.ok_ns = Some(e.t_ns);
                op.outcome = Some(outcome);
                op.token = op.token.or(e.token);
                op.deadline_ns = e.deadline_ns;
            }
            (None, None) => {}
        }
    }
    ops.sort_by_key(|o| (o.inv_ns, o.proc.clone(), o.id));
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_writer_leaves_its_invocation_open_and_its_torn_line_skipped() {
        let dir = std::env::temp_dir().join(format!("fp-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w0.jsonl");
        let _ = std::fs::remove_file(&path);
        let r = Recorder::create(&path, "w0").unwrap();
        let s = r.session_name();
        r.session(&s, true, mono_ns());
        let g = r.invoke(OpKind::Grant, &s, Some("p1"), None);
        r.complete(
            g,
            Outcome::Ok,
            Some(7),
            Some(std::time::Duration::from_millis(100)),
        );
        let _submit = r.invoke(OpKind::Submit, &s, Some("p1"), Some(7));
        // A torn last line, as a SIGKILL mid-write leaves it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"proc\":\"w0\",\"id\":")
            .unwrap();
        let ops = load(&read_events(std::slice::from_ref(&path)).unwrap()).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[1].token, Some(7));
        assert!(ops[1].deadline_ns.unwrap() > ops[1].ok_ns.unwrap());
        assert_eq!((ops[2].kind, ops[2].ok_ns), (OpKind::Submit, None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
