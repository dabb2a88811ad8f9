//! Per-task storage that is allocated on demand and freed behind a watermark, so that a graph
//! built while it runs under a task window holds storage for the tasks in flight, not for every
//! task ever submitted.
//!
//! # What it promises
//!
//! A [`ChunkArena`] is indexed by `u32` (a task id, an edge number, a table position). Entries
//! live in fixed chunks of [`CHUNK`] entries, made by the arena's `init` when first reached
//! ([`ChunkArena::get_or_grow`]) and never moved, so readers index the arena without locks while
//! it grows. [`ChunkArena::reclaim_below`] frees every chunk that lies wholly below an index;
//! the caller promises that no thread touches those entries any more (that is the whole safety
//! contract: it is what a completed-prefix watermark gives). Up to [`SPARE`] freed chunks are
//! kept and handed out again by the next growth (entries re-made by `init`), so a run that
//! streams millions of tasks through a window of a few chunks keeps reusing the same, already
//! faulted-in memory instead of asking the allocator (and the kernel) for fresh pages per
//! chunk. [`ChunkArena::live`] and
//! [`ChunkArena::peak`] count the entries held, so tests can hold memory to a bound without
//! measuring the process.
//!
//! # Layout and orderings
//!
//! A directory of lazily made pages (`std` [`OnceLock`], never freed: 8 KiB per 2^20 indices)
//! holds one [`AtomicPtr`] per chunk. The directory grows with the indices used: the first page
//! (indices below 2^20) sits in the arena itself, the table of the other pages (4,096 entries,
//! 64 KiB) is made only when an index above that is first grown, so an arena of a small run
//! makes and drops one 8 KiB page, not a 64 KiB table. A grower installs a chunk with a compare-exchange
//! (`AcqRel`; several threads may race to grow, the loser frees its copy), so a reader that
//! loads the pointer with `Acquire` sees the chunk's initialised entries. The reclaimer swaps
//! the pointer to null and frees the chunk.

use crate::sync::{AtomicPtr, AtomicUsize, OnceLock, Ordering, UnmodelledMutex as Mutex};

/// log2 of [`CHUNK`].
#[cfg(not(loom))]
const CHUNK_BITS: u32 = 10;
/// Tiny chunks under loom, so that models exercise growth and reclamation.
#[cfg(loom)]
const CHUNK_BITS: u32 = 1;
/// Entries per chunk: the unit of allocation and of reclamation.
pub const CHUNK: usize = 1 << CHUNK_BITS;
/// log2 of the chunks per directory page.
#[cfg(not(loom))]
const PAGE_BITS: u32 = 10;
#[cfg(loom)]
const PAGE_BITS: u32 = 2;
/// Most freed chunks kept for reuse (not counted as [`ChunkArena::live`]).
#[cfg(not(loom))]
pub const SPARE: usize = 8;
/// None under loom: models keep exercising fresh growth.
#[cfg(loom)]
pub const SPARE: usize = 0;
/// Directory pages needed to index every `u32`.
#[cfg(not(loom))]
const PAGES: usize = 1 << (32 - CHUNK_BITS - PAGE_BITS);
/// Under loom the index space is small (models use a few dozen indices).
#[cfg(loom)]
const PAGES: usize = 8;

/// Fixed-size arrays, so that indexing by a `u32`'s bits needs no bounds check.
type Page<T> = Box<[AtomicPtr<T>; 1 << PAGE_BITS]>;

/// A boxed array of `N` values made by `f`.
fn boxed_array<E, const N: usize>(f: impl FnMut(usize) -> E) -> Box<[E; N]> {
    let v: Box<[E]> = (0..N).map(f).collect();
    match v.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("collected exactly N values"),
    }
}

/// The table of every directory page.
type Pages<T> = Box<[OnceLock<Page<T>>; PAGES]>;

/// A directory page of null chunk pointers.
fn new_page<T>() -> Page<T> {
    boxed_array(|_| AtomicPtr::new(std::ptr::null_mut()))
}

