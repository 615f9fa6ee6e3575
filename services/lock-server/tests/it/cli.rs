//! The `lock-server` command line at its edges: every refused flag,
//! environment variable or input file exits 2 with a message naming the
//! flag and what is accepted, before any log line; the log is one flat JSON
//! object a line and ends with `stopped` naming the signal.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use serde_json::Value;

use crate::support::temp_dir;

/// One refused input: arguments, environment, the flag the message must
/// name, and what it must say is accepted.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str, &'a str);

/// How long a refused start may take before the test fails (it should be
/// immediate: nothing is bound or opened).
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs the binary with `args` and `env` on top of a memory store on a free
/// port (so an input wrongly accepted starts a server, which the deadline
/// then kills and reports); returns its exit code and stderr.
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let stderr = temp_dir("cli").join("stderr.log");
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("LOCK_STORE", "memory:")
        .env("LOCK_LISTEN", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("lock-server starts");
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} {env:?} was not refused within {PATIENCE:?}:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (
        status.code(),
        std::fs::read_to_string(&stderr).unwrap_or_default(),
    )
}

#[test]
fn every_refused_input_exits_2_naming_its_flag_before_any_log_line() {
    let dir = temp_dir("cli-files");
    let bad_tokens = dir.join("tokens");
    std::fs::write(&bad_tokens, "alice root sha256:nothex\n").unwrap();
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let tokens = bad_tokens.to_str().unwrap();
    let pem = not_pem.to_str().unwrap();
    // (arguments, environment, the flag the message names, what it says is accepted)
    let cases: &[Refusal] = &[
        (&["--store", "bogus:"], &[], "--store", "sqlite:PATH"),
        (&["--store", "memory"], &[], "--store", "memory:"),
        (
            &["--store", "postgres://fp@db:notaport/fp"],
            &[],
            "--store",
            "postgres://",
        ),
        (&[], &[("LOCK_STORE", "bogus:")], "--store", "sqlite:PATH"),
        (&["--listen", "nowhere"], &[], "--listen", "IP:PORT"),
        (&["--listen", "-1"], &[], "--listen", "IP:PORT"),
        (&["--session-ttl", "-1s"], &[], "--session-ttl", "negative"),
        (&["--session-ttl=-1s"], &[], "--session-ttl", "negative"),
        (&["--session-ttl", "15"], &[], "--session-ttl", "unit"),
        (
            &[],
            &[("LOCK_SESSION_TTL", "-1s")],
            "--session-ttl",
            "negative",
        ),
        (&["--default-ttl", "20m"], &[], "--default-ttl", "within"),
        (&["--ttl-min", "0s"], &[], "--ttl-min", "greater than 0"),
        (&["--ttl-max", "200h"], &[], "--ttl-max", "7 days"),
        (&["--grace", "soon"], &[], "--grace", "unit"),
        (&["--grace", "-1ms"], &[], "--grace", "negative"),
        (
            &["--grace", "1s", "--clock-quantum", "2ms"],
            &[],
            "--grace",
            "cannot be used with",
        ),
        (
            &["--clock-offset-max", "-5ms"],
            &[],
            "--clock-offset-max",
            "negative",
        ),
        (
            &["--clock-drift-ppm", "-3"],
            &[],
            "--clock-drift-ppm",
            "0 to 1000000",
        ),
        (
            &["--clock-drift-ppm", "2000000"],
            &[],
            "--clock-drift-ppm",
            "0 to 1000000",
        ),
        (&["--clock-quantum", "lots"], &[], "--clock-quantum", "unit"),
        (
            &["--advertise", "lock-1:7070"],
            &[],
            "--advertise",
            "base URL",
        ),
        (
            &["--leader-lease", "10ms"],
            &[],
            "--leader-lease",
            "between 100ms and 1h",
        ),
        (
            &["--leader-lease", "-5s"],
            &[],
            "--leader-lease",
            "negative",
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
            &[("LOCK_AUTH_TOKENS", "/nonexistent/tokens")],
            "--auth-tokens",
            "cannot read",
        ),
        (&["--tls-cert", pem], &[], "--tls-key", "must be set with"),
        (&["--tls-key", pem], &[], "--tls-cert", "must be set with"),
        (
            &["--tls-cert", pem, "--tls-key", pem],
            &[],
            "--tls-cert",
            "PEM",
        ),
        (
            &["--tls-client-ca", pem],
            &[],
            "--tls-client-ca",
            "--tls-cert and --tls-key",
        ),
        (
            &["--sabotage", "bogus"],
            &[],
            "--sabotage",
            "possible values",
        ),
        (
            &["token", "new", "--name", "a b", "--role", "client"],
            &[],
            "--name",
            "[A-Za-z0-9._-]",
        ),
        (
            &["token", "new", "--name", "ok", "--role", "root"],
            &[],
            "--role",
            "possible values",
        ),
        (
            &[
                "token", "new", "--name", "ok", "--role", "client", "--prefix", "a b",
            ],
            &[],
            "--prefix",
            "lock-key characters",
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
fn help_shows_every_default() {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let out = Command::new(bin).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, default) in [
        ("--listen", "127.0.0.1:7070"),
        ("--session-ttl", "15s"),
        ("--default-ttl", "30s"),
        ("--ttl-min", "100ms"),
        ("--ttl-max", "10m"),
        ("--clock-offset-max", "50ms"),
        ("--clock-drift-ppm", "100"),
        ("--clock-quantum", "1ms"),
        ("--leader-lease", "5s"),
    ] {
        // The option's block: its line, up to the next option's.
        let lines: Vec<&str> = help.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("{flag} missing from --help:\n{help}"));
        let section: String = lines[start..]
            .iter()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || !l.trim_start().starts_with('-'))
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            section.contains(&format!("[default: {default}]")),
            "{flag}: {section}"
        );
    }
    assert!(help.contains("[default: sqlite:"), "--store's default");
}

#[test]
fn the_log_is_flat_json_and_ends_with_stopped_naming_the_signal() {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let log = temp_dir("cli-log").join("stderr.log");
    let mut server =
        ChildService::start(&bin, ["--store", "memory:"], &log).expect("lock-server starts");
    let status = server.terminate(PATIENCE).expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for l in &lines {
        assert!(l.get("fields").is_none(), "nested: {l}");
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
    }
    let ready = lines
        .iter()
        .find(|l| l["message"] == "lock-server ready")
        .unwrap_or_else(|| panic!("no ready line:\n{text}"));
    assert_eq!(ready["store"], "memory", "{ready}");
    let last = lines.last().expect("a log line");
    assert_eq!(
        (&last["event"], &last["reason"]),
        (&Value::from("stopped"), &Value::from("SIGTERM")),
        "{text}"
    );
}
