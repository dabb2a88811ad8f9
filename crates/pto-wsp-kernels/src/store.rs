//! Tensor storage: the memory every kernel of a run reads and writes.
//!
//! Why: the IR declares tensors by name with shapes over runtime symbols; a back end that runs
//! real kernels needs one buffer per tensor, sized under the run's bindings, and a way for the
//! user to put data in and take results out without knowing the layout.
//!
//! Promises:
//! - [`TensorStore::new`] allocates one zeroed buffer per [`Module::tensors`] entry, in the same
//!   order (tensor index `i` is `module.tensors[i]`, the index regions carry), each row-major
//!   and 64-byte aligned. Shapes are evaluated with [`pto_wsp_ir::eval`] under the bindings'
//!   symbols, as the expander does; an unbound symbol is an error naming it. Integer tensors
//!   whose contents the bindings carry (`Bindings::arrays`: ragged lengths, sparse indices)
//!   start with those contents, so kernels see what the expander saw.
//! - Typed access ([`TensorStore::read`], [`TensorStore::write`]) checks the element type
//!   ([`Element::DTYPES`]) and the element count; errors name the tensor, what it holds and what
//!   was given.
//! - Safe methods never race with kernels: the ones that mutate take `&mut self`, and the ones
//!   that read through `&self` are covered by the contract of
//!   [`crate::TaskContext::new`] (no task may write a region while anything else looks at it).

use pto_wsp_ir::eval::{EvalError, eval};
use pto_wsp_ir::task_io::{MAX_RANK, TaskIo};
use pto_wsp_ir::{Bindings, DType, Module, ScalarType, Value};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;

use crate::lazy::LazyFill;
pub use crate::seed::SeedRange;

/// Size from which [`TensorStore::fill_random_lazy`] promises a tensor's contents instead of
/// making them (smaller tensors are filled at once: their chunk checks would cost more than
/// the fill).
pub const LAZY_MIN: usize = 1 << 20;

/// Alignment of every tensor buffer, in bytes (a cache line; enough for any SIMD load).
pub const ALIGN: usize = 64;

/// A Rust type that can stand for the elements of a tensor.
///
/// Implemented for `f32`, [`half::f16`], [`half::bf16`], `i32`, `u32`, `i64`, `u64`, `u8` (one
/// [`DType`] each) and `u16`, which reads and writes the raw bits of `f16` and `bf16` tensors.
/// (The IR has no 64-bit float element type, so there is no `f64` element.)
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The element types of tensors this Rust type may view.
    const DTYPES: &'static [DType];
    /// The Rust type's name, for messages (`f32`, `f16`, ...).
    const NAME: &'static str;

    /// Whether a tensor of `dtype` may be viewed as this type.
    #[inline]
    fn accepts(dtype: DType) -> bool {
        Self::DTYPES.contains(&dtype)
    }
}

macro_rules! element {
    ($t:ty, $name:literal, [$($d:ident),+]) => {
        impl Element for $t {
            const DTYPES: &'static [DType] = &[$(DType::$d),+];
            const NAME: &'static str = $name;
        }
    };
}

element!(f32, "f32", [F32]);
element!(half::f16, "f16", [F16]);
element!(half::bf16, "bf16", [Bf16]);
element!(i32, "i32", [I32]);
element!(u32, "u32", [U32]);
element!(i64, "i64", [I64]);
element!(u64, "u64", [U64]);
element!(u8, "u8", [U8]);
element!(u16, "u16", [F16, Bf16]);

/// What the store knows of one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The declared name.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The evaluated extent of each dimension (row-major; empty for a scalar tensor).
    pub shape: Vec<u64>,
}

impl TensorInfo {
    /// Number of elements (the product of the shape; 1 for a scalar tensor).
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Size of the tensor in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.elements() * self.dtype.size_bytes() as u64
    }
}

/// A tensor to allocate with [`TensorStore::from_specs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The name (for lookups and messages).
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The extent of each dimension (row-major).
    pub shape: Vec<u64>,
    /// The buffer's alignment in bytes: a power of two, at most [`MAX_ALIGN`]; below
    /// [`ALIGN`] it is raised to [`ALIGN`].
    pub align: usize,
}

/// The most bytes a store's tensors may take together (16 GiB): checked before anything is
/// allocated, so a shape bound to a huge symbol is an error, not an exhausted machine.
pub const MAX_TOTAL_BYTES: u64 = 1 << 34;

