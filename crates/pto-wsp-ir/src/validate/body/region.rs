//! Checks of a region passed to a task: its dimension expressions, its rank and bounds against
//! the tensor, and how it fits the tile parameter it is passed to ([`TileFit`]).

use super::{BodyCx, TileUse};
use crate::loc::Loc;
use crate::module::{ParamKind, TensorDecl};
use crate::validate::errors::ValidationError;
use crate::validate::typeck::{self, Expected};
use crate::validate::{Validator, Want, pick};
use crate::workload::Region;

/// The constant `(start, size)` of each dimension of a region, where known.
type Consts = Vec<(Option<i64>, Option<i64>)>;

impl<'m> Validator<'m> {
    pub(super) fn check_region(
        &mut self,
        r: &'m Region,
        tile: Option<TileUse<'m>>,
        loc: Loc,
        cx: &BodyCx<'m>,
    ) {
        let path = cx.path();
        let rloc = pick(r.tensor.loc, loc);
        // Dimension expressions are checked whatever the tensor.
        let consts = self.region_dims(r, rloc, cx);
        let td = self
            .lookup(&r.tensor, Want::Tensor, &path)
            .and_then(|i| self.m.tensors.get(i));
        if let Some(td) = td {
            self.region_bounds(r, td, &consts, rloc, &path);
        }
        if let Some(tile) = tile {
            self.region_tile(r, td, &tile, &consts, rloc, path);
        }
    }

    /// Checks each dimension's start and size; returns their constant values.
    fn region_dims(&mut self, r: &'m Region, rloc: Loc, cx: &BodyCx<'m>) -> Consts {
        let path = cx.path();
        let tname = &r.tensor.name;
        let mut consts = Vec::with_capacity(r.dims.len());
        for (d, dim) in r.dims.iter().enumerate() {
            let ctx = || format!("the start of dimension {d} of the region of `{tname}`");
            self.body_expr(&dim.start, Some(Expected::Integer), &ctx, rloc, cx);
            let start = typeck::const_value(&dim.start);
            let size = match &dim.size {
                Some(e) => {
                    let ctx = || format!("the size of dimension {d} of the region of `{tname}`");
                    self.body_expr(e, Some(Expected::Integer), &ctx, rloc, cx);
                    typeck::const_value(e)
                }
                None => Some(1),
            };
            if let Some(s) = start
                && s < 0
            {
                self.push(ValidationError::NegativeRegionStart {
                    tensor: tname.clone(),
                    dim: d,
                    start: s,
                    loc: rloc,
                    path: path.clone(),
                });
            }
            if let Some(s) = size
                && s < 1
            {
                self.push(ValidationError::BadRegionSize {
                    tensor: tname.clone(),
                    dim: d,
                    size: s,
                    loc: rloc,
                    path: path.clone(),
                });
            }
            consts.push((start, size));
        }
        consts
    }

    /// The region's rank, and its constant dimensions inside the tensor's constant extents.
    fn region_bounds(
        &mut self,
        r: &'m Region,
        td: &'m TensorDecl,
        consts: &Consts,
        rloc: Loc,
        path: &str,
    ) {
        let tname = &r.tensor.name;
        if td.shape.len() != r.dims.len() {
            self.push(ValidationError::RegionRank {
                tensor: tname.clone(),
                dims: r.dims.len(),
                rank: td.shape.len(),
                loc: rloc,
                path: path.to_string(),
            });
        }
        for (d, (&(start, size), extent)) in consts.iter().zip(&td.shape).enumerate() {
            if let (Some(start), Some(size), Some(extent)) =
                (start, size, typeck::const_value(extent))
                && start >= 0
                && size >= 1
                && i128::from(start) + i128::from(size) > i128::from(extent)
            {
                self.push(ValidationError::RegionOutOfBounds {
                    tensor: tname.clone(),
                    dim: d,
                    start,
                    size,
                    extent,
                    loc: rloc,
                    path: path.to_string(),
                });
            }
        }
    }

