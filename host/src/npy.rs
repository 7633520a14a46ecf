//! NumPy `.npy` files in and out, with the `npyz` crate.
//!
//! Reading accepts what a NumPy or PyTorch user is likely to hand over: float32, or float64
//! (converted to float32, and said so), little-endian, C order (NumPy's default). Anything else
//! is an error that names the file and what is wrong with it, before any work is done.
//!
//! Writing goes through [`Staged`]: every output is written into a fresh directory beside the
//! destination, and that directory is renamed into place only when all of it is complete, so
//! an interrupted or failed run never leaves a partial file that looks finished.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use npyz::{AutoSerialize, DType, Endianness, NpyFile, Order, TypeChar, WriterBuilder};

/// An array read from a `.npy` file, as f32.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The shape as the file gives it.
    pub shape: Vec<usize>,
    /// The elements in C order.
    pub data: Vec<f32>,
    /// The file held float64, converted here.
    pub converted_from_f64: bool,
}

/// Reads a float32 or float64 `.npy` file (little-endian, C order).
pub fn read_f32(path: &Path) -> Result<Array> {
    let name = path.display();
    let file = File::open(path).with_context(|| format!("cannot read {name}"))?;
    let npy = NpyFile::new(BufReader::new(file))
        .map_err(|e| anyhow!("{name} is not a valid .npy file (or its header is cut off): {e}"))?;
    if npy.order() == Order::Fortran {
        bail!(
            "{name} is in Fortran order; fused-mh reads C order (save it with \
             np.save(path, np.ascontiguousarray(a)))"
        );
    }
    let dtype = npy.dtype();
    let DType::Plain(ts) = &dtype else {
        bail!(
            "{name} has a structured dtype {}; fused-mh reads float32 or float64",
            dtype.descr()
        );
    };
    let is_float = ts.type_char() == TypeChar::Float;
    let size = ts.size_field();
    if !is_float || !(size == 4 || size == 8) {
        bail!("{name} has dtype {ts}; fused-mh reads float32 (<f4) or float64 (<f8)");
    }
    if ts.endianness() == Endianness::Big {
        bail!("{name} is big-endian ({ts}); fused-mh reads little-endian (<f4 or <f8)");
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let truncated = |e: std::io::Error| {
        if e.kind() == ErrorKind::UnexpectedEof {
            anyhow!("{name} is truncated: its header promises shape {shape:?}, the data is shorter")
        } else {
            anyhow!("cannot read the data of {name}: {e}")
        }
    };
    let (data, converted_from_f64) = if size == 4 {
        (npy.into_vec::<f32>().map_err(truncated)?, false)
    } else {
        let wide = npy.into_vec::<f64>().map_err(truncated)?;
        (wide.into_iter().map(|v| v as f32).collect(), true)
    };
    Ok(Array {
        shape,
        data,
        converted_from_f64,
    })
}

/// Writes `data` with `shape` as a `.npy` file (dtype from `T`: f32 `<f4`, f64 `<f8`, u32
/// `<u4`, bool `|b1`).
pub fn write<T: AutoSerialize>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    let mut writer = NpyStream::<T>::create(path, shape)?;
    writer.extend(data)?;
    writer.finish()
}

/// A `.npy` file written piece by piece (the thinned trace arrives in chunks).
pub struct NpyStream<T: AutoSerialize> {
    writer: npyz::NpyWriter<T, BufWriter<File>>,
    path: PathBuf,
}

impl<T: AutoSerialize> NpyStream<T> {
    /// Creates the file with its header; the elements follow with [`Self::extend`].
    pub fn create(path: &Path, shape: &[usize]) -> Result<Self> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape)
            .writer(BufWriter::new(file))
            .begin_nd()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self {
            writer,
            path: path.to_path_buf(),
        })
    }

    /// Appends elements in C order.
    pub fn extend(&mut self, data: &[T]) -> Result<()> {
        for v in data {
            self.writer
                .push(v)
                .with_context(|| format!("cannot write {}", self.path.display()))?;
        }
        Ok(())
    }

    /// Checks that the file got as many elements as its shape says, and flushes it.
    pub fn finish(self) -> Result<()> {
        let path = self.path.display().to_string();
        self.writer
            .finish()
            .with_context(|| format!("cannot finish {path}"))
    }
}

