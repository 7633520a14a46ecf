//! What a job killed outright leaves behind, found and cleared by the next job.
//!
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT remove a job's staging directory or report file
//! ([`crate::signals`]); SIGKILL, a crash or a power cut cannot. So every job holds a lock on
//! what it stages (`flock`, exclusive) for as long as the process lives: the kernel releases
//! it when the process ends, however it ends, so a lock that can be taken is proof that its
//! owner is gone (no pid to be reused, no file to go stale). Before staging, a job looks at
//! the entries beside it with the staging prefix:
//! - locked: a live job's, left alone;
//! - unlocked and over 10 s old (a new job takes its lock a moment after creating the entry):
//!   a dead job's partial outputs, removed, and said so;
//! - except a staging directory with a `summary.json`: complete results that a failed final
//!   rename left (the job said where); they are reported, never removed.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The prefix of a run's staging directory (`crate::outdir`).
pub const STAGING_PREFIX: &str = ".fused-mh-staging-";
/// The prefix of a benchmark report's temporary file (`crate::report_file`).
pub const REPORT_PREFIX: &str = ".fused-mh-report-";

/// How old an unlocked entry must be to count as a dead job's.
const GRACE: Duration = Duration::from_secs(10);

/// Takes this job's lock on the staging entry `path`; the lock lasts as long as the returned
/// file is open (the whole job: keep it).
pub fn hold(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    file.try_lock().map_err(io::Error::from)?;
    Ok(file)
}

/// Clears what dead jobs left in `dir` under `prefix` (see the module doc), with a note for
/// each.
pub fn sweep(dir: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(prefix.as_bytes()) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > GRACE);
        if meta.is_symlink() || !old {
            continue;
        }
        // The lock, held while removing: a second job sweeping at once waits for nothing
        // (its try fails) and leaves it.
        let Ok(_lock) = hold(&path) else { continue };
        if meta.is_dir() && path.join(crate::outdir::SUMMARY).exists() {
            crate::note!(
                "note: {} holds the complete results of an earlier run whose final rename \
                 failed; rename it yourself (it is never removed)",
                path.display()
            );
            continue;
        }
        let removed = if meta.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => crate::note!(
                "note: removed {}, the partial outputs of a job that was killed",
                path.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => crate::note!(
                "note: {} is left by a job that was killed, and cannot be removed: {e}",
                path.display()
            ),
        }
    }
}
