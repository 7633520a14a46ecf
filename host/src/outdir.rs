//! The output directory of `host run`: checked before the run starts, filled in a staging
//! directory of the run's own, and moved into place whole when every file is written.
//!
//! The rules that keep a user's files safe:
//! - `--out` names a new directory in an existing parent, or, with `--force`, a directory
//!   that an earlier run wrote: only files that its `summary.json` lists, and none of this
//!   run's inputs. Anything else (a file, a symbolic link, a directory with other files, a
//!   name ending in `.` or `..`, a missing parent, a name too long) is refused before the run.
//! - The staging directory is created exclusively, with a random name, beside the
//!   destination (`tempfile`), so nothing stale is ever reused and the final move is a rename
//!   within one file system.
//! - The move is atomic: a new directory is renamed into place only if nothing has taken the
//!   name meanwhile; an old run's directory is swapped with the new one in one step
//!   (`renameat2(RENAME_EXCHANGE)`), and only then are the old files removed, by name.
//! - A run that fails, or is stopped by a signal ([`crate::signals`]), removes its staging
//!   directory and leaves the destination as it was.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use rustix::fs::{CWD, RenameFlags, renameat_with};
use rustix::io::Errno;
use tempfile::TempDir;

use crate::{leftovers, signals};

/// The file that records a run and lists its files: what marks a directory as a run's output.
pub const SUMMARY: &str = "summary.json";

/// A run's output directory, from its checks to its commit.
pub struct OutputDir {
    dest: PathBuf,
    parent: PathBuf,
    staging: Option<TempDir>,
    /// With `--force` over an earlier run's directory: the files it holds.
    replaces: Option<Vec<OsString>>,
    /// This job's lock on its staging directory, held until the process ends
    /// ([`crate::leftovers`]).
    _lock: File,
}