/// Why a store could not be made, or a store operation refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A tensor's shape uses a runtime symbol that the bindings leave unbound.
    #[error("dimension {dim} of tensor `{tensor}` uses symbol `{symbol}`, which is not bound")]
    MissingSymbol {
        /// The tensor.
        tensor: String,
        /// The dimension whose extent could not be evaluated.
        dim: usize,
        /// The unbound symbol.
        symbol: String,
    },
    /// A symbol is bound to a value of another type than its declaration.
    #[error("symbol `{name}` is declared {expected} but bound to a {found} value")]
    BindingType {
        /// The symbol.
        name: String,
        /// Its declared type.
        expected: ScalarType,
        /// The type of the bound value.
        found: ScalarType,
    },
    /// A dimension's extent is not a non-negative integer (or could not be evaluated).
    #[error("dimension {dim} of tensor `{tensor}`: {message}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// What is wrong.
        message: String,
    },
    /// The tensor has more bytes than this machine can address.
    #[error(
        "tensor `{tensor}` of shape {shape:?} and element type {dtype} is too large to allocate"
    )]
    TooLarge {
        /// The tensor.
        tensor: String,
        /// Its evaluated shape.
        shape: Vec<u64>,
        /// Its element type.
        dtype: DType,
    },
    /// The tensors together would take more than [`MAX_TOTAL_BYTES`].
    #[error(
        "tensor `{tensor}` ({bytes} bytes) brings the tensors to {total} bytes, more than the limit of {limit} bytes"
    )]
    OverLimit {
        /// The tensor that crossed the limit.
        tensor: String,
        /// Its size.
        bytes: u64,
        /// The size of it and every tensor before it.
        total: u64,
        /// [`MAX_TOTAL_BYTES`].
        limit: u64,
    },
    /// An alignment that is not a power of two, or above [`MAX_ALIGN`].
    #[error("tensor `{tensor}`: alignment {align} is not a power of two of at most {max} bytes")]
    Alignment {
        /// The tensor.
        tensor: String,
        /// The alignment asked for.
        align: usize,
        /// [`MAX_ALIGN`].
        max: usize,
    },
    /// The allocator refused the buffer.
    #[error("cannot allocate {bytes} bytes for tensor `{tensor}`")]
    Alloc {
        /// The tensor.
        tensor: String,
        /// The size asked for.
        bytes: usize,
    },
    /// Memory given to [`TensorStore::attach_external`] does not fit the tensor.
    #[error("tensor `{tensor}`: {reason}")]
    External {
        /// The tensor.
        tensor: String,
        /// What does not fit.
        reason: String,
    },
    /// The contents the bindings give a tensor do not fit it.
    #[error("bound contents of tensor `{tensor}`: {message}")]
    Array {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// No tensor has the name.
    #[error("no tensor is named `{name}`")]
    UnknownTensor {
        /// The name asked for.
        name: String,
    },
    /// Typed access with a Rust type that cannot view the tensor's elements.
    #[error("tensor `{tensor}` holds {expected} elements, not {found}")]
    DType {
        /// The tensor.
        tensor: String,
        /// Its element type.
        expected: DType,
        /// The Rust type used ([`Element::NAME`]).
        found: &'static str,
    },
    /// A write with the wrong number of elements.
    #[error("tensor `{tensor}` has {expected} elements, but {found} were given")]
    Length {
        /// The tensor.
        tensor: String,
        /// Its element count.
        expected: u64,
        /// The number given.
        found: usize,
    },
    /// A region names a tensor index the store does not have.
    #[error("a region names tensor index {tensor}, but there are {count} tensor(s)")]
    NoSuchTensor {
        /// The index in the region.
        tensor: u32,
        /// Number of tensors in the store.
        count: usize,
    },
    /// A region of another rank than its tensor.
    #[error(
        "a region of tensor `{tensor}` has rank {rank}, but the tensor has {expected} dimension(s)"
    )]
    RegionRank {
        /// The tensor.
        tensor: String,
        /// The region's rank.
        rank: u32,
        /// The tensor's rank.
        expected: usize,
    },
    /// A region that does not lie inside its tensor.
    #[error(
        "a region of tensor `{tensor}` is out of bounds in dimension {dim}: start {start} + size {size} > extent {extent}"
    )]
    RegionBounds {
        /// The tensor.
        tensor: String,
        /// The first dimension out of bounds.
        dim: usize,
        /// The region's start there.
        start: u32,
        /// The region's size there.
        size: u32,
        /// The tensor's extent there.
        extent: u64,
    },
}

/// One tensor's bytes: a zeroed, [`ALIGN`]-aligned block owned through a raw pointer.
///
/// Held by raw pointer rather than `Box<[u8]>` so that views may write through a pointer derived
/// from a shared `&TensorStore` without a `&`/`&mut` to the whole buffer ever existing at the
/// same time (see [`crate::context`]).
///
/// Blocks of at least [`MAP_MIN`] bytes are anonymous memory maps of their own: fresh zero pages,
/// mapped only when first touched and returned to the system when the store is dropped, whatever
/// the process's global allocator does with freed memory (an allocator that keeps freed blocks
/// for reuse must `memset` them to hand them out zeroed again — gigabytes per run for the LLaMA
/// example's activations). Tensors of gigabytes that a run never touches (empty kernels, unused
/// outputs) then cost nothing. Smaller blocks come from the allocator with its natural alignment
/// ([`CALLOC_ALIGN`]) and [`ALIGN`] extra bytes, `ptr` being the first [`ALIGN`]-aligned byte
/// inside (asking for alignment above 16 makes the system allocator `memset` instead of `calloc`).
struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    /// Alignment of `ptr` (a power of two, at least [`ALIGN`], at most [`MAX_ALIGN`]).
    align: usize,
    /// Start of the allocation (`ptr` minus the alignment padding); unused for a mapped block.
    base: NonNull<u8>,
    /// The block's own memory map, for blocks of at least [`MAP_MIN`] bytes.
    map: Option<memmap2::MmapMut>,
    /// Whether the memory is the caller's ([`TensorStore::attach_external`]): never freed here.
    external: bool,
}

/// Alignment the system allocator gives `calloc` blocks without a `memset`.
const CALLOC_ALIGN: usize = 16;

/// Size from which a buffer is a memory map of its own (see [`Buffer`]).
const MAP_MIN: usize = 1 << 20;
const _: () = assert!(ALIGN <= MAX_ALIGN, "memory maps are page aligned");

