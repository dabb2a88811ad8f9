//! The AIE device table: one row per device a spatial map may name, with the resources the
//! mapper budgets and the facts the MLIR emitter writes.
//!
//! Why: the validator (is the device known, does the grid fit), the mapper (memory, DMA
//! channels, locks, buffer descriptors per tile), the throughput model (stream width) and the
//! emitter (the device's spelling and number) all need the same facts; they read this one table.
//!
//! Promise: every figure is a fact of the device family, from mlir-aie's target models
//! (`lib/Dialect/AIE/IR/AIETargetModel.h`, `AIETargetModel.cpp`: six rows — shim row 0, memory
//! tiles row 1, compute rows 2 to 5 —, 64 KiB of data memory per compute tile, 512 KiB per memory
//! tile, 2 / 6 / 2 DMA channels each way on compute / memory / shim tiles, 16 / 64 / 16 locks, 16 /
//! 48 / 16 buffer descriptors), its device enumeration (`include/aie/Dialect/AIE/IR/AIEAttrs.td`,
//! the numbering of the spelling generation the emitter writes) and AMD's AIE-ML architecture
//! manual (a 32-bit stream per cycle on AIE-ML, 64-bit on AIE-ML v2).

/// Resources of one kind of tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileResources {
    /// Data memory in bytes (0: the tile has none the mapper may allocate, a shim tile).
    pub memory: u64,
    /// DMA channels from the stream into memory (S2MM).
    pub s2mm: u32,
    /// DMA channels from memory onto the stream (MM2S).
    pub mm2s: u32,
    /// Semaphore locks.
    pub locks: u32,
    /// Buffer descriptors.
    pub bds: u32,
}

/// One AIE device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// The name a spatial map writes and `aie.device(...)` spells (`npu1_4col`).
    pub name: &'static str,
    /// The family and silicon, for reports.
    pub family: &'static str,
    /// Columns of tiles.
    pub columns: u32,
    /// The row of the shim tiles.
    pub shim_row: u32,
    /// The row of the memory tiles.
    pub mem_row: u32,
    /// The first row of compute tiles.
    pub first_compute_row: u32,
    /// Rows of compute tiles.
    pub compute_rows: u32,
    /// A compute tile.
    pub compute: TileResources,
    /// A memory tile.
    pub mem_tile: TileResources,
    /// A shim tile.
    pub shim: TileResources,
    /// Bytes of a compute tile's memory a core's stack takes (mlir-aie's default `stack_size`).
    pub stack: u64,
    /// Bytes a stream moves per cycle.
    pub stream_bytes_per_cycle: u64,
    /// The device's number in the generic form's `device` property.
    pub enum_value: u32,
}

impl Device {
    /// Compute tiles on the device.
    pub fn compute_tiles(&self) -> u64 {
        u64::from(self.columns) * u64::from(self.compute_rows)
    }

    /// What kind of tile (`col`, `row`) is, if it is on the device.
    pub fn tile_kind(&self, col: u32, row: u32) -> Option<TileKind> {
        if col >= self.columns {
            None
        } else if row == self.shim_row {
            Some(TileKind::Shim)
        } else if row == self.mem_row {
            Some(TileKind::Mem)
        } else if row >= self.first_compute_row && row < self.first_compute_row + self.compute_rows
        {
            Some(TileKind::Compute)
        } else {
            None
        }
    }

    /// The resources of a tile of kind `kind`.
    pub fn resources(&self, kind: TileKind) -> &TileResources {
        match kind {
            TileKind::Compute => &self.compute,
            TileKind::Mem => &self.mem_tile,
            TileKind::Shim => &self.shim,
        }
    }

    /// Whether the core of compute tile `core` may read and write the data memory of compute
    /// tile `mem` (AIE-ML: its own, the west, north and south neighbours' — the south one only
    /// when it is a compute tile; `AIE2TargetModel::isLegalMemAffinity`).
    pub fn core_reaches(&self, core: (u32, u32), mem: (u32, u32)) -> bool {
        let compute = |(c, r): (u32, u32)| self.tile_kind(c, r) == Some(TileKind::Compute);
        if !compute(core) || !compute(mem) {
            return false;
        }
        let (cc, cr) = core;
        mem == core
            || (cc > 0 && mem == (cc - 1, cr))
            || mem == (cc, cr + 1)
            || (cr > 0 && mem == (cc, cr - 1))
    }
}

/// The kinds of tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TileKind {
    /// A shim tile (row 0): DMA to and from host memory.
    Shim,
    /// A memory tile (row 1): 512 KiB of memory and DMAs, no core.
    Mem,
    /// A compute tile: a core and its data memory.
    Compute,
}

impl TileKind {
    /// The word reports use (`shim`, `memory`, `compute`).
    pub fn word(self) -> &'static str {
        match self {
            TileKind::Shim => "shim",
            TileKind::Mem => "memory",
            TileKind::Compute => "compute",
        }
    }
}

const COMPUTE: TileResources = TileResources {
    memory: 64 * 1024,
    s2mm: 2,
    mm2s: 2,
    locks: 16,
    bds: 16,
};

const MEM_TILE: TileResources = TileResources {
    memory: 512 * 1024,
    s2mm: 6,
    mm2s: 6,
    locks: 64,
    bds: 48,
};

const SHIM: TileResources = TileResources {
    memory: 0,
    s2mm: 2,
    mm2s: 2,
    locks: 16,
    bds: 16,
};

const fn npu1(name: &'static str, columns: u32, enum_value: u32) -> Device {
    Device {
        name,
        family: "npu1 (AIE-ML: Phoenix, Hawk Point)",
        columns,
        shim_row: 0,
        mem_row: 1,
        first_compute_row: 2,
        compute_rows: 4,
        compute: COMPUTE,
        mem_tile: MEM_TILE,
        shim: SHIM,
        stack: 1024,
        stream_bytes_per_cycle: 4,
        enum_value,
    }
}

/// Every device a spatial map may name.
pub const DEVICES: &[Device] = &[
    npu1("npu1_1col", 1, 5),
    npu1("npu1_2col", 2, 6),
    npu1("npu1_3col", 3, 7),
    npu1("npu1_4col", 4, 8),
    Device {
        name: "npu2",
        family: "npu2 (AIE-ML v2: Strix, Strix Halo, Krackan)",
        columns: 8,
        stream_bytes_per_cycle: 8,
        enum_value: 9,
        ..npu1("npu2", 8, 9)
    },
];

/// The device named `name`.
pub fn device(name: &str) -> Option<&'static Device> {
    DEVICES.iter().find(|d| d.name == name)
}

/// Every device name, comma-separated (for messages).
pub fn device_names() -> String {
    DEVICES
        .iter()
        .map(|d| d.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_follow_the_aie_ml_rule() {
        let d = device("npu1_4col").unwrap();
        assert!(d.core_reaches((1, 3), (1, 2))); // south, a compute tile
        assert!(!d.core_reaches((1, 2), (1, 1))); // south is the memory tile
        assert!(d.core_reaches((1, 3), (1, 4))); // north
        assert!(d.core_reaches((1, 3), (0, 3))); // west
        assert!(!d.core_reaches((0, 3), (1, 3))); // east is not reachable
        assert!(!d.core_reaches((0, 2), (0, 4)));
        assert_eq!(d.compute_tiles(), 16);
        assert_eq!(device("npu2").unwrap().compute_tiles(), 32);
    }
}
