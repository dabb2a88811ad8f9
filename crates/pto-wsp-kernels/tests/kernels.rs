//! Integration tests of `pto-wsp-kernels`: the tensor store built from parsed modules, region
//! views against naive index arithmetic, the built-in kernels against naive loops, and the
//! conflict checker against a brute-force oracle; the tile kernels against `f64`
//! references in [`math`].

// Contexts are made here directly (single-threaded), which is `unsafe` by contract.
#![allow(unsafe_code)]

use half::{bf16, f16};
use proptest::prelude::*;
use pto_wsp_ir::task_io::{Region, TaskIo};
use pto_wsp_ir::{Access, Bindings, DType, Module, ScalarType, parse};
use pto_wsp_kernels::builtins::NAMES;
use pto_wsp_kernels::cost::{LAUNCH_CYCLES, Work};
use pto_wsp_kernels::store::ALIGN;
use pto_wsp_kernels::{
    Conflict, ConflictChecker, KernelError, KernelRegistry, RegionLedger, StoreError, TaskContext,
    TensorStore, ViewProblem,
};

mod math;
mod npy_files;

// ---------------------------------------------------------------------------------------------
// Helpers

fn module(text: &str) -> Module {
    parse(text).unwrap_or_else(|e| panic!("test module does not parse: {e:?}"))
}

/// SplitMix64, for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An `f32` with a random exponent in a modest range, sign and mantissa.
    fn f32(&mut self) -> f32 {
        let x = self.next();
        let mantissa = (x & 0x7f_ffff) as u32;
        let exponent = 100 + ((x >> 23) % 55) as u32; // 2^-27 .. 2^27
        let sign = ((x >> 40) & 1) as u32;
        f32::from_bits(sign << 31 | exponent << 23 | mantissa)
    }

    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

fn region(tensor: u32, start: &[i64], size: &[i64]) -> Region {
    Region::new(tensor, start, size).unwrap()
}

fn io(tensor: u32, start: &[i64], size: &[i64], access: Access) -> TaskIo {
    TaskIo::new(region(tensor, start, size), access)
}

/// A context over `store` for a single-threaded test.
fn ctx<'a>(store: &'a TensorStore, params: &'a [u64], io: &'a [TaskIo]) -> TaskContext<'a> {
    // SAFETY: tests make one context at a time on one thread and touch the store only through
    // it while it lives.
    unsafe { TaskContext::new(store, 0, 0, params, io) }
}

/// Runs built-in `name` over `io` with `params`.
fn run(
    reg: &KernelRegistry,
    store: &TensorStore,
    name: &str,
    params: &[u64],
    io: &[TaskIo],
) -> Result<(), KernelError> {
    let id = reg.lookup(name).expect("kernel registered");
    reg.call(id, &ctx(store, params, io))
}

/// Row-major strides of `shape`.
fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as usize;
    }
    s
}

/// Linear offsets of every element of `r` in a tensor of `shape`, in row-major order of the
/// region: the naive reading of "rows × cols".
fn naive_offsets(shape: &[u64], r: &Region) -> Vec<usize> {
    let st = strides(shape);
    let rank = r.rank as usize;
    let mut out = vec![0usize];
    for (d, &stride) in st.iter().enumerate().take(rank) {
        let mut next = Vec::new();
        for &base in &out {
            for i in 0..r.size[d] as usize {
                next.push(base + (r.start[d] as usize + i) * stride);
            }
        }
        out = next;
    }
    out
}

const SHAPES: &str = "
symbol n: i64;
symbol m: u64;
tensor A: f32[n, 4];
tensor B: f16[2, n * 3];
tensor C: i32[m];
tensor D: bf16[n];
tensor E: u8[3, 5];
tensor F: u64[2];
";

fn shapes_store() -> TensorStore {
    let b = Bindings::new().symbol("n", 5i64).symbol("m", 7u64);
    TensorStore::new(&module(SHAPES), &b).unwrap()
}

// ---------------------------------------------------------------------------------------------
// TensorStore

#[test]
fn store_allocates_every_tensor_with_evaluated_shapes() {
    let s = shapes_store();
    assert_eq!(s.len(), 6);
    assert!(!s.is_empty());
    let want: [(&str, DType, &[u64]); 6] = [
        ("A", DType::F32, &[5, 4]),
        ("B", DType::F16, &[2, 15]),
        ("C", DType::I32, &[7]),
        ("D", DType::Bf16, &[5]),
        ("E", DType::U8, &[3, 5]),
        ("F", DType::U64, &[2]),
    ];
    for (i, (name, dtype, shape)) in want.into_iter().enumerate() {
        let info = s.info(i as u32);
        assert_eq!(info.name, name);
        assert_eq!(info.dtype, dtype);
        assert_eq!(info.shape, shape);
        assert_eq!(s.index_of(name), Some(i as u32));
        let bytes = s.bytes(i as u32);
        assert_eq!(bytes.len() as u64, info.size_bytes());
        assert!(bytes.iter().all(|&b| b == 0), "{name} starts zeroed");
        assert_eq!(bytes.as_ptr() as usize % ALIGN, 0, "{name} is aligned");
    }
    assert_eq!(s.index_of("Z"), None);
}

