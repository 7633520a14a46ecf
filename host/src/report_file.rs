//! The benchmark's `--json` report file, written so that it appears complete or not at all.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::signals;

/// Where `--json` goes, checked before the benchmark runs: the report is written to a new
/// temporary file beside it and renamed over it at the end, so the file appears complete or not
/// at all. An existing file is replaced only if it is a report of this benchmark.
pub struct ReportFile {
    path: PathBuf,
    staged: tempfile::NamedTempFile,
}

impl ReportFile {
    /// Checks `--json PATH` and creates the temporary file beside it.
    pub fn prepare(path: &Path) -> Result<Self> {
        let shown = path.display();
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            let is_report = meta.is_file()
                && std::fs::read_to_string(path)
                    .ok()
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .is_some_and(|v| v["git_rev"].is_string() && v["rows"].is_array());
            anyhow::ensure!(
                is_report,
                "--json {shown} exists and is not a report of this benchmark: it is never \
                 overwritten (choose another name)"
            );
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let staged = tempfile::Builder::new()
            .prefix(".fused-mh-report-")
            .tempfile_in(parent)
            .with_context(|| {
                format!(
                    "--json {shown}: cannot create a file in {}",
                    parent.display()
                )
            })?;
        *signals::lock() = Some(staged.path().to_path_buf());
        Ok(Self {
            path: path.to_path_buf(),
            staged,
        })
    }

    /// Where the report goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the report and renames it into place.
    pub fn write(mut self, text: &str) -> Result<()> {
        let shown = self.path.display().to_string();
        self.staged
            .write_all(text.as_bytes())
            .and_then(|()| self.staged.as_file().sync_all())
            .with_context(|| format!("cannot write --json {shown}"))?;
        let mut registered = signals::lock();
        *registered = None;
        self.staged
            .persist(&self.path)
            .map_err(|e| anyhow::anyhow!("cannot write --json {shown}: {}", e.error))?;
        Ok(())
    }
}
