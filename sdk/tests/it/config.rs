//! C4 configuration: environment first, explicit values override; bad
//! values refused with an error that names the key.

use std::collections::HashMap;
use std::time::Duration;

use fencepost_sdk::{LockClient, LockClientConfig, MarginPolicy};

fn from(vars: &[(&str, &str)]) -> Result<LockClientConfig, fencepost_sdk::ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LockClientConfig::from_lookup("http://127.0.0.1:7070", |k| map.get(k).cloned())
}

#[test]
fn bad_margins_are_refused_naming_the_key() {
    let err = from(&[("LOCK_CLIENT_SAFETY_MARGIN", "1.2")])
        .unwrap_err()
        .to_string();
    assert_eq!(err, "lock.client.safety-margin=1.2: must be 0 ≤ m < 1");
    for bad in [
        "1",
        "-0.1",
        "NaN",
        "inf",
        "abc",
        "",
        "adaptive:k=0,floor=0.1,ceiling=0.5",
        "adaptive:k=4,floor=0.6,ceiling=0.5",
        "adaptive:k=4,floor=0.1,ceiling=1",
        "adaptive:k=4",
    ] {
        let err = from(&[("LOCK_CLIENT_SAFETY_MARGIN", bad)])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("lock.client.safety-margin={bad}:")),
            "{bad}: {err}"
        );
    }
    // Set explicitly, the same rule applies when the client is built.
    let cfg = LockClientConfig::new("http://127.0.0.1:7070").with_margin(MarginPolicy::Fixed(1.0));
    let err = LockClient::new(cfg).err().unwrap().to_string();
    assert!(err.starts_with("lock.client.safety-margin=1:"), "{err}");
}

#[test]
fn bad_ttls_are_refused_naming_the_key() {
    for (var, key) in [
        ("LOCK_SESSION_TTL", "lock.session.ttl"),
        ("LOCK_DEFAULT_TTL", "lock.default.ttl"),
    ] {
        for bad in ["-5s", "0ms", "30", "abc", "5 parsecs"] {
            let err = from(&[(var, bad)]).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{key}={bad}:")),
                "{var}={bad}: {err}"
            );
        }
    }
    let cfg = LockClientConfig::new("http://127.0.0.1:7070").with_session_ttl(Duration::ZERO);
    let err = LockClient::new(cfg).err().unwrap().to_string();
    assert_eq!(err, "lock.session.ttl=0ns: must be greater than zero");
    let cfg = LockClientConfig::new("not a url");
    assert!(
        LockClient::new(cfg)
            .err()
            .unwrap()
            .to_string()
            .starts_with("lock.client.base-url=not a url:")
    );
    // https:// reads its trust when the client is built: a CA file that
    // cannot be read is refused then, not at the first request.
    let cfg = LockClientConfig::new("https://lock.example:7070")
        .with_tls_ca("/nonexistent/fencepost-ca.pem");
    let err = LockClient::new(cfg).err().unwrap().to_string();
    assert!(
        err.starts_with("lock.client.tls.ca=/nonexistent/fencepost-ca.pem: cannot read"),
        "{err}"
    );
    // A client certificate without its key is refused, naming the key.
    let cfg = LockClientConfig::new("https://lock.example:7070").with_tls_ca("/nonexistent/ca.pem");
    let mut cfg = cfg;
    cfg.tls.client_cert = Some("/nonexistent/client.pem".into());
    let err = LockClient::new(cfg).err().unwrap().to_string();
    assert!(err.starts_with("lock.client.tls.key="), "{err}");
    for ok in [
        "http://127.0.0.1:7070",
        "http://lock:7070/",
        "http://[::1]:7070",
    ] {
        assert!(LockClient::new(LockClientConfig::new(ok)).is_ok(), "{ok}");
    }
}

#[test]
fn environment_is_read_then_explicit_values_override_it() {
    let cfg = from(&[
        (
            "LOCK_CLIENT_SAFETY_MARGIN",
            "adaptive:k=4,floor=0.05,ceiling=0.5",
        ),
        ("LOCK_SESSION_TTL", "250ms"),
        ("LOCK_DEFAULT_TTL", "2m"),
    ])
    .unwrap();
    assert_eq!(
        cfg.margin,
        MarginPolicy::Adaptive {
            k: 4.0,
            floor: 0.05,
            ceiling: 0.5
        }
    );
    assert_eq!(cfg.session_ttl, Duration::from_millis(250));
    assert_eq!(cfg.default_ttl, Duration::from_secs(120));
    let cfg = cfg
        .with_margin(MarginPolicy::Fixed(0.4))
        .with_session_ttl(Duration::from_secs(5));
    assert_eq!(cfg.margin, MarginPolicy::Fixed(0.4));
    assert_eq!(cfg.session_ttl, Duration::from_secs(5));
    // Nothing set: the C4 defaults.
    let d = from(&[]).unwrap();
    assert_eq!(d.margin, MarginPolicy::Fixed(0.30));
    assert_eq!(d.session_ttl, Duration::from_secs(15));
    assert_eq!(d.default_ttl, Duration::from_secs(30));
    assert!(LockClient::new(d).is_ok());
}

#[test]
fn lock_urls_lists_the_replicas_and_a_single_url_still_works() {
    let one = from(&[]).unwrap();
    assert_eq!(one.urls(), vec!["http://127.0.0.1:7070".to_string()]);
    let three = from(&[("LOCK_URLS", "http://a:7070, http://b:7070,http://c:7070")]).unwrap();
    assert_eq!(three.base_url, "http://a:7070");
    assert_eq!(
        three.urls(),
        ["http://a:7070", "http://b:7070", "http://c:7070"]
    );
    three.validate().unwrap();
    let err = from(&[("LOCK_URLS", " , ")]).unwrap_err().to_string();
    assert!(err.starts_with("lock.client.urls="), "{err}");
    let err = from(&[("LOCK_URLS", "http://a:7070,b:7070")])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("lock.client.urls=\"b:7070\"")
            || err.starts_with("lock.client.urls=b:7070"),
        "{err}"
    );
}