/// The largest alignment a tensor may ask for ([`TensorSpec::align`]): a page, what memory maps
/// guarantee.
pub const MAX_ALIGN: usize = 4096;

// SAFETY: a `Buffer` owns its allocation exclusively, like `Box<[u8]>`; moving it to another
// thread moves that ownership.
unsafe impl Send for Buffer {}
// SAFETY: through `&Buffer` the safe API only reads. Writes through a shared reference happen
// only in views handed out by `TaskContext`, whose `unsafe` constructor makes the caller
// promise that no other access overlaps a region being written.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A zeroed buffer of `layout.size()` bytes aligned to `layout.align()` (raised to
    /// [`ALIGN`]); `None` if the allocator refuses or the alignment is above [`MAX_ALIGN`].
    fn zeroed(layout: Layout) -> Option<Buffer> {
        let align = layout.align().max(ALIGN);
        if align > MAX_ALIGN {
            return None;
        }
        if layout.size() == 0 {
            let ptr = NonNull::new(std::ptr::without_provenance_mut(align))?;
            return Some(Buffer {
                ptr,
                len: 0,
                align,
                base: ptr,
                map: None,
                external: false,
            });
        }
        if layout.size() >= MAP_MIN {
            let mut map = memmap2::MmapMut::map_anon(layout.size()).ok()?;
            let ptr = NonNull::new(map.as_mut_ptr())?;
            return Some(Buffer {
                ptr,
                len: layout.size(),
                align,
                base: ptr,
                map: Some(map),
                external: false,
            });
        }
        let outer = Self::outer(layout.size(), align)?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { alloc_zeroed(outer) })?;
        let pad = base.as_ptr().align_offset(align);
        debug_assert!(pad < align);
        // SAFETY: `pad < align` and the block has `len + align` bytes, so `base + pad` and the
        // `len` bytes after it lie inside it.
        let ptr = unsafe { base.add(pad) };
        Some(Buffer {
            ptr,
            len: layout.size(),
            align,
            base,
            map: None,
            external: false,
        })
    }

    /// The layout actually allocated for `len` bytes aligned to `align`.
    fn outer(len: usize, align: usize) -> Option<Layout> {
        Layout::from_size_align(len.checked_add(align)?, CALLOC_ALIGN).ok()
    }

    /// The layout of the tensor's bytes.
    fn layout(&self) -> Layout {
        // The same layout `zeroed` was given: it was valid then.
        Layout::from_size_align(self.len, self.align)
            .expect("a buffer's layout was valid when made")
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes (or dangling and aligned with `len == 0`),
        // initialised (zeroed at allocation). Nothing writes them while this borrow lives: safe
        // writers need `&mut`, and view writers are excluded by `TaskContext::new`'s contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` excludes every other borrow of the buffer
        // (views borrow the store, so none is alive).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // A mapped block is unmapped when `map` drops.
        if self.len != 0 && self.map.is_none() && !self.external {
            let outer = Self::outer(self.len, self.align).expect("valid when allocated");
            // SAFETY: `base` was allocated by `alloc_zeroed` with exactly this layout, freed once.
            unsafe { dealloc(self.base.as_ptr(), outer) }
        }
    }
}

/// The tensors of a module, allocated from its declarations under one set of bindings.
///
/// Tensor `i` is `module.tensors[i]`. Every buffer is row-major, zeroed at creation (or filled
/// from the bindings' integer contents) and 64-byte aligned.
pub struct TensorStore {
    infos: Vec<TensorInfo>,
    bufs: Vec<Buffer>,
    by_name: HashMap<String, u32>,
    /// Whether the tensor's contents came from `Bindings::arrays` (kept by `fill_random`).
    bound: Vec<bool>,
    /// Seeded contents promised, made where first read ([`TensorStore::fill_random_lazy`]).
    lazy: Vec<Option<Box<LazyFill>>>,
}

impl fmt::Debug for TensorStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorStore")
            .field("tensors", &self.infos)
            .finish_non_exhaustive()
    }
}

impl Clone for TensorStore {
    /// A deep copy of every buffer. Like every `&self` read, it must not run while a task writes
    /// (see [`crate::TaskContext::new`]).
    fn clone(&self) -> TensorStore {
        self.make_all();
        let bufs = self
            .bufs
            .iter()
            .map(|b| {
                let mut copy = Buffer::zeroed(b.layout())
                    .unwrap_or_else(|| std::alloc::handle_alloc_error(b.layout()));
                copy.as_mut_slice().copy_from_slice(b.as_slice());
                copy
            })
            .collect();
        TensorStore {
            infos: self.infos.clone(),
            bufs,
            by_name: self.by_name.clone(),
            bound: self.bound.clone(),
            lazy: self.bound.iter().map(|_| None).collect(),
        }
    }
}

