//! The cost model of the built-ins, and registry aliases.

use super::*;
use pto_wsp_kernels::builtins::NAMES;
use pto_wsp_kernels::cost::{LAUNCH_CYCLES, Work};

fn cost(reg: &KernelRegistry, s: &TensorStore, name: &str, list: &[TaskIo]) -> u64 {
    reg.cost(reg.lookup(name).unwrap(), &ctx(s, &[], list))
}

#[test]
fn costs_follow_the_roofline_model() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor A: f16[128, 256];\ntensor B: f16[256, 64];\ntensor C: f32[128, 64];\n\
         tensor Q: f16[4, 128];\ntensor K: f16[512, 128];\ntensor V: f16[512, 128];\n\
         tensor O: f32[4, 128];\ntensor M: f32[4];\ntensor L: f32[4];\ntensor X: f32[64, 1024];\ntensor Y: f32[64, 1024];",
        500,
    );
    // matmul: 2·128·64·256 = 4,194,304 flops at 32 a cycle = 131,072 cycles; bytes (64 KiB +
    // 32 KiB + 32 KiB) / 32 = 4,096: compute-bound.
    let mm = [
        whole(&s, "A", Access::In),
        whole(&s, "B", Access::In),
        whole(&s, "C", Access::Out),
    ];
    assert_eq!(cost(&reg, &s, "matmul", &mm), LAUNCH_CYCLES + 131_072);
    // matmul_acc reads C too: the same compute, still compute-bound.
    let mut acc = mm;
    acc[2] = whole(&s, "C", Access::InOut);
    assert_eq!(cost(&reg, &s, "matmul_acc", &acc), LAUNCH_CYCLES + 131_072);
    // add on 64 x 1024 f32: 65,536 ops / 16 = 4,096 cycles; 3 × 256 KiB / 32 = 24,576: memory-bound.
    let add = [
        whole(&s, "X", Access::In),
        whole(&s, "Y", Access::In),
        whole(&s, "X", Access::Out),
    ];
    assert_eq!(cost(&reg, &s, "add", &add), LAUNCH_CYCLES + 24_576);
    // exp: one transcendental an element, at 4 a cycle: 16,384 + 4,096 > 16,384 bytes-cycles.
    let ex = [whole(&s, "X", Access::In), whole(&s, "Y", Access::Out)];
    assert_eq!(cost(&reg, &s, "exp", &ex), LAUNCH_CYCLES + 4_096 + 16_384);
    // Decode attention over 512 x 128 for 4 queries: 4·(4·512·128) = 1,048,576 flops (32,768
    // cycles), 4·2,048 + 2·512 ops (576 cycles), 2,048 exps (512 cycles).
    let at = [
        whole(&s, "Q", Access::In),
        whole(&s, "K", Access::In),
        whole(&s, "V", Access::In),
        whole(&s, "O", Access::Out),
        whole(&s, "M", Access::Out),
        whole(&s, "L", Access::Out),
    ];
    assert_eq!(
        cost(&reg, &s, "attn_decode_chunk", &at),
        LAUNCH_CYCLES + 32_768 + 576 + 512
    );
    let w = Work {
        vector_ops: 10,
        transcendentals: 5,
        matmul_flops: 64,
        bytes: 0,
    };
    assert_eq!(w.cycles(), LAUNCH_CYCLES + 1 + 2 + 2);
    // Every built-in has a cost function that does not fail on a task without regions.
    for name in NAMES {
        let c = cost(&reg, &s, name, &[]);
        assert!(c >= LAUNCH_CYCLES, "{name}: {c}");
    }
}

#[test]
fn aliases_share_kernel_and_cost() {
    let mut reg = KernelRegistry::with_builtins();
    let id = reg.alias("decode_chunk", "attn_decode_chunk").unwrap();
    assert_eq!(reg.lookup("decode_chunk"), Some(id));
    assert_eq!(reg.name(id), "decode_chunk");
    assert!(reg.alias("x", "no_such_kernel").is_none());
    assert!(reg.lookup("x").is_none());
    let s = store(
        "tensor A: f32[8, 16];\ntensor B: f32[16, 8];\ntensor C: f32[8, 8];",
        510,
    );
    let mm = [
        whole(&s, "A", Access::In),
        whole(&s, "B", Access::In),
        whole(&s, "C", Access::Out),
    ];
    let gid = reg.alias("gemm_tile", "matmul").unwrap();
    assert_eq!(
        reg.cost(gid, &ctx(&s, &[], &mm)),
        reg.cost(reg.lookup("matmul").unwrap(), &ctx(&s, &[], &mm))
    );
    reg.call(gid, &ctx(&s, &[], &mm)).unwrap();
    let (a, b, c) = (get(&s, "A"), get(&s, "B"), get(&s, "C"));
    let want: f64 = (0..16).map(|p| a[p] * b[p * 8]).sum();
    assert!((c[0] - want).abs() < 1e-5);
    // An alias runs the built-in itself: its messages name the built-in.
    let err = reg.call(gid, &ctx(&s, &[], &mm[..2])).unwrap_err();
    assert_eq!(err, KernelError::Region { index: 2, count: 2 });
    let bad = [mm[0], mm[0], mm[2]];
    let err = reg.call(gid, &ctx(&s, &[], &bad)).unwrap_err();
    assert!(err.to_string().contains("kernel `matmul`"), "{err}");
}
