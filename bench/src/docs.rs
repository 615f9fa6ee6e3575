//! `bench docs`: writes `DATA/docs-facts.json`, every number the generated
//! blocks of README.md and docs/*.md compute or decide (medians, intervals,
//! ratios, verdicts against the targets, trigger headlines), from the
//! committed runs under DATA, by the functions that write the runs' own
//! reports ([`bench_report::docs_facts`]); `scripts/gen-docs.py` formats it.
//! With `--check` it writes nothing and says whether the file is current.

use std::path::{Path, PathBuf};

use bench_report::docs_facts::{FACTS_JSON, render};

use crate::cli::DocsArgs;

/// Why `bench docs` could not do its work (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    /// DATA is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// The facts file could not be written.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Writes (or, with `--check`, compares) the facts file; the exit code: 0
/// written or current, 1 not current.
pub fn run(args: &DocsArgs) -> Result<i32, DocsError> {
    let data: &Path = &args.data;
    if !data.is_dir() {
        return Err(DocsError::NotADirectory(data.to_owned()));
    }
    let text = render(data);
    for line in unavailable(&text) {
        eprintln!("bench docs: {line}");
    }
    let path = data.join(FACTS_JSON);
    if args.check {
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            println!("bench docs: {} is current", path.display());
            return Ok(0);
        }
        eprintln!(
            "bench docs: {} is not what `bench docs` writes from {} now; run `bench docs {}` and commit it",
            path.display(),
            data.display(),
            data.display()
        );
        return Ok(1);
    }
    std::fs::write(&path, &text).map_err(|source| DocsError::Write {
        path: path.clone(),
        source,
    })?;
    println!("bench docs: wrote {}", path.display());
    Ok(0)
}

/// The sections the facts could not compute, with why.
fn unavailable(text: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, s)| Some(format!("{k}: {}", s.get("unavailable")?.as_str()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_passes_on_what_was_written_and_fails_on_anything_else() {
        let data = std::env::temp_dir().join(format!("bench-docs-check-{}", std::process::id()));
        std::fs::create_dir_all(&data).unwrap();
        let args = |check| DocsArgs {
            data: data.clone(),
            check,
        };
        assert_eq!(run(&args(true)).unwrap(), 1, "no file yet: not current");
        assert_eq!(run(&args(false)).unwrap(), 0);
        assert_eq!(run(&args(true)).unwrap(), 0);
        let path = data.join(FACTS_JSON);
        let edited = std::fs::read_to_string(&path)
            .unwrap()
            .replace("unavailable", "edited");
        std::fs::write(&path, edited).unwrap();
        assert_eq!(
            run(&args(true)).unwrap(),
            1,
            "an edited file is not current"
        );
        std::fs::remove_dir_all(&data).ok();
        assert!(matches!(run(&args(true)), Err(DocsError::NotADirectory(_))));
    }
}