impl TensorStore {
    /// One zeroed buffer per tensor of `module`, shapes evaluated under `bindings`' symbols.
    ///
    /// Integer tensors that `bindings.arrays` gives contents start with them (their length must
    /// be the element count and every value must fit the element type). Errors: an unbound
    /// symbol in a shape ([`StoreError::MissingSymbol`]), a symbol bound with the wrong type, an
    /// extent that is negative or not an integer, a tensor too large to allocate, bound contents
    /// that do not fit.
    pub fn new(module: &Module, bindings: &Bindings) -> Result<TensorStore, StoreError> {
        let mut env: HashMap<&str, Value> = HashMap::new();
        for sym in &module.symbols {
            if let Some(v) = bindings.symbols.get(sym.name.as_str()) {
                if v.ty() != sym.ty {
                    return Err(StoreError::BindingType {
                        name: sym.name.name.clone(),
                        expected: sym.ty,
                        found: v.ty(),
                    });
                }
                env.insert(sym.name.as_str(), *v);
            }
        }
        let lookup = |name: &str| env.get(name).copied();

        let mut store = TensorStore::with_capacity(module.tensors.len());
        let mut total = 0u64;
        for decl in &module.tensors {
            let tensor = decl.name.name.clone();
            let mut shape = Vec::with_capacity(decl.shape.len());
            for (dim, e) in decl.shape.iter().enumerate() {
                let shape_err = |message: String| StoreError::Shape {
                    tensor: tensor.clone(),
                    dim,
                    message,
                };
                let v = eval(e, &lookup).map_err(|err| match err {
                    EvalError::Unbound { name } if module.symbol(&name).is_some() => {
                        StoreError::MissingSymbol {
                            tensor: tensor.clone(),
                            dim,
                            symbol: name,
                        }
                    }
                    other => shape_err(other.to_string()),
                })?;
                let extent = match v {
                    Value::I64(x) if x >= 0 => x as u64,
                    Value::U64(x) => x,
                    Value::I64(x) => return Err(shape_err(format!("extent {x} is negative"))),
                    Value::Bool(_) => {
                        return Err(shape_err("extent is a bool, not an integer".into()));
                    }
                };
                shape.push(extent);
            }
            let spec = TensorSpec {
                name: tensor,
                dtype: decl.dtype,
                shape,
                align: ALIGN,
            };
            store.push(&spec, &mut total)?;
        }
        let n = store.len();
        for i in 0..n {
            if let Some(data) = bindings.arrays.get(&store.infos[i].name) {
                store.fill_bound(i, data)?;
                store.bound[i] = true;
            }
        }
        Ok(store)
    }

    /// One zeroed buffer per spec, in order (tensor `i` is `specs[i]`), each aligned to its
    /// [`TensorSpec::align`]: for runtimes whose tensors are not a module's declarations (the
    /// task-graph ISA allocates by size, element type and alignment).
    ///
    /// Errors: an alignment that is not a power of two or is above [`MAX_ALIGN`]
    /// ([`StoreError::Alignment`]), a tensor too large to allocate, the tensors together above
    /// [`MAX_TOTAL_BYTES`], an allocation the allocator refuses.
    pub fn from_specs(specs: &[TensorSpec]) -> Result<TensorStore, StoreError> {
        let mut store = TensorStore::with_capacity(specs.len());
        let mut total = 0u64;
        for spec in specs {
            store.push(spec, &mut total)?;
        }
        Ok(store)
    }

    fn with_capacity(n: usize) -> TensorStore {
        TensorStore {
            infos: Vec::with_capacity(n),
            bufs: Vec::with_capacity(n),
            by_name: HashMap::with_capacity(n),
            bound: Vec::with_capacity(n),
            lazy: Vec::with_capacity(n),
        }
    }

    /// Allocates `spec` as the next tensor; `total` is the bytes of the tensors before it.
    fn push(&mut self, spec: &TensorSpec, total: &mut u64) -> Result<(), StoreError> {
        let tensor = spec.name.clone();
        if !spec.align.is_power_of_two() || spec.align > MAX_ALIGN {
            return Err(StoreError::Alignment {
                tensor,
                align: spec.align,
                max: MAX_ALIGN,
            });
        }
        let too_large = || StoreError::TooLarge {
            tensor: tensor.clone(),
            shape: spec.shape.clone(),
            dtype: spec.dtype,
        };
        let bytes = spec
            .shape
            .iter()
            .try_fold(spec.dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(too_large)?;
        *total = total.saturating_add(bytes as u64);
        if *total > MAX_TOTAL_BYTES {
            return Err(StoreError::OverLimit {
                tensor,
                bytes: bytes as u64,
                total: *total,
                limit: MAX_TOTAL_BYTES,
            });
        }
        let layout =
            Layout::from_size_align(bytes, spec.align.max(ALIGN)).map_err(|_| too_large())?;
        let buf = Buffer::zeroed(layout).ok_or_else(|| StoreError::Alloc {
            tensor: tensor.clone(),
            bytes,
        })?;
        let i = self.infos.len() as u32;
        self.by_name.entry(tensor.clone()).or_insert(i);
        self.infos.push(TensorInfo {
            name: tensor,
            dtype: spec.dtype,
            shape: spec.shape.clone(),
        });
        self.bufs.push(buf);
        self.bound.push(false);
        self.lazy.push(None);
        Ok(())
    }

    /// The alignment of tensor `tensor`'s buffer in bytes (a power of two, at least
    /// [`ALIGN`]). Panics if the index is out of range.
    pub fn align(&self, tensor: u32) -> usize {
        self.bufs[tensor as usize].align
    }

    /// Copies bound integer contents into tensor `i`, converting to its element type.
    fn fill_bound(&mut self, i: usize, data: &[i64]) -> Result<(), StoreError> {
        let info = &self.infos[i];
        let err = |message: String| StoreError::Array {
            tensor: info.name.clone(),
            message,
        };
        if !info.dtype.is_integer() {
            return Err(err(format!(
                "only integer tensors take bound contents, and this one holds {}",
                info.dtype
            )));
        }
        if data.len() as u64 != info.elements() {
            return Err(err(format!(
                "{} value(s) bound, but the tensor has {} element(s)",
                data.len(),
                info.elements()
            )));
        }
        let dtype = info.dtype;
        let bytes = self.bufs[i].as_mut_slice();
        for (k, &v) in data.iter().enumerate() {
            let fits = match dtype {
                DType::U8 => store_int::<u8>(bytes, k, v),
                DType::I32 => store_int::<i32>(bytes, k, v),
                DType::U32 => store_int::<u32>(bytes, k, v),
                DType::I64 => store_int::<i64>(bytes, k, v),
                DType::U64 => store_int::<u64>(bytes, k, v),
                DType::F16 | DType::Bf16 | DType::F32 => false,
            };
            if !fits {
                return Err(StoreError::Array {
                    tensor: self.infos[i].name.clone(),
                    message: format!("value {v} at index {k} does not fit {dtype}"),
                });
            }
        }
        Ok(())
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether the module declares no tensor.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }

    /// Name, element type and shape of tensor `tensor`. Panics if the index is out of range.
    pub fn info(&self, tensor: u32) -> &TensorInfo {
        &self.infos[tensor as usize]
    }

    /// Every tensor's info, in index order.
    pub fn infos(&self) -> &[TensorInfo] {
        &self.infos
    }

    /// The index of the tensor named `name`.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    fn lookup<T: Element>(&self, name: &str) -> Result<u32, StoreError> {
        let t = self
            .index_of(name)
            .ok_or_else(|| StoreError::UnknownTensor { name: name.into() })?;
        let info = self.info(t);
        if !T::accepts(info.dtype) {
            return Err(StoreError::DType {
                tensor: info.name.clone(),
                expected: info.dtype,
                found: T::NAME,
            });
        }
        Ok(t)
    }

