//! The placed design (`AieDesign`): what the spatial mapper decided, in one structure.
//!
//! Why: the MLIR printers, the `--report` tables, the functional simulation and the throughput
//! model all describe the same placement and routing. Each reads this structure and none looks
//! at the workload again, so they cannot disagree about what was placed.
//!
//! Promise: a design the mapper returns fits its device (every tile's memory, DMA channels,
//! locks and buffer descriptors are within the device table's limits), every fifo is acquired
//! and released the same number of times by its producer and each consumer, and every host
//! transfer is a legal strided pattern of at most four dimensions.

use pto_wsp_ir::DType;
use pto_wsp_ir::spatial::device::{Device, TileKind};
use pto_wsp_ir::value::Value;

/// A tile: (column, row).
pub type TileId = (u32, u32);

/// The placed design of one entry point on one device.
#[derive(Clone, Debug)]
pub struct AieDesign {
    /// The device (a row of the device table).
    pub device: &'static Device,
    /// The entry point's name.
    pub entry: String,
    /// The spatial map's grid (rows, columns).
    pub grid: (u64, u64),
    /// The kernels the cores call, in first-call order.
    pub kernels: Vec<KernelSig>,
    /// Every tile the design uses, sorted by column, then row.
    pub tiles: Vec<TileId>,
    /// The ObjectFIFOs, in creation order.
    pub fifos: Vec<Fifo>,
    /// Links in memory tiles (one-to-one or join).
    pub links: Vec<Link>,
    /// The cores, sorted by tile.
    pub cores: Vec<Core>,
    /// The runtime sequence's arguments: host tensors, in declaration order.
    pub host: Vec<HostArg>,
    /// The runtime sequence: one transfer per shim-ended fifo.
    pub transfers: Vec<Transfer>,
    /// Per tile, the resources the design uses.
    pub budgets: Vec<TileBudget>,
    /// Notes for the report (ring slots not allocated, ...).
    pub notes: Vec<String>,
}

/// A kernel called by the cores: its name, its object and scalar parameter types.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSig {
    /// The kernel's name.
    pub name: String,
    /// The index of its declaration in the module.
    pub decl: usize,
    /// Parameter types in call order.
    pub params: Vec<ArgType>,
}

/// The type of one kernel argument.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgType {
    /// An object of a fifo.
    Object(ObjType),
    /// A scalar: `f32`, `f64`, `i64`, `i1`.
    Scalar(&'static str),
}

/// The type of a fifo's objects: `memref<ROWS x COLS x DTYPE>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjType {
    /// Extents, outermost first.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
}

impl ObjType {
    /// Elements in one object.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes of one object.
    pub fn bytes(&self) -> u64 {
        self.elements() * self.dtype.size_bytes() as u64
    }
}

/// Which end of a fifo a core acquires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Port {
    /// The producer's end: acquire an empty buffer, release it full.
    Produce,
    /// A consumer's end: acquire a full buffer, release it empty.
    Consume,
}

/// How a fifo moves its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoKind {
    /// One pool in the memory of `owner`, which both cores reach: no DMA.
    Shared {
        /// The tile holding the pool.
        owner: TileId,
    },
    /// A pool at each end, joined by a stream (DMA channels at both ends).
    Dma,
}

/// One ObjectFIFO.
#[derive(Clone, Debug)]
pub struct Fifo {
    /// Its symbol (`@name`).
    pub name: String,
    /// The producer's tile.
    pub producer: TileId,
    /// The consumers' tiles (several: a broadcast).
    pub consumers: Vec<TileId>,
    /// Buffers per pool.
    pub depth: u64,
    /// The objects' type.
    pub obj: ObjType,
    /// Shared memory or DMA.
    pub kind: FifoKind,
    /// Objects it carries in one run.
    pub objects: u64,
    /// What it carries, for the report (`host X`, `channel loaded (Stage)`, ...).
    pub carries: String,
}

/// An `aie.objectfifo.link` in a memory tile.
#[derive(Clone, Debug)]
pub struct Link {
    /// The memory tile.
    pub tile: TileId,
    /// Input fifos.
    pub ins: Vec<usize>,
    /// Output fifos.
    pub outs: Vec<usize>,
    /// Element offsets of each input in the output object (a join), else empty.
    pub src_offsets: Vec<u64>,
}

