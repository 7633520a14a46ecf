//! Input files opened without ever blocking: only a regular file is read.
//!
//! `open` on a named pipe (FIFO) blocks until a writer appears, possibly forever, and a pipe
//! cannot seek (a `.npy` header is read twice). So a file is opened non-blocking (which
//! returns at once whatever it is), checked with `fstat` on the open descriptor (no race with
//! a rename between a check and the open), and refused unless it is a regular file; for a
//! regular file the flag changes nothing, and it is cleared.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

/// Opens `path` for reading if it is a regular file (following symbolic links, as `open`
/// does); anything else is an `InvalidInput` error that says what it is.
pub fn open(path: &Path) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = rustix::fs::open(path, flags, Mode::empty())?;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
    let what = match kind {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::Fifo => Some("a named pipe (FIFO)"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        FileType::Socket => Some("a socket"),
        _ => Some("not a regular file"),
    };
    if let Some(what) = what {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file (write the data to a file first)"),
        ));
    }
    rustix::fs::fcntl_setfl(&fd, rustix::fs::fcntl_getfl(&fd)? - OFlags::NONBLOCK)?;
    Ok(File::from(fd))
}

/// The whole of the regular file `path`, as text.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_opened() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let file = tmp.path().join("a.txt");
        std::fs::write(&file, "text").expect("write");
        assert_eq!(read_to_string(&file).expect("a regular file"), "text");
        let fifo = tmp.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::RUSR | Mode::WUSR).expect("mkfifo");
        // No writer: a plain open would block here forever.
        let e = open(&fifo).expect_err("a FIFO is refused");
        assert!(e.to_string().contains("named pipe"), "{e}");
        let e = open(tmp.path()).expect_err("a directory is refused");
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = open(Path::new("/dev/null")).expect_err("a device is refused");
        assert!(e.to_string().contains("character device"), "{e}");
    }
}
