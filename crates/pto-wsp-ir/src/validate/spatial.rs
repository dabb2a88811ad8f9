//! The checks of spatial maps (`crate::spatial`): the entry point, device and grid exist and
//! fit, every `tile` variable is a parallel loop variable of the entry's outermost loop nest
//! whose extent is the grid axis's, every `place` names a process of the entry pipeline on a
//! cell of the grid (one process per cell), and every `layout` names a tensor once, with one
//! entry per dimension, each grid axis sharded at most once and each sharded extent a multiple
//! of its grid axis (when the extent is a constant; otherwise when the map is applied, under
//! the bindings). Each mistake is one [`ValidationError::Spatial`] naming the map and the item,
//! at the offending name's location.

use super::ValidationError;
use crate::eval::eval;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{AxisKind, Module};
use crate::spatial::device::{self, Device};
use crate::spatial::{GridAxis, LayoutDim, SpatialMap};
use crate::value::Value;
use crate::workload::{LoopOrder, Stmt, StmtKind};
use std::collections::HashSet;

/// Checks the module's spatial maps, appending to `errors`.
pub(super) fn check(m: &Module, errors: &mut Vec<ValidationError>) {
    let mut names = HashSet::new();
    let mut entries = HashSet::new();
    for s in &m.spatial_maps {
        let mut c = Checker { m, s, errors };
        if !names.insert(s.name.as_str()) {
            c.err(s.name.loc, "the name is already declared".into());
        }
        if !entries.insert(s.entry.as_str()) {
            c.err(
                s.entry.loc,
                format!("`{}` already has a spatial map", s.entry),
            );
        }
        c.map();
    }
}

struct Checker<'a> {
    m: &'a Module,
    s: &'a SpatialMap,
    errors: &'a mut Vec<ValidationError>,
}

/// The value of a name-free expression, if it folds to an `i64`.
pub(crate) fn constant(e: &Expr) -> Option<i64> {
    match eval(e, &|_: &str| None) {
        Ok(Value::I64(v)) => Some(v),
        Ok(Value::U64(v)) => i64::try_from(v).ok(),
        _ => None,
    }
}

