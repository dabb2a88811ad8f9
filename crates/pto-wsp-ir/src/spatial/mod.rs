//! Spatial maps: where a workload or pipeline runs on a spatial array of compute tiles, and how
//! its tensors are laid out over that array.
//!
//! Why: a spatial accelerator (an AMD AIE array: compute tiles with local memory, memory tiles
//! and shim tiles, joined by streams) runs each part of a program on its own tile. Which part
//! goes where, and which block of each tensor a tile owns, is a decision separate from what the
//! program computes, like a schedule: a [`SpatialMap`] names the grid of compute tiles an entry
//! point is mapped to, which parallel loop variables index the grid (workloads), which grid
//! cell runs each process (pipelines), and per tensor a [`Layout`] (each dimension sharded over
//! a grid axis or replicated). This module is the IR only — what was written, names unresolved;
//! the validator checks it (`validate/spatial.rs`), the printer spells it (`print.rs`), and the
//! AIE back end (`pto-wsp-backends`) maps and lowers it.
//!
//! Promise: a spatial map changes no task and no number: every other consumer (the expander,
//! the CPU simulation, the bytecode) ignores it. Locations are metadata, as everywhere in the
//! IR. The devices a map may name and their resources are the one table of [`device`].

pub mod device;

use crate::loc::{Ident, Loc};

/// `spatial_map NAME for ENTRY { device D; grid R x C; tile V -> row; place P at (r, c);
/// layout T(shard row, replicate); }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpatialMap {
    /// The map's name.
    pub name: Ident,
    /// The workload or pipeline it maps.
    pub entry: Ident,
    /// `device NAME;`: a device of [`device::DEVICES`] (checked by the validator).
    pub device: Option<Ident>,
    /// `grid ROWS x COLS;`: the compute tiles used.
    pub grid: Option<Grid>,
    /// `tile VAR -> AXIS;` (workloads): a parallel loop variable indexing a grid axis.
    pub tiles: Vec<TileVar>,
    /// `place PROCESS at (ROW, COL);` (pipelines): a process pinned to a grid cell.
    pub places: Vec<Place>,
    /// `layout TENSOR(DIM, ...);`: how a tensor is distributed over the grid.
    pub layouts: Vec<Layout>,
    /// Where the declaration was written.
    pub loc: Loc,
}

/// `grid ROWS x COLS;`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Rows of compute tiles (grid axis `row`).
    pub rows: u64,
    /// Columns of compute tiles (grid axis `col`).
    pub cols: u64,
    /// Where it was written.
    pub loc: Loc,
}

impl Grid {
    /// The extent of grid axis `axis`.
    pub fn extent(&self, axis: GridAxis) -> u64 {
        match axis {
            GridAxis::Row => self.rows,
            GridAxis::Col => self.cols,
        }
    }
}

/// An axis of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GridAxis {
    /// Grid rows (a compute tile's row on the device).
    Row,
    /// Grid columns (a device column).
    Col,
}

crate::types::keyword_impl!(GridAxis {
    Row = "row",
    Col = "col",
});

/// `tile VAR -> AXIS;`: iteration `v` of the parallel loop binding `VAR` runs on the grid cells
/// whose `AXIS` coordinate is `v`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileVar {
    /// The loop variable.
    pub var: Ident,
    /// The grid axis it indexes.
    pub axis: GridAxis,
}

/// `place PROCESS at (ROW, COL);`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    /// The process.
    pub process: Ident,
    /// Grid row.
    pub row: u64,
    /// Grid column.
    pub col: u64,
    /// Where it was written.
    pub loc: Loc,
}

/// `layout TENSOR(DIM, ...);`: one entry per tensor dimension.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The tensor.
    pub tensor: Ident,
    /// Per dimension, outermost first.
    pub dims: Vec<LayoutDim>,
    /// Where it was written.
    pub loc: Loc,
}

/// How one tensor dimension is distributed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutDim {
    /// `shard AXIS`: the dimension is cut into as many equal blocks as the grid axis has cells;
    /// block `k` belongs to the cells whose `AXIS` coordinate is `k`.
    Shard(GridAxis),
    /// `replicate`: every cell sees the whole dimension.
    Replicate,
}

impl std::fmt::Display for LayoutDim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutDim::Shard(a) => write!(f, "shard {a}"),
            LayoutDim::Replicate => f.write_str("replicate"),
        }
    }
}

impl std::fmt::Display for Layout {
    /// `T(shard row, replicate)` (no `layout` keyword, no `;`: the form messages quote).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}(", self.tensor)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str(")")
    }
}

impl SpatialMap {
    /// The layout declared for `tensor`.
    pub fn layout(&self, tensor: &str) -> Option<&Layout> {
        self.layouts.iter().find(|l| l.tensor.name == tensor)
    }

    /// The grid axis loop variable `var` indexes.
    pub fn tile_axis(&self, var: &str) -> Option<GridAxis> {
        self.tiles
            .iter()
            .find(|t| t.var.name == var)
            .map(|t| t.axis)
    }

    /// The grid cell process `process` is pinned to.
    pub fn place(&self, process: &str) -> Option<(u64, u64)> {
        self.places
            .iter()
            .find(|p| p.process.name == process)
            .map(|p| (p.row, p.col))
    }
}
