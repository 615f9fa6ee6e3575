//! Where fencepost's services keep their durable state when told nothing: one
//! stable file per service, so a restarted process finds what its predecessor
//! wrote (C4: `lock.store` defaults to SQLite "at a stable path that survives
//! restarts"; the rail-stub's ledger follows the same rule).
//!
//! The directory is `$XDG_STATE_HOME/fencepost` (the XDG base-directory
//! specification's place for state that should persist between restarts but
//! is not configuration), else `$HOME/.local/state/fencepost` (the
//! specification's default for an unset `XDG_STATE_HOME`). With neither set
//! — a `FROM scratch` container has no `HOME` — the file is
//! `./fencepost-NAME` in the working directory. Relative or empty variables
//! are ignored, as the specification asks.
//!
//! Reading two environment variables is the only thing this module does; it
//! creates nothing (the stores create the directory when they open the file).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The default path of the state file `name` (e.g. `lock.sqlite`), from this
/// process's environment.
pub fn default_state_file(name: &str) -> PathBuf {
    state_file_from(
        name,
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`default_state_file`] for the given `XDG_STATE_HOME` and `HOME` values.
pub fn state_file_from(
    name: &str,
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> PathBuf {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = absolute(xdg_state_home) {
        return dir.join("fencepost").join(name);
    }
    if let Some(home) = absolute(home) {
        return home.join(".local/state/fencepost").join(name);
    }
    Path::new(".").join(format!("fencepost-{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_state_home_then_home_then_the_working_directory() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            state_file_from("lock.sqlite", os("/s"), os("/h")),
            PathBuf::from("/s/fencepost/lock.sqlite")
        );
        assert_eq!(
            state_file_from("lock.sqlite", None, os("/h")),
            PathBuf::from("/h/.local/state/fencepost/lock.sqlite")
        );
        // Relative and empty values are ignored (XDG base-directory spec).
        assert_eq!(
            state_file_from("lock.sqlite", os("rel"), os("")),
            PathBuf::from("./fencepost-lock.sqlite")
        );
        assert_eq!(
            state_file_from("rail-ledger.sqlite", None, None),
            PathBuf::from("./fencepost-rail-ledger.sqlite")
        );
    }
}
