//! The parser of spatial maps (`crate::spatial`): `spatial_map NAME for ENTRY { ... }`. The
//! module parser calls in here for the top-level word `spatial_map`; every word inside the block
//! (`device`, `grid`, `tile`, `place`, `layout`, `shard`, `replicate`, `row`, `col`, `x`, `at`)
//! is contextual.

use super::lexer::Kind;
use super::{PResult, ParseError, Parser};
use crate::spatial::{Grid, GridAxis, Layout, LayoutDim, Place, SpatialMap, TileVar};

impl Parser<'_> {
    /// `spatial_map NAME for ENTRY { (device D; | grid R x C; | tile V -> AXIS; |
    /// place P at (R, C); | layout T(DIM, ...);)* }`.
    pub(super) fn spatial_map(&mut self) -> PResult<SpatialMap> {
        let start = self.bump().start;
        let name = self.ident("spatial map name")?;
        self.expect_word("for", "after the spatial map's name")?;
        let entry = self.ident("the workload or pipeline the map is for")?;
        self.open("{", "to open the spatial map")?;
        let mut m = SpatialMap {
            name,
            entry,
            device: None,
            grid: None,
            tiles: Vec::new(),
            places: Vec::new(),
            layouts: Vec::new(),
            loc: crate::loc::Loc::NONE,
        };
        while !self.peek().is_punct("}") {
            let t = self.peek();
            if self.eat_word("device") {
                let d = self.ident("device name")?;
                if m.device.is_some() {
                    return Err(ParseError::new(
                        "a spatial map names one device",
                        self.loc_from(t.start),
                    ));
                }
                self.expect(";", "after the device")?;
                m.device = Some(d);
            } else if self.eat_word("grid") {
                let g = self.grid(t.start)?;
                if m.grid.is_some() {
                    return Err(ParseError::new("a spatial map has one grid", g.loc));
                }
                m.grid = Some(g);
            } else if self.eat_word("tile") {
                let var = self.ident("loop variable")?;
                self.expect("->", "after the loop variable")?;
                let axis = self.grid_axis()?;
                self.expect(";", "after the grid axis")?;
                m.tiles.push(TileVar { var, axis });
            } else if self.eat_word("place") {
                let process = self.ident("process name")?;
                self.expect_word("at", "after the process name")?;
                self.open("(", "before the grid cell")?;
                let row = self.count("the grid row")?;
                self.expect(",", "after the grid row")?;
                let col = self.count("the grid column")?;
                self.close(")", "after the grid cell")?;
                self.expect(";", "after the placement")?;
                m.places.push(Place {
                    process,
                    row,
                    col,
                    loc: self.loc_from(t.start),
                });
            } else if self.eat_word("layout") {
                let tensor = self.ident("tensor name")?;
                self.open("(", "after the tensor name")?;
                let dims = self.list(")", "in the layout", Self::layout_dim)?;
                self.close(")", "to close the layout")?;
                self.expect(";", "after the layout")?;
                m.layouts.push(Layout {
                    tensor,
                    dims,
                    loc: self.loc_from(t.start),
                });
            } else {
                return Err(self.err_expected(
                    "`device`, `grid`, `tile`, `place`, `layout` or `}` in the spatial map",
                ));
            }
        }
        self.close("}", "")?;
        m.loc = self.loc_from(start);
        Ok(m)
    }

    /// `ROWS x COLS;` after `grid` (the item starts at `start`).
    fn grid(&mut self, start: usize) -> PResult<Grid> {
        let rows = self.count("the grid's rows")?;
        // `4 x 4` lexes as `4`, `x`, `4`; `4 x4` as `4`, `x4`.
        let t = self.peek();
        let cols = if self.eat_word("x") {
            self.count("the grid's columns")?
        } else if t.kind == Kind::Word
            && t.text.len() > 1
            && t.text.starts_with('x')
            && t.text[1..].bytes().all(|b| b.is_ascii_digit())
        {
            self.bump();
            t.text[1..]
                .parse::<u64>()
                .map_err(|_| ParseError::new("the grid's columns do not fit in u64", t.loc()))?
        } else {
            return Err(
                self.err_expected("`x` between the grid's rows and columns (`grid 4 x 4;`)")
            );
        };
        self.expect(";", "after the grid")?;
        Ok(Grid {
            rows,
            cols,
            loc: self.loc_from(start),
        })
    }

    /// `row` or `col`.
    fn grid_axis(&mut self) -> PResult<GridAxis> {
        self.keyword("grid axis", GridAxis::ALL, GridAxis::keyword)
    }

    /// `shard row`, `shard col` or `replicate`.
    fn layout_dim(&mut self) -> PResult<LayoutDim> {
        if self.eat_word("shard") {
            Ok(LayoutDim::Shard(self.grid_axis()?))
        } else if self.eat_word("replicate") {
            Ok(LayoutDim::Replicate)
        } else {
            Err(self.err_expected("`shard row`, `shard col` or `replicate`"))
        }
    }
}