/// One core and its program.
#[derive(Clone, Debug)]
pub struct Core {
    /// Its tile.
    pub tile: TileId,
    /// What runs there: `process loader`, `grid cell (1, 2)`.
    pub label: String,
    /// The program, run once per invocation.
    pub program: Vec<Step>,
}

/// One step of a core's program.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// `scf.for` over `count` iterations.
    Loop {
        /// Iterations.
        count: u64,
        /// The body.
        body: Vec<Step>,
    },
    /// Acquire one object of a fifo.
    Acquire {
        /// The fifo.
        fifo: usize,
        /// The end.
        port: Port,
    },
    /// Release one object of a fifo.
    Release {
        /// The fifo.
        fifo: usize,
        /// The end.
        port: Port,
    },
    /// Call a kernel.
    Call {
        /// Index into [`AieDesign::kernels`].
        kernel: usize,
        /// Arguments in call order.
        args: Vec<CallArg>,
    },
}

/// One argument of a call.
#[derive(Clone, Debug, PartialEq)]
pub enum CallArg {
    /// The object the core holds of `fifo` at `port`.
    Object {
        /// The fifo.
        fifo: usize,
        /// The end.
        port: Port,
    },
    /// A constant scalar, and its MLIR type.
    Scalar(Value, &'static str),
}

/// A tensor passed to the runtime sequence.
#[derive(Clone, Debug)]
pub struct HostArg {
    /// The tensor's index in the module.
    pub tensor: u32,
    /// Its name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Its extents.
    pub shape: Vec<u64>,
}

impl HostArg {
    /// Elements of the tensor.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A host transfer (`aiex.npu.dma_memcpy_nd`) feeding or draining a shim-ended fifo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The fifo.
    pub fifo: usize,
    /// Index into [`AieDesign::host`].
    pub host: usize,
    /// Element offset into the flattened tensor.
    pub offset: u64,
    /// Sizes, outermost first.
    pub sizes: [u64; 4],
    /// Strides in elements, outermost first.
    pub strides: [u64; 4],
    /// Host to device (`false`) or device to host (`true`, waited for).
    pub output: bool,
}

impl Transfer {
    /// The flattened element indices the transfer visits, in order.
    pub fn indices(&self) -> impl Iterator<Item = u64> + '_ {
        let [s3, s2, s1, s0] = self.sizes;
        let [t3, t2, t1, t0] = self.strides;
        (0..s3).flat_map(move |a| {
            (0..s2).flat_map(move |b| {
                (0..s1).flat_map(move |c| {
                    (0..s0).map(move |d| self.offset + a * t3 + b * t2 + c * t1 + d * t0)
                })
            })
        })
    }
}

/// What one tile uses.
#[derive(Clone, Debug)]
pub struct TileBudget {
    /// The tile.
    pub tile: TileId,
    /// Its kind.
    pub kind: TileKind,
    /// Pools on the tile: (fifo name, depth, bytes per buffer).
    pub pools: Vec<(String, u64, u64)>,
    /// The core's stack, if the tile runs a core.
    pub stack: u64,
    /// Fifos using an input (S2MM) DMA channel.
    pub s2mm: Vec<String>,
    /// Fifos using an output (MM2S) DMA channel.
    pub mm2s: Vec<String>,
    /// Locks in use.
    pub locks: u64,
    /// Buffer descriptors in use.
    pub bds: u64,
}

impl TileBudget {
    /// Bytes of data memory in use.
    pub fn memory(&self) -> u64 {
        self.pools.iter().map(|(_, d, b)| d * b).sum::<u64>() + self.stack
    }
}

/// How a tile is named in messages and reports: `tile (0, 2)`, `memory tile (1, 1)`,
/// `shim tile (0, 0)`.
pub fn tile_name(device: &Device, t: TileId) -> String {
    match device.tile_kind(t.0, t.1) {
        Some(TileKind::Mem) => format!("memory tile ({}, {})", t.0, t.1),
        Some(TileKind::Shim) => format!("shim tile ({}, {})", t.0, t.1),
        _ => format!("tile ({}, {})", t.0, t.1),
    }
}
