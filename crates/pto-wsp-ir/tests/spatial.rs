//! Spatial maps in the text format and the builder: the AIE examples parse, validate, print and
//! parse back equal; the builder gives the parser's IR; every mistake is reported with its exact
//! message at its `line:column`.

use pto_wsp_ir::builder::ModuleBuilder;
use pto_wsp_ir::spatial::{GridAxis, LayoutDim};
use pto_wsp_ir::{DType, SourceFile, parse, validate};

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../examples/aie/{name}.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_aie_examples_parse_validate_print_and_parse_back_equal() {
    for name in ["pipeline3", "vector_scalar", "gemm_4x4"] {
        let m = parse(&example(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        validate(&m).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(m.spatial_maps.len(), 1, "{name}");
        let printed = m.to_string();
        let again = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(again, m, "{name}");
        assert_eq!(again.to_string(), printed, "printing is canonical");
    }
    let g = parse(&example("gemm_4x4")).unwrap();
    let s = &g.spatial_maps[0];
    assert_eq!(s.device.as_ref().unwrap().as_str(), "npu1_4col");
    assert_eq!((s.grid.unwrap().rows, s.grid.unwrap().cols), (4, 4));
    assert_eq!(s.tile_axis("i"), Some(GridAxis::Row));
    assert_eq!(
        s.layout("B").unwrap().dims,
        [LayoutDim::Replicate, LayoutDim::Shard(GridAxis::Col)]
    );
    assert!(
        g.to_string()
            .contains("spatial_map whole_array for main {\n    device npu1_4col;\n    grid 4 x 4;\n    tile i -> row;\n    tile j -> col;\n    layout A(shard row, replicate);\n")
    );
}

#[test]
fn the_builder_gives_the_parsers_ir() {
    let text = example("vector_scalar");
    let parsed = parse(&text).unwrap();
    let mut m = ModuleBuilder::new();
    let mut built_map = None;
    m.spatial_map("columns", "main", |s| {
        s.device("npu1_4col").grid(1, 4).tile("c", GridAxis::Col);
        s.layout("X", [LayoutDim::Shard(GridAxis::Col), LayoutDim::Replicate]);
        s.layout("Y", [LayoutDim::Shard(GridAxis::Col), LayoutDim::Replicate]);
    });
    let built = m.finish();
    built_map.replace(built.spatial_maps[0].clone());
    assert_eq!(built_map.unwrap(), parsed.spatial_maps[0]);
    let _ = DType::F32;
}

/// The first error of `text` (parse or validation): its message and `line:column`.
fn first_error(text: &str) -> (String, (usize, usize)) {
    let src = SourceFile::new("t.wsp", text);
    match parse(text) {
        Err(e) => (e.to_string(), src.line_col(e.loc.start as usize)),
        Ok(m) => {
            let errs = validate(&m).expect_err(text);
            (
                errs[0].to_string(),
                src.line_col(errs[0].loc().start as usize),
            )
        }
    }
}

const GEMM_MAP: &str = "spatial_map whole_array for main {";

#[test]
fn mistakes_are_reported_at_their_line_and_column() {
    let base = example("gemm_4x4");
    let line = base.lines().position(|l| l.starts_with(GEMM_MAP)).unwrap() + 1;
    let cases: &[(&str, &str, &str, (usize, usize))] = &[
        (
            "device npu1_4col;",
            "device npu9;",
            "spatial_map `whole_array`: unknown device `npu9` (known devices: npu1_1col, npu1_2col, npu1_3col, npu1_4col, npu2)",
            (line + 1, 12),
        ),
        (
            "grid 4 x 4;",
            "grid 5 x 4;",
            "spatial_map `whole_array`: grid 5 x 4 does not fit npu1_4col: it has 4 rows of compute tiles",
            (line + 2, 5),
        ),
        (
            "tile i -> row;",
            "tile k -> row;",
            "spatial_map `whole_array`: `k` is not a `parallel_for` variable of the outermost loop nest of `main` (those are: i, j)",
            (line + 3, 10),
        ),
        (
            "layout A(shard row, replicate);",
            "layout A(shard row);",
            "spatial_map `whole_array`: layout `A(shard row)` gives 1 dimension(s); tensor `A` has 2",
            (line + 5, 5),
        ),
        (
            "layout C(shard row, shard col);",
            "layout C(shard row, shard row);",
            "spatial_map `whole_array`: layout `C(shard row, shard row)` shards grid axis `row` twice",
            (line + 7, 5),
        ),
        (
            "layout B(replicate, shard col);",
            "layout Q(replicate, shard col);",
            "spatial_map `whole_array`: unknown tensor `Q`",
            (line + 6, 12),
        ),
        (
            "grid 4 x 4;",
            "grid 4 by 4;",
            "expected `x` between the grid's rows and columns (`grid 4 x 4;`), found `by`",
            (line + 2, 12),
        ),
        (
            "layout A(shard row, replicate);",
            "layout A(shard diagonal, replicate);",
            "unknown grid axis `diagonal` (expected one of row, col)",
            (line + 5, 20),
        ),
    ];
    for (from, to, message, at) in cases {
        assert!(base.contains(from), "{from}");
        let text = base.replacen(from, to, 1);
        let (got, got_at) = first_error(&text);
        assert!(got.starts_with(message), "{to}: {got}");
        assert_eq!(got_at, *at, "{to}: {got}");
    }
}

#[test]
fn pipeline_maps_check_their_places_and_tensor_extents() {
    let base = example("pipeline3");
    let line = base
        .lines()
        .position(|l| l.starts_with("spatial_map column"))
        .unwrap()
        + 1;
    let cases: &[(&str, &str, &str, (usize, usize))] = &[
        (
            "place storer at (2, 0);",
            "place storer at (1, 0);",
            "spatial_map `column`: cell (1, 0) already runs another process",
            (line + 5, 5),
        ),
        (
            "place storer at (2, 0);",
            "place writer at (2, 0);",
            "spatial_map `column`: pipeline `stream3` has no process `writer`",
            (line + 5, 11),
        ),
        (
            "place storer at (2, 0);",
            "place storer at (3, 0);",
            "spatial_map `column`: cell (3, 0) is outside the grid 3 x 1",
            (line + 5, 5),
        ),
        (
            "spatial_map column for stream3",
            "spatial_map column for stream4",
            "spatial_map `column`: unknown entry `stream4`",
            (line, 24),
        ),
    ];
    for (from, to, message, at) in cases {
        let text = base.replacen(from, to, 1);
        let (got, got_at) = first_error(&text);
        assert!(got.starts_with(message), "{to}: {got}");
        assert_eq!(got_at, *at, "{to}: {got}");
    }
    let v =
        example("vector_scalar").replace("tensor X: f32[16, 1024];", "tensor X: f32[18, 1024];");
    let (got, _) = first_error(&v);
    assert_eq!(
        got,
        "spatial_map `columns`: tensor `X` dimension 0 has 18 elements, not a multiple of grid axis `col` (4 cells)"
    );
}