#[test]
fn store_write_read_round_trip() {
    let mut s = shapes_store();
    let mut rng = Rng(1);
    let a = rng.f32s(20);
    s.write("A", &a).unwrap();
    assert_eq!(s.read::<f32>("A").unwrap(), a);

    let b: Vec<f16> = (0..30)
        .map(|i| f16::from_f32(i as f32 * 0.25 - 3.0))
        .collect();
    s.write("B", &b).unwrap();
    assert_eq!(s.read::<f16>("B").unwrap(), b);
    // u16 views the raw bits of f16 tensors.
    let bits: Vec<u16> = b.iter().map(|x| x.to_bits()).collect();
    assert_eq!(s.read::<u16>("B").unwrap(), bits);

    let c: Vec<i32> = vec![-3, 0, 1, i32::MAX, i32::MIN, 7, 9];
    s.write("C", &c).unwrap();
    assert_eq!(s.read::<i32>("C").unwrap(), c);

    let d: Vec<bf16> = (0..5).map(|i| bf16::from_f32(i as f32 - 2.5)).collect();
    s.write("D", &d).unwrap();
    assert_eq!(s.read::<bf16>("D").unwrap(), d);

    let e: Vec<u8> = (0..15).collect();
    s.write("E", &e).unwrap();
    assert_eq!(s.read::<u8>("E").unwrap(), e);
    assert_eq!(s.bytes(4), &e[..]);

    s.write("F", &[u64::MAX, 3]).unwrap();
    assert_eq!(s.read::<u64>("F").unwrap(), [u64::MAX, 3]);

    // A clone is a deep copy.
    let copy = s.clone();
    s.write("E", &[0u8; 15]).unwrap();
    assert_eq!(copy.read::<u8>("E").unwrap(), e);
}

