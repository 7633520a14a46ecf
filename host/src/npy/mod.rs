//! NumPy `.npy` files in and out, with the `npyz` crate.
//!
//! Reading accepts what a NumPy or PyTorch user is likely to hand over: float32, or float64
//! (converted to float32, and said so), little-endian, C order (NumPy's default). Anything else
//! is an error that names the file and what is wrong with it, before any work is done.
//!
//! A file's header is read and checked on its own first ([`probe`]): its shape must not
//! overflow, and the data the header promises must be exactly what the file holds. So a
//! 128-byte file that claims to hold 2^64 elements is an error at once, and the caller can
//! check the sizes against the free memory before [`read_f32`] allocates anything.

mod header;

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Seek, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Context, Result, anyhow, bail};
use header::{header_text, parse_error_line, raw_shape};
use npyz::{
    AutoSerialize, DType, Endianness, NpyFile, NpyHeader, Order, TypeChar, TypeStr, WriterBuilder,
};

/// What a `.npy` file's header says, checked against the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The shape as the file gives it.
    pub shape: Vec<usize>,
    /// Elements: the product of the shape.
    pub len: usize,
    /// The data is float64 (converted to float32 when read).
    pub float64: bool,
}

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

/// Reads and checks the header of a float32 or float64 `.npy` file (little-endian, C order),
/// and that the file holds exactly the data it promises.
pub fn probe(path: &Path) -> Result<Header> {
    Ok(open(path)?.0)
}

/// Opens a `.npy` file of any plain (not structured) dtype and checks its header against the
/// file; `Header::float64` is meaningful only for a float file ([`open`]).
fn open_plain(path: &Path) -> Result<(Header, TypeStr, NpyFile<BufReader<File>>)> {
    let name = path.display();
    let file = crate::regular_file::open(path).with_context(|| format!("cannot read {name}"))?;
    let file_len = file
        .metadata()
        .with_context(|| format!("cannot read {name}"))?
        .len();
    let mut reader = BufReader::new(file);
    let text = header_text(&mut reader, file_len).map_err(|why| anyhow!("{name} {why}"))?;
    if let Some(shape) = raw_shape(&text)
        && shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .is_none()
    {
        bail!("{name} claims shape {shape:?}, more elements than any file can hold");
    }
    reader
        .rewind()
        .with_context(|| format!("cannot read {name}"))?;
    let header = NpyHeader::from_reader(&mut reader).map_err(|e| {
        let why = parse_error_line(&e.to_string());
        anyhow!("{name} is not a valid .npy file (or its header is cut off): {why}")
    })?;
    let header_len = reader
        .stream_position()
        .with_context(|| format!("cannot read {name}"))?;
    let npy = NpyFile::with_header(header, reader);
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
    let ts = ts.clone();
    let size = ts.size_field();
    let shape = npy.shape().to_vec();
    let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let data_len = elements.and_then(|n| n.checked_mul(size));
    let (Some(elements), Some(data_len)) = (elements, data_len) else {
        bail!("{name} claims shape {shape:?}, more elements than any file can hold");
    };
    let held = file_len.saturating_sub(header_len);
    if held < data_len {
        bail!(
            "{name} is truncated: its header promises shape {shape:?} ({data_len} bytes of \
             data), the file holds {held}"
        );
    }
    if held > data_len {
        bail!(
            "{name} has {} bytes after the data its header promises (shape {shape:?}): not a \
             file np.save wrote",
            held - data_len
        );
    }
    let header = Header {
        shape: shape.iter().map(|&d| d as usize).collect(),
        len: elements as usize,
        float64: size == 8,
    };
    Ok((header, ts, npy))
}

/// [`open_plain`], for a float32 or float64 file (little-endian).
fn open(path: &Path) -> Result<(Header, NpyFile<BufReader<File>>)> {
    let name = path.display();
    let (header, ts, npy) = open_plain(path)?;
    let size = ts.size_field();
    if ts.type_char() != TypeChar::Float || !(size == 4 || size == 8) {
        bail!("{name} has dtype {ts}; fused-mh reads float32 (<f4) or float64 (<f8)");
    }
    if ts.endianness() == Endianness::Big {
        bail!("{name} is big-endian ({ts}); fused-mh reads little-endian (<f4 or <f8)");
    }
    Ok((header, npy))
}

