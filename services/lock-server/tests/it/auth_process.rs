//! API tokens on the real `lock-server` binary: the start-up log
//! says the auth mode (a WARN without tokens), a bad token file stops the
//! start, and SIGHUP re-reads the file: a rotated-in token works and a
//! removed one is refused, while a bad file is logged at ERROR and the set
//! in force kept. Every wait is for a condition with a deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use fencepost_api::auth::{Role, issue_token};
use fencepost_harness::ChildService;
use nix::sys::signal::Signal;

use crate::support::temp_dir;

/// How long any wait for a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// Starts the binary on a memory store with `extra` flags and waits for
/// `/readyz` (open without a token).
async fn start(extra: &[&str]) -> ChildService {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let log = temp_dir("auth-log").join("stderr.log");
    let mut args = vec!["--store", "memory:"];
    args.extend_from_slice(extra);
    let server = ChildService::start(&bin, args, &log).expect("lock-server starts");
    let c = reqwest::Client::new();
    wait_for("/readyz", || async {
        c.get(format!("{}/readyz", server.url()))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    server
}

/// Waits until `cond` holds, failing after [`PATIENCE`].
async fn wait_for<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !cond().await {
        assert!(Instant::now() < deadline, "never true: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status of `GET /v1/config` with `secret` as the bearer token.
async fn config_status(c: &reqwest::Client, base: &str, secret: &str) -> u16 {
    c.get(format!("{base}/v1/config"))
        .bearer_auth(secret)
        .send()
        .await
        .expect("GET /v1/config")
        .status()
        .as_u16()
}

fn stderr_of(s: &ChildService) -> String {
    std::fs::read_to_string(s.stderr_path()).unwrap_or_default()
}

#[tokio::test]
async fn without_tokens_the_server_warns_at_start_and_config_says_none() {
    let server = start(&[]).await;
    wait_for("the WARN line", || async {
        let log = stderr_of(&server);
        log.contains("auth: none") && log.contains("\"level\":\"WARN\"")
    })
    .await;
    let v: serde_json::Value = reqwest::get(format!("{}/v1/config", server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["auth"], "none");
}

#[tokio::test]
async fn a_bad_token_file_stops_the_start_with_its_line_named() {
    let dir = temp_dir("auth-bad");
    let path = dir.join("tokens");
    std::fs::write(&path, "# ok\nalice client sha256:zz\n").unwrap();
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let out = std::process::Command::new(bin)
        .args([
            "--store",
            "memory:",
            "--listen",
            "127.0.0.1:0",
            "--auth-tokens",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":2: bad HASH"), "{err}");
    assert!(err.contains("lock.auth.tokens"), "{err}");
}

#[tokio::test]
async fn token_new_prints_the_secret_on_stdout_and_the_line_on_stderr() {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let out = std::process::Command::new(bin)
        .args([
            "token", "new", "--name", "alice", "--role", "client", "--prefix", "payout:",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let secret = String::from_utf8(out.stdout).unwrap();
    let line = String::from_utf8(out.stderr).unwrap();
    let secret = secret.trim();
    assert!(secret.starts_with("fpt_"), "{secret}");
    assert!(!line.contains(secret));
    let set =
        fencepost_api::auth::TokenSet::parse(&line, Path::new("stderr")).expect("a valid line");
    let p = set
        .authenticate(secret)
        .expect("the line accepts the secret");
    assert_eq!((&*p.name, p.role), ("alice", Role::Client));
}

#[tokio::test]
async fn sighup_rotates_the_token_file_and_a_bad_file_keeps_the_old_set() {
    let dir = temp_dir("auth-hup");
    let path = dir.join("tokens");
    let old = issue_token("ops", Role::Admin, None).unwrap();
    let new = issue_token("ops", Role::Admin, None).unwrap();
    std::fs::write(&path, format!("{}\n", old.line)).unwrap();
    let file = path.display().to_string();
    let mut server = start(&["--auth-tokens", &file]).await;
    let base = server.url();
    let c = reqwest::Client::new();
    assert!(stderr_of(&server).contains("auth: tokens"));
    assert_eq!(config_status(&c, &base, &old.secret).await, 200);
    assert_eq!(config_status(&c, &base, &new.secret).await, 401);

    // Rotation, step 1: both lines, SIGHUP; the new token starts to work.
    std::fs::write(&path, format!("{}\n{}\n", old.line, new.line)).unwrap();
    server.signal(Signal::SIGHUP).unwrap();
    wait_for("the new token accepted", || async {
        config_status(&c, &base, &new.secret).await == 200
    })
    .await;
    assert_eq!(config_status(&c, &base, &old.secret).await, 200);
    // Step 2: only the new line; the old token stops working.
    std::fs::write(&path, format!("{}\n", new.line)).unwrap();
    server.signal(Signal::SIGHUP).unwrap();
    wait_for("the old token refused", || async {
        config_status(&c, &base, &old.secret).await == 401
    })
    .await;
    // A bad file: logged at ERROR, the set in force kept.
    std::fs::write(&path, "ops admin sha256:nothex\n").unwrap();
    server.signal(Signal::SIGHUP).unwrap();
    wait_for("the refusal logged", || async {
        let log = stderr_of(&server);
        log.contains("\"level\":\"ERROR\"") && log.contains("bad HASH")
    })
    .await;
    assert_eq!(config_status(&c, &base, &new.secret).await, 200);
    assert_eq!(config_status(&c, &base, &old.secret).await, 401);
    assert!(server.is_running(), "SIGHUP must not stop the server");
}

/// With neither TLS nor a token file there is nothing to reload, but a
/// SIGHUP must not end the server (its default action): it is logged and
/// the server keeps answering.
#[tokio::test]
async fn sighup_without_tls_or_tokens_is_logged_and_the_server_keeps_serving() {
    let mut server = start(&[]).await;
    let base = server.url();
    server.signal(Signal::SIGHUP).unwrap();
    let deadline = Instant::now() + PATIENCE;
    while server.is_running() && !stderr_of(&server).contains("nothing to reload") {
        assert!(Instant::now() < deadline, "the SIGHUP was never logged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        server.is_running(),
        "SIGHUP ended the server: {}",
        stderr_of(&server)
    );
    let r = reqwest::get(format!("{base}/readyz"))
        .await
        .expect("GET /readyz");
    assert_eq!(r.status(), 200);
}
