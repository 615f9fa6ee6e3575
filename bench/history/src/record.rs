//! Writing a history and reading it back: a worker's [`Recorder`] appends one
//! JSON line per [`Event`] to its own file, written through; [`read_events`]
//! and [`load`] join many such files into [`Op`]s.

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::op::{Event, Op, OpKind, Outcome, mono_ns};

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

impl Pending {
    /// The operation's number within its process, for a caller that must
    /// carry it as a plain number (an SDK observer's ticket).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The invocation numbered `id` (from [`id`](Self::id)) of this process.
    pub fn from_id(id: u64) -> Pending {
        Pending { id }
    }
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
        self.invoke_keyed(kind, session, payout, token, None)
    }

    /// Records the invocation of `kind` in `session` (now) under the lock
    /// `key` of a multi-step payout ([`Event::key`]).
    pub fn invoke_keyed(
        &self,
        kind: OpKind,
        session: &str,
        payout: Option<&str>,
        token: Option<u64>,
        key: Option<&str>,
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
            key: key.map(str::to_string),
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
            key: None,
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
            key: None,
        });
    }
}

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A file could not be read.
    #[error("reading {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// A line is not an [`Event`] (a torn last line of a killed process is
    /// skipped, not refused: only one *before* the last is an error).
    #[error("{path} line {line}: {error}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The JSON error (in the message, so not also a `source()`).
        error: serde_json::Error,
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
        let f = std::fs::File::open(path).map_err(|error| HistoryError::Io {
            path: shown.clone(),
            error,
        })?;
        let lines: Vec<String> = std::io::BufReader::new(f)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|error| HistoryError::Io {
                path: shown.clone(),
                error,
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
                Err(error) => {
                    return Err(HistoryError::Parse {
                        path: shown,
                        line: i + 1,
                        error,
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
                    key: e.key.clone(),
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
