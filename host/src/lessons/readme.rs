//! The README's lessons table: rendered from a report, and written between two marker lines
//! of a Markdown file (nothing else in it changes).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{FUSED_STEPS, Report, SIZES};
use fused_mh::testing::dispatch;

/// The README's table: a row per lesson, the file, the idea, and per size the median time and
/// the share of the copy bandwidth, with where and when it was measured.
pub(super) fn markdown(report: &Report) -> String {
    let mut out = format!(
        "On the {} ({}, git {}, median of {} steps, copy {:.0} GB/s), written by `host lessons \
         --readme`:\n\n| # | file | idea |",
        report.gpu, report.ptx_target, report.git_rev, report.reps, report.copy_gbps
    );
    for (b, d) in SIZES {
        out += &format!(" ({b}, {d}) µs | % copy |");
    }
    out += "\n|---|---|---|";
    out += &"---|---|".repeat(SIZES.len());
    for row in &report.lessons {
        let files: Vec<String> = row.file.split(", ").map(|f| format!("`{f}`")).collect();
        out += &format!("\n| {} | {} | {} |", row.number, files.join(", "), row.idea);
        for m in row.at_sizes() {
            out += &match m {
                Some(m) => format!(" {:.1} | {:.1} |", m.gpu.median_us, 100.0 * m.copy_fraction),
                None => " – | – |".into(),
            };
        }
    }
    out + &format!(
        "\n\nRows {}, {} and {}: µs per step of {FUSED_STEPS}-step launches; their % copy is a \
         single step's bytes over that time, so it passes 100 % once the state stays in \
         registers. A dash: the row does not hold that size (rows {} and {} are the long rows', \
         a block per row).\n",
        dispatch::FUSED_LESSON.number,
        dispatch::FUSED_LESSON.number + 1,
        dispatch::FAST_LOG_LESSON.number,
        dispatch::LONG_ROW_LESSON.number,
        dispatch::LONG_ROW_LESSON.number + 1
    )
}

/// A Markdown file with the lessons table between two marker lines.
pub(super) struct Readme {
    path: PathBuf,
    before: String,
    after: String,
}

/// The marker lines (HTML comments: invisible when rendered).
pub(super) const TABLE_BEGIN: &str =
    "<!-- lessons table: written by `host lessons --readme`, do not edit -->";
pub(super) const TABLE_END: &str = "<!-- end of the lessons table -->";

impl Readme {
    /// Reads `path` and finds the markers, before anything is measured.
    pub(super) fn read(path: &Path) -> Result<Self> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).with_context(|| format!("--readme {shown}"))?;
        let (Some(begin), Some(end)) = (text.find(TABLE_BEGIN), text.find(TABLE_END)) else {
            bail!("--readme {shown}: no lines {TABLE_BEGIN} and {TABLE_END} to write between");
        };
        if end < begin {
            bail!("--readme {shown}: the end marker comes before the beginning");
        }
        let split = begin + TABLE_BEGIN.len();
        Ok(Self {
            path: path.to_path_buf(),
            before: text[..split].to_string(),
            after: text[end..].to_string(),
        })
    }

    /// Writes the file with `table` between the markers: a new file beside it, renamed over it.
    pub(super) fn write(self, table: &str) -> Result<()> {
        let dir = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        let mut temp = tempfile::NamedTempFile::new_in(dir.unwrap_or(Path::new(".")))?;
        use std::io::Write as _;
        write!(temp, "{}\n{table}{}", self.before, self.after)?;
        // The file keeps its permissions (a new temporary file has 0600).
        let permissions = std::fs::metadata(&self.path)?.permissions();
        temp.as_file().set_permissions(permissions)?;
        temp.persist(&self.path)
            .with_context(|| format!("--readme {}", self.path.display()))?;
        Ok(())
    }
}
