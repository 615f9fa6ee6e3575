//! API tokens on the lock-server: the token file named by
//! `--auth-tokens` (`lock.auth.tokens`), held behind a lock so SIGHUP can
//! swap in a re-read file without a restart ([`Authenticator::reload`]: a
//! bad file is refused and the old set kept), and what a request proved
//! ([`RequestAuth`]): its principal, role and key scope, which the
//! [`http`](crate::http) handlers check before calling the service.
//!
//! The file's format, the constant-time match and the reloadable holder
//! ([`Authenticator`]) are shared with the rail-stub: [`fencepost_api::auth`].

use fencepost_api::auth::Principal;

use crate::core::Caller;

/// The token file in force, re-read on SIGHUP (shared with the rail-stub).
pub type Authenticator = fencepost_api::auth::TokenFile;

/// What a request proved, put in its extensions by the router's
/// authentication layer: nothing to prove (auth off), or its principal.
#[derive(Clone, Debug)]
pub struct RequestAuth {
    principal: Option<Principal>,
}

impl RequestAuth {
    /// A request to a server with auth off: everything is allowed, as
    /// before API tokens existed.
    pub fn open() -> Self {
        RequestAuth { principal: None }
    }

    /// A request that presented `principal`'s token.
    pub fn as_principal(principal: Principal) -> Self {
        RequestAuth {
            principal: Some(principal),
        }
    }

    /// The principal, with auth on.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// The server's auth mode as `/v1/config` says it: `none` or `tokens`.
    pub fn mode(&self) -> &'static str {
        match self.principal {
            None => "none",
            Some(_) => "tokens",
        }
    }

    /// Who the session binding sees.
    pub fn caller(&self) -> Caller<'_> {
        match &self.principal {
            None => Caller::Anyone,
            Some(p) => Caller::Principal(&p.name),
        }
    }

    /// Why this request may not open or use sessions (`None`: it may).
    pub fn refuse_sessions(&self) -> Option<String> {
        let p = self.principal.as_ref()?;
        (!p.may_use_sessions()).then(|| {
            format!(
                "a {} token cannot open or use sessions; use a client or admin token",
                p.role
            )
        })
    }

    /// Why this request may not act on `key` (`None`: it may).
    pub fn refuse_key(&self, key: &str) -> Option<String> {
        let p = self.principal.as_ref()?;
        if p.may_use_key(key) {
            return None;
        }
        Some(match &p.prefix {
            Some(prefix) if p.may_use_sessions() => format!(
                "lock {key} is outside this token's scope: it may act only on keys starting with {prefix:?}"
            ),
            _ => format!("a {} token cannot act on lock keys", p.role),
        })
    }

    /// Why this request may not do `what`, which needs an admin (`None`: it may).
    pub fn refuse_unless_admin(&self, what: &str) -> Option<String> {
        let p = self.principal.as_ref()?;
        (!p.is_admin()).then(|| format!("{what} needs an admin token; this one is {}", p.role))
    }

    /// Why this request may not read `/metrics` or `/v1/config` (`None`: it may).
    pub fn refuse_unless_monitor(&self, what: &str) -> Option<String> {
        let p = self.principal.as_ref()?;
        (!p.may_monitor()).then(|| {
            format!(
                "{what} needs an admin or monitor token; this one is {}",
                p.role
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use fencepost_api::auth::{Role, issue_token};

    fn file(lines: &[String]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "fencepost-auth-unit-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    #[test]
    fn reload_swaps_a_good_file_in_and_keeps_the_old_set_on_a_bad_one() {
        let old = issue_token("alice", Role::Client, None).unwrap();
        let new = issue_token("alice", Role::Client, None).unwrap();
        let path = file(std::slice::from_ref(&old.line));
        let auth = Authenticator::load(&path).unwrap();
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        assert!(auth.authenticate(Some(&bearer(&old.secret))).is_some());
        assert!(auth.authenticate(Some(&bearer(&new.secret))).is_none());
        // Rotation: both lines, then only the new one.
        std::fs::write(&path, format!("{}\n{}\n", old.line, new.line)).unwrap();
        assert_eq!(auth.reload().unwrap(), 2);
        assert!(auth.authenticate(Some(&bearer(&old.secret))).is_some());
        std::fs::write(&path, format!("{}\n", new.line)).unwrap();
        assert_eq!(auth.reload().unwrap(), 1);
        assert!(auth.authenticate(Some(&bearer(&old.secret))).is_none());
        let p = auth.authenticate(Some(&bearer(&new.secret))).unwrap();
        assert_eq!(&*p.name, "alice");
        // A bad file is refused; the set in force stays.
        std::fs::write(&path, "alice client sha256:nothex\n").unwrap();
        let e = auth.reload().unwrap_err();
        assert!(e.to_string().contains(":1: bad HASH"), "{e}");
        assert!(auth.authenticate(Some(&bearer(&new.secret))).is_some());
        assert_eq!(auth.len(), 1);
        std::fs::remove_file(&path).unwrap();
        assert!(auth.reload().is_err());
        assert!(auth.authenticate(Some(&bearer(&new.secret))).is_some());
        // No header, another scheme: nobody.
        assert!(auth.authenticate(None).is_none());
        assert!(
            auth.authenticate(Some(format!("Basic {}", new.secret).as_bytes()))
                .is_none()
        );
    }

    #[test]
    fn refusals_follow_role_and_scope() {
        let p = |role, prefix: Option<&str>| {
            RequestAuth::as_principal(Principal {
                name: Arc::from("n"),
                role,
                prefix: prefix.map(Arc::from),
            })
        };
        let open = RequestAuth::open();
        assert_eq!(open.mode(), "none");
        assert!(open.refuse_key("any").is_none() && open.refuse_unless_admin("L8").is_none());
        assert_eq!(open.caller(), Caller::Anyone);
        let c = p(Role::Client, Some("payout:"));
        assert_eq!(c.mode(), "tokens");
        assert_eq!(c.caller(), Caller::Principal("n"));
        assert!(c.refuse_key("payout:1").is_none());
        assert!(c.refuse_key("refund:1").unwrap().contains("outside"));
        assert!(c.refuse_unless_admin("L8").is_some());
        assert!(c.refuse_unless_monitor("/metrics").is_some());
        assert!(c.refuse_sessions().is_none());
        let m = p(Role::Monitor, None);
        assert!(m.refuse_sessions().is_some() && m.refuse_key("k").is_some());
        assert!(m.refuse_unless_monitor("/metrics").is_none());
        let a = p(Role::Admin, Some("payout:"));
        assert!(a.refuse_key("refund:1").is_none() && a.refuse_unless_admin("L8").is_none());
    }
}
