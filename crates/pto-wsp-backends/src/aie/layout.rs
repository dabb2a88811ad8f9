//! The layout analyzer: which grid cells hold which part of a tensor under its layout.
//!
//! Why: a spatial map lays each tensor out over the grid (`layout A(shard row, replicate)`):
//! every sharded dimension is cut into as many equal blocks as its grid axis has cells, and a
//! grid axis no dimension shards is one along which the tensor is replicated. The mapper places
//! a workload's tasks by the cells their regions live on, and must refuse a task whose regions
//! live on different cells (a layout mismatch, naming both tensors).
//!
//! Promise: [`TensorLayout::get_tile`] and [`TensorLayout::get_local_idx`] are total on
//! in-bounds indices; every global index lies in exactly the local slices of the cells
//! `get_tile` names, at `get_local_idx` (tested against an enumeration of the slices).

use pto_wsp_ir::spatial::{GridAxis, Layout, LayoutDim};

/// A set of grid cells: per axis one coordinate, or every cell along it (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TileSet {
    /// The grid row, or every row.
    pub row: Option<u64>,
    /// The grid column, or every column.
    pub col: Option<u64>,
}

impl TileSet {
    fn axis(&mut self, axis: GridAxis) -> &mut Option<u64> {
        match axis {
            GridAxis::Row => &mut self.row,
            GridAxis::Col => &mut self.col,
        }
    }

    /// Whether cell (`row`, `col`) is in the set.
    pub fn contains(&self, row: u64, col: u64) -> bool {
        self.row.is_none_or(|r| r == row) && self.col.is_none_or(|c| c == col)
    }

    /// The cells in both sets, or `None` when they share none.
    pub fn meet(&self, other: &TileSet) -> Option<TileSet> {
        let one = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) if x != y => Err(()),
            (Some(x), _) | (_, Some(x)) => Ok(Some(x)),
            (None, None) => Ok(None),
        };
        Some(TileSet {
            row: one(self.row, other.row).ok()?,
            col: one(self.col, other.col).ok()?,
        })
    }
}

impl std::fmt::Display for TileSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.row, self.col) {
            (Some(r), Some(c)) => write!(f, "grid cell ({r}, {c})"),
            (Some(r), None) => write!(f, "grid row {r}"),
            (None, Some(c)) => write!(f, "grid column {c}"),
            (None, None) => f.write_str("every grid cell"),
        }
    }
}

/// One tensor's layout over a grid, with the tensor's extents known.
#[derive(Clone, Debug)]
pub struct TensorLayout {
    /// The layout as written (`A(shard row, replicate)`).
    pub text: String,
    /// Per dimension.
    pub dims: Vec<LayoutDim>,
    /// The tensor's extents.
    pub shape: Vec<u64>,
    /// Per dimension, the block a cell holds (the extent when replicated).
    pub block: Vec<u64>,
}

impl TensorLayout {
    /// The layout `l` of a tensor of extents `shape` on a grid of `grid` (rows, columns); an
    /// error when a sharded extent is not a multiple of its grid axis or the ranks differ.
    pub fn new(l: &Layout, shape: &[u64], grid: (u64, u64)) -> Result<TensorLayout, String> {
        if l.dims.len() != shape.len() {
            return Err(format!(
                "layout `{l}` gives {} dimension(s); tensor `{}` has {}",
                l.dims.len(),
                l.tensor,
                shape.len()
            ));
        }
        let mut block = Vec::with_capacity(shape.len());
        for (d, (dim, &n)) in l.dims.iter().zip(shape).enumerate() {
            block.push(match dim {
                LayoutDim::Replicate => n,
                LayoutDim::Shard(a) => {
                    let cells = extent(grid, *a);
                    if !n.is_multiple_of(cells) {
                        return Err(format!(
                            "tensor `{}` dimension {d} has {n} elements, not a multiple of grid axis `{a}` ({cells} cells)",
                            l.tensor
                        ));
                    }
                    n / cells
                }
            });
        }
        Ok(TensorLayout {
            text: l.to_string(),
            dims: l.dims.clone(),
            shape: shape.to_vec(),
            block,
        })
    }