    /// Replaces the whole contents of tensor `name` with `data` (row-major). The element type
    /// must view the tensor's ([`Element::DTYPES`]) and `data` must have exactly its element
    /// count.
    pub fn write<T: Element>(&mut self, name: &str, data: &[T]) -> Result<(), StoreError> {
        let t = self.lookup::<T>(name)?;
        let info = self.info(t);
        if data.len() as u64 != info.elements() {
            return Err(StoreError::Length {
                tensor: info.name.clone(),
                expected: info.elements(),
                found: data.len(),
            });
        }
        // Every byte is replaced: a promise of seeded contents is void.
        self.lazy[t as usize] = None;
        self.bufs[t as usize]
            .as_mut_slice()
            .copy_from_slice(bytemuck::cast_slice(data));
        Ok(())
    }

    /// The whole contents of tensor `name` (row-major), as `T`.
    ///
    /// Reads through `&self`: call it when no task is running (see
    /// [`crate::TaskContext::new`]).
    pub fn read<T: Element>(&self, name: &str) -> Result<Vec<T>, StoreError> {
        let t = self.lookup::<T>(name)?;
        Ok(bytemuck::cast_slice(self.bytes(t)).to_vec())
    }

    /// The raw bytes of tensor `tensor` (row-major, native endianness). Panics if the index is
    /// out of range.
    ///
    /// The borrow must not overlap a running task that writes the tensor: this is part of the
    /// contract of [`crate::TaskContext::new`], which engines meet by holding the store
    /// exclusively while tasks run.
    pub fn bytes(&self, tensor: u32) -> &[u8] {
        self.make(tensor);
        self.bufs[tensor as usize].as_slice()
    }

    /// Bytes `range` of tensor `tensor` ([`TensorStore::bytes`] of part of a tensor: of a tensor
    /// filled with [`TensorStore::fill_random_lazy`], only the part read is made). Panics if the
    /// index or the range is out of range.
    pub fn bytes_in(&self, tensor: u32, range: std::ops::Range<usize>) -> &[u8] {
        let t = tensor as usize;
        if let Some(l) = &self.lazy[t] {
            let b = &self.bufs[t];
            // SAFETY: the buffer is valid for `b.len` bytes; every reader of it asks the
            // promise first (the store's readers and `TaskContext`'s views), and the borrow
            // rules of `TaskContext::new` keep writers away while this `&self` borrow lives.
            unsafe { l.ensure(b.ptr.as_ptr(), b.len, range.start, range.end, 0) };
        }
        &self.bufs[t].as_slice()[range]
    }

    /// The raw bytes of tensor `tensor`, writable. Panics if the index is out of range.
    pub fn bytes_mut(&mut self, tensor: u32) -> &mut [u8] {
        self.make(tensor);
        self.lazy[tensor as usize] = None;
        self.bufs[tensor as usize].as_mut_slice()
    }

    /// Makes every promised chunk of tensor `t` ([`TensorStore::fill_random_lazy`]).
    fn make(&self, t: u32) {
        if let Some(l) = &self.lazy[t as usize] {
            let b = &self.bufs[t as usize];
            // SAFETY: as in `bytes_in`.
            unsafe { l.ensure_all(b.ptr.as_ptr(), b.len) };
        }
    }

    /// [`TensorStore::make`] of every tensor.
    fn make_all(&self) {
        for t in 0..self.len() {
            self.make(t as u32);
        }
    }