/// A directory page, made at once under loom: several threads may grow one arena (device
/// generation's owner table), and loom cannot see the synchronisation of std's `OnceLock` that
/// orders a page's making before its use.
fn new_page_lock<T>() -> OnceLock<Page<T>> {
    let page = OnceLock::new();
    #[cfg(loom)]
    let _ = page.set(new_page());
    page
}

/// The table of directory pages 1 and up (see [`new_page_lock`] for loom).
fn new_pages<T>() -> Pages<T> {
    boxed_array(|_| new_page_lock())
}

/// Storage indexed by `u32`, grown in chunks on demand and freed behind a watermark (see the
/// module docs).
pub struct ChunkArena<T> {
    /// Directory page 0 (indices below `CHUNK << PAGE_BITS`).
    first: OnceLock<Page<T>>,
    /// Directory pages 1 and up, made when first needed (entry 0 stays unused).
    rest: OnceLock<Pages<T>>,
    init: fn() -> T,
    /// How a chunk's entries are made.
    fill: Fill,
    /// Freed chunks kept for reuse (raw `CHUNK`-long boxed slices nobody else references).
    spare: Mutex<Vec<SparePtr<T>>>,
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl<T> std::fmt::Debug for ChunkArena<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkArena")
            .field("live", &self.live())
            .field("peak", &self.peak())
            .finish()
    }
}

impl<T> ChunkArena<T> {
    /// An empty arena whose entries start as `init()`.
    pub fn new(init: fn() -> T) -> ChunkArena<T> {
        let rest = OnceLock::new();
        // Under loom the whole directory is made up front (see `new_page_lock`).
        #[cfg(loom)]
        let _ = rest.set(new_pages());
        ChunkArena {
            first: new_page_lock(),
            rest,
            init,
            fill: Fill::Call,
            spare: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Like [`ChunkArena::new`], for entries that may be made by copying the bytes of one
    /// `init()`: a chunk (a fresh one, or a spare one re-made) is filled by copying one value,
    /// not by a call of `init` per entry — the per-task cost of a streamed run that reuses its
    /// chunks. (Under loom, whose atomics must not be copied, entries are made one by one.)
    ///
    /// # Safety
    /// A bitwise copy of `init()` is a valid `T` that owns nothing: `T` has no drop glue and
    /// holds no unique reference (integers, atomics of integers, `MaybeUninit` of such).
    #[allow(unsafe_code)]
    pub unsafe fn new_bitwise(init: fn() -> T) -> ChunkArena<T> {
        let mut a = ChunkArena::new(init);
        if !cfg!(loom) && !std::mem::needs_drop::<T>() {
            a.fill = Fill::Copy;
        }
        a
    }

    /// Like [`ChunkArena::new`], for entries valid whatever their bytes: a chunk's entries are
    /// not made at all (a fresh chunk is uninitialised memory, a spare one keeps its old bytes).
    ///
    /// # Safety
    /// Every byte pattern, uninitialised bytes included, is a valid `T` that owns nothing
    /// (`MaybeUninit` of a `Copy` type, in a cell).
    #[allow(unsafe_code)]
    pub unsafe fn new_unfilled(init: fn() -> T) -> ChunkArena<T> {
        let mut a = ChunkArena::new(init);
        if !cfg!(loom) && !std::mem::needs_drop::<T>() {
            a.fill = Fill::Nothing;
        }
        a
    }

    /// The lock of directory page `p`, if the table holding it exists.
    #[inline]
    fn page_lock(&self, p: usize) -> Option<&OnceLock<Page<T>>> {
        if p == 0 {
            Some(&self.first)
        } else {
            Some(&self.rest.get()?[p])
        }
    }

    /// Every directory page made so far.
    fn pages(&self) -> impl Iterator<Item = &Page<T>> {
        let rest = self.rest.get().map(|r| &r[1..]).unwrap_or(&[]);
        std::iter::once(&self.first)
            .chain(rest)
            .filter_map(OnceLock::get)
    }

    #[inline]
    fn slot(&self, chunk: usize) -> Option<&AtomicPtr<T>> {
        let page = self.page_lock(chunk >> PAGE_BITS)?.get()?;
        Some(&page[chunk & ((1 << PAGE_BITS) - 1)])
    }

    #[inline]
    fn slot_or_grow(&self, chunk: usize) -> &AtomicPtr<T> {
        let p = chunk >> PAGE_BITS;
        let lock = if p == 0 {
            &self.first
        } else {
            &self.rest.get_or_init(new_pages)[p]
        };
        let page = lock.get_or_init(new_page);
        &page[chunk & ((1 << PAGE_BITS) - 1)]
    }

    /// The entry at `i`, if its chunk is allocated (and not reclaimed).
    #[inline]
    pub fn try_get(&self, i: u32) -> Option<&T> {
        let i = i as usize;
        let p = self.slot(i >> CHUNK_BITS)?.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer was installed by `get_or_grow` (release) as a chunk of
        // `CHUNK` initialised entries and is freed only by `reclaim_below`, whose caller
        // promised that nobody touches these entries any more.
        #[allow(unsafe_code)]
        Some(unsafe { &*p.add(i & (CHUNK - 1)) })
    }

    /// The entry at `i`, which must be allocated and not reclaimed.
    ///
    /// # Panics
    /// If it is not.
    #[inline]
    pub fn get(&self, i: u32) -> &T {
        match self.try_get(i) {
            Some(e) => e,
            None => panic!("arena: index {i} used before it was allocated or after it was freed"),
        }
    }

    /// The entry at `i`, allocating its chunk if needed. Must not be called for an index the
    /// caller has reclaimed.
    #[inline]
    pub fn get_or_grow(&self, i: u32) -> &T {
        if let Some(e) = self.try_get(i) {
            return e;
        }
        let i = i as usize;
        let slot = self.slot_or_grow(i >> CHUNK_BITS);
        let fresh = self.new_chunk();
        let p = match slot.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let now = self.live.fetch_add(CHUNK, Ordering::Relaxed) + CHUNK;
                self.peak.fetch_max(now, Ordering::Relaxed);
                fresh
            }
            Err(theirs) => {
                // Another grower won: our copy was never published.
                // SAFETY: `fresh` came from `new_chunk` just above and nobody else saw it.
                #[allow(unsafe_code)]
                unsafe {
                    self.retire_chunk(fresh)
                };
                theirs
            }
        };
        // SAFETY: as in `try_get`.
        #[allow(unsafe_code)]
        unsafe {
            &*p.add(i & (CHUNK - 1))
        }
    }