    /// The box (start, size per dimension) cell (`row`, `col`) holds.
    pub fn local_slice(&self, row: u64, col: u64) -> Vec<(u64, u64)> {
        self.dims
            .iter()
            .zip(&self.block)
            .map(|(d, &b)| match d {
                LayoutDim::Replicate => (0, b),
                LayoutDim::Shard(GridAxis::Row) => (row * b, b),
                LayoutDim::Shard(GridAxis::Col) => (col * b, b),
            })
            .collect()
    }

    /// The cells holding global index `idx`.
    pub fn get_tile(&self, idx: &[u64]) -> TileSet {
        let mut t = TileSet::default();
        for ((d, &b), &i) in self.dims.iter().zip(&self.block).zip(idx) {
            if let LayoutDim::Shard(a) = d {
                *t.axis(*a) = Some(i / b);
            }
        }
        t
    }

    /// Where global index `idx` lies in its cells' local slices.
    pub fn get_local_idx(&self, idx: &[u64]) -> Vec<u64> {
        self.dims
            .iter()
            .zip(&self.block)
            .zip(idx)
            .map(|((d, &b), &i)| match d {
                LayoutDim::Replicate => i,
                LayoutDim::Shard(_) => i % b,
            })
            .collect()
    }

    /// The cells holding the whole region (`start`, `size`), or why no cell does (the region
    /// spans two blocks of a sharded dimension).
    pub fn region_tiles(&self, start: &[u64], size: &[u64]) -> Result<TileSet, String> {
        let first = self.get_tile(start);
        let last: Vec<u64> = start.iter().zip(size).map(|(s, n)| s + n - 1).collect();
        let end = self.get_tile(&last);
        if first != end {
            return Err(format!(
                "it spans {first} and {end} under layout `{}`",
                self.text
            ));
        }
        Ok(first)
    }
}

/// The extent of grid axis `a`.
pub fn extent(grid: (u64, u64), a: GridAxis) -> u64 {
    match a {
        GridAxis::Row => grid.0,
        GridAxis::Col => grid.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_wsp_ir::loc::{Ident, Loc};

    fn layout(dims: Vec<LayoutDim>) -> Layout {
        Layout {
            tensor: Ident::new("T"),
            dims,
            loc: Loc::NONE,
        }
    }

    #[test]
    fn every_index_lies_in_exactly_the_slices_get_tile_names() {
        use GridAxis::*;
        use LayoutDim::*;
        let grid = (2, 4);
        for dims in [
            vec![Shard(Row), Replicate],
            vec![Replicate, Shard(Col)],
            vec![Shard(Row), Shard(Col)],
            vec![Shard(Col), Shard(Row)],
            vec![Replicate, Replicate],
        ] {
            let l = TensorLayout::new(&layout(dims.clone()), &[8, 12], grid).unwrap();
            for i in 0..8 {
                for j in 0..12 {
                    let t = l.get_tile(&[i, j]);
                    for r in 0..grid.0 {
                        for c in 0..grid.1 {
                            let s = l.local_slice(r, c);
                            let inside = s
                                .iter()
                                .zip([i, j])
                                .all(|(&(st, n), x)| x >= st && x < st + n);
                            assert_eq!(
                                inside,
                                t.contains(r, c),
                                "{dims:?} ({i}, {j}) cell ({r}, {c})"
                            );
                            if inside {
                                let local = l.get_local_idx(&[i, j]);
                                assert_eq!(local, vec![i - s[0].0, j - s[1].0]);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_region_across_two_blocks_and_bad_extents_are_refused() {
        let l = TensorLayout::new(
            &layout(vec![LayoutDim::Shard(GridAxis::Row), LayoutDim::Replicate]),
            &[128, 128],
            (4, 4),
        )
        .unwrap();
        assert_eq!(
            l.region_tiles(&[32, 0], &[32, 32]).unwrap(),
            TileSet {
                row: Some(1),
                col: None
            }
        );
        assert_eq!(
            l.region_tiles(&[16, 0], &[32, 32]).unwrap_err(),
            "it spans grid row 0 and grid row 1 under layout `T(shard row, replicate)`"
        );
        let e = TensorLayout::new(
            &layout(vec![LayoutDim::Shard(GridAxis::Row)]),
            &[10],
            (4, 4),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "tensor `T` dimension 0 has 10 elements, not a multiple of grid axis `row` (4 cells)"
        );
    }
}
