//! Ctrl-C in the middle of a cell, as a user meets it: `bench run` and
//! `bench sweep` (their process group, as from a terminal) get SIGINT once the cell's measured window is open (the
//! driver's `window_opened` log event, read from stderr), close the window
//! early, write what was measured as a partial cell (`stopped_by`
//! `interrupted`, the manifest's `cells_partial`) and exit 130; `bench
//! report` reads the directory and says the cell is partial, no trigger says
//! ok on it, and `bench sweep --resume` measures it again in full.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bench_analysis::manifest::Manifest;
use bench_analysis::results::read_results;
use bench_analysis::triggers::{Verdict, evaluate};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::driver::temp_dir;

/// How long a cell may take to reach its window on a loaded machine (a
/// debug build starting its services), and to write and exit after the signal.
const DEADLINE: Duration = Duration::from_secs(120);

/// A bench with the driver's window event on stderr, stdout discarded, in
/// a process group of its own, as a shell starts a foreground job.
fn bench(args: &[&str], out: &Path) -> Child {
    use std::os::unix::process::CommandExt as _;
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .process_group(0)
        .args(args)
        .args(["--ttl", "1s", "--workers", "2", "--payouts", "2000"])
        .arg("--out")
        .arg(out)
        .env("RUST_LOG", "warn,bench_driver::cell::run=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench starts")
}

/// The child's stderr lines as they come, on a channel (and all of them at the end).
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (up to [`DEADLINE`]) for a stderr line containing `needle`;
/// returns every line read so far.
fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let until = Instant::now() + DEADLINE;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return;
                }
            }
            Err(e) => panic!("no {needle:?} on stderr ({e}); saw:\n{}", seen.join("\n")),
        }
    }
}

/// Sends SIGINT once the window is open to the bench's process group, as a
/// terminal's Ctrl-C does (the services it started must not get it: they
/// are in groups of their own), then waits (up to [`DEADLINE`]) for the
/// exit; returns the exit code and the stderr text.
fn interrupt_in_window(mut child: Child) -> (Option<i32>, String) {
    let rx = lines(&mut child);
    let mut seen = Vec::new();
    wait_for(&rx, "window_opened", &mut seen);
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    wait_exit(child, &rx, seen)
}

/// Waits (up to [`DEADLINE`]) for `child` to exit, draining its stderr;
/// returns the exit code and every stderr line.
fn wait_exit(
    mut child: Child,
    rx: &mpsc::Receiver<String>,
    mut seen: Vec<String>,
) -> (Option<i32>, String) {
    let until = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("bench did not exit in time; saw:\n{}", seen.join("\n"));
        }
        // Poll the exit while draining what it prints.
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push(line);
        }
    };
    seen.extend(rx.try_iter());
    (status.code(), seen.join("\n"))
}

/// The one row of `dir` is partial, the manifest says so, `bench report`
/// says so, and no trigger is `ok` on it.
fn assert_partial(dir: &Path, stderr: &str) -> String {
    let rows = read_results(dir).unwrap_or_else(|e| panic!("{e}; stderr:\n{stderr}"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.stopped_by, "interrupted", "{row:?}");
    assert!(row.ledger_ok, "{row:?}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert!(csv.contains("interrupted"), "{csv}");
    let manifest = Manifest::read(dir).unwrap();
    assert_eq!(manifest.cells_partial, std::slice::from_ref(&row.cell));
    assert!(manifest.cells_done.is_empty(), "{:?}", manifest.cells_done);
    assert!(manifest.finished_at.is_none());
    for t in evaluate(&rows) {
        assert_ne!(t.verdict, Verdict::Ok, "{t:?}");
    }
    let report = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&report.stdout).into_owned();
    assert_eq!(
        report.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        said.contains("partial") && said.contains(&row.cell),
        "{said}"
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("Partial"), "{md}");
    row.cell.clone()
}

/// `bench run` interrupted inside its window: exit 130 after writing the
/// partial cell, which `bench report` reads and names.
#[test]
fn ctrl_c_in_the_window_writes_a_partial_cell_and_exits_130() {
    let out = temp_dir("interrupt").join("run");
    let child = bench(&["run", "--duration", "60s"], &out);
    let (code, stderr) = interrupt_in_window(child);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("partial"), "{stderr}");
    assert_partial(&out, &stderr);
}

/// A sweep interrupted in its window keeps the partial cell, and
/// `--resume` measures it again in full instead of skipping it.
#[test]
fn a_resumed_sweep_measures_a_partial_cell_again() {
    let out = temp_dir("interrupt").join("sweep");
    let args = [
        "sweep",
        "--margin",
        "0.3",
        "--duration",
        "8s",
        "--seed",
        "3",
    ];
    let (code, stderr) = interrupt_in_window(bench(&args, &out));
    assert_eq!(code, Some(130), "{stderr}");
    let cell = assert_partial(&out, &stderr);

    let mut resume = args.to_vec();
    resume.push("--resume");
    let mut child = bench(&resume, &out);
    let rx = lines(&mut child);
    let (code, stderr) = wait_exit(child, &rx, Vec::new());
    assert_eq!(code, Some(0), "{stderr}");
    let rows = read_results(&out).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].cell.as_str(), rows[0].stopped_by.as_str()),
        (cell.as_str(), "duration")
    );
    let manifest = Manifest::read(&out).unwrap();
    assert!(manifest.cells_partial.is_empty());
    assert_eq!(manifest.cells_done, [cell]);
}