/// The shape of a `.npy` file of any plain dtype (the run's counts are `<u8`), checked as
/// [`probe`] checks: a valid header, C order, exactly the data it promises.
pub fn shape(path: &Path) -> Result<Vec<usize>> {
    Ok(open_plain(path)?.0.shape)
}

/// Reads a float32 or float64 `.npy` file (little-endian, C order), checked as [`probe`] does.
/// The data goes straight into one float32 buffer (float64 converted element by element).
pub fn read_f32(path: &Path) -> Result<Array> {
    let name = path.display();
    let (header, npy) = open(path)?;
    let failed = |e: std::io::Error| {
        if e.kind() == ErrorKind::UnexpectedEof {
            anyhow!("{name} is truncated: it ended while being read")
        } else {
            anyhow!("cannot read the data of {name}: {e}")
        }
    };
    let mut data =
        fused_mh::testing::host_memory::reserved::<f32>("a .npy file's data", header.len)
            .with_context(|| format!("reading {name}"))?;
    if header.float64 {
        for v in npy.data::<f64>().map_err(|e| anyhow!("{name}: {e}"))? {
            data.push(v.map_err(failed)? as f32);
        }
    } else {
        for v in npy.data::<f32>().map_err(|e| anyhow!("{name}: {e}"))? {
            data.push(v.map_err(failed)?);
        }
    }
    Ok(Array {
        shape: header.shape,
        data,
        converted_from_f64: header.float64,
    })
}

/// Writes `data` with `shape` as a `.npy` file (dtype from `T`: f32 `<f4`, f64 `<f8`, u32
/// `<u4`, bool `|b1`). Returns the file's digest ([`digest`]).
pub fn write<T: AutoSerialize>(path: &Path, shape: &[usize], data: &[T]) -> Result<String> {
    let mut writer = NpyStream::<T>::create(path, shape)?;
    writer.extend(data)?;
    writer.finish()
}

