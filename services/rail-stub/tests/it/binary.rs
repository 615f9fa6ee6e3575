//! The built `rail-stub` binary: the `listening on` line, SIGTERM, exit code 2
//! on bad values, `--help`, the SQLite ledger surviving a killed process, the
//! default ledger being durable (one rail-stub per file), and `memory` saying
//! that it forgets.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{temp_path, wait_until};

/// One refused input: arguments, environment, the flag the message must
/// name, and what it must say is accepted.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str, &'a str);

/// A running rail-stub child and its base URL.
struct Running {
    child: Child,
    base: String,
    /// The rest of stdout, after the `listening on` line.
    stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with `args` and waits (20 s at most) for its one line.
/// Its default ledger goes to a fresh state directory, never the user's.
fn start(args: &[&str]) -> Running {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    start_in(&temp_path(&format!("xdg-state-{n}")), args, Stdio::null())
}

/// [`start`] with `XDG_STATE_HOME=state` (and no `RAIL_LEDGER`) and stderr to `stderr`.
fn start_in(state: &std::path::Path, args: &[&str], stderr: impl Into<Stdio>) -> Running {
    start_logging(state, args, stderr, "warn")
}

/// [`start_in`] with `RUST_LOG=rust_log`.
fn start_logging(
    state: &std::path::Path,
    args: &[&str],
    stderr: impl Into<Stdio>,
    rust_log: &str,
) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rail-stub"))
        .args(args)
        .env("RUST_LOG", rust_log)
        .env("XDG_STATE_HOME", state)
        .env_remove("RAIL_LEDGER")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Read the first line on a thread so a silent child cannot hang the test.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
        stdout
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("no `listening on` line within 20 s");
    let stdout = reader.join().unwrap();
    let base = line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(
        base.starts_with("http://127.0.0.1:") && !base.ends_with(":0"),
        "{base}"
    );
    Running {
        child,
        base,
        stdout,
    }
}

/// Sends SIGTERM and waits (10 s at most) for the exit status.
async fn terminate(mut running: Running) -> (std::process::ExitStatus, String) {
    let pid = running.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut status = None;
    wait_until(Duration::from_secs(10), || {
        status = running.child.try_wait().unwrap();
        status.is_some()
    })
    .await;
    let status = status.expect("rail-stub did not stop within 10 s of SIGTERM");
    let mut rest = String::new();
    running.stdout.read_to_string(&mut rest).unwrap();
    (status, rest)
}