impl OutputDir {
    /// Checks `--out DIR` (see the module doc) and creates the staging directory. `inputs`
    /// are the files the run reads: a directory holding one of them is never replaced.
    pub fn prepare(dest: &Path, force: bool, inputs: &[&Path]) -> Result<Self> {
        let (parent, name) = split(dest)?;
        // Checked and used without its trailing slashes and `.` components: `link/` names
        // the link itself (not the directory it points to), and messages show clean paths.
        let dest = &normalized(dest);
        let shown = dest.display();
        match fs::metadata(&parent) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("--out {shown}: {} is not a directory", parent.display()),
            Err(_) => bail!(
                "--out {shown}: the parent directory {} does not exist (host run creates only \
                 the output directory itself)",
                parent.display()
            ),
        }
        let limit = rustix::fs::statvfs(&parent)
            .map(|s| s.f_namemax)
            .unwrap_or(255);
        if name.len() as u64 > limit {
            bail!(
                "--out {shown}: the name is {} bytes long; this file system allows {limit}",
                name.len()
            );
        }
        let replaces = match fs::symlink_metadata(dest) {
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => bail!("--out {shown}: cannot inspect it: {e}"),
            Ok(m) if m.file_type().is_symlink() => bail!(
                "--out {shown} is a symbolic link; host run never writes through or replaces \
                 a link (give the directory itself, or a new name)"
            ),
            Ok(m) if !m.is_dir() => bail!("--out {shown} exists and is not a directory"),
            Ok(_) if !force => bail!(
                "the output directory {shown} already exists (pass --force to replace it, if \
                 an earlier run wrote it)"
            ),
            Ok(_) => {
                let dest_real = fs::canonicalize(dest)
                    .with_context(|| format!("--out {shown}: cannot resolve it"))?;
                for input in inputs {
                    if let Ok(real) = fs::canonicalize(input)
                        && real.starts_with(&dest_real)
                    {
                        bail!(
                            "--out {shown} holds the input {}; --force never replaces a \
                             directory that holds the run's own inputs (choose another --out)",
                            input.display()
                        );
                    }
                }
                Some(earlier_run_files(dest).map_err(|why| {
                    anyhow!(
                        "--force replaces only a directory that host run wrote, and {shown} \
                         {why} (remove it yourself, or choose another --out)"
                    )
                })?)
            }
        };
        leftovers::sweep(&parent, leftovers::STAGING_PREFIX);
        let staging = tempfile::Builder::new()
            .prefix(leftovers::STAGING_PREFIX)
            // What a plain `mkdir` makes (the umask applies), not tempfile's private 0700.
            .permissions(fs::Permissions::from_mode(0o777))
            .tempdir_in(&parent)
            .with_context(|| {
                format!(
                    "--out {shown}: cannot create a staging directory in {}",
                    parent.display()
                )
            })?;
        let lock = leftovers::hold(staging.path()).with_context(|| {
            format!(
                "--out {shown}: cannot lock the staging directory in {}",
                parent.display()
            )
        })?;
        *signals::lock() = Some(staging.path().to_path_buf());
        Ok(Self {
            dest: dest.to_path_buf(),
            parent,
            staging: Some(staging),
            replaces,
            _lock: lock,
        })
    }

    /// The directory whose file system receives the outputs.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Where to write the output file `name` (inside the staging directory).
    pub fn path(&self, name: &str) -> PathBuf {
        self.staging_path().join(name)
    }

    fn staging_path(&self) -> &Path {
        self.staging.as_ref().expect("staged until commit").path()
    }

    /// Writes a small text file (the summary) into the staging directory.
    pub fn write_text(&self, name: &str, text: &str) -> Result<()> {
        let path = self.path(name);
        let mut file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Moves the complete directory into place: `files` are the staged files, flushed to
    /// disk first. Returns the destination.
    pub fn commit(mut self, files: &[&str]) -> Result<PathBuf> {
        for name in files {
            let path = self.path(name);
            File::open(&path)
                .and_then(|f| f.sync_all())
                .with_context(|| format!("cannot flush {}", path.display()))?;
        }
        sync_dir(self.staging_path())?;
        let mut registered = signals::lock();
        let staging = self.staging.take().expect("staged until commit").keep();
        *registered = None;
        let dest = self.dest.clone();
        let kept = |why: String| {
            anyhow!(
                "{why}; the results are kept in {} (rename it yourself)",
                staging.display()
            )
        };
        match &self.replaces {
            None => match renameat_with(CWD, &staging, CWD, &dest, RenameFlags::NOREPLACE) {
                Ok(()) => {}
                Err(Errno::EXIST | Errno::NOTEMPTY) => {
                    return Err(kept(format!("{} appeared during the run", dest.display())));
                }
                Err(Errno::INVAL | Errno::NOSYS) if !dest.exists() => {
                    // No RENAME_NOREPLACE on this file system: a plain rename, just checked.
                    fs::rename(&staging, &dest).map_err(|e| {
                        kept(format!(
                            "cannot move the results to {}: {e}",
                            dest.display()
                        ))
                    })?;
                }
                Err(e) => {
                    return Err(kept(format!(
                        "cannot move the results to {}: {e}",
                        dest.display()
                    )));
                }
            },
            Some(_) => {
                // Checked again: the directory may have changed while the run went on.
                let old = earlier_run_files(&dest).map_err(|why| {
                    kept(format!(
                        "{} changed during the run and {why}, so it was not replaced",
                        dest.display()
                    ))
                })?;
                renameat_with(CWD, &staging, CWD, &dest, RenameFlags::EXCHANGE).map_err(|e| {
                    kept(format!(
                        "cannot swap the results into {}: {e}",
                        dest.display()
                    ))
                })?;
                // `staging` now holds the earlier run's files: remove exactly those.
                let removed = old
                    .iter()
                    .try_for_each(|name| fs::remove_file(staging.join(name)))
                    .and_then(|()| fs::remove_dir(&staging));
                if let Err(e) = removed {
                    crate::note!(
                        "note: the replaced results are left in {} ({e})",
                        staging.display()
                    );
                }
            }
        }
        sync_dir(&self.parent)?;
        Ok(dest)
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if self.staging.is_some() {
            // Not committed: the TempDir removes the staging directory as it drops.
            *signals::lock() = None;
        }
    }
}