#[test]
fn store_dtype_mismatch_names_tensor_and_types() {
    let mut s = shapes_store();
    let err = s.write("A", &[f16::ZERO; 20]).unwrap_err();
    assert_eq!(
        err,
        StoreError::DType {
            tensor: "A".into(),
            expected: DType::F32,
            found: "f16",
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`A`") && msg.contains("f32") && msg.contains("f16"),
        "{msg}"
    );
    let err = s.read::<f32>("C").unwrap_err();
    assert!(
        matches!(err, StoreError::DType { ref tensor, expected: DType::I32, found: "f32" } if tensor == "C")
    );
    // u16 views f16 and bf16 only.
    assert!(s.read::<u16>("D").is_ok());
    assert!(matches!(s.read::<u16>("A"), Err(StoreError::DType { .. })));
}

#[test]
fn store_length_mismatch_names_tensor_and_counts() {
    let mut s = shapes_store();
    let err = s.write("A", &[0.0f32; 19]).unwrap_err();
    assert_eq!(
        err,
        StoreError::Length {
            tensor: "A".into(),
            expected: 20,
            found: 19,
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`A`") && msg.contains("20") && msg.contains("19"),
        "{msg}"
    );
    // Nothing was written.
    assert!(s.read::<f32>("A").unwrap().iter().all(|&x| x == 0.0));
}

#[test]
fn store_unknown_tensor() {
    let mut s = shapes_store();
    let err = s.write("nope", &[0.0f32]).unwrap_err();
    assert_eq!(
        err,
        StoreError::UnknownTensor {
            name: "nope".into()
        }
    );
    assert!(err.to_string().contains("`nope`"));
}

#[test]
fn store_missing_symbol_names_it() {
    let b = Bindings::new().symbol("m", 7u64);
    let err = TensorStore::new(&module(SHAPES), &b).unwrap_err();
    assert_eq!(
        err,
        StoreError::MissingSymbol {
            tensor: "A".into(),
            dim: 0,
            symbol: "n".into(),
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("`n`") && msg.contains("`A`"), "{msg}");
}

#[test]
fn store_rejects_badly_typed_or_negative_bindings() {
    let b = Bindings::new().symbol("n", 5u64).symbol("m", 7u64);
    let err = TensorStore::new(&module(SHAPES), &b).unwrap_err();
    assert_eq!(
        err,
        StoreError::BindingType {
            name: "n".into(),
            expected: ScalarType::I64,
            found: ScalarType::U64,
        }
    );
    let b = Bindings::new().symbol("n", -2i64).symbol("m", 7u64);
    let err = TensorStore::new(&module(SHAPES), &b).unwrap_err();
    assert!(
        matches!(err, StoreError::Shape { ref tensor, dim: 0, .. } if tensor == "A"),
        "{err:?}"
    );
    assert!(err.to_string().contains("negative"), "{err}");
    // Overflowing shapes are refused, not wrapped.
    let b = Bindings::new().symbol("n", i64::MAX).symbol("m", 7u64);
    let err = TensorStore::new(&module(SHAPES), &b).unwrap_err();
    assert!(
        matches!(err, StoreError::TooLarge { ref tensor, .. } if tensor == "A"),
        "{err:?}"
    );
}

#[test]
fn store_takes_bound_integer_contents_and_fill_random_keeps_them() {
    let m = module("symbol n: i64;\ntensor lens: i32[n];\ntensor X: f32[n, 2];");
    let b = Bindings::new()
        .symbol("n", 3i64)
        .array("lens", vec![4, 0, 9]);
    let mut s = TensorStore::new(&m, &b).unwrap();
    assert_eq!(s.read::<i32>("lens").unwrap(), [4, 0, 9]);
    s.fill_random(5);
    assert_eq!(s.read::<i32>("lens").unwrap(), [4, 0, 9]);
    assert!(s.read::<f32>("X").unwrap().iter().any(|&x| x != 0.0));

    let bad_len = Bindings::new().symbol("n", 3i64).array("lens", vec![4, 0]);
    let err = TensorStore::new(&m, &bad_len).unwrap_err();
    assert!(matches!(err, StoreError::Array { ref tensor, .. } if tensor == "lens"));
    let bad_value = Bindings::new()
        .symbol("n", 3i64)
        .array("lens", vec![4, 0, 1 << 40]);
    let err = TensorStore::new(&m, &bad_value).unwrap_err();
    assert!(err.to_string().contains("does not fit i32"), "{err}");
    let float = Bindings::new().symbol("n", 3i64).array("X", vec![0; 6]);
    let err = TensorStore::new(&m, &float).unwrap_err();
    assert!(matches!(err, StoreError::Array { ref tensor, .. } if tensor == "X"));
}

#[test]
fn fill_random_is_deterministic_and_in_range() {
    let mut a = shapes_store();
    let mut b = shapes_store();
    a.fill_random(42);
    b.fill_random(42);
    for t in 0..a.len() as u32 {
        assert_eq!(a.bytes(t), b.bytes(t));
    }
    let x = a.read::<f32>("A").unwrap();
    assert!(x.iter().all(|v| (-1.0..1.0).contains(v)));
    assert!(x.iter().any(|&v| v != x[0]), "not constant");
    assert!(
        a.read::<f16>("B")
            .unwrap()
            .iter()
            .all(|v| (-1.0..1.0).contains(&v.to_f32()))
    );
    assert!(
        a.read::<bf16>("D")
            .unwrap()
            .iter()
            .all(|v| (-1.0..1.0).contains(&v.to_f32()))
    );
    assert!(
        a.read::<i32>("C")
            .unwrap()
            .iter()
            .all(|v| (0..16).contains(v))
    );
    assert!(a.read::<u8>("E").unwrap().iter().all(|v| *v < 16));
    assert!(a.read::<u64>("F").unwrap().iter().all(|v| *v < 16));
    b.fill_random(43);
    assert_ne!(a.bytes(0), b.bytes(0));
}

#[test]
fn check_region_reports_tensor_and_dim() {
    let s = shapes_store();
    // A is 5 x 4.
    assert!(s.check_region(&io(0, &[1, 0], &[4, 4], Access::In)).is_ok());
    let err = s
        .check_region(&io(0, &[1, 2], &[4, 3], Access::Out))
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::RegionBounds {
            tensor: "A".into(),
            dim: 1,
            start: 2,
            size: 3,
            extent: 4,
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("`A`") && msg.contains("dimension 1"), "{msg}");
    let err = s.check_region(&io(0, &[0], &[1], Access::In)).unwrap_err();
    assert!(matches!(
        err,
        StoreError::RegionRank {
            rank: 1,
            expected: 2,
            ..
        }
    ));
    let err = s.check_region(&io(9, &[0], &[1], Access::In)).unwrap_err();
    assert_eq!(
        err,
        StoreError::NoSuchTensor {
            tensor: 9,
            count: 6
        }
    );
    // A raw region claiming more dimensions than are tracked is refused, not indexed.
    let five =
        TensorStore::new(&module("tensor P: f32[1, 1, 1, 1, 2];"), &Bindings::new()).unwrap();
    let raw = TaskIo {
        region: Region {
            rank: 5,
            ..region(0, &[0, 0, 0, 0], &[1, 1, 1, 1])
        },
        ..TaskIo::default()
    };
    let err = five.check_region(&raw).unwrap_err();
    assert!(matches!(
        err,
        StoreError::RegionRank {
            rank: 5,
            expected: 5,
            ..
        }
    ));
}

// ---------------------------------------------------------------------------------------------
// Views

const VIEWS: &str = "
tensor V1: f32[50];
tensor V2: f32[6, 7];
tensor V3: f32[4, 5, 6];
tensor V4: f32[3, 2, 4, 5];
tensor H: f16[4, 4];
";

/// A store whose f32 tensors hold their own linear indices.
fn index_store() -> TensorStore {
    let mut s = TensorStore::new(&module(VIEWS), &Bindings::new()).unwrap();
    for name in ["V1", "V2", "V3", "V4"] {
        let n = s.info(s.index_of(name).unwrap()).elements();
        let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
        s.write(name, &data).unwrap();
    }
    s
}

fn check_view_geometry(s: &TensorStore, r: Region) {
    let shape = s.info(r.tensor).shape.clone();
    let offs = naive_offsets(&shape, &r);
    let rank = r.rank as usize;
    let cols = r.size[rank - 1] as usize;
    let rows: usize = (0..rank - 1).map(|d| r.size[d] as usize).product();
    let list = [TaskIo::new(r, Access::InOut)];
    let c = ctx(s, &[], &list);
    let v = c.read::<f32>(0).unwrap();
    assert_eq!((v.rows(), v.cols()), (rows, cols), "{r:?}");
    assert_eq!(v.elements(), offs.len());
    for row in 0..rows {
        for col in 0..cols {
            assert_eq!(
                v.get(row, col),
                offs[row * cols + col] as f32,
                "{r:?} ({row}, {col})"
            );
        }
    }
    let all: Vec<f32> = offs.iter().map(|&o| o as f32).collect();
    assert_eq!(v.to_vec(), all);
}

#[test]
fn views_of_1d_2d_3d_regions_match_naive_indexing() {
    let s = index_store();
    check_view_geometry(&s, region(0, &[7], &[30]));
    check_view_geometry(&s, region(0, &[0], &[50]));
    check_view_geometry(&s, region(1, &[1, 2], &[4, 3]));
    check_view_geometry(&s, region(1, &[0, 0], &[6, 7]));
    check_view_geometry(&s, region(2, &[1, 2, 1], &[2, 3, 4]));
    check_view_geometry(&s, region(2, &[3, 0, 5], &[1, 5, 1]));
    check_view_geometry(&s, region(3, &[1, 0, 1, 2], &[2, 2, 3, 3]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(256)))]

    #[test]
    fn views_match_naive_indexing_for_random_boxes(
        which in 0usize..4,
        seeds in proptest::collection::vec((0u32..1000, 0u32..1000), 4),
    ) {
        let s = index_store();
        let t = which as u32;
        let shape = s.info(t).shape.clone();
        let mut start = Vec::new();
        let mut size = Vec::new();
        for (d, &extent) in shape.iter().enumerate() {
            let extent = extent as u32;
            let st = seeds[d].0 % extent;
            let sz = 1 + seeds[d].1 % (extent - st);
            start.push(st as i64);
            size.push(sz as i64);
        }
        check_view_geometry(&s, region(t, &start, &size));
    }
}

#[test]
fn write_views_write_exactly_their_region() {
    let s = TensorStore::new(&module(VIEWS), &Bindings::new()).unwrap();
    let list = [
        io(2, &[1, 1, 2], &[2, 3, 2], Access::Out),
        io(1, &[4, 0], &[2, 7], Access::InOut),
    ];
    {
        let c = ctx(&s, &[], &list);
        let mut w = c.write::<f32>(0).unwrap();
        assert_eq!((w.rows(), w.cols()), (6, 2));
        w.fill(1.5);
        w.set(5, 1, 9.0);
        assert_eq!(w.get(5, 1), 9.0);
        w.row_mut(0)[0] = -1.0;
        assert_eq!(w.row(0), [-1.0, 1.5]);
        let mut x = c.write::<f32>(1).unwrap();
        for r in 0..x.rows() {
            for (k, v) in x.row_mut(r).iter_mut().enumerate() {
                *v = (r * 10 + k) as f32;
            }
        }
        assert_eq!(x.to_vec().len(), 14);
    }
    let v3 = s.read::<f32>("V3").unwrap();
    let offs = naive_offsets(&[4, 5, 6], &list[0].region);
    for (i, &x) in v3.iter().enumerate() {
        let want = match offs.iter().position(|&o| o == i) {
            Some(0) => -1.0,
            Some(11) => 9.0,
            Some(_) => 1.5,
            None => 0.0,
        };
        assert_eq!(x, want, "element {i}");
    }
    let v2 = s.read::<f32>("V2").unwrap();
    for (i, &x) in v2.iter().enumerate() {
        let want = if i >= 28 {
            ((i / 7 - 4) * 10 + i % 7) as f32
        } else {
            0.0
        };
        assert_eq!(x, want, "element {i}");
    }
}

fn view_problem(e: KernelError) -> (usize, String, ViewProblem) {
    match e {
        KernelError::View {
            index,
            tensor,
            problem,
        } => (index, tensor, problem),
        other => panic!("expected a view error, got {other:?}"),
    }
}

#[test]
fn write_view_of_an_in_region_is_refused() {
    let s = index_store();
    let list = [io(1, &[0, 0], &[2, 2], Access::In)];
    let c = ctx(&s, &[], &list);
    let err = c.write::<f32>(0).err().unwrap();
    assert!(err.to_string().contains("`V2`"), "{err}");
    assert_eq!(
        view_problem(err),
        (
            0,
            "V2".into(),
            ViewProblem::NotWritable { access: Access::In }
        )
    );
    // Reading it is fine.
    assert_eq!(c.read::<f32>(0).unwrap().get(1, 1), 8.0);
}

#[test]
fn second_write_view_of_a_region_is_refused() {
    let s = index_store();
    let list = [io(1, &[0, 0], &[2, 2], Access::Out)];
    let c = ctx(&s, &[], &list);
    {
        let _first = c.write::<f32>(0).unwrap();
        let err = c.write::<f32>(0).err().unwrap();
        assert_eq!(view_problem(err).2, ViewProblem::SecondWrite);
    }
    // Still refused: views stay registered for the context's lifetime.
    assert!(c.write::<f32>(0).is_err());
}

#[test]
fn overlapping_write_and_read_views_are_refused() {
    let s = index_store();
    let list = [
        io(1, &[0, 0], &[3, 3], Access::In),
        io(1, &[2, 2], &[3, 3], Access::Out),
        io(1, &[2, 2], &[1, 1], Access::InOut),
    ];
    // read, then an overlapping write
    let c = ctx(&s, &[], &list);
    let _r = c.read::<f32>(0).unwrap();
    let err = c.write::<f32>(1).err().unwrap();
    assert_eq!(
        view_problem(err),
        (1, "V2".into(), ViewProblem::Overlap { other: 0 })
    );
    // write, then an overlapping read
    let c = ctx(&s, &[], &list);
    let _w = c.write::<f32>(1).unwrap();
    let err = c.read::<f32>(0).err().unwrap();
    assert_eq!(view_problem(err).2, ViewProblem::Overlap { other: 1 });
    // write, then an overlapping write of another region index
    let err = c.write::<f32>(2).err().unwrap();
    assert_eq!(view_problem(err).2, ViewProblem::Overlap { other: 1 });
    // read and write of the same inout region
    let c = ctx(&s, &[], &list);
    let _r = c.read::<f32>(2).unwrap();
    let err = c.write::<f32>(2).err().unwrap();
    assert_eq!(view_problem(err).2, ViewProblem::Overlap { other: 2 });
}

#[test]
fn non_overlapping_views_coexist() {
    let s = index_store();
    let list = [
        io(1, &[0, 0], &[3, 7], Access::In),
        io(1, &[3, 0], &[3, 3], Access::Out),
        io(1, &[3, 3], &[3, 4], Access::Out),
        io(1, &[0, 0], &[3, 7], Access::In),
        io(2, &[0, 0, 0], &[4, 5, 6], Access::InOut),
    ];
    {
        let c = ctx(&s, &[], &list);
        let a = c.read::<f32>(0).unwrap();
        let mut w1 = c.write::<f32>(1).unwrap();
        let mut w2 = c.write::<f32>(2).unwrap();
        let again = c.read::<f32>(3).unwrap();
        let same = c.read::<f32>(0).unwrap();
        let mut other = c.write::<f32>(4).unwrap();
        for r in 0..3 {
            w1.row_mut(r).copy_from_slice(&a.row(r)[..3]);
            w2.row_mut(r).copy_from_slice(&again.row(r)[3..]);
        }
        other.fill(2.0);
        assert_eq!(same.to_vec(), a.to_vec());
    }
    let v2 = s.read::<f32>("V2").unwrap();
    for (i, &x) in v2.iter().enumerate().skip(21) {
        assert_eq!(x, (i - 21) as f32);
    }
}

#[test]
fn views_check_dtype_bounds_and_indices() {
    let s = index_store();
    let list = [
        io(4, &[0, 0], &[2, 2], Access::InOut),
        io(1, &[5, 0], &[2, 7], Access::In),
    ];
    let c = ctx(&s, &[], &list);
    let (i, t, p) = view_problem(c.read::<f32>(0).err().unwrap());
    assert_eq!((i, t.as_str()), (0, "H"));
    assert_eq!(
        p,
        ViewProblem::DType {
            dtype: DType::F16,
            element: "f32",
        }
    );
    assert!(c.write::<f16>(0).is_ok());
    let (_, t, p) = view_problem(c.read::<f32>(1).err().unwrap());
    assert_eq!(t, "V2");
    assert!(matches!(
        p,
        ViewProblem::Region(StoreError::RegionBounds { dim: 0, .. })
    ));
    assert_eq!(
        c.read::<f32>(2).err().unwrap(),
        KernelError::Region { index: 2, count: 2 }
    );
    assert_eq!(c.info(1).unwrap().name, "V2");
}

#[test]
fn params_decode_and_report_missing_ones() {
    let s = index_store();
    let params = [7u64, (-3i64) as u64, 2.5f64.to_bits()];
    let c = ctx(&s, &params, &[]);
    assert_eq!(c.params(), params);
    assert_eq!(c.param_u64(0), Ok(7));
    assert_eq!(c.param_i64(1), Ok(-3));
    assert_eq!(c.param_f64(2), Ok(2.5));
    assert_eq!(c.param_f32(2), Ok(2.5f32));
    let err = c.param_u64(3).unwrap_err();
    assert_eq!(err, KernelError::Param { index: 3, count: 3 });
    assert!(err.to_string().contains("parameter 3"));
    assert_eq!((c.task(), c.executor(), c.num_regions()), (0, 0, 0));
    assert!(c.io(0).is_err());
}

#[test]
fn task_and_executor_are_reported() {
    let s = index_store();
    // SAFETY: the only context, on this thread.
    let c = unsafe { TaskContext::new(&s, 12, 3, &[], &[]) };
    assert_eq!((c.task(), c.executor()), (12, 3));
}

#[test]
fn tasks_on_disjoint_regions_run_on_threads_at_once() {
    let reg = KernelRegistry::with_builtins();
    let s = TensorStore::new(&module(VIEWS), &Bindings::new()).unwrap();
    let halves = [
        [io(1, &[0, 0], &[3, 7], Access::Out)],
        [io(1, &[3, 0], &[3, 7], Access::Out)],
    ];
    let params = [[1.0f64.to_bits()], [2.0f64.to_bits()]];
    std::thread::scope(|scope| {
        for k in 0..2 {
            let (reg, s, list, p) = (&reg, &s, &halves[k], &params[k]);
            scope.spawn(move || {
                // SAFETY: the two tasks' regions are disjoint and nothing else touches the store
                // until both threads are joined.
                let c = unsafe { TaskContext::new(s, k as u32, k as u32, p, list) };
                reg.call(reg.lookup("fill").unwrap(), &c).unwrap();
            });
        }
    });
    let v2 = s.read::<f32>("V2").unwrap();
    assert!(v2[..21].iter().all(|&x| x == 1.0) && v2[21..].iter().all(|&x| x == 2.0));
}

// ---------------------------------------------------------------------------------------------
// Built-in kernels

const KERNELS: &str = "
tensor X: f32[8, 12];
tensor Y: f32[8, 12];
tensor Z: f32[8, 12];
tensor T3: f32[3, 4, 10];
tensor H: f16[8, 12];
tensor I: i32[8, 12];
";

fn random_store(seed: u64) -> (TensorStore, Rng) {
    let mut s = TensorStore::new(&module(KERNELS), &Bindings::new()).unwrap();
    let mut rng = Rng(seed);
    for name in ["X", "Y", "Z"] {
        let data = rng.f32s(96);
        s.write(name, &data).unwrap();
    }
    let data = rng.f32s(120);
    s.write("T3", &data).unwrap();
    (s, rng)
}

/// Applies `f(dst_offset, src_offsets)` over matching elements of two regions.
fn naive_pairs(shape_a: &[u64], a: &Region, shape_b: &[u64], b: &Region) -> Vec<(usize, usize)> {
    naive_offsets(shape_a, a)
        .into_iter()
        .zip(naive_offsets(shape_b, b))
        .collect()
}

#[test]
fn builtins_are_registered_with_costs() {
    let reg = KernelRegistry::with_builtins();
    assert_eq!(reg.names().collect::<Vec<_>>(), NAMES);
    assert_eq!(reg.len(), NAMES.len());
    assert!(KernelRegistry::new().is_empty());
    for (i, name) in NAMES.iter().enumerate() {
        let id = reg.lookup(name).unwrap();
        assert_eq!(id.0 as usize, i);
        assert_eq!(reg.name(id), *name);
    }
    let (s, _) = random_store(1);
    let list = [
        io(0, &[0, 0], &[2, 3], Access::In),
        io(1, &[0, 0], &[2, 3], Access::In),
        io(2, &[0, 0], &[2, 3], Access::Out),
    ];
    let c = ctx(&s, &[], &list);
    let cost = |name| reg.cost(reg.lookup(name).unwrap(), &c);
    // The roofline model of `cost`: 3 regions of 6 f32 elements move 72 bytes (3 cycles).
    assert_eq!(cost("empty"), LAUNCH_CYCLES);
    assert_eq!(cost("fill"), LAUNCH_CYCLES + 3);
    assert_eq!(cost("add"), LAUNCH_CYCLES + 3);
    assert_eq!(
        cost("add"),
        Work {
            vector_ops: 6,
            bytes: 72,
            ..Work::default()
        }
        .cycles()
    );
    // A registered kernel without a cost function: 1 + elements of every region.
    let mut reg = reg.clone();
    let id = reg.register("custom", |_| Ok(()));
    assert_eq!(reg.cost(id, &c), 19);
    assert!(reg.set_cost("custom", |c| c.num_regions() as u64));
    assert_eq!(reg.cost(id, &c), 3);
}

#[test]
fn fill_matches_naive() {
    let reg = KernelRegistry::with_builtins();
    let (s, _) = random_store(2);
    let before = s.read::<f32>("T3").unwrap();
    let r = io(3, &[1, 1, 2], &[2, 3, 7], Access::Out);
    run(&reg, &s, "fill", &[(-0.1f64).to_bits()], &[r]).unwrap();
    let mut want = before;
    for o in naive_offsets(&[3, 4, 10], &r.region) {
        want[o] = -0.1f64 as f32;
    }
    assert_eq!(s.read::<f32>("T3").unwrap(), want);
    let err = run(&reg, &s, "fill", &[], &[r]).unwrap_err();
    assert_eq!(err, KernelError::Param { index: 0, count: 0 });
}

#[test]
fn builtins_refuse_extra_scalar_parameters() {
    let reg = KernelRegistry::with_builtins();
    let (s, _) = random_store(2);
    let r = io(3, &[1, 1, 2], &[2, 3, 7], Access::Out);
    let before = s.read::<f32>("T3").unwrap();
    let err = run(&reg, &s, "fill", &[1, 2], &[r]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `fill`: parameter 1: the kernel takes at most 1 scalar parameter(s) (value: f64), \
         but the task passes 2"
    );
    let err = run(
        &reg,
        &s,
        "counter",
        &[7],
        &[io(3, &[1, 1, 2], &[2, 3, 7], Access::InOut)],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `counter`: parameter 0: the kernel takes no scalar parameters, but the task passes 1"
    );
    assert_eq!(s.read::<f32>("T3").unwrap(), before, "nothing written");
    // rope's `pos` is optional in the signature: the form with cos / sin tables takes no
    // scalars; the angle form still requires it (a missing `pos` is `KernelError::Param`).
    let sig = pto_wsp_kernels::builtins::signature("rope").unwrap();
    assert_eq!(
        sig.describe(),
        "pos: i64 (optional), tokens: i64 (optional), theta: f64 (optional)"
    );
}

#[test]
fn copy_add_scale_accumulate_counter_match_naive() {
    let reg = KernelRegistry::with_builtins();
    let s2 = [8u64, 12];
    let s3 = [3u64, 4, 10];
    for seed in 0..8 {
        let (s, _) = random_store(100 + seed);
        let x0 = s.read::<f32>("X").unwrap();
        let y0 = s.read::<f32>("Y").unwrap();
        let z0 = s.read::<f32>("Z").unwrap();
        let t0 = s.read::<f32>("T3").unwrap();

        // copy: X[1..4, 2..12] -> T3[0..2, 1..2, 0..10] is 3 x 10 vs 2 x 10: refused.
        let a = io(0, &[1, 2], &[3, 10], Access::In);
        let bad = io(3, &[0, 1, 0], &[2, 1, 10], Access::Out);
        let err = run(&reg, &s, "copy", &[], &[a, bad]).unwrap_err();
        assert!(matches!(err, KernelError::Shape { ref kernel, .. } if kernel == "copy"));
        assert!(err.to_string().contains("3 x 10"), "{err}");

        // copy: X[1..4, 2..12] (3 x 10) -> T3[0..3, 2..3, 0..10] (3 x 10).
        let dst = io(3, &[0, 2, 0], &[3, 1, 10], Access::Out);
        run(&reg, &s, "copy", &[], &[a, dst]).unwrap();
        let mut t = t0.clone();
        for (i, o) in naive_pairs(&s2, &a.region, &s3, &dst.region) {
            t[o] = x0[i];
        }
        assert_eq!(s.read::<f32>("T3").unwrap(), t);

        // add: Z[0..4, 0..6] = X[4..8, 6..12] + Y[2..6, 3..9].
        let (ra, rb) = (
            io(0, &[4, 6], &[4, 6], Access::In),
            io(1, &[2, 3], &[4, 6], Access::In),
        );
        let rz = io(2, &[0, 0], &[4, 6], Access::Out);
        run(&reg, &s, "add", &[], &[ra, rb, rz]).unwrap();
        let mut z = z0.clone();
        let pa = naive_offsets(&s2, &ra.region);
        let pb = naive_offsets(&s2, &rb.region);
        let pz = naive_offsets(&s2, &rz.region);
        for k in 0..pz.len() {
            z[pz[k]] = x0[pa[k]] + y0[pb[k]];
        }
        assert_eq!(s.read::<f32>("Z").unwrap(), z);

        // scale: Y[0..8, 0..5] = X[0..8, 7..12] * 1.7 (rounded to f32 first).
        let (src, dst) = (
            io(0, &[0, 7], &[8, 5], Access::In),
            io(1, &[0, 0], &[8, 5], Access::Out),
        );
        run(&reg, &s, "scale", &[1.7f64.to_bits()], &[src, dst]).unwrap();
        let mut y = y0.clone();
        for (i, o) in naive_pairs(&s2, &src.region, &s2, &dst.region) {
            y[o] = x0[i] * 1.7f32;
        }
        assert_eq!(s.read::<f32>("Y").unwrap(), y);

        // accumulate: T3[1..3, 0..4, 5..10] += X[0..8, 0..5] (8 x 5 both).
        let t_now = s.read::<f32>("T3").unwrap();
        let (src, acc) = (
            io(0, &[0, 0], &[8, 5], Access::In),
            io(3, &[1, 0, 5], &[2, 4, 5], Access::InOut),
        );
        run(&reg, &s, "accumulate", &[], &[src, acc]).unwrap();
        let mut t = t_now.clone();
        for (i, o) in naive_pairs(&s2, &src.region, &s3, &acc.region) {
            t[o] += x0[i];
        }
        assert_eq!(s.read::<f32>("T3").unwrap(), t);

        // counter: X[2..5, 3..4] += 1, twice.
        let c = io(0, &[2, 3], &[3, 1], Access::InOut);
        run(&reg, &s, "counter", &[], &[c]).unwrap();
        run(&reg, &s, "counter", &[], &[c]).unwrap();
        let mut x = x0.clone();
        for o in naive_offsets(&s2, &c.region) {
            x[o] = x[o] + 1.0 + 1.0;
        }
        assert_eq!(s.read::<f32>("X").unwrap(), x);
    }
}

#[test]
fn builtins_refuse_other_dtypes_and_bad_accesses() {
    let reg = KernelRegistry::with_builtins();
    let (s, _) = random_store(3);
    let i = io(5, &[0, 0], &[2, 2], Access::InOut);
    let err = run(&reg, &s, "counter", &[], &[i]).unwrap_err();
    assert!(err.to_string().contains("`I`"), "{err}");
    assert!(matches!(
        view_problem(err).2,
        ViewProblem::DType {
            dtype: DType::I32,
            element: "f32, f16 or bf16"
        }
    ));
    // counter updates its region: `out` is refused, naming kernel, region and access.
    let x = io(0, &[0, 0], &[2, 2], Access::Out);
    let err = run(&reg, &s, "counter", &[], &[x]).unwrap_err();
    assert_eq!(
        err,
        KernelError::Access {
            kernel: "counter".into(),
            index: 0,
            access: Access::Out
        }
    );
    assert!(err.to_string().contains("declare it `inout`"), "{err}");
    // f16 regions are counted in f32 and rounded back.
    let h = io(4, &[0, 0], &[2, 2], Access::InOut);
    run(&reg, &s, "counter", &[], &[h]).unwrap();
    assert_eq!(s.read::<f16>("H").unwrap()[..2], [f16::ONE, f16::ONE]);
    // copy into an `in` region
    let a = io(0, &[0, 0], &[2, 2], Access::In);
    let b = io(1, &[0, 0], &[2, 2], Access::In);
    let err = run(&reg, &s, "copy", &[], &[a, b]).unwrap_err();
    assert!(matches!(
        view_problem(err).2,
        ViewProblem::NotWritable { .. }
    ));
    // add with a missing region
    let err = run(&reg, &s, "add", &[], &[a, b]).unwrap_err();
    assert_eq!(err, KernelError::Region { index: 2, count: 2 });
    // empty accepts anything
    run(&reg, &s, "empty", &[], &[]).unwrap();
}

// ---------------------------------------------------------------------------------------------
// RegionLedger: every pair of a launch's items, whatever the timing

/// The ledger's verdict computed by brute force: the earliest earlier item with a region that
/// intersects one of `io`'s where one of the two writes.
fn earliest_conflict(earlier: &[(u32, Vec<TaskIo>)], io: &[TaskIo]) -> Option<u32> {
    earlier
        .iter()
        .filter(|(_, old)| {
            old.iter().any(|o| {
                io.iter().any(|n| {
                    (o.access().writes() || n.access().writes()) && o.region.intersects(&n.region)
                })
            })
        })
        .map(|(i, _)| *i)
        .min()
}

fn access_of(k: u8) -> Access {
    [Access::In, Access::Out, Access::InOut][usize::from(k % 3)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(256)))]

    /// Random items of 1 to 3 boxes in 2 tensors of rank 1 to 3 (long and short extents mixed,
    /// so the index's reach matters): the ledger refuses exactly the items the brute force
    /// says conflict with an admitted one, naming the earliest such item, and records nothing
    /// of a refused item.
    #[test]
    fn the_ledger_refuses_exactly_the_items_a_brute_force_finds_conflicting(
        items in prop::collection::vec(
            prop::collection::vec(
                (0u32..2, 1usize..4, prop::array::uniform3((0i64..12, 1i64..6)), any::<bool>(), any::<u8>()),
                1..4,
            ),
            1..40,
        )
    ) {
        let mut ledger = RegionLedger::new();
        let mut admitted: Vec<(u32, Vec<TaskIo>)> = Vec::new();
        for (n, boxes) in items.iter().enumerate() {
            let io: Vec<TaskIo> = boxes
                .iter()
                .map(|&(t, rank, dims, long, k)| {
                    let start: Vec<i64> = dims[..rank].iter().map(|d| d.0).collect();
                    let size: Vec<i64> = dims[..rank]
                        .iter()
                        .map(|d| if long { d.1 * 4 } else { d.1 })
                        .collect();
                    io(t, &start, &size, access_of(k))
                })
                .collect();
            let want = earliest_conflict(&admitted, &io);
            match ledger.record(n as u32, &io) {
                Ok(()) => {
                    prop_assert_eq!(want, None, "item {} admitted", n);
                    admitted.push((n as u32, io));
                }
                Err(c) => {
                    prop_assert_eq!(Some(c.running), want, "item {}", n);
                    prop_assert_eq!(c.task, n as u32);
                    prop_assert!(c.region.intersects(&c.running_region));
                    prop_assert!(c.access.writes() || c.running_access.writes());
                }
            }
        }
        let regions: usize = admitted.iter().map(|(_, io)| io.len()).sum();
        prop_assert_eq!(ledger.regions(), regions);
    }
}

