//! Iteration spaces (the PDE specification's `PTO_SPACE`, `PTO_AXIS`, `PTO_TILE`): the named axes a
//! plan's work ranges over, each with a start, an end that is a constant or known only at run time,
//! and a tiling. A [`Space`] is declared once; [`Space::bind`] fixes its dynamic ends and its
//! `auto` tiles (the planner's choice) and checks everything, giving a [`BoundSpace`] the generator
//! walks without further checks.

use crate::descriptor::MAX_AXES;
use crate::error::{PdeError, Result};

/// The end of an axis (exclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Known when the space is declared.
    Const(u32),
    /// Known only at run time: given to [`Space::bind`].
    Dynamic,
}

/// How an axis is split into tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
    /// Not tiled: one iteration per element.
    Unit,
    /// `tile(axis, n)`: `ceil(extent / n)` iterations, the last one possibly shorter.
    Size(u32),
    /// `tile(axis, n, pad_last)`: as [`Tile::Size`], but the last tile keeps the full size `n`
    /// (its bounds run past the axis end; the kernel masks the padding).
    PadLast(u32),
    /// `tile(axis, auto)`: the size is chosen by the planner and given to [`Space::bind`].
    Auto,
}

/// One declared axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// Its name, unique in the space.
    pub name: String,
    /// First index.
    pub start: u32,
    /// End (exclusive).
    pub end: End,
    /// Its tiling.
    pub tile: Tile,
}

/// A named iteration space of at most [`MAX_AXES`] axes (declaration order = descriptor index
/// order). Mistakes are collected and reported by [`Space::bind`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    name: String,
    axes: Vec<Axis>,
    problems: Vec<String>,
}

impl Space {
    /// An empty space called `name`.
    pub fn new(name: &str) -> Space {
        Space {
            name: name.to_string(),
            axes: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// The space's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared axes, in order.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// Declares axis `name` over `start..end`, untiled.
    pub fn axis(mut self, name: &str, start: u32, end: End) -> Space {
        if self.axes.iter().any(|a| a.name == name) {
            self.problems
                .push(format!("axis `{name}` is declared twice"));
        } else if self.axes.len() == MAX_AXES {
            self.problems.push(format!(
                "axis `{name}` is one too many: a descriptor holds at most {MAX_AXES} indices"
            ));
        } else {
            self.axes.push(Axis {
                name: name.to_string(),
                start,
                end,
                tile: Tile::Unit,
            });
        }
        self
    }

    /// Sets the tiling of axis `name`: `tile(axis, n)`, `tile(axis, n, pad_last)` or
    /// `tile(axis, auto)`.
    pub fn tile(mut self, name: &str, tile: Tile) -> Space {
        match self.axes.iter_mut().find(|a| a.name == name) {
            Some(a) => {
                if matches!(tile, Tile::Size(0) | Tile::PadLast(0)) {
                    self.problems
                        .push(format!("axis `{name}`: a tile size must be at least 1"));
                }
                a.tile = tile;
            }
            None => self
                .problems
                .push(format!("`tile` names axis `{name}`, which is not declared")),
        }
        self
    }

    /// The index of axis `name`.
    pub fn axis_index(&self, name: &str) -> Result<usize> {
        self.axes
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| self.err(format!("no axis `{name}`")))
    }

    fn err(&self, problem: String) -> PdeError {
        PdeError::Space {
            space: self.name.clone(),
            problem,
        }
    }

    /// Binds the space for one run: `ends` gives every dynamic end, `tiles` every `auto` tile
    /// size, each by axis name. Refuses a declaration mistake, a missing, repeated or unknown
    /// binding, a zero tile size and an end before its start.
    pub fn bind(&self, ends: &[(&str, u32)], tiles: &[(&str, u32)]) -> Result<BoundSpace> {
        if let Some(p) = self.problems.first() {
            return Err(self.err(p.clone()));
        }
        for (list, what) in [(ends, "end"), (tiles, "tile size")] {
            for (i, (name, _)) in list.iter().enumerate() {
                self.axis_index(name).map_err(|_| {
                    self.err(format!("a {what} is given for unknown axis `{name}`"))
                })?;
                if list[..i].iter().any(|(n, _)| n == name) {
                    return Err(self.err(format!("the {what} of axis `{name}` is given twice")));
                }
            }
        }
        let lookup = |list: &[(&str, u32)], name: &str| {
            list.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
        };
        let mut axes = Vec::with_capacity(self.axes.len());
        for a in &self.axes {
            let end = match a.end {
                End::Const(e) => {
                    if lookup(ends, &a.name).is_some() {
                        return Err(self.err(format!(
                            "axis `{}` has a constant end; it cannot be bound",
                            a.name
                        )));
                    }
                    e
                }
                End::Dynamic => lookup(ends, &a.name).ok_or_else(|| {
                    self.err(format!("the dynamic end of axis `{}` is not bound", a.name))
                })?,
            };
            if end < a.start {
                return Err(self.err(format!(
                    "axis `{}` ends at {end}, before its start {}",
                    a.name, a.start
                )));
            }
            let (size, pad_last) = match a.tile {
                Tile::Unit => (1, false),
                Tile::Size(n) => (n, false),
                Tile::PadLast(n) => (n, true),
                Tile::Auto => (
                    lookup(tiles, &a.name).ok_or_else(|| {
                        self.err(format!(
                            "the auto tile size of axis `{}` is not bound",
                            a.name
                        ))
                    })?,
                    false,
                ),
            };
            if !matches!(a.tile, Tile::Auto) && lookup(tiles, &a.name).is_some() {
                return Err(self.err(format!(
                    "axis `{}` is not tiled `auto`; its tile size cannot be bound",
                    a.name
                )));
            }
            if size == 0 {
                return Err(self.err(format!("axis `{}`: a tile size must be at least 1", a.name)));
            }
            let count = (end - a.start).div_ceil(size);
            axes.push(BoundAxis {
                start: a.start,
                end,
                size,
                pad_last,
                count,
            });
        }
        Ok(BoundSpace {
            space: self.clone(),
            axes,
        })
    }
}

/// An axis with its end and tile size fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundAxis {
    /// First index.
    pub start: u32,
    /// End (exclusive).
    pub end: u32,
    /// Tile size (1 when untiled).
    pub size: u32,
    /// Whether the last tile is padded to the full size.
    pub pad_last: bool,
    /// Number of iterations (tiles).
    pub count: u32,
}

/// A space bound for one run: every axis's extent and tiling known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundSpace {
    space: Space,
    axes: Vec<BoundAxis>,
}

impl BoundSpace {
    /// The declaration it was bound from.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// The space's name.
    pub fn name(&self) -> &str {
        &self.space.name
    }

    /// The bound axes, in declaration order.
    pub fn axes(&self) -> &[BoundAxis] {
        &self.axes
    }

    /// Number of iterations of axis `k`, 0 if there is no such axis.
    pub fn count(&self, k: usize) -> u32 {
        self.axes.get(k).map_or(0, |a| a.count)
    }

    /// The bounds `(start, end)` of tile `i` of axis `k`: `end` is clamped to the axis end
    /// unless the axis pads its last tile. `None` if there is no such axis or tile.
    pub fn tile_bounds(&self, k: usize, i: u32) -> Option<(u32, u32)> {
        let a = self.axes.get(k)?;
        if i >= a.count {
            return None;
        }
        let start = a.start + i * a.size;
        let full = start.saturating_add(a.size);
        Some((start, if a.pad_last { full } else { full.min(a.end) }))
    }
}