    /// Makes the promised chunks of tensor `tensor` covering bytes `lo .. hi` (a view's span,
    /// before the view is handed out); `start` spreads callers asking at once over different
    /// chunks. Nothing to do for a tensor with nothing promised.
    ///
    /// # Safety
    ///
    /// The caller is about to hand out a view of these bytes under the contract of
    /// [`crate::TaskContext::new`]: nothing reads or writes a byte of the buffer but through the
    /// store's methods and such views.
    #[inline]
    pub(crate) unsafe fn make_span(&self, tensor: u32, lo: usize, hi: usize, start: usize) {
        if let Some(l) = &self.lazy[tensor as usize] {
            let b = &self.bufs[tensor as usize];
            // SAFETY: the buffer is valid for `b.len` bytes; the caller's promise.
            unsafe { l.ensure(b.ptr.as_ptr(), b.len, lo, hi, start) };
        }
    }

    /// Fills tensors with deterministic pseudo-random contents derived from `seed` alone (the
    /// same seed gives the same bytes on every machine and every run).
    ///
    /// Each tensor draws from its own SplitMix64 stream (seeded from `seed` and its index), in
    /// row-major order. Floating-point elements are multiples of `2^-(p-1)` in `[-1, 1)`, with
    /// `p` the significand width of the type (24 for `f32`, 11 for `f16`, 8 for `bf16`), so every
    /// value is exact in its type. Integer elements are in `0 .. 16`. Tensors whose contents came
    /// from the bindings (`Bindings::arrays`) are left as they are: they drive control flow.
    pub fn fill_random(&mut self, seed: u64) {
        self.fill_random_except(seed, &[]);
    }

    /// [`TensorStore::fill_random`], leaving the tensors `given` (indices) untouched too: those
    /// an input will replace need no contents first. Every other tensor gets the same bytes as
    /// from `fill_random` (each tensor has its own stream).
    pub fn fill_random_except(&mut self, seed: u64, given: &[u32]) {
        self.fill_random_ranged(seed, given, &[]);
    }

    /// [`TensorStore::fill_random_except`], the float tensors of `ranges` (index, range) with
    /// their values placed in their [`SeedRange`] as they are made (one pass over memory): the
    /// same bytes as filling first and mapping each value after. Ranges of integer tensors
    /// are ignored.
    pub fn fill_random_ranged(&mut self, seed: u64, given: &[u32], ranges: &[(u32, SeedRange)]) {
        for t in 0..self.len() {
            if self.bound[t] || given.contains(&(t as u32)) {
                continue;
            }
            let (stream, dtype, range) = self.seeding(t, seed, ranges);
            self.lazy[t] = None;
            crate::seed::fill(self.bufs[t].as_mut_slice(), dtype, stream, range);
        }
    }

    /// [`TensorStore::fill_random_ranged`], except that tensors of at least [`LAZY_MIN`] bytes
    /// are only promised their contents: each chunk of such a tensor is made where it is first
    /// read (a task's view of a region, or any read of the store), on the thread that reads it.
    /// Every read sees the same bytes as after `fill_random_ranged`; parts nobody reads are
    /// never made. Writing a whole tensor ([`TensorStore::write`], an input file) drops its
    /// promise.
    pub fn fill_random_lazy(&mut self, seed: u64, given: &[u32], ranges: &[(u32, SeedRange)]) {
        for t in 0..self.len() {
            if self.bound[t] || given.contains(&(t as u32)) {
                continue;
            }
            let (stream, dtype, range) = self.seeding(t, seed, ranges);
            let len = self.bufs[t].len;
            if len >= LAZY_MIN && !self.bufs[t].external {
                self.lazy[t] = Some(Box::new(LazyFill::new(len, dtype, stream, range)));
            } else {
                self.lazy[t] = None;
                crate::seed::fill(self.bufs[t].as_mut_slice(), dtype, stream, range);
            }
        }
    }

    /// Tensor `t`'s stream (seeded from `seed` and its index), element type and range.
    fn seeding(
        &self,
        t: usize,
        seed: u64,
        ranges: &[(u32, SeedRange)],
    ) -> (u64, DType, Option<SeedRange>) {
        let stream = seed
            ^ (t as u64)
                .wrapping_add(1)
                .wrapping_mul(0xD1B5_4A32_D192_ED03);
        let range = ranges
            .iter()
            .find(|(i, _)| *i as usize == t)
            .map(|&(_, r)| r);
        (stream, self.infos[t].dtype, range)
    }

    /// Checks that `io`'s region lies inside its tensor: the tensor exists, the ranks agree and
    /// every dimension's `start + size` is within the extent. Engines call this before running a
    /// task; views check the same when made.
    ///
    /// Inline: engines call it for every region of every task, and the passing check is a few
    /// comparisons; naming what is wrong is out of line ([`TensorStore::region_error`]).
    #[inline]
    pub fn check_region(&self, io: &TaskIo) -> Result<(), StoreError> {
        let r = &io.region;
        let fits = self.infos.get(r.tensor as usize).is_some_and(|info| {
            r.rank as usize == info.shape.len()
                && r.rank as usize <= MAX_RANK
                && info
                    .shape
                    .iter()
                    .enumerate()
                    .all(|(dim, &extent)| r.end(dim) <= extent)
        });
        if fits { Ok(()) } else { self.region_error(io) }
    }

    /// [`TensorStore::check_region`] for a region it refused: names what is wrong.
    #[cold]
    #[inline(never)]
    fn region_error(&self, io: &TaskIo) -> Result<(), StoreError> {
        let r = &io.region;
        let info = self
            .infos
            .get(r.tensor as usize)
            .ok_or(StoreError::NoSuchTensor {
                tensor: r.tensor,
                count: self.len(),
            })?;
        if r.rank as usize != info.shape.len() || r.rank as usize > MAX_RANK {
            return Err(StoreError::RegionRank {
                tensor: info.name.clone(),
                rank: r.rank,
                expected: info.shape.len(),
            });
        }
        for (dim, &extent) in info.shape.iter().enumerate() {
            if r.end(dim) > extent {
                return Err(StoreError::RegionBounds {
                    tensor: info.name.clone(),
                    dim,
                    start: r.start[dim],
                    size: r.size[dim],
                    extent,
                });
            }
        }
        Ok(())
    }