/// An output directory being written: files go to `<dir>.partial-<pid>` and
/// [`Staged::commit`] renames it to `<dir>`. Dropped without a commit, the partial directory is
/// removed.
pub struct Staged {
    partial: PathBuf,
    dest: PathBuf,
    force: bool,
    committed: bool,
}

impl Staged {
    /// Checks that `dest` may be written (absent, or `force`) and creates the partial
    /// directory beside it.
    pub fn new(dest: &Path, force: bool) -> Result<Self> {
        if dest.exists() && !force {
            bail!(
                "the output directory {} already exists (pass --force to replace it)",
                dest.display()
            );
        }
        let mut name = dest
            .file_name()
            .ok_or_else(|| anyhow!("--out {} names no directory", dest.display()))?
            .to_os_string();
        name.push(format!(".partial-{}", std::process::id()));
        let partial = dest.with_file_name(name);
        fs::create_dir_all(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?;
        Ok(Self {
            partial,
            dest: dest.to_path_buf(),
            force,
            committed: false,
        })
    }

    /// Where to write the output file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.partial.join(name)
    }

    /// Writes a small text file (the summary) into the staged directory.
    pub fn write_text(&self, name: &str, text: &str) -> Result<()> {
        let path = self.path(name);
        let mut file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Moves the complete directory into place (replacing an old one with `--force`).
    pub fn commit(mut self) -> Result<PathBuf> {
        if self.dest.exists() && self.force {
            fs::remove_dir_all(&self.dest)
                .with_context(|| format!("cannot replace {}", self.dest.display()))?;
        }
        fs::rename(&self.partial, &self.dest).with_context(|| {
            format!(
                "cannot move {} to {}",
                self.partial.display(),
                self.dest.display()
            )
        })?;
        self.committed = true;
        Ok(self.dest.clone())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.partial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fused-mh-npy-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn f32_round_trip_and_f64_conversion() {
        let dir = temp_dir("round-trip");
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.37 - 1.5).collect();
        write(&dir.join("a.npy"), &[3, 4], &data).expect("write");
        let back = read_f32(&dir.join("a.npy")).expect("read");
        assert_eq!(back.shape, vec![3, 4]);
        assert_eq!(back.data, data);
        assert!(!back.converted_from_f64);

        let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        write(&dir.join("b.npy"), &[12], &wide).expect("write f64");
        let back = read_f32(&dir.join("b.npy")).expect("read f64");
        assert_eq!((back.shape, back.data), (vec![12], data));
        assert!(back.converted_from_f64);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn bad_files_are_named_errors() {
        let dir = temp_dir("bad");
        let msg = |p: &Path| format!("{:#}", read_f32(p).expect_err("must fail"));
        assert!(msg(&dir.join("missing.npy")).contains("cannot read"));

        write(&dir.join("i.npy"), &[2], &[1u32, 2]).expect("write");
        assert!(msg(&dir.join("i.npy")).contains("dtype <u4"));

        write(&dir.join("t.npy"), &[100], &vec![1.0f32; 100]).expect("write");
        let bytes = fs::read(dir.join("t.npy")).expect("read back");
        fs::write(dir.join("t.npy"), &bytes[..bytes.len() - 40]).expect("cut");
        assert!(msg(&dir.join("t.npy")).contains("truncated"));
        fs::write(dir.join("h.npy"), &bytes[..20]).expect("cut header");
        assert!(msg(&dir.join("h.npy")).contains("not a valid .npy"));

        // A Fortran-order header, written by hand as NumPy would.
        let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let pad = 64 - (10 + header.len() + 1) % 64;
        let len = (header.len() + pad + 1) as u16;
        f.extend_from_slice(&len.to_le_bytes());
        f.extend_from_slice(header.as_bytes());
        f.extend(std::iter::repeat_n(b' ', pad));
        f.push(b'\n');
        f.extend_from_slice(&[0u8; 16]);
        fs::write(dir.join("f.npy"), f).expect("write fortran");
        assert!(msg(&dir.join("f.npy")).contains("Fortran order"));
        fs::remove_dir_all(&dir).ok();
    }
}