#[tokio::test]
async fn the_binary_prints_one_listening_line_serves_and_stops_on_sigterm() {
    let rail = start(&[
        "--listen",
        "127.0.0.1:0",
        "--latency",
        "fixed:1ms",
        "--seed",
        "5",
    ]);
    let http = reqwest::Client::new();
    let health: Value = http
        .get(format!("{}/healthz", rail.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (health["seed"].as_u64(), health["latency"].as_str()),
        (Some(5), Some("fixed:1ms"))
    );

    let created = http
        .post(format!("{}/v1/payouts", rail.base))
        .json(&json!({"payout_id": "p-1", "amount_minor": 1, "currency": "EUR"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // Over a real socket the declared length is checked before reading.
    let big = http
        .post(format!("{}/v1/payouts/p-1/claim", rail.base))
        .header("content-type", "application/json")
        .body(vec![b' '; 70 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    assert_eq!(
        big.json::<Value>().await.unwrap()["code"],
        "PAYLOAD_TOO_LARGE"
    );

    let (status, rest) = terminate(rail).await;
    assert!(status.success(), "{status:?}");
    assert_eq!(
        rest, "",
        "stdout must hold exactly the one `listening on` line"
    );
}

#[tokio::test]
async fn the_log_is_flat_json_and_ends_with_rail_stub_stopped_naming_the_signal() {
    let state = temp_path("xdg-state-log");
    let log = temp_path("rail-log").join("stderr.log");
    let rail = start_logging(
        &state,
        &["--listen", "127.0.0.1:0", "--ledger", "memory"],
        std::fs::File::create(&log).unwrap(),
        "info",
    );
    let (status, _) = terminate(rail).await;
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for l in &lines {
        assert!(l.get("fields").is_none(), "nested: {l}");
        assert!(
            l["timestamp"].is_string() && l["message"].is_string(),
            "{l}"
        );
    }
    assert!(
        lines.iter().any(|l| l["message"] == "rail_stub_started"),
        "{text}"
    );
    let last = lines.last().expect("a log line");
    assert_eq!(
        (&last["message"], &last["reason"]),
        (&json!("rail_stub_stopped"), &json!("SIGTERM")),
        "{text}"
    );
}

#[tokio::test]
async fn the_sqlite_ledger_survives_a_killed_and_restarted_binary() {
    let dir = temp_path("binary-restart");
    let ledger = format!("sqlite:{}", dir.join("rail.db").display());
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--latency",
        "fixed:0ms",
        "--ledger",
        &ledger,
    ];
    let http = reqwest::Client::new();
    let before: Value = {
        let mut rail = start(&args);
        let post = |path: String, body: Value| {
            http.post(format!("{}{path}", rail.base)).json(&body).send()
        };
        for (path, body, status) in [
            ("/v1/payouts/bulk", json!({"count": 2}), 201),
            ("/v1/payouts/p-000001/claim", json!({"token": 4}), 200),
            ("/v1/payouts/p-000001/submit", json!({"token": 4}), 200),
            ("/v1/payouts/p-000002/claim", json!({"token": 9}), 200),
            ("/v1/payouts/p-000002/claim", json!({"token": 8}), 409),
        ] {
            let got = post(path.into(), body).await.unwrap().status();
            assert_eq!(got, status, "POST {path}");
        }
        let before = http
            .get(format!("{}/v1/ledger", rail.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // SIGKILL: no shutdown path runs; only what was persisted before each reply survives.
        rail.child.kill().unwrap();
        rail.child.wait().unwrap();
        before
    };
    let rail = start(&args);
    let after: Value = http
        .get(format!("{}/v1/ledger", rail.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(after, before);
    assert_eq!(after["counters"]["fenced_out_fence1"], 1);
    let stale = http
        .post(format!("{}/v1/payouts/p-000002/submit", rail.base))
        .json(&json!({"token": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 409);
    drop(rail);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_values_exit_2_naming_the_flag_before_any_log_line() {
    let dir = std::env::temp_dir().join(format!("rail-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_tokens = dir.join("tokens");
    std::fs::write(&bad_tokens, "alice root sha256:nothex\n").unwrap();
    let tokens = bad_tokens.to_str().unwrap();
    // On a free port and a memory ledger, so an input wrongly accepted starts
    // a server the deadline then kills and reports.
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rail-stub"));
        cmd.args(args)
            .env("RAIL_LISTEN", "127.0.0.1:0")
            .env("RAIL_LEDGER", "memory")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} {env:?} was not refused within 30 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // (arguments, environment, the flag the message names, what it says is accepted)
    let cases: &[Refusal] = &[
        (&["--latency", "gauss:5ms"], &[], "--latency", "fixed:"),
        (&["--latency", "uniform:50ms..10ms"], &[], "--latency", ""),
        (&["--latency", "-5ms"], &[], "--latency", ""),
        (
            &[],
            &[("RAIL_LATENCY", "lognormal:p50=1s,p99=1ms")],
            "--latency",
            "",
        ),
        (
            &[],
            &[("RAIL_LISTEN", "not-an-address")],
            "--listen",
            "IP:PORT",
        ),
        (&["--listen", "-1"], &[], "--listen", "IP:PORT"),
        (&[], &[("RAIL_SEED", "seven")], "--seed", "whole number"),
        (&["--seed", "-1"], &[], "--seed", "whole number"),
        (&["--seed=-1"], &[], "--seed", "whole number"),
        (&[], &[("RAIL_SEED", "-1")], "--seed", "whole number"),
        (&["--ledger", "postgres://db"], &[], "--ledger", "sqlite:"),
        (&["--ledger", "-x"], &[], "--ledger", "sqlite:"),
        (
            &["--sabotage", "some"],
            &[],
            "--sabotage",
            "possible values",
        ),
        (
            &["--auth-tokens", "/nonexistent/tokens"],
            &[],
            "--auth-tokens",
            "cannot read",
        ),
        (
            &["--auth-tokens", tokens],
            &[],
            "--auth-tokens",
            "NAME ROLE sha256:HEX",
        ),
        (
            &[],
            &[("RAIL_AUTH_TOKENS", "/nonexistent/tokens")],
            "--auth-tokens",
            "cannot read",
        ),
    ];
    for (args, env, flag, accepted) in cases {
        let (code, stderr) = run(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} {env:?}: no {flag}: {stderr}"
        );
        assert!(
            stderr.contains(accepted),
            "{args:?} {env:?}: does not say {accepted:?}: {stderr}"
        );
        let logged: Vec<&str> = stderr
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok())
            .collect();
        assert!(
            logged.is_empty(),
            "{args:?} {env:?}: logged before refusing: {logged:?}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn help_teaches_the_latency_forms_and_the_environment_variables() {
    let out = Command::new(env!("CARGO_BIN_EXE_rail-stub"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "fixed:5ms",
        "uniform:10ms..50ms",
        "lognormal:p50=40ms,p99=400ms",
        "RAIL_LISTEN",
        "RAIL_LATENCY",
        "RAIL_SEED",
        "RAIL_LEDGER",
        "sqlite:PATH",
        "listening on http://IP:PORT",
    ] {
        assert!(
            help.contains(needle),
            "--help should mention {needle}:\n{help}"
        );
    }
}

/// `GET path` as JSON.
async fn get_json(base: &str, path: &str) -> Value {
    reqwest::get(format!("{base}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_default_ledger_is_a_stable_file_that_survives_a_restart_and_takes_one_process() {
    let state = temp_path("xdg-default");
    let file = state.join("fencepost").join("rail-ledger.sqlite");
    let http = reqwest::Client::new();
    {
        let rail = start_in(&state, &["--listen", "127.0.0.1:0"], Stdio::null());
        let health = get_json(&rail.base, "/healthz").await;
        assert_eq!(
            (health["ledger"].as_str(), health["durable"].as_bool()),
            (
                Some(format!("sqlite:{}", file.display()).as_str()),
                Some(true)
            ),
            "{health}"
        );
        for (path, body, status) in [
            ("/v1/payouts/bulk", json!({"count": 1}), 201),
            ("/v1/payouts/p-000001/claim", json!({"token": 7}), 200),
            ("/v1/payouts/p-000001/submit", json!({"token": 7}), 200),
        ] {
            let got = http
                .post(format!("{}{path}", rail.base))
                .json(&body)
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(got, status, "POST {path}");
        }
        // A second rail-stub on the same default file refuses to start.
        let second = Command::new(env!("CARGO_BIN_EXE_rail-stub"))
            .args(["--listen", "127.0.0.1:0"])
            .env("XDG_STATE_HOME", &state)
            .env_remove("RAIL_LEDGER")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert!(
            !second.status.success(),
            "a second rail-stub started on one file"
        );
        assert!(stderr.contains("locked"), "{stderr}");
        drop(rail);
    }
    assert!(file.exists());
    // Restarted on the same default file: PAID and the fence are remembered.
    let rail = start_in(&state, &["--listen", "127.0.0.1:0"], Stdio::null());
    let p = get_json(&rail.base, "/v1/payouts/p-000001").await;
    assert_eq!(
        (p["state"].as_str(), p["highest_token"].as_u64()),
        (Some("PAID"), Some(7)),
        "{p}"
    );
    let stale = http
        .post(format!("{}/v1/payouts/p-000001/claim", rail.base))
        .json(&json!({"token": 6}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.json::<Value>().await.unwrap()["code"], "FENCED_OUT");
    drop(rail);
    let _ = std::fs::remove_dir_all(state);
}

#[tokio::test]
async fn a_memory_ledger_warns_at_start_and_healthz_says_it_is_not_durable() {
    let state = temp_path("xdg-memory");
    let log = temp_path("memory-log");
    std::fs::create_dir_all(&log).unwrap();
    let log = log.join("stderr.log");
    let rail = start_in(
        &state,
        &["--listen", "127.0.0.1:0", "--ledger", "memory"],
        std::fs::File::create(&log).unwrap(),
    );
    let health = get_json(&rail.base, "/healthz").await;
    assert_eq!(
        (health["ledger"].as_str(), health["durable"].as_bool()),
        (Some("memory"), Some(false))
    );
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("WARN") && l.contains("rail_ledger_not_durable")),
        "{stderr}"
    );
    assert!(
        !state.join("fencepost").exists(),
        "memory wrote a state file"
    );
    drop(rail);
}
