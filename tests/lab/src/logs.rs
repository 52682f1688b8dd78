//! The daemons' own account of a failure: the last lines of their logs, printed when a lab test
//! fails (its temporary directory is gone afterwards).

use std::path::Path;

/// Prints, for every log file in `dir` (sorted by name), its last `last` lines that `keep`
/// accepts, under a header naming the file, how many lines `keep` accepted, and `kind` (what
/// those lines are). A missing directory prints nothing.
pub fn print_log_tails(dir: &Path, last: usize, kind: &str, keep: impl Fn(&str) -> bool) {
    let Ok(logs) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = logs.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        // Ceph logs are not always valid UTF-8 (RocksDB's statistics, binary keys).
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
        let lines: Vec<&str> = text.lines().filter(|l| keep(l)).collect();
        eprintln!(
            "--- {} (the last {last} of its {} {kind})",
            path.display(),
            lines.len()
        );
        for line in &lines[lines.len().saturating_sub(last)..] {
            eprintln!("{line}");
        }
    }
}
