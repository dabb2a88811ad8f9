//! No input makes a built-in panic: every kernel on random region lists (any tensor and element
//! type, boxes in or out of bounds, zero sizes, wrong ranks, any access) and random parameters
//! either runs or returns a `KernelError`.

use super::*;
use proptest::prelude::*;
use pto_wsp_ir::task_io::{MAX_RANK, Region};
use pto_wsp_kernels::builtins::NAMES;
use std::panic::{AssertUnwindSafe, catch_unwind};

const TENSORS: &str = "tensor A: f32[6, 8];\ntensor B: f16[8, 6];\ntensor C: bf16[4, 4, 4];\n\
                       tensor D: i32[5];\ntensor E: f32[1];\ntensor F: u8[3, 3];";
const SHAPES: [&[u32]; 6] = [&[6, 8], &[8, 6], &[4, 4, 4], &[5], &[1], &[3, 3]];

/// A raw region of tensor `t`: usually in bounds with the tensor's rank; sometimes past the
/// end, empty (size 0) or of the wrong rank.
fn raw_region(access: Access) -> impl Strategy<Value = TaskIo> {
    (
        0u32..6,
        prop::collection::vec((0u32..10, 0u32..10), 0..4),
        0u8..10,
    )
        .prop_map(move |(t, dims, oddity)| {
            let shape = SHAPES[t as usize];
            let rank = if oddity == 0 { dims.len() } else { shape.len() };
            let mut r = Region {
                tensor: t,
                rank: rank as u32,
                start: [0; MAX_RANK],
                size: [1; MAX_RANK],
            };
            for d in 0..rank.min(MAX_RANK) {
                let (st, sz) = dims.get(d).copied().unwrap_or((0, 9));
                let extent = shape.get(d).copied().unwrap_or(1);
                r.start[d] = st % extent;
                r.size[d] = 1 + sz % (extent - r.start[d]);
                match oddity {
                    1 => r.size[d] = 0,
                    2 => r.size[d] += 1,
                    _ => {}
                }
            }
            TaskIo::new(r, access)
        })
}

/// Up to 7 regions: inputs first, then outputs, as kernels take them.
fn region_list() -> impl Strategy<Value = Vec<TaskIo>> {
    (0usize..5, 0usize..4, any::<bool>()).prop_flat_map(|(ins, outs, inout)| {
        let out = if inout { Access::InOut } else { Access::Out };
        (
            prop::collection::vec(raw_region(Access::In), ins),
            prop::collection::vec(raw_region(out), outs),
        )
            .prop_map(|(mut a, b)| {
                a.extend(b);
                a
            })
    })
}

fn param() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![
        0u64,
        1,
        2,
        7,
        (-1i64) as u64,
        i64::MAX as u64,
        1e-6f64.to_bits(),
        0.5f64.to_bits(),
        f64::NAN.to_bits(),
        f64::INFINITY.to_bits(),
        (-3.0f64).to_bits(),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(2000)))]

    #[test]
    fn no_input_makes_a_builtin_panic(
        k in 0usize..NAMES.len(),
        list in region_list(),
        params in prop::collection::vec(param(), 0..4),
        seed in 0u64..100,
    ) {
        let reg = KernelRegistry::with_builtins();
        let s = store(TENSORS, seed);
        let name = NAMES[k];
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let _ = run(&reg, &s, name, &params, &list);
            let _ = reg.cost(reg.lookup(name).unwrap(), &ctx(&s, &params, &list));
        }));
        prop_assert!(outcome.is_ok(), "`{}` panicked on {:?} with params {:?}", name, list, params);
    }
}
