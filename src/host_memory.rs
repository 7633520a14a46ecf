//! Host buffers that fail with [`Error::HostOutOfMemory`] instead of aborting the process.
//!
//! `vec![0; n]` aborts when the allocator says no. These reserve first (`try_reserve_exact`),
//! so a size the process cannot hold (beyond the address space, or refused by the operating
//! system) becomes an error naming the buffer and its size. They do not know what memory the
//! machine has free: a program that sizes its buffers from user input also compares the total
//! with the free memory first (as `host run` does).

use cudarc::driver::ValidAsZeroBits;

use crate::error::{Error, Result};

/// `len` zeros, zeroed by the allocator (`calloc`): a large buffer's pages are mapped, and
/// zeroed by the operating system, only when first written, so a buffer that a download is
/// about to fill, or that stays mostly zero, is not written twice. At a million chains that
/// is milliseconds: each 4 KB page's first touch is a page fault.
pub fn zeroed<T: ValidAsZeroBits>(what: &'static str, len: usize) -> Result<Vec<T>> {
    let refused = || Error::HostOutOfMemory {
        what,
        bytes: len.saturating_mul(size_of::<T>()),
    };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| refused())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: a layout of nonzero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `len` elements of `T`
    // (capacity `len`), and all-zero bytes are a valid `T` (`ValidAsZeroBits`), so all `len`
    // elements are initialized.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// `len` copies of `value`.
pub fn filled<T: Clone>(what: &'static str, len: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserved(what, len)?;
    v.resize(len, value);
    Ok(v)
}

/// A copy of `src`.
pub fn copied<T: Clone>(what: &'static str, src: &[T]) -> Result<Vec<T>> {
    let mut v = reserved(what, src.len())?;
    v.extend_from_slice(src);
    Ok(v)
}

/// The items of `items`, in a vector allocated (fallibly) once for all of them.
pub fn collected<T>(what: &'static str, items: impl ExactSizeIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = reserved(what, items.len())?;
    v.extend(items);
    Ok(v)
}

/// An empty vector with room for `len` elements.
pub fn reserved<T>(what: &'static str, len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| Error::HostOutOfMemory {
            what,
            bytes: len.saturating_mul(size_of::<T>()),
        })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_errors() {
        // 2^62 f32 is 2^64 bytes: beyond any address space.
        assert!(matches!(
            filled("x", 1 << 62, 0f32),
            Err(Error::HostOutOfMemory { what: "x", bytes }) if bytes == usize::MAX
        ));
        assert_eq!(filled("x", 3, 1.5f32).unwrap(), vec![1.5; 3]);
        assert_eq!(copied("x", &[1u64, 2]).unwrap(), vec![1, 2]);
        assert!(matches!(
            zeroed::<f32>("z", 1 << 62),
            Err(Error::HostOutOfMemory { what: "z", bytes }) if bytes == usize::MAX
        ));
        assert_eq!(zeroed::<u64>("z", 3).unwrap(), vec![0; 3]);
        assert!(zeroed::<u8>("z", 0).unwrap().is_empty());
    }
}