    /// The region against the tile parameter it is passed to: element type and shape.
    fn region_tile(
        &mut self,
        r: &'m Region,
        td: Option<&'m TensorDecl>,
        tile: &TileUse<'m>,
        consts: &Consts,
        rloc: Loc,
        path: String,
    ) {
        let tname = &r.tensor.name;
        let ParamKind::Tile { dtype, shape, .. } = &tile.param.kind else {
            return;
        };
        let kname = &tile.kernel.name.name;
        let pname = &tile.param.name.name;
        if let Some(td) = td
            && td.dtype != *dtype
        {
            self.push(ValidationError::DTypeMismatch {
                kernel: kname.clone(),
                index: tile.index,
                param: pname.clone(),
                expected: *dtype,
                tensor: tname.clone(),
                found: td.dtype,
                loc: rloc,
                path: path.clone(),
            });
        }
        let n = r.dims.len();
        let sizes: Vec<Option<i64>> = (0..n)
            .map(|d| consts.get(d).and_then(|&(_, size)| size))
            .collect();
        let fit = TileFit::new(&sizes, shape);
        if fit.fits() {
            return;
        }
        let fits = format!("{dtype}{}", natural_shape(&sizes));
        let Some(report) = fit.report() else {
            self.push(ValidationError::TileRank {
                kernel: kname.clone(),
                param: pname.clone(),
                tile: shape.len(),
                tensor: tname.clone(),
                dims: n,
                fits,
                loc: rloc,
                path,
            });
            return;
        };
        for (d, size, expected) in report {
            self.push(ValidationError::TileShapeMismatch {
                tensor: tname.clone(),
                dim: d,
                size,
                kernel: kname.clone(),
                param: pname.clone(),
                expected,
                fits: fits.clone(),
                loc: rloc,
                path: path.clone(),
            });
        }
    }
}

/// How a region's sizes (`None`: not a constant) match a tile parameter's shape (`None`: `?`).
///
/// The rule (docs/FORMAT.md, "Tiles and regions"): the tile's dimensions are matched against the
/// region's from the right, either as written, or with the unit dimensions of both left out
/// (the last dimension is always kept: it is the row a kernel reads). So
/// `K[r, c * 512 +: 512, g, 0 +: 128]` (sizes `[1, 512, 1, 128]`) fits `f32[512, 128]` as well
/// as `f32[512, 1, 128]`. A kernel sees every region as rows (the product of the outer sizes)
/// by the last dimension, so both readings give it the same view.
struct TileFit {
    /// The mismatches when matched as written: (region dimension, its size, the tile's size).
    aligned: Option<Vec<(usize, i64, u64)>>,
    /// The mismatches with unit dimensions left out, in the same form.
    squeezed: Option<Vec<(usize, i64, u64)>>,
}

impl TileFit {
    fn new(sizes: &[Option<i64>], tile: &[Option<u64>]) -> TileFit {
        let all: Vec<usize> = (0..sizes.len()).collect();
        let aligned = mismatches(sizes, &all, tile);
        let kept = squeeze(&all, |&d| sizes[d] == Some(1));
        let tile = squeeze(tile, |s| *s == Some(1));
        let squeezed = mismatches(sizes, &kept, &tile);
        TileFit { aligned, squeezed }
    }

    fn fits(&self) -> bool {
        [&self.aligned, &self.squeezed]
            .iter()
            .any(|m| m.as_ref().is_some_and(Vec::is_empty))
    }

    /// The mismatches to report: with unit dimensions left out when that lines the ranks up,
    /// else as written; `None` if the tile has more dimensions than the region either way.
    fn report(self) -> Option<Vec<(usize, i64, u64)>> {
        self.squeezed.or(self.aligned)
    }
}

/// The dimensions `dims` of a region with `sizes` whose constant size differs from `tile`'s,
/// matched from the right; `None` if the tile has more dimensions.
fn mismatches(
    sizes: &[Option<i64>],
    dims: &[usize],
    tile: &[Option<u64>],
) -> Option<Vec<(usize, i64, u64)>> {
    let skip = dims.len().checked_sub(tile.len())?;
    Some(
        dims[skip..]
            .iter()
            .zip(tile)
            .filter_map(|(&d, want)| match (want, sizes[d]) {
                (Some(want), Some(size))
                    if size >= 1 && u64::try_from(size).ok() != Some(*want) =>
                {
                    Some((d, size, *want))
                }
                _ => None,
            })
            .collect(),
    )
}

/// `dims` without the unit ones, except the last.
fn squeeze<T: Copy>(dims: &[T], unit: impl Fn(&T) -> bool) -> Vec<T> {
    let last = dims.len().saturating_sub(1);
    dims.iter()
        .enumerate()
        .filter(|&(i, d)| i == last || !unit(d))
        .map(|(_, d)| *d)
        .collect()
}

/// The tile shape a region of these sizes fits with its unit dimensions left out (`[512, 128]`;
/// `?` where a size is not a constant).
fn natural_shape(sizes: &[Option<i64>]) -> String {
    let dims: Vec<String> = squeeze(sizes, |s| *s == Some(1))
        .iter()
        .map(|s| s.map_or("?".to_string(), |s| s.to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}
