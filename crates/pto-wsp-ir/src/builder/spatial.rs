//! The builder of spatial maps, in Rust. Same promise as the rest of [`crate::builder`]:
//! exactly the IR the parser produces for the same text, every location unknown, nothing
//! checked.
//!
//! ```
//! use pto_wsp_ir::builder::ModuleBuilder;
//! use pto_wsp_ir::spatial::{GridAxis, LayoutDim};
//! use pto_wsp_ir::{DType, parse};
//!
//! let mut m = ModuleBuilder::new();
//! m.tensor("X", DType::F32, [16.into(), 1024.into()]);
//! m.dense("C", 4);
//! m.workload("main", |w| {
//!     w.parallel_for("c", "C", |_| {});
//! });
//! m.spatial_map("columns", "main", |s| {
//!     s.device("npu1_4col").grid(1, 4).tile("c", GridAxis::Col);
//!     s.layout("X", [LayoutDim::Shard(GridAxis::Col), LayoutDim::Replicate]);
//! });
//! let built = m.finish();
//! let text = "tensor X: f32[16, 1024];\naxis C = dense(4);\n\
//!             workload main() { parallel_for c in C { } }\n\
//!             spatial_map columns for main {\n    device npu1_4col;\n    grid 1 x 4;\n\
//!             tile c -> col;\n    layout X(shard col, replicate);\n}\n";
//! assert_eq!(built, parse(text).unwrap());
//! assert!(pto_wsp_ir::validate(&built).is_ok());
//! ```

use super::ModuleBuilder;
use crate::loc::{Ident, Loc};
use crate::spatial::{Grid, GridAxis, Layout, LayoutDim, Place, SpatialMap, TileVar};

impl ModuleBuilder {
    /// `spatial_map NAME for ENTRY { ... }`, its items added by `f`.
    pub fn spatial_map(
        &mut self,
        name: &str,
        entry: &str,
        f: impl FnOnce(&mut SpatialMapBuilder),
    ) -> &mut Self {
        let mut s = SpatialMapBuilder {
            map: SpatialMap {
                name: Ident::new(name),
                entry: Ident::new(entry),
                device: None,
                grid: None,
                tiles: Vec::new(),
                places: Vec::new(),
                layouts: Vec::new(),
                loc: Loc::NONE,
            },
        };
        f(&mut s);
        self.module.spatial_maps.push(s.map);
        self
    }
}

/// Adds the items of one spatial map (see [`ModuleBuilder::spatial_map`]).
pub struct SpatialMapBuilder {
    map: SpatialMap,
}

impl SpatialMapBuilder {
    /// `device NAME;`
    pub fn device(&mut self, name: &str) -> &mut Self {
        self.map.device = Some(Ident::new(name));
        self
    }

    /// `grid ROWS x COLS;`
    pub fn grid(&mut self, rows: u64, cols: u64) -> &mut Self {
        self.map.grid = Some(Grid {
            rows,
            cols,
            loc: Loc::NONE,
        });
        self
    }

    /// `tile VAR -> AXIS;`
    pub fn tile(&mut self, var: &str, axis: GridAxis) -> &mut Self {
        self.map.tiles.push(TileVar {
            var: Ident::new(var),
            axis,
        });
        self
    }

    /// `place PROCESS at (ROW, COL);`
    pub fn place(&mut self, process: &str, row: u64, col: u64) -> &mut Self {
        self.map.places.push(Place {
            process: Ident::new(process),
            row,
            col,
            loc: Loc::NONE,
        });
        self
    }

    /// `layout TENSOR(DIM, ...);`
    pub fn layout(&mut self, tensor: &str, dims: impl IntoIterator<Item = LayoutDim>) -> &mut Self {
        self.map.layouts.push(Layout {
            tensor: Ident::new(tensor),
            dims: dims.into_iter().collect(),
            loc: Loc::NONE,
        });
        self
    }
}