    /// The entries from `i` to the end of its chunk, if the chunk is allocated (and not
    /// reclaimed): a scan over consecutive entries looks each chunk up once.
    #[inline]
    pub fn try_chunk_from(&self, i: u32) -> Option<&[T]> {
        let p = self.slot(i as usize >> CHUNK_BITS)?.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        let off = i as usize & (CHUNK - 1);
        // SAFETY: as in `try_get`, for the entries `off .. CHUNK` of the chunk.
        #[allow(unsafe_code)]
        Some(unsafe { std::slice::from_raw_parts(p.add(off), CHUNK - off) })
    }

    /// The first of the [`CHUNK`] contiguous entries of the chunk holding `i` (entry `i` is at
    /// offset `i % CHUNK`), allocating the chunk if needed: a single writer that fills a chunk
    /// entry by entry looks the chunk up once instead of once per entry. The pointer is valid
    /// until the chunk is reclaimed; the same rules as for [`ChunkArena::get_or_grow`] apply.
    #[inline]
    pub fn chunk_or_grow(&self, i: u32) -> std::ptr::NonNull<T> {
        self.get_or_grow(i);
        let p = self
            .slot(i as usize >> CHUNK_BITS)
            .map_or(std::ptr::null_mut(), |s| s.load(Ordering::Acquire));
        std::ptr::NonNull::new(p).expect("arena: a chunk grown just now is allocated")
    }