#[test]
fn the_ledger_finds_a_repeated_write_however_far_apart_and_lets_reads_share() {
    let mut ledger = RegionLedger::new();
    // A row of column tiles written once each, then read twice: no conflict.
    for c in 0..64u32 {
        let w = io(0, &[0, i64::from(c) * 16], &[16, 16], Access::Out);
        ledger.record(c, &[w]).unwrap();
    }
    for c in 0..64u32 {
        let r = io(1, &[0, i64::from(c) * 16], &[16, 16], Access::In);
        ledger.record(64 + c, &[r]).unwrap();
        ledger.record(128 + c, &[r]).unwrap();
    }
    // A write of one element of tensor 1, long after: refused, naming the first reader.
    let err = ledger
        .record(500, &[io(1, &[3, 5 * 16 + 2], &[1, 1], Access::Out)])
        .unwrap_err();
    assert_eq!((err.running, err.task, err.tensor()), (64 + 5, 500, 1));
    assert_eq!(
        err.named("K").split(':').next(),
        Some("conflict on tensor `K`")
    );
    // Tile 7 of tensor 0 written again: refused, naming its first writer.
    let err = ledger
        .record(501, &[io(0, &[15, 7 * 16 + 15], &[4, 4], Access::InOut)])
        .unwrap_err();
    assert_eq!((err.running, err.running_access), (7, Access::Out));
    assert_eq!(ledger.regions(), 64 * 3);
}

