//! Unit tests of the command line and its checks.

use super::*;

fn args(extra: &[&str]) -> Args {
    let mut v = vec!["lock-server"];
    v.extend_from_slice(extra);
    Args::try_parse_from(v).unwrap()
}

#[test]
fn defaults_are_the_c4_values() {
    assert_eq!(args(&[]).limits().unwrap(), Limits::default());
}

#[test]
fn the_default_store_is_the_stable_sqlite_file() {
    let a = args(&[]);
    assert_eq!(a.store, crate::store::default_store_url());
    assert!(a.store.starts_with("sqlite:"), "{}", a.store);
    assert!(a.store.ends_with("lock.sqlite"), "{}", a.store);
}

#[test]
fn bad_values_name_their_key() {
    let e = args(&["--session-ttl=-1s"]).limits().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--session-ttl \"-1s\" (lock.session.ttl, LOCK_SESSION_TTL): "),
        "{e}"
    );
    // A value that starts with '-' reaches the check, not clap's
    // "unexpected argument".
    let e = args(&["--leader-lease", "-1s"])
        .leader_settings()
        .unwrap_err();
    assert!(e.to_string().starts_with("--leader-lease \"-1s\""), "{e}");
    let e = args(&["--default-ttl", "20m"]).limits().unwrap_err();
    assert!(e.to_string().starts_with("--default-ttl "), "{e}");
    let e = args(&["--clock-drift-ppm", "lots"]).limits().unwrap_err();
    assert!(e.to_string().starts_with("--clock-drift-ppm "), "{e}");
    let e = args(&["--ttl-min", "0s"]).limits().unwrap_err();
    assert!(e.to_string().starts_with("--ttl-min "), "{e}");
    let e = args(&["--grace", "soon"]).limits().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--grace \"soon\" (lock.server.grace"),
        "{e}"
    );
}

#[test]
fn leader_settings_default_and_refuse_bad_values() {
    let bound: SocketAddr = "127.0.0.1:7070".parse().unwrap();
    let l = args(&[]).leader(bound).unwrap();
    assert_eq!(l.lease, crate::leader::DEFAULT_LEADER_LEASE);
    assert_eq!(l.advertise.as_deref(), Some("http://127.0.0.1:7070"));
    let any: SocketAddr = "0.0.0.0:7070".parse().unwrap();
    assert_eq!(args(&[]).leader(any).unwrap().advertise, None);
    let l = args(&["--advertise", "http://lock-1:7070/", "--leader-lease", "1s"])
        .leader(any)
        .unwrap();
    assert_eq!(l.advertise.as_deref(), Some("http://lock-1:7070"));
    assert_eq!(l.lease, Duration::from_secs(1));
    let e = args(&["--leader-lease", "10ms"]).leader(bound).unwrap_err();
    assert!(e.to_string().starts_with("--leader-lease "), "{e}");
    let e = args(&["--advertise", "lock-1:7070"])
        .leader(bound)
        .unwrap_err();
    assert!(e.to_string().starts_with("--advertise "), "{e}");
}

#[test]
fn auth_tokens_and_the_token_subcommand_parse() {
    assert_eq!(args(&[]).auth_tokens, None);
    assert!(args(&[]).command.is_none());
    let a = args(&["--auth-tokens", "/etc/fp/tokens"]);
    assert_eq!(a.auth_tokens, Some(PathBuf::from("/etc/fp/tokens")));
    let a = args(&[
        "token", "new", "--name", "alice", "--role", "client", "--prefix", "payout:",
    ]);
    match a.command {
        Some(Command::Token(TokenCommand::New { name, role, prefix })) => {
            assert_eq!((name.as_str(), role.as_str()), ("alice", "client"));
            assert_eq!(prefix.as_deref(), Some("payout:"));
        }
        other => panic!("{other:?}"),
    }
    let bad = Args::try_parse_from([
        "lock-server",
        "token",
        "new",
        "--name",
        "a",
        "--role",
        "root",
    ]);
    assert!(bad.is_err());
}

#[test]
fn tls_files_come_in_pairs_and_switch_the_default_advertise_to_https() {
    assert_eq!(args(&[]).tls_files().unwrap(), None);
    let t = args(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
    let files = t.tls_files().unwrap().unwrap();
    assert_eq!(files.cert, PathBuf::from("c.pem"));
    assert_eq!(files.client_ca, None);
    let bound: SocketAddr = "127.0.0.1:7443".parse().unwrap();
    assert_eq!(
        t.leader(bound).unwrap().advertise.as_deref(),
        Some("https://127.0.0.1:7443")
    );
    let e = args(&["--tls-cert", "c.pem"]).tls_files().unwrap_err();
    assert!(e.to_string().starts_with("--tls-key (lock.tls.key"), "{e}");
    let e = args(&["--tls-key", "k.pem"]).tls_files().unwrap_err();
    assert!(
        e.to_string().starts_with("--tls-cert (lock.tls.cert"),
        "{e}"
    );
    let e = args(&["--tls-client-ca", "ca.pem"])
        .tls_files()
        .unwrap_err();
    assert!(e.to_string().starts_with("--tls-client-ca "), "{e}");
}

#[test]
fn the_store_url_is_checked_before_anything_is_opened() {
    for ok in [
        "memory:",
        "sqlite:",
        "sqlite:/tmp/x.sqlite",
        "postgres://fp@db:5432/fp",
    ] {
        check_store_url(ok).unwrap();
    }
    for bad in ["bogus:", "memory", "postgres://fp@db:notaport/fp", ""] {
        let e = check_store_url(bad).unwrap_err().to_string();
        assert!(e.starts_with("--store "), "{e}");
        assert!(e.contains("sqlite:PATH"), "{e}");
    }
}

#[test]
fn the_derived_grace_parameters_show_their_defaults_and_yield_to_grace() {
    let a = args(&[]);
    assert_eq!(
        (
            a.clock_offset_max.as_str(),
            a.clock_drift_ppm.as_str(),
            a.clock_quantum.as_str()
        ),
        ("50ms", "100", "1ms")
    );
    // The defaults do not count as given: --grace alone is accepted.
    let l = args(&["--grace", "200ms"]).limits().unwrap();
    assert_eq!(l.grace, GracePolicy::Fixed(Duration::from_millis(200)));
    let both = Args::try_parse_from(["lock-server", "--grace", "1s", "--clock-quantum", "2ms"]);
    assert!(both.is_err());
}

#[test]
fn fixed_grace_and_derived_parameters_are_read() {
    let l = args(&["--grace", "200ms"]).limits().unwrap();
    assert_eq!(l.grace, GracePolicy::Fixed(Duration::from_millis(200)));
    let l = args(&["--clock-offset-max", "5ms", "--clock-drift-ppm", "10"])
        .limits()
        .unwrap();
    assert_eq!(
        l.grace,
        GracePolicy::Derived(GraceParams {
            offset_max: Duration::from_millis(5),
            drift_ppm: 10,
            quantum: Duration::from_millis(1),
        })
    );
}
