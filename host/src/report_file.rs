//! A report file of the benchmark (`--json`, `--svg`), written so that it appears complete or
//! not at all, and never over a file it did not write.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{leftovers, signals};

/// Where a report goes, checked before the benchmark runs: the report is written to a new
/// temporary file beside it and renamed over it at the end, so the file appears complete or not
/// at all. An existing file is replaced only if it is a report of the same kind (`is_ours`).
pub struct ReportFile {
    path: PathBuf,
    option: &'static str,
    staged: tempfile::NamedTempFile,
    /// This job's lock on the temporary file ([`crate::leftovers`]).
    _lock: std::fs::File,
}

impl ReportFile {
    /// Checks `OPTION PATH` and creates the temporary file beside it.
    pub fn prepare(path: &Path, option: &'static str, is_ours: fn(&str) -> bool) -> Result<Self> {
        let shown = path.display();
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            let ours = meta.is_file()
                && crate::regular_file::read_to_string(path)
                    .ok()
                    .is_some_and(|text| is_ours(&text));
            anyhow::ensure!(
                ours,
                "{option} {shown} exists and is not a report of this benchmark: it is never \
                 overwritten (choose another name)"
            );
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        leftovers::sweep(parent, leftovers::REPORT_PREFIX);
        let cannot = || {
            format!(
                "{option} {shown}: cannot create a file in {}",
                parent.display()
            )
        };
        let staged = tempfile::Builder::new()
            .prefix(leftovers::REPORT_PREFIX)
            // The mode of a file the shell would create (the umask applies), not tempfile's
            // private 0600.
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(parent)
            .with_context(cannot)?;
        let lock = leftovers::hold(staged.path()).with_context(cannot)?;
        *signals::lock() = Some(staged.path().to_path_buf());
        Ok(Self {
            path: path.to_path_buf(),
            option,
            staged,
            _lock: lock,
        })
    }

    /// Where the report goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the report and renames it into place.
    pub fn write(mut self, text: &str) -> Result<()> {
        let (option, shown) = (self.option, self.path.display().to_string());
        self.staged
            .write_all(text.as_bytes())
            .and_then(|()| self.staged.as_file().sync_all())
            .with_context(|| format!("cannot write {option} {shown}"))?;
        let mut registered = signals::lock();
        *registered = None;
        self.staged
            .persist(&self.path)
            .map_err(|e| anyhow::anyhow!("cannot write {option} {shown}: {}", e.error))?;
        Ok(())
    }
}