    /// Base pointer of tensor `tensor`'s buffer, for views. Panics if the index is out of range.
    /// The bytes of the tensors of `whole`, mutably, to be overwritten whole (their promised
    /// contents dropped unmade), in tensor order (disjoint buffers): `None` for the others.
    pub(crate) fn buffers_mut(&mut self, whole: &[u32]) -> impl Iterator<Item = Option<&mut [u8]>> {
        for &t in whole {
            self.lazy[t as usize] = None;
        }
        self.bufs
            .iter_mut()
            .enumerate()
            .map(|(t, b)| whole.contains(&(t as u32)).then(|| b.as_mut_slice()))
    }

    pub(crate) fn base_ptr(&self, tensor: u32) -> *mut u8 {
        self.bufs[tensor as usize].ptr.as_ptr()
    }

    /// Makes tensor `tensor`'s buffer the caller's memory at `ptr` instead of its own, so a run
    /// reads and writes it in place (a numpy array, without a copy). The store's own buffer is
    /// freed; its contents are not copied. [`TensorStore::detach_external`] gives the tensor a
    /// fresh zeroed buffer of its own again.
    ///
    /// Errors: `len` is not the tensor's size in bytes, or `ptr` is not aligned for its element
    /// type ([`StoreError::External`]).
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` bytes, and nothing but this store may
    /// access that memory, until the tensor is detached or the store dropped (the store never
    /// frees it).
    pub unsafe fn attach_external(
        &mut self,
        tensor: u32,
        ptr: NonNull<u8>,
        len: usize,
    ) -> Result<(), StoreError> {
        let info = &self.infos[tensor as usize];
        let bad = |reason: String| StoreError::External {
            tensor: info.name.clone(),
            reason,
        };
        if len as u64 != info.size_bytes() {
            return Err(bad(format!(
                "{len} byte(s) given, the tensor has {}",
                info.size_bytes()
            )));
        }
        let align = info.dtype.size_bytes().max(1);
        if ptr.as_ptr().align_offset(align) != 0 {
            return Err(bad(format!(
                "the memory is not aligned to its {align}-byte elements"
            )));
        }
        self.lazy[tensor as usize] = None;
        self.bufs[tensor as usize] = Buffer {
            ptr,
            len,
            align,
            base: ptr,
            map: None,
            external: true,
        };
        Ok(())
    }

    /// Gives tensor `tensor` a zeroed buffer of its own again if it has the caller's memory
    /// ([`TensorStore::attach_external`]); the store no longer touches that memory.
    pub fn detach_external(&mut self, tensor: u32) -> Result<(), StoreError> {
        let b = &self.bufs[tensor as usize];
        if !b.external {
            return Ok(());
        }
        let layout = b.layout();
        let fresh = Buffer::zeroed(layout).ok_or_else(|| StoreError::Alloc {
            tensor: self.infos[tensor as usize].name.clone(),
            bytes: layout.size(),
        })?;
        self.bufs[tensor as usize] = fresh;
        self.lazy[tensor as usize] = None;
        Ok(())
    }
}

/// Writes `v` as element `k` of `bytes` (a `T` buffer) if it fits `T`.
fn store_int<T: Element + TryFrom<i64>>(bytes: &mut [u8], k: usize, v: i64) -> bool {
    match T::try_from(v) {
        Ok(x) => {
            bytemuck::cast_slice_mut::<u8, T>(bytes)[k] = x;
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attached_buffer_is_written_in_place_and_detached_without_a_trace() {
        let module = pto_wsp_ir::parse("tensor A: f32[2, 3];\ntensor B: f32[4];").expect("parses");
        let mut store = TensorStore::new(&module, &Bindings::new()).expect("allocates");
        let mut mine = vec![9.0f32; 6];
        let ptr = NonNull::new(mine.as_mut_ptr().cast::<u8>()).expect("non-null");
        // SAFETY: `mine` lives to the end of the test and is not touched until detached.
        let short = unsafe { store.attach_external(0, ptr, 20) };
        assert!(
            matches!(short, Err(StoreError::External { .. })),
            "{short:?}"
        );
        // SAFETY: as above, with the tensor's exact size.
        unsafe { store.attach_external(0, ptr, 24) }.expect("fits");
        assert_eq!(store.read::<f32>("A").expect("reads"), vec![9.0; 6]);
        store
            .write("A", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
            .expect("writes");
        store.detach_external(0).expect("detaches");
        assert_eq!(mine, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(store.read::<f32>("A").expect("reads"), vec![0.0; 6]);
        store.write("A", &[7.0f32; 6]).expect("writes");
        assert_eq!(mine, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    /// A promised fill reads as the eager fill everywhere: through views of regions (a column
    /// tile of a matrix, from two threads at once), parts, whole reads, clones and `.npy`; a
    /// whole write drops the promise; nothing unread is made.
    #[test]
    fn a_lazy_fill_reads_as_the_eager_fill() {
        let text = "tensor W: f16[1024, 1536];\ntensor K: f32[8, 4096, 16];\ntensor s: f32[4];";
        let module = pto_wsp_ir::parse(text).expect("parses");
        let b = Bindings::new();
        let range = [(
            0u32,
            SeedRange {
                lo: -0.25,
                hi: 0.25,
            },
        )];
        let mut eager = TensorStore::new(&module, &b).expect("allocates");
        eager.fill_random_ranged(5, &[], &range);
        let mut lazy = TensorStore::new(&module, &b).expect("allocates");
        lazy.fill_random_lazy(5, &[], &range);
        assert!(lazy.lazy[0].is_some() && lazy.lazy[1].is_some() && lazy.lazy[2].is_none());
        // Two tasks' column tiles of W, viewed at once from two threads.
        let tiles: Vec<Vec<TaskIo>> = (0..2i64)
            .map(|c| {
                let r = pto_wsp_ir::task_io::Region::new(0, &[0, c * 128], &[1024, 128]).unwrap();
                vec![TaskIo::new(r, pto_wsp_ir::Access::In)]
            })
            .collect();
        let seen: Vec<Vec<half::f16>> = std::thread::scope(|s| {
            let hs: Vec<_> = tiles
                .iter()
                .enumerate()
                .map(|(e, io)| {
                    let lazy = &lazy;
                    s.spawn(move || {
                        // SAFETY: both contexts only read; nothing writes the store meanwhile.
                        let ctx = unsafe { crate::TaskContext::new(lazy, 0, e as u32, &[], io) };
                        let v = ctx.read::<half::f16>(0).expect("a view");
                        (0..v.rows()).flat_map(|r| v.row(r).to_vec()).collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("joins")).collect()
        });
        let w: &[half::f16] = bytemuck::cast_slice(eager.bytes(0));
        for (c, got) in seen.iter().enumerate() {
            let want: Vec<half::f16> = (0..1024)
                .flat_map(|r| w[r * 1536 + c * 128..r * 1536 + c * 128 + 128].to_vec())
                .collect();
            assert!(*got == want, "tile {c}");
        }
        // A part of K: only its chunks are made.
        let part = 3 * 4096 * 16 * 4 + 1000..3 * 4096 * 16 * 4 + 9000;
        assert_eq!(lazy.bytes_in(1, part.clone()), &eager.bytes(1)[part]);
        let unread = &lazy.bufs[1].as_slice()[..4096];
        assert!(unread.iter().all(|&x| x == 0), "nothing unread is made");
        let copy = lazy.clone();
        for t in 0..3u32 {
            assert_eq!(copy.bytes(t), eager.bytes(t), "clone, tensor {t}");
            assert_eq!(lazy.bytes(t), eager.bytes(t), "tensor {t}");
        }
        let mut fresh = TensorStore::new(&module, &b).expect("allocates");
        fresh.fill_random_lazy(5, &[], &range);
        assert_eq!(fresh.to_npy("K").unwrap(), eager.to_npy("K").unwrap());
        fresh
            .write("W", &vec![half::f16::ONE; 1024 * 1536])
            .unwrap();
        assert!(fresh.lazy[0].is_none());
        assert!(
            fresh
                .read::<half::f16>("W")
                .unwrap()
                .iter()
                .all(|&v| v == half::f16::ONE)
        );
    }

    #[test]
    fn specs_give_each_tensor_its_alignment() {
        let spec = |name: &str, dtype, shape: Vec<u64>, align| TensorSpec {
            name: name.into(),
            dtype,
            shape,
            align,
        };
        let specs = [
            spec("a", DType::F32, vec![3, 5], 512),
            spec("b", DType::U8, vec![7], 1),
            spec("c", DType::I64, vec![2, 2], 4096),
            spec("d", DType::F16, vec![MAP_MIN as u64], 2048),
        ];
        let mut store = TensorStore::from_specs(&specs).unwrap();
        for (i, s) in specs.iter().enumerate() {
            let t = i as u32;
            assert_eq!(store.align(t), s.align.max(ALIGN));
            assert_eq!(store.bytes(t).as_ptr() as usize % s.align, 0, "{}", s.name);
            assert_eq!(store.info(t).shape, s.shape);
            assert!(store.bytes(t).iter().all(|&x| x == 0));
        }
        store.write("a", &[1.5f32; 15]).unwrap();
        let copy = store.clone();
        assert_eq!(copy.read::<f32>("a").unwrap(), vec![1.5; 15]);
        assert_eq!(copy.bytes(0).as_ptr() as usize % 512, 0);
        let bad = TensorStore::from_specs(&[spec("x", DType::U8, vec![4], 48)]).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "tensor `x`: alignment 48 is not a power of two of at most 4096 bytes"
        );
        let big = TensorStore::from_specs(&[spec("y", DType::U8, vec![4], 8192)]).unwrap_err();
        assert!(matches!(big, StoreError::Alignment { align: 8192, .. }));
    }

    #[test]
    fn buffers_are_aligned_zeroed_and_writable() {
        for size in [0, 1, 3, 64, 1000, MAP_MIN - 1, MAP_MIN, MAP_MIN + 3] {
            let mut b = Buffer::zeroed(Layout::from_size_align(size, ALIGN).unwrap()).unwrap();
            assert_eq!(b.map.is_some(), size >= MAP_MIN, "{size}");
            assert_eq!(b.ptr.as_ptr() as usize % ALIGN, 0);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            if let Some(last) = b.as_mut_slice().last_mut() {
                *last = 7;
            }
            assert_eq!(b.as_slice().last().copied(), (size > 0).then_some(7));
        }
    }
}