/// `--out` as its parent directory and last name; refuses names that are not a directory of
/// their own (`.`, `..`, `/`, `x/.`).
fn split(dest: &Path) -> Result<(PathBuf, OsString)> {
    let bytes = dest.as_os_str().as_bytes();
    let trimmed = match bytes.iter().rposition(|&b| b != b'/') {
        Some(end) => &bytes[..=end],
        None => bail!("--out {}: name a directory to create", dest.display()),
    };
    let (parent, name) = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(slash) => (&trimmed[..slash.max(1)], &trimmed[slash + 1..]),
        None => (&b"."[..], trimmed),
    };
    if name == b"." || name == b".." {
        bail!(
            "--out {} ends in '{}': name the output directory itself (e.g. --out results)",
            dest.display(),
            String::from_utf8_lossy(name)
        );
    }
    Ok((
        normalized(Path::new(OsStr::from_bytes(parent))),
        OsStr::from_bytes(name).to_os_string(),
    ))
}

/// `path` without trailing slashes and inner `.` components (`a/./b/` is `a/b`); a path of
/// only `.` stays `.`. Lexical, and exact: a `.` component names the directory it is in
/// (`..` would not be lexical, and is kept).
fn normalized(path: &Path) -> PathBuf {
    let clean: PathBuf = path.components().collect();
    if clean.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        clean
    }
}

/// The files of a directory that an earlier run wrote, or why it is not one: it must hold
/// regular files only, a `summary.json` of host run, and nothing that summary does not list.
fn earlier_run_files(dir: &Path) -> Result<Vec<OsString>, String> {
    let text = crate::regular_file::read_to_string(&dir.join(SUMMARY))
        .map_err(|_| format!("has no readable {SUMMARY}"))?;
    let summary: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| format!("has a {SUMMARY} that is not JSON"))?;
    let listed: Vec<&str> = summary["files"]
        .as_array()
        .filter(|_| summary["mode"].is_string())
        .map(|files| files.iter().filter_map(|f| f.as_str()).collect())
        .ok_or_else(|| format!("has a {SUMMARY} that host run did not write"))?;
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| format!("cannot be read ({e})"))? {
        let entry = entry.map_err(|e| format!("cannot be read ({e})"))?;
        let name = entry.file_name();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || !listed.iter().any(|l| OsStr::new(l) == name) {
            return Err(format!(
                "holds {}, which is not one of the files the run wrote",
                name.to_string_lossy()
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// Flushes a directory's entries to disk (the renames into and out of it).
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot flush the directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_split_or_refused() {
        let ok = |s: &str| split(Path::new(s)).map(|(p, n)| (p, n.into_string().unwrap()));
        assert_eq!(ok("out").unwrap(), (PathBuf::from("."), "out".into()));
        assert_eq!(ok("out/").unwrap(), (PathBuf::from("."), "out".into()));
        assert_eq!(ok("a/b/out").unwrap(), (PathBuf::from("a/b"), "out".into()));
        assert_eq!(ok("/out").unwrap(), (PathBuf::from("/"), "out".into()));
        assert_eq!(
            ok("a/./b//out").unwrap(),
            (PathBuf::from("a/b"), "out".into())
        );
        assert_eq!(normalized(Path::new("link/")), PathBuf::from("link"));
        assert_eq!(normalized(Path::new("/d/./x/")), PathBuf::from("/d/x"));
        for bad in ["out/.", ".", "..", "a/..", "/", "out/./", ""] {
            assert!(ok(bad).is_err(), "{bad:?}");
        }
    }
}