/// The BLAKE3 digest of the file at `path`, in hex: what [`write`] and [`NpyStream::finish`]
/// return for the bytes they wrote (a run records them; a resume checks them).
pub fn digest(path: &Path) -> Result<String> {
    let name = path.display();
    let mut file =
        crate::regular_file::open(path).with_context(|| format!("cannot read {name}"))?;
    let mut hasher = blake3::Hasher::new();
    std::io::copy(&mut file, &mut hasher).with_context(|| format!("cannot read {name}"))?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// A file's writer that hashes every byte on its way to the file.
struct HashingWriter {
    file: BufWriter<File>,
    hasher: Rc<RefCell<blake3::Hasher>>,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A `.npy` file written piece by piece (the thinned trace arrives in chunks), hashed as it
/// is written.
pub struct NpyStream<T: AutoSerialize> {
    writer: npyz::NpyWriter<T, HashingWriter>,
    /// The digest of the bytes written so far (shared with the writer, which `npyz` owns).
    hasher: Rc<RefCell<blake3::Hasher>>,
    path: PathBuf,
}

impl<T: AutoSerialize> NpyStream<T> {
    /// Creates the file with its header; the elements follow with [`Self::extend`].
    pub fn create(path: &Path, shape: &[usize]) -> Result<Self> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let hasher = Rc::new(RefCell::new(blake3::Hasher::new()));
        let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape)
            .writer(HashingWriter {
                file: BufWriter::new(file),
                hasher: Rc::clone(&hasher),
            })
            .begin_nd()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self {
            writer,
            hasher,
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

    /// Checks that the file got as many elements as its shape says, and flushes it. Returns
    /// the digest of everything written ([`digest`]).
    pub fn finish(self) -> Result<String> {
        let path = self.path.display().to_string();
        self.writer
            .finish()
            .with_context(|| format!("cannot finish {path}"))?;
        Ok(self.hasher.borrow().finalize().to_hex().to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A `.npy` file of the given header dictionary and `data` bytes, written as NumPy would.
    fn handmade(path: &Path, dict: &str, data: &[u8]) {
        let mut f = header::tests::header_bytes(dict);
        f.extend_from_slice(data);
        fs::write(path, f).expect("write handmade .npy");
    }

    #[test]
    fn f32_round_trip_and_f64_conversion() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.37 - 1.5).collect();
        write(&dir.join("a.npy"), &[3, 4], &data).expect("write");
        let back = read_f32(&dir.join("a.npy")).expect("read");
        // The digest of the bytes as written is the digest of the file as read back, and
        // BLAKE3's own (the crate's hash of the whole file's bytes at once).
        let written = write(&dir.join("a.npy"), &[3, 4], &data).expect("write again");
        let bytes = fs::read(dir.join("a.npy")).expect("bytes");
        assert_eq!(written, blake3::hash(&bytes).to_hex().to_string());
        assert_eq!(digest(&dir.join("a.npy")).expect("digest"), written);
        assert_eq!(back.shape, vec![3, 4]);
        assert_eq!(back.data, data);
        assert!(!back.converted_from_f64);

        let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        write(&dir.join("b.npy"), &[12], &wide).expect("write f64");
        let back = read_f32(&dir.join("b.npy")).expect("read f64");
        assert_eq!((back.shape, back.data), (vec![12], data));
        assert!(back.converted_from_f64);
    }

    #[test]
    fn bad_files_are_named_errors() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
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

        let f4 =
            |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        handmade(
            &dir.join("f.npy"),
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
            &[0u8; 16],
        );
        assert!(msg(&dir.join("f.npy")).contains("Fortran order"));

        // Headers that promise more than the file holds fail before anything is allocated:
        // the whole check reads 128 bytes.
        handmade(
            &dir.join("huge.npy"),
            &f4("(8589934592, 2147483648)"),
            &[0u8; 8],
        );
        assert!(msg(&dir.join("huge.npy")).contains("more elements than any file can hold"));
        handmade(
            &dir.join("big.npy"),
            &f4("(1073741824, 1048576)"),
            &[0u8; 8],
        );
        let e = msg(&dir.join("big.npy"));
        assert!(
            e.contains("is truncated") && e.contains("4503599627370496 bytes"),
            "{e}"
        );
        handmade(&dir.join("wide.npy"), &f4("(0, 1073741824)"), &[]);
        assert_eq!(
            probe(&dir.join("wide.npy")).expect("empty is readable").len,
            0
        );
        handmade(
            &dir.join("overflow.npy"),
            &f4("(4294967296, 4294967296, 4)"),
            &[],
        );
        assert!(msg(&dir.join("overflow.npy")).contains("more elements than any file"));
        handmade(&dir.join("long.npy"), &f4("(2,)"), &[0u8; 12]);
        assert!(msg(&dir.join("long.npy")).contains("4 bytes after the data"));
    }

    /// Headers that nest deep (a structured dtype 12 levels deep, 20 bare `[`) or run long
    /// are refused after one linear scan: a backtracking parser takes exponential time on them.
    #[test]
    fn deep_or_long_headers_are_refused_at_once() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let mut descr = "'<f4'".to_string();
        for level in 0..12 {
            descr = format!("[('f{level}', {descr})]");
        }
        let cases = [
            format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}"),
            format!("{{'descr': '<f4', 'shape': {}1", "[".repeat(20)),
            format!(
                "{{'descr': '<f4', 'x': '{}', 'shape': (1,), }}",
                " ".repeat(10_000)
            ),
        ];
        for (i, dict) in cases.iter().enumerate() {
            let path = dir.join(format!("deep{i}.npy"));
            handmade(&path, dict, &[0u8; 4]);
            let start = std::time::Instant::now();
            let e = format!("{:#}", probe(&path).expect_err("must fail"));
            // Generous for a slow CI machine: the scan is microseconds; the parsers it
            // protects took over 60 s on the first case.
            assert!(start.elapsed().as_secs_f64() < 1.0, "{e}");
            assert!(e.contains("deep") || e.contains("header of"), "{e}");
        }
        // Brackets inside a quoted string are not nesting.
        handmade(
            &dir.join("quoted.npy"),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'n': '[[[['}",
            &[0u8; 4],
        );
        assert_eq!(probe(&dir.join("quoted.npy")).expect("readable").len, 1);
    }
}