    /// A chunk of `CHUNK` entries made by `init`: a spare one re-made in place, or a new one.
    fn new_chunk(&self) -> *mut T {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if self.fill != Fill::Call {
            let p = match spare {
                Some(SparePtr(p)) => p,
                None => {
                    let chunk: Box<[std::mem::MaybeUninit<T>]> = Box::new_uninit_slice(CHUNK);
                    Box::into_raw(chunk) as *mut T
                }
            };
            if self.fill == Fill::Nothing {
                // Any bytes are a valid entry (`new_unfilled`'s promise).
                return p;
            }
            let v = std::mem::ManuallyDrop::new((self.init)());
            for k in 0..CHUNK {
                // SAFETY: `p` is a `CHUNK`-long slice nobody references (spare or just made);
                // its entries need no drop and a copy of `v`'s bytes is a valid, independent
                // `T` (`new_bitwise`'s promise).
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::copy_nonoverlapping(&*v as *const T, p.add(k), 1)
                };
            }
            return p;
        }
        match spare {
            Some(SparePtr(p)) => {
                for k in 0..CHUNK {
                    // SAFETY: `p` is a `CHUNK`-long slice nobody references (a spare chunk); its
                    // entries are initialised, so each is dropped and re-made in place.
                    #[allow(unsafe_code)]
                    unsafe {
                        let e = p.add(k);
                        std::ptr::drop_in_place(e);
                        e.write((self.init)());
                    }
                }
                p
            }
            None => {
                let chunk: Box<[T]> = (0..CHUNK).map(|_| (self.init)()).collect();
                Box::into_raw(chunk) as *mut T
            }
        }
    }

    /// Keeps a chunk nobody references any more for reuse, or frees it if [`SPARE`] are kept.
    ///
    /// # Safety
    /// `p` came from [`ChunkArena::new_chunk`] and nobody references its entries.
    #[allow(unsafe_code)]
    unsafe fn retire_chunk(&self, p: *mut T) {
        {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            if spare.len() < SPARE {
                spare.push(SparePtr(p));
                return;
            }
        }
        // SAFETY: the caller's promise; `new_chunk` made it as a `CHUNK`-long boxed slice.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, CHUNK)) });
    }

    /// Frees every chunk that lies wholly below index `below` and was not freed before,
    /// scanning down from `below` to the first chunk already free (so a caller that raises
    /// `below` step by step pays once per chunk). Returns the entries freed.
    ///
    /// # Safety
    /// No thread may touch an entry below `below` after this call begins, nor hold a reference
    /// to one returned earlier; and no index below `below` may be grown again.
    #[allow(unsafe_code)]
    pub unsafe fn reclaim_below(&self, below: u32) -> usize {
        let mut freed = 0;
        let mut chunk = below as usize >> CHUNK_BITS;
        while chunk > 0 {
            chunk -= 1;
            let Some(slot) = self.slot(chunk) else { break };
            let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if p.is_null() {
                break;
            }
            // Counted as freed at once: a concurrent grower's peak does not count a chunk this
            // call holds only to free it.
            self.live.fetch_sub(CHUNK, Ordering::Relaxed);
            // SAFETY: `p` was installed from `new_chunk`; the swap took it out, and the caller
            // promised nobody uses its entries.
            unsafe { self.retire_chunk(p) };
            freed += CHUNK;
        }
        freed
    }

    /// Frees the chunk holding index `i`, if allocated. Returns the entries freed.
    ///
    /// # Safety
    /// As [`ChunkArena::reclaim_below`], for the entries of that chunk.
    #[allow(unsafe_code)]
    pub unsafe fn reclaim_chunk(&self, i: u32) -> usize {
        let Some(slot) = self.slot(i as usize >> CHUNK_BITS) else {
            return 0;
        };
        let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return 0;
        }
        // SAFETY: as in `reclaim_below`.
        unsafe { self.retire_chunk(p) };
        self.live.fetch_sub(CHUNK, Ordering::Relaxed);
        CHUNK
    }

    /// Empties the arena for reuse, as if new: every allocated chunk is kept as a spare (up to
    /// [`SPARE`], the rest freed) and the directory pages stay, so the next run's growth takes
    /// memory already faulted in instead of asking the allocator and the kernel for fresh pages.
    /// `live` and `peak` start again from zero. Exclusive access (`&mut self`) is what makes
    /// every entry unreferenced.
    pub fn reset(&mut self) {
        for page in self.pages() {
            for slot in page.iter() {
                let p = slot.swap(std::ptr::null_mut(), Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: `&mut self`: nobody else uses the arena or holds one of its
                    // entries; `p` came from `new_chunk`.
                    #[allow(unsafe_code)]
                    unsafe {
                        self.retire_chunk(p)
                    };
                }
            }
        }
        self.live.store(0, Ordering::Relaxed);
        self.peak.store(0, Ordering::Relaxed);
    }

    /// Entries allocated and not freed.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Most entries held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl<T> Drop for ChunkArena<T> {
    fn drop(&mut self) {
        let spare = self.spare.get_mut().unwrap_or_else(|p| p.into_inner());
        for SparePtr(p) in spare.drain(..) {
            // SAFETY: `&mut self`: nobody else uses the arena; a spare chunk is a `CHUNK`-long
            // boxed slice nobody references.
            #[allow(unsafe_code)]
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, CHUNK)) });
        }
        for page in self.pages() {
            for slot in page.iter() {
                let p = slot.swap(std::ptr::null_mut(), Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: `&mut self`: nobody else uses the arena; `p` came from
                    // `Box::into_raw` of a `CHUNK`-long slice.
                    #[allow(unsafe_code)]
                    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, CHUNK)) });
                }
            }
        }
    }
}