// ---------------------------------------------------------------------------------------------
// ConflictChecker

#[test]
fn conflict_names_both_tasks_tensor_boxes_and_accesses() {
    let ch = ConflictChecker::new();
    ch.begin(1, &[io(0, &[0, 0], &[4, 4], Access::In)]).unwrap();
    ch.begin(2, &[io(0, &[0, 0], &[4, 4], Access::In)]).unwrap(); // two readers
    ch.begin(3, &[io(1, &[0, 0], &[4, 4], Access::Out)])
        .unwrap(); // another tensor
    let err: Conflict = ch
        .begin(
            4,
            &[
                io(2, &[0], &[1], Access::Out),
                io(0, &[3, 2], &[2, 2], Access::InOut),
            ],
        )
        .unwrap_err();
    assert_eq!((err.running, err.task, err.tensor()), (1, 4, 0));
    assert_eq!(
        (err.running_access, err.access),
        (Access::In, Access::InOut)
    );
    let msg = err.to_string();
    for part in [
        "tensor 0",
        "task 4",
        "task 1",
        "inout [3..5, 2..4]",
        "in [0..4, 0..4]",
    ] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
    // Nothing of task 4 was recorded.
    assert_eq!(ch.regions_in_flight(), 3);
    ch.end(1);
    ch.end(2);
    ch.begin(4, &[io(0, &[3, 2], &[2, 2], Access::InOut)])
        .unwrap();
    ch.end(4);
    ch.end(3);
    assert_eq!(ch.regions_in_flight(), 0);
}

