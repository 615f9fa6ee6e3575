//! The sections that point at the pack's files rather than read them: §10
//! (failover and chaos, linked when present) and the list of every file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::adr::evidence::model::Evidence;

/// §10: failover and chaos, linked when the pack has them.
pub(crate) fn others_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 10. Failover and chaos\n");
    for (name, what) in [("failover", "failover"), ("chaos", "chaos")] {
        let files: Vec<&String> = ev
            .files
            .iter()
            .filter(|f| f.starts_with(&format!("{name}/")))
            .collect();
        let _ = write!(md, "**{what}:** ");
        if files.is_empty() {
            md.push_str(&ev.absent(name, "output"));
        } else {
            let _ = writeln!(
                md,
                "its output is in the pack: {}.",
                files
                    .iter()
                    .filter(|f| f.ends_with(".md")
                        || f.ends_with(".json")
                        || f.ends_with(".csv")
                        || f.ends_with(".svg"))
                    .map(|f| format!("[{f}]({f})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some(r) = ev.step(name) {
                let _ = writeln!(md, " Step status: {}.", r.status.as_str());
            }
        }
        md.push('\n');
    }
}

/// Every file of the pack, by directory.
pub(crate) fn files_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## Appendix B. Files of this pack\n");
    let mut by_dir: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for f in &ev.files {
        let d = f.split_once('/').map_or(".", |(d, _)| d);
        by_dir.entry(d).or_default().push(f);
    }
    for (d, files) in by_dir {
        let shown: Vec<String> = files
            .iter()
            .filter(|f| !f.contains("/hgrm/"))
            .map(|f| format!("[{}]({f})", f.rsplit('/').next().unwrap_or(f)))
            .collect();
        let hgrm = files.iter().filter(|f| f.contains("/hgrm/")).count();
        let _ = writeln!(
            md,
            "- `{d}/`: {}{}",
            shown.join(", "),
            if hgrm > 0 {
                format!(" and {hgrm} histogram file(s) in `{d}/hgrm/`")
            } else {
                String::new()
            }
        );
    }
}