/// How a [`ChunkArena`] makes the entries of a chunk it hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// A call of `init` per entry (dropping a spare chunk's old entries first).
    Call,
    /// Copies of one `init()` ([`ChunkArena::new_bitwise`]).
    Copy,
    /// Nothing ([`ChunkArena::new_unfilled`]).
    Nothing,
}

/// A spare chunk's pointer (owned by the arena's spare list).
struct SparePtr<T>(*mut T);

// SAFETY: a spare chunk is owned by the arena alone; moving its ownership between threads is
// what `T: Send` allows.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for SparePtr<T> {}

// SAFETY: the arena hands out `&T` to any thread and frees `T`s from any thread: exactly what
// `T: Send + Sync` allows.
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Sync for ChunkArena<T> {}
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Send for ChunkArena<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The directory grows with the indices used: small indices make only the first page, an
    /// index beyond it makes the table of the others, and entries on both sides (up to the last
    /// `u32`) are kept, reset and freed alike.
    #[test]
    fn the_directory_grows_with_the_indices_used() {
        let mut a = ChunkArena::<AtomicUsize>::new(|| AtomicUsize::new(0));
        assert!(a.first.get().is_none() && a.rest.get().is_none());
        a.get_or_grow(5).store(5, Ordering::Relaxed);
        assert!(a.first.get().is_some());
        assert!(a.rest.get().is_none());
        let far = (CHUNK << PAGE_BITS) as u32 + 3;
        assert!(a.try_get(far).is_none());
        for (i, v) in [(far, 9), (u32::MAX, 11)] {
            a.get_or_grow(i).store(v, Ordering::Relaxed);
        }
        assert!(a.rest.get().is_some());
        assert_eq!(a.get(5).load(Ordering::Relaxed), 5);
        assert_eq!(a.get(far).load(Ordering::Relaxed), 9);
        assert_eq!(a.get(u32::MAX).load(Ordering::Relaxed), 11);
        assert_eq!(a.live(), 3 * CHUNK);
        a.reset();
        assert_eq!(a.live(), 0);
        assert!(a.try_get(5).is_none() && a.try_get(far).is_none());
        assert!(a.try_get(u32::MAX).is_none());
        assert_eq!(a.get_or_grow(far).load(Ordering::Relaxed), 0);
    }

    #[test]
    fn grows_on_demand_and_frees_behind_the_watermark() {
        let a = ChunkArena::<AtomicUsize>::new(|| AtomicUsize::new(7));
        assert!(a.try_get(0).is_none());
        for i in 0..(5 * CHUNK) as u32 {
            a.get_or_grow(i).store(i as usize, Ordering::Relaxed);
        }
        assert_eq!(a.live(), 5 * CHUNK);
        // Below a chunk boundary only whole chunks go.
        // SAFETY: nothing else uses the arena.
        #[allow(unsafe_code)]
        let freed = unsafe { a.reclaim_below((2 * CHUNK + 3) as u32) };
        assert_eq!(freed, 2 * CHUNK);
        assert_eq!(a.live(), 3 * CHUNK);
        assert!(a.try_get(0).is_none());
        assert!(a.try_get((2 * CHUNK - 1) as u32).is_none());
        assert_eq!(a.get((2 * CHUNK) as u32).load(Ordering::Relaxed), 2 * CHUNK);
        // A far index allocates only its own chunk.
        assert_eq!(a.get_or_grow(u32::MAX).load(Ordering::Relaxed), 7);
        assert_eq!(a.live(), 4 * CHUNK);
        assert_eq!(a.peak(), 5 * CHUNK);
    }

    #[test]
    fn a_reset_arena_is_empty_and_regrows_from_its_own_chunks() {
        let mut a = ChunkArena::<AtomicUsize>::new(|| AtomicUsize::new(7));
        for i in 0..(3 * CHUNK) as u32 {
            a.get_or_grow(i).store(1000 + i as usize, Ordering::Relaxed);
        }
        let before: Vec<*const AtomicUsize> = (0..3)
            .map(|c| a.get((c * CHUNK) as u32) as *const AtomicUsize)
            .collect();
        a.reset();
        assert_eq!((a.live(), a.peak()), (0, 0));
        assert!((0..(3 * CHUNK) as u32).all(|i| a.try_get(i).is_none()));
        // Growth takes the three kept chunks (no new allocation), their entries made afresh.
        for i in 0..(3 * CHUNK) as u32 {
            assert_eq!(a.get_or_grow(i).load(Ordering::Relaxed), 7);
        }
        let mut after: Vec<*const AtomicUsize> = (0..3)
            .map(|c| a.get((c * CHUNK) as u32) as *const AtomicUsize)
            .collect();
        after.sort();
        let mut before = before;
        before.sort();
        assert_eq!(before, after);
        assert_eq!((a.live(), a.peak()), (3 * CHUNK, 3 * CHUNK));
    }

    #[test]
    fn reused_chunks_start_afresh() {
        reused_chunks_start_afresh_in(ChunkArena::<AtomicUsize>::new(|| AtomicUsize::new(7)));
        // SAFETY: an atomic integer owns nothing; a copy of a fresh one is a fresh one.
        #[allow(unsafe_code)]
        let bitwise = unsafe { ChunkArena::<AtomicUsize>::new_bitwise(|| AtomicUsize::new(7)) };
        assert_eq!(bitwise.fill, Fill::Copy);
        reused_chunks_start_afresh_in(bitwise);
    }

    fn reused_chunks_start_afresh_in(a: ChunkArena<AtomicUsize>) {
        let n = ((SPARE + 3) * CHUNK) as u32;
        for i in 0..n {
            a.get_or_grow(i).store(1, Ordering::Relaxed);
        }
        // SAFETY: nothing else uses the arena.
        #[allow(unsafe_code)]
        let freed = unsafe { a.reclaim_below(n) };
        assert_eq!(freed, n as usize);
        assert_eq!(a.live(), 0);
        assert_eq!(a.spare.lock().unwrap().len(), SPARE);
        // Growth takes the spares back, each entry re-made by `init`, then fresh chunks.
        for i in n..2 * n {
            assert_eq!(a.get_or_grow(i).load(Ordering::Relaxed), 7, "index {i}");
        }
        assert!(a.spare.lock().unwrap().is_empty());
        assert_eq!(a.live(), n as usize);
    }
}
