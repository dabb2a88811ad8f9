//! Huge-page advice for the large tables of a build, an `unsafe` call that changes no contents.
//!
//! Why: the exact map's slot table and entries are read at random (one lookup touches a slot
//! and an entry on two different pages), so past a few megabytes a lookup costs a TLB miss and
//! a page walk as well as a cache miss; under virtualisation the walk itself is two-level. With
//! transparent huge pages in `madvise` mode (a common default), memory gets 2 MiB pages only
//! where a program asks. [`with_capacity`] makes a vector whose buffer is advised before its first
//! write, so the pages are faulted in huge (also far fewer page faults for a new table).
//!
//! Promise: the vectors are ordinary `Vec`s (same contents, same capacity or more); the advice
//! only changes how the kernel backs the memory. Off Linux, or below [`MIN_BYTES`], nothing is
//! advised.

/// A huge page (x86-64 and the common arm64 configuration).
const HUGE: usize = 2 << 20;

/// Buffers smaller than this are not advised (a huge page would mostly hold other data).
pub const MIN_BYTES: usize = HUGE;

/// An empty vector with room for at least `capacity` elements whose buffer is advised to be
/// backed by huge pages once it is at least [`MIN_BYTES`]: it holds room for one huge page more,
/// so that its elements lie in whole, aligned huge pages but for at most one page at each end.
pub fn with_capacity<T>(capacity: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    if capacity.saturating_mul(size) < MIN_BYTES {
        return Vec::with_capacity(capacity);
    }
    let v = Vec::with_capacity(capacity.saturating_add(HUGE / size));
    advise(&v);
    v
}

/// Advises the whole buffer of `v` (its capacity, whatever its length) to be backed by huge
/// pages: the pages not touched yet are then faulted in huge. Does nothing off Linux or below
/// [`MIN_BYTES`]; a refusal by the kernel (no transparent huge pages) is ignored.
pub fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < MIN_BYTES {
        return;
    }
    let start = v.as_ptr() as usize;
    let (lo, hi) = (start.next_multiple_of(HUGE), (start + bytes) & !(HUGE - 1));
    if hi <= lo {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: `lo .. hi` is page-aligned and lies inside `v`'s allocation (its capacity), which
    // `v` owns; `MADV_HUGEPAGE` only changes how the kernel backs those pages, never their
    // contents or their mapping, so no reference to them is affected.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Advised vectors are ordinary vectors: room for what was asked, contents kept as they
    /// grow and shrink, small and zero-sized element types included.
    #[test]
    fn advised_vectors_hold_what_is_put_in_them() {
        for n in [
            0usize,
            1,
            1000,
            MIN_BYTES / 8 - 1,
            MIN_BYTES / 8,
            3 * MIN_BYTES / 8 + 5,
        ] {
            let mut v: Vec<u64> = with_capacity(n);
            assert!(v.capacity() >= n);
            v.extend((0..n as u64).map(|i| i * 7 + 1));
            advise(&v);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 7 + 1));
            v.truncate(n / 2);
            assert_eq!(v.len(), n / 2);
        }
        let z: Vec<()> = with_capacity(1 << 30);
        assert!(z.capacity() >= 1 << 30);
    }
}