impl Checker<'_> {
    fn err(&mut self, loc: Loc, what: String) {
        let owner = format!("spatial_map `{}`", self.s.name);
        self.errors.push(ValidationError::Spatial {
            message: format!("{owner}: {what}"),
            loc,
            path: owner,
        });
    }

    fn map(&mut self) {
        let s = self.s;
        let workload = self.m.workload(s.entry.as_str());
        let pipeline = self.m.pipeline(s.entry.as_str());
        if workload.is_none() && pipeline.is_none() {
            self.err(
                s.entry.loc,
                format!(
                    "unknown entry `{}`: no workload or pipeline has that name",
                    s.entry
                ),
            );
        }
        let device = self.device();
        let Some(grid) = s.grid else {
            self.err(s.name.loc, "no `grid ROWS x COLS;`".into());
            return;
        };
        if grid.rows == 0 || grid.cols == 0 {
            self.err(
                grid.loc,
                "a grid needs at least one row and one column".into(),
            );
            return;
        }
        if let Some(d) = device {
            self.grid_fits(d, grid.rows, grid.cols, grid.loc);
        }
        if let Some(w) = workload {
            self.tiles(&w.body, grid);
        } else if let Some(t) = s.tiles.first() {
            self.err(
                t.var.loc,
                format!(
                    "`tile {} -> {}`: tile variables map a workload's parallel loops; a pipeline's processes are placed with `place PROCESS at (ROW, COL);`",
                    t.var, t.axis
                ),
            );
        }
        if let Some(p) = pipeline {
            self.places(p, grid);
        } else if let Some(p) = s.places.first() {
            self.err(
                p.process.loc,
                format!(
                    "`place {}`: only the processes of a pipeline are placed; a workload's cells come from `tile VAR -> AXIS;`",
                    p.process
                ),
            );
        }
        self.layouts(grid);
    }

    fn device(&mut self) -> Option<&'static Device> {
        let Some(d) = &self.s.device else {
            self.err(
                self.s.name.loc,
                format!("no `device NAME;` (one of {})", device::device_names()),
            );
            return None;
        };
        let found = device::device(d.as_str());
        if found.is_none() {
            self.err(
                d.loc,
                format!(
                    "unknown device `{d}` (known devices: {})",
                    device::device_names()
                ),
            );
        }
        found
    }

    fn grid_fits(&mut self, d: &Device, rows: u64, cols: u64, loc: Loc) {
        if rows > u64::from(d.compute_rows) {
            self.err(
                loc,
                format!(
                    "grid {rows} x {cols} does not fit {}: it has {} rows of compute tiles",
                    d.name, d.compute_rows
                ),
            );
        }
        if cols > u64::from(d.columns) {
            self.err(
                loc,
                format!(
                    "grid {rows} x {cols} does not fit {}: it has {} columns",
                    d.name, d.columns
                ),
            );
        }
    }

    /// `tile` items: each variable a `parallel_for` variable of the outermost loop nest, over a
    /// `dense` axis whose extent is the grid axis's; each variable and each grid axis once; a
    /// grid axis of more than one cell needs a variable.
    fn tiles(&mut self, body: &[Stmt], grid: crate::spatial::Grid) {
        let nest = outer_parallel_vars(body);
        let mut vars = HashSet::new();
        let mut axes = HashSet::new();
        for t in &self.s.tiles {
            if !vars.insert(t.var.as_str()) {
                self.err(t.var.loc, format!("`{}` is mapped twice", t.var));
                continue;
            }
            if !axes.insert(t.axis) {
                self.err(
                    t.var.loc,
                    format!("grid axis `{}` already has a loop variable", t.axis),
                );
                continue;
            }
            let Some((_, axis)) = nest.iter().find(|(v, _)| v.as_str() == t.var.as_str()) else {
                self.err(
                    t.var.loc,
                    format!(
                        "`{}` is not a `parallel_for` variable of the outermost loop nest of `{}`{}",
                        t.var,
                        self.s.entry,
                        if nest.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " (those are: {})",
                                nest.iter()
                                    .map(|(v, _)| v.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        }
                    ),
                );
                continue;
            };
            self.extent_matches(t.var.clone(), axis, grid.extent(t.axis), t.axis);
        }
        for axis in GridAxis::ALL {
            if grid.extent(*axis) > 1 && !axes.contains(axis) {
                self.err(
                    grid.loc,
                    format!(
                        "grid axis `{axis}` has {} cells but no loop variable is mapped to it (`tile VAR -> {axis};`)",
                        grid.extent(*axis)
                    ),
                );
            }
        }
    }

    fn extent_matches(&mut self, var: Ident, axis: &Ident, cells: u64, gaxis: GridAxis) {
        let Some(decl) = self.m.axis(axis.as_str()) else {
            return; // an unknown axis is the body's validator's error
        };
        match &decl.kind {
            AxisKind::Dense(e) | AxisKind::DenseDyn(e) => {
                if let Some(n) = constant(e)
                    && u64::try_from(n).ok() != Some(cells)
                {
                    self.err(
                        var.loc,
                        format!(
                            "loop `{var}` runs {n} iterations but grid axis `{gaxis}` has {cells} cells"
                        ),
                    );
                }
            }
            AxisKind::Ragged { .. } | AxisKind::Sparse { .. } => self.err(
                var.loc,
                format!(
                    "`{var}` ranges over the {} axis `{axis}`; a grid axis needs a dense loop",
                    decl.kind.keyword()
                ),
            ),
        }
    }

    fn places(&mut self, p: &crate::csp::Pipeline, grid: crate::spatial::Grid) {
        let mut seen = HashSet::new();
        let mut cells = HashSet::new();
        for pl in &self.s.places {
            if !p
                .processes
                .iter()
                .any(|q| q.name.as_str() == pl.process.as_str())
            {
                self.err(
                    pl.process.loc,
                    format!("pipeline `{}` has no process `{}`", p.name, pl.process),
                );
                continue;
            }
            if !seen.insert(pl.process.as_str()) {
                self.err(pl.loc, format!("process `{}` is placed twice", pl.process));
                continue;
            }
            if pl.row >= grid.rows || pl.col >= grid.cols {
                self.err(
                    pl.loc,
                    format!(
                        "cell ({}, {}) is outside the grid {} x {}",
                        pl.row, pl.col, grid.rows, grid.cols
                    ),
                );
                continue;
            }
            if !cells.insert((pl.row, pl.col)) {
                self.err(
                    pl.loc,
                    format!("cell ({}, {}) already runs another process", pl.row, pl.col),
                );
            }
        }
    }

    fn layouts(&mut self, grid: crate::spatial::Grid) {
        let mut seen = HashSet::new();
        for l in &self.s.layouts {
            let Some(t) = self.m.tensor(l.tensor.as_str()) else {
                self.err(l.tensor.loc, format!("unknown tensor `{}`", l.tensor));
                continue;
            };
            if !seen.insert(l.tensor.as_str()) {
                self.err(l.loc, format!("tensor `{}` has two layouts", l.tensor));
                continue;
            }
            if l.dims.len() != t.shape.len() {
                self.err(
                    l.loc,
                    format!(
                        "layout `{l}` gives {} dimension(s); tensor `{}` has {}",
                        l.dims.len(),
                        l.tensor,
                        t.shape.len()
                    ),
                );
                continue;
            }
            let mut sharded = HashSet::new();
            for (d, (dim, extent)) in l.dims.iter().zip(&t.shape).enumerate() {
                let LayoutDim::Shard(axis) = dim else {
                    continue;
                };
                if !sharded.insert(*axis) {
                    self.err(
                        l.loc,
                        format!("layout `{l}` shards grid axis `{axis}` twice"),
                    );
                    continue;
                }
                let cells = grid.extent(*axis);
                if let Some(n) = constant(extent)
                    && (n < 0 || !(n as u64).is_multiple_of(cells))
                {
                    self.err(
                        l.loc,
                        format!(
                            "tensor `{}` dimension {d} has {n} elements, not a multiple of grid axis `{axis}` ({cells} cells)",
                            l.tensor
                        ),
                    );
                }
            }
        }
    }
}

/// The variables of the `parallel_for` loops of `body`'s outermost loop nest (the loops reached
/// from the top through `parallel_for` loops only), with their axes.
fn outer_parallel_vars(body: &[Stmt]) -> Vec<(Ident, Ident)> {
    let mut out = Vec::new();
    let mut level = body;
    loop {
        let mut next = None;
        for s in level {
            if let StmtKind::Loop {
                order: LoopOrder::Parallel,
                vars,
                axis,
                body,
            } = &s.kind
                && vars.len() == 1
            {
                out.push((vars[0].clone(), axis.clone()));
                next = Some(body.as_slice());
            }
        }
        match next {
            Some(b) if level.len() == 1 => level = b,
            _ => return out,
        }
    }
}