#[derive(Clone, Debug)]
enum Op {
    Begin(Vec<(u32, [u32; 2], [u32; 2], Access)>),
    End(usize),
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)]
}

fn op() -> impl Strategy<Value = Op> {
    let entry = (0u32..2, [0u32..6, 0u32..6], [1u32..4, 1u32..4], access());
    prop_oneof![
        3 => proptest::collection::vec(entry, 1..4).prop_map(Op::Begin),
        2 => (0usize..8).prop_map(Op::End),
    ]
}

/// Whether two entries touch a common element (by enumerating cells), one of them writing.
fn brute_conflict(a: &TaskIo, b: &TaskIo) -> bool {
    if a.region.tensor != b.region.tensor || !(a.access().writes() || b.access().writes()) {
        return false;
    }
    let cells = |r: &Region| {
        let mut v = Vec::new();
        for i in r.start[0]..r.start[0] + r.size[0] {
            for j in r.start[1]..r.start[1] + r.size[1] {
                v.push((i, j));
            }
        }
        v
    };
    let cb = cells(&b.region);
    cells(&a.region).iter().any(|c| cb.contains(c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(256)))]

    #[test]
    fn checker_agrees_with_brute_force(ops in proptest::collection::vec(op(), 1..40)) {
        let ch = ConflictChecker::new();
        let mut model: Vec<(u32, Vec<TaskIo>)> = Vec::new();
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Begin(entries) => {
                    let list: Vec<TaskIo> = entries
                        .iter()
                        .map(|&(t, st, sz, acc)| TaskIo::new(Region::new_2d(t, st[0], sz[0], st[1], sz[1]), acc))
                        .collect();
                    let task = next;
                    next += 1;
                    let expected = model
                        .iter()
                        .any(|(_, old)| old.iter().any(|o| list.iter().any(|n| brute_conflict(o, n))));
                    match ch.begin(task, &list) {
                        Ok(()) => {
                            prop_assert!(!expected, "missed a conflict of task {task}");
                            model.push((task, list));
                        }
                        Err(c) => {
                            prop_assert!(expected, "false conflict: {c}");
                            prop_assert_eq!(c.task, task);
                            let (_, old) = model.iter().find(|(t, _)| *t == c.running).unwrap();
                            let o = old.iter().find(|o| o.region == c.running_region && o.access() == c.running_access).unwrap();
                            let n = TaskIo::new(c.region, c.access);
                            prop_assert!(brute_conflict(o, &n));
                        }
                    }
                }
                Op::End(k) => {
                    if !model.is_empty() {
                        let (task, _) = model.remove(k % model.len());
                        ch.end(task);
                    }
                }
            }
            prop_assert_eq!(ch.regions_in_flight(), model.iter().map(|(_, l)| l.len()).sum::<usize>());
        }
    }
}
