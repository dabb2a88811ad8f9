//! Split-KV decode attention: one chunk against a reference, and chunks merged against full
//! softmax attention over the whole sequence.

use super::*;
use proptest::prelude::*;

/// Attention in f64 of the `g` rows of `q` (`d` wide) over key / value rows `0 .. n`:
/// (output `g×d`, max `g`, sum `g`, output scale `Σ_j p_j |v_j|`).
struct Reference {
    o: Vec<f64>,
    m: Vec<f64>,
    l: Vec<f64>,
    mag: Vec<f64>,
}

fn attend(q: &[f64], k: &[f64], v: &[f64], d: usize, n: usize, scale: f64) -> Reference {
    let g = q.len() / d;
    let mut r = Reference {
        o: vec![0.0; g * d],
        m: vec![f64::NEG_INFINITY; g],
        l: vec![0.0; g],
        mag: vec![0.0; g * d],
    };
    for gi in 0..g {
        let s: Vec<f64> = (0..n)
            .map(|j| scale * (0..d).map(|c| q[gi * d + c] * k[j * d + c]).sum::<f64>())
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if n == 0 {
            continue;
        }
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let l: f64 = e.iter().sum();
        r.m[gi] = m;
        r.l[gi] = l;
        for c in 0..d {
            r.o[gi * d + c] = (0..n).map(|j| e[j] * v[j * d + c]).sum::<f64>() / l;
            r.mag[gi * d + c] = (0..n).map(|j| e[j] * v[j * d + c].abs()).sum::<f64>() / l;
        }
    }
    r
}

fn check_stats(what: &str, got_m: &[f64], got_l: &[f64], r: &Reference) {
    let mscale: Vec<f64> = r.m.iter().map(|m| 1.0 + m.abs()).collect();
    assert_close(
        &format!("{what}: max"),
        got_m,
        &r.m,
        &mscale,
        (F32_TOL, 0.0),
    );
    assert_close(&format!("{what}: sum"), got_l, &r.l, &r.l, (F32_TOL, 0.0));
}

#[test]
fn decode_chunk_matches_reference() {
    let reg = KernelRegistry::with_builtins();
    let combos = [
        ("f32", "f32", "f32"),
        ("f16", "f16", "f32"),
        ("bf16", "bf16", "f32"),
        ("f16", "bf16", "f16"),
        ("f32", "f16", "bf16"),
    ];
    let (s_rows, start, end) = (70usize, 140i64, 201i64);
    for (t, (tq, tkv, to)) in combos.into_iter().enumerate() {
        for (g, d) in [(1, 64), (3, 100), (4, 128), (5, 8), (9, 33)] {
            for scale in [None, Some(0.3)] {
                let s = store(
                    &format!(
                        "tensor Q: {tq}[{g}, {d}];\ntensor K: {tkv}[{s_rows}, {d}];\ntensor V: {tkv}[{s_rows}, {d}];\n\
                         tensor O: {to}[{g}, {d}];\ntensor M: f32[{g}];\ntensor L: f32[{g}, 1];"
                    ),
                    300 + t as u64 * 17 + g as u64,
                );
                let list = [
                    whole(&s, "Q", Access::In),
                    whole(&s, "K", Access::In),
                    whole(&s, "V", Access::In),
                    whole(&s, "O", Access::Out),
                    whole(&s, "M", Access::Out),
                    whole(&s, "L", Access::Out),
                ];
                let mut params = vec![i(start), i(end)];
                params.extend(scale.map(f));
                run(&reg, &s, "attn_decode_chunk", &params, &list).unwrap();
                let sc = scale.unwrap_or(1.0 / (d as f64).sqrt()) as f32 as f64;
                let n = (end - start) as usize;
                let r = attend(&get(&s, "Q"), &get(&s, "K"), &get(&s, "V"), d, n, sc);
                let what = format!("chunk {tq}/{tkv}->{to} g {g} d {d} scale {scale:?}");
                assert_close(
                    &what,
                    &get(&s, "O"),
                    &r.o,
                    &r.mag,
                    tol(dtype(&s, "O"), F32_TOL),
                );
                check_stats(&what, &get(&s, "M"), &get(&s, "L"), &r);
            }
        }
    }
}

/// Tensors for a sequence of `len` tokens split into chunks of `chunk` (plus one empty chunk at
/// the end), `g` query heads sharing one KV head of width `d`.
fn split_store(
    g: usize,
    d: usize,
    len: usize,
    chunk: usize,
    ty: &str,
    seed: u64,
) -> (TensorStore, usize) {
    let c = len.div_ceil(chunk) + 1;
    let cap = c * chunk;
    let s = store(
        &format!(
            "tensor Q: {ty}[{g}, {d}];\ntensor K: {ty}[{cap}, {d}];\ntensor V: {ty}[{cap}, {d}];\n\
             tensor Op: f32[{g}, {c}, {d}];\ntensor Mp: f32[{g}, {c}];\ntensor Lp: f32[{g}, {c}];\n\
             tensor O: f32[{g}, {d}];\ntensor Mo: f32[{g}];\ntensor Lo: f32[{g}];\n\
             tensor O1: f32[{g}, 2, {d}];\ntensor M1: f32[{g}, 2];\ntensor L1: f32[{g}, 2];\n\
             tensor O2: f16[{g}, {d}];"
        ),
        seed,
    );
    (s, c)
}

/// Runs every chunk task, then the merge into `O`, `Mo`, `Lo`.
fn split_and_merge(
    reg: &KernelRegistry,
    s: &TensorStore,
    g: usize,
    d: usize,
    len: usize,
    chunk: usize,
    c: usize,
) {
    let (g, d) = (g as i64, d as i64);
    for ci in 0..c {
        let lo = ((ci * chunk) as i64).min(len as i64);
        let hi = (((ci + 1) * chunk) as i64).min(len as i64);
        let list = [
            whole(s, "Q", Access::In),
            part(
                s,
                "K",
                &[(ci * chunk) as i64, 0],
                &[chunk as i64, d],
                Access::In,
            ),
            part(
                s,
                "V",
                &[(ci * chunk) as i64, 0],
                &[chunk as i64, d],
                Access::In,
            ),
            part(s, "Op", &[0, ci as i64, 0], &[g, 1, d], Access::Out),
            part(s, "Mp", &[0, ci as i64], &[g, 1], Access::Out),
            part(s, "Lp", &[0, ci as i64], &[g, 1], Access::Out),
        ];
        run(reg, s, "attn_decode_chunk", &[i(lo), i(hi)], &list).unwrap();
    }
    let list = [
        whole(s, "Op", Access::In),
        whole(s, "Mp", Access::In),
        whole(s, "Lp", Access::In),
        whole(s, "O", Access::Out),
        whole(s, "Mo", Access::Out),
        whole(s, "Lo", Access::Out),
    ];
    run(reg, s, "attn_merge", &[], &list).unwrap();
}

fn check_split(g: usize, d: usize, len: usize, chunk: usize, ty: &str, seed: u64) {
    let reg = KernelRegistry::with_builtins();
    let (s, c) = split_store(g, d, len, chunk, ty, seed);
    split_and_merge(&reg, &s, g, d, len, chunk, c);
    let r = attend(
        &get(&s, "Q"),
        &get(&s, "K"),
        &get(&s, "V"),
        d,
        len,
        1.0 / (d as f64).sqrt(),
    );
    let what = format!("split g {g} d {d} len {len} chunk {chunk} {ty}");
    assert_close(&what, &get(&s, "O"), &r.o, &r.mag, (2.0 * F32_TOL, 0.0));
    check_stats(&what, &get(&s, "Mo"), &get(&s, "Lo"), &r);
    // The last chunk is empty: o = 0, m = -inf, l = 0.
    let (op, mp, lp) = (get(&s, "Op"), get(&s, "Mp"), get(&s, "Lp"));
    for gi in 0..g {
        assert_eq!(mp[gi * c + c - 1], f64::NEG_INFINITY);
        assert_eq!(lp[gi * c + c - 1], 0.0);
        assert!(
            op[(gi * c + c - 1) * d..(gi * c + c) * d]
                .iter()
                .all(|&x| x == 0.0)
        );
    }
}

#[test]
fn split_kv_chunks_merged_equal_full_attention() {
    for ty in ["f32", "f16", "bf16"] {
        check_split(4, 64, 203, 64, ty, 310);
        check_split(1, 128, 512, 128, ty, 311);
        check_split(5, 40, 37, 50, ty, 312);
    }
}

#[test]
fn one_chunk_is_already_the_answer_and_merges_compose() {
    let reg = KernelRegistry::with_builtins();
    let (g, d, len, chunk) = (4usize, 48usize, 150usize, 40usize);
    let (s, c) = split_store(g, d, len, chunk, "f16", 320);
    assert_eq!(c, 5);
    split_and_merge(&reg, &s, g, d, len, chunk, c);
    let (gi, di) = (g as i64, d as i64);
    // Two-level merge: chunks {0, 1} and {2, 3, 4} (4 is empty) separately, then together.
    for (slot, (c0, cn)) in [(0i64, (0i64, 2i64)), (1, (2, 3))] {
        let list = [
            part(&s, "Op", &[0, c0, 0], &[gi, cn, di], Access::In),
            part(&s, "Mp", &[0, c0], &[gi, cn], Access::In),
            part(&s, "Lp", &[0, c0], &[gi, cn], Access::In),
            part(&s, "O1", &[0, slot, 0], &[gi, 1, di], Access::Out),
            part(&s, "M1", &[0, slot], &[gi, 1], Access::Out),
            part(&s, "L1", &[0, slot], &[gi, 1], Access::Out),
        ];
        run(&reg, &s, "attn_merge", &[], &list).unwrap();
    }
    let list = [
        whole(&s, "O1", Access::In),
        whole(&s, "M1", Access::In),
        whole(&s, "L1", Access::In),
        whole(&s, "O2", Access::Out),
    ];
    run(&reg, &s, "attn_merge", &[], &list).unwrap();
    let r = attend(
        &get(&s, "Q"),
        &get(&s, "K"),
        &get(&s, "V"),
        d,
        len,
        1.0 / (d as f64).sqrt(),
    );
    assert_close(
        "two-level merge",
        &get(&s, "O2"),
        &r.o,
        &r.mag,
        tol(DType::F16, 2.0 * F32_TOL),
    );
    // One chunk over the whole sequence: its partial output is the attention output.
    let list = [
        whole(&s, "Q", Access::In),
        part(&s, "K", &[0, 0], &[len as i64, di], Access::In),
        part(&s, "V", &[0, 0], &[len as i64, di], Access::In),
        whole(&s, "O", Access::Out),
        whole(&s, "Mo", Access::Out),
        whole(&s, "Lo", Access::Out),
    ];
    run(&reg, &s, "attn_decode_chunk", &[], &list).unwrap();
    assert_close("single chunk", &get(&s, "O"), &r.o, &r.mag, (F32_TOL, 0.0));
    check_stats("single chunk", &get(&s, "Mo"), &get(&s, "Lo"), &r);
    // Merging nothing but empty partials gives zeros.
    let empty = [
        part(&s, "Op", &[0, 4, 0], &[gi, 1, di], Access::In),
        part(&s, "Mp", &[0, 4], &[gi, 1], Access::In),
        part(&s, "Lp", &[0, 4], &[gi, 1], Access::In),
        whole(&s, "O", Access::Out),
        whole(&s, "Mo", Access::Out),
    ];
    run(&reg, &s, "attn_merge", &[], &empty).unwrap();
    assert!(get(&s, "O").iter().all(|&x| x == 0.0));
    assert!(get(&s, "Mo").iter().all(|&x| x == f64::NEG_INFINITY));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(24)))]

    #[test]
    fn split_attention_matches_full_for_random_shapes(
        g in 1usize..7,
        d in 1usize..70,
        len in 1usize..260,
        chunk in 8usize..100,
        ty in prop::sample::select(vec!["f32", "f16", "bf16"]),
        seed in 0u64..1000,
    ) {
        check_split(g, d, len, chunk, ty, seed);
    }
}

#[test]
fn attention_errors_name_kernel_regions_and_params() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor Q: f16[4, 64];\ntensor K: f16[32, 64];\ntensor V: f16[32, 64];\ntensor O: f32[4, 64];\n\
         tensor M: f32[4];\ntensor L: f32[4];\ntensor I: i32[4];",
        330,
    );
    let w = |n: &str| whole(&s, n, Access::Out);
    let r = |n: &str| whole(&s, n, Access::In);
    let good = [r("Q"), r("K"), r("V"), w("O"), w("M"), w("L")];
    let with = |k: usize, x: TaskIo| {
        let mut l = good;
        l[k] = x;
        l
    };
    const K: &str = "kernel `attn_decode_chunk`";
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(1, part(&s, "K", &[0, 0], &[32, 63], Access::In)),
        &[K, "region 1 is 32 x 63", "32 x 64"],
    );
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(2, part(&s, "V", &[0, 0], &[31, 64], Access::In)),
        &[K, "region 2 is 31 x 64", "32 x 64"],
    );
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(3, part(&s, "O", &[0, 0], &[3, 64], Access::Out)),
        &[K, "region 3 is 3 x 64", "region 0 is 4 x 64"],
    );
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(4, part(&s, "M", &[0], &[3], Access::Out)),
        &[K, "region 4", "must hold 4", "running max"],
    );
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(5, part(&s, "L", &[1], &[3], Access::Out)),
        &[K, "region 5", "must hold 4", "running sum"],
    );
    expect_err(
        &reg,
        &s,
        "attn_decode_chunk",
        &[],
        &with(4, w("I")),
        &["region 4", "`I`", "f32, f16 or bf16"],
    );
    for (params, needle) in [
        (vec![i(0)], "chunk_end is missing"),
        (vec![i(10), i(9)], "before chunk_start"),
        (vec![i(100), i(133)], "has 33 rows"),
        (vec![i(0), i(8), f(f64::NAN)], "scale must be finite"),
    ] {
        let err = expect_err(&reg, &s, "attn_decode_chunk", &params, &good, &[K, needle]);
        assert!(matches!(err, KernelError::ParamValue { .. }), "{err:?}");
    }
    assert_eq!(
        run(&reg, &s, "attn_decode_chunk", &[], &good[..5]).unwrap_err(),
        KernelError::Region { index: 5, count: 5 }
    );

    const MK: &str = "kernel `attn_merge`";
    let s = store(
        "tensor Op: f32[4, 3, 64];\ntensor Mp: f32[4, 3];\ntensor Lp: f32[4, 3];\ntensor O: f16[4, 64];\n\
         tensor Mo: f32[4];\ntensor X: f32[5];\ntensor O5: f32[5, 64];",
        331,
    );
    let r = |n: &str| whole(&s, n, Access::In);
    let good = [r("Op"), r("Mp"), r("Lp"), whole(&s, "O", Access::Out)];
    let mut bad = good;
    bad[3] = part(&s, "O", &[0, 0], &[4, 32], Access::Out);
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &bad,
        &[MK, "region 0 is 12 x 64", "region 3 is 4 x 32"],
    );
    bad[3] = part(&s, "O", &[0, 0], &[5, 64], Access::Out);
    let err = run(&reg, &s, "attn_merge", &[], &bad).unwrap_err();
    assert!(matches!(err, KernelError::View { index: 3, .. }), "{err:?}");
    bad[3] = whole(&s, "O5", Access::Out);
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &bad,
        &[MK, "region 3 is 5 x 64", "whole number of rows"],
    );
    let mut bad = good;
    bad[1] = part(&s, "Mp", &[0, 0], &[4, 2], Access::In);
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &bad,
        &[MK, "region 1", "must hold 12"],
    );
    let mut bad = good;
    bad[2] = part(&s, "Lp", &[0, 0], &[3, 3], Access::In);
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &bad,
        &[MK, "region 2", "must hold 12"],
    );
    let more = [
        good[0],
        good[1],
        good[2],
        good[3],
        whole(&s, "X", Access::Out),
    ];
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &more,
        &[MK, "region 4", "must hold 4", "merged running max"],
    );
    let seven = [
        good[0],
        good[1],
        good[2],
        good[3],
        whole(&s, "Mo", Access::Out),
        whole(&s, "X", Access::Out),
        whole(&s, "X", Access::Out),
    ];
    expect_err(
        &reg,
        &s,
        "attn_merge",
        &[],
        &seven,
        &[MK, "7 regions", "4 to 6"],
    );
}

/// The split-KV decode example end to end: `examples/decode_ragged.wsp` expanded by the
/// reference expander, every task run in program order (a valid sequential order) with the
/// example's kernels mapped to the built-ins, and each request's output compared with full
/// attention over its whole KV cache.
#[test]
fn decode_ragged_example_computes_attention_over_each_request() {
    let path = format!(
        "{}/../../examples/decode_ragged.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("example readable");
    let m = module(&text);
    // Smaller than the example's defaults (same shape of problem): ragged lengths, the last
    // chunk of most requests partial.
    let lens = [700i64, 200, 1100, 1030];
    let chunks: Vec<i64> = lens.iter().map(|l| (l + 511) / 512).collect();
    let b = Bindings::new()
        .symbol("nreq", 4i64)
        .symbol("max_chunks", 3i64)
        .array("kv_chunks", chunks.clone())
        .array("kv_lens", lens.to_vec());
    let mut s = TensorStore::new(&m, &b).unwrap();
    s.fill_random(340);
    let r = pto_wsp_ir::resolve(&m, &Default::default()).expect("resolves");
    let exp = pto_wsp_ir::expand::expand(&r, &b, &Default::default()).expect("expands");
    let mut reg = KernelRegistry::with_builtins();
    reg.alias("decode_chunk", "attn_decode_chunk").unwrap();
    reg.alias("merge", "attn_merge").unwrap();
    for (t, task) in exp.tasks.iter().enumerate() {
        let name = &m.kernels[task.kernel as usize].name.name;
        let params: Vec<u64> = task.params.iter().map(|v| v.to_bits()).collect();
        let list: Vec<TaskIo> = task
            .regions
            .iter()
            .map(|r| {
                TaskIo::new(
                    pto_wsp_ir::task_io::Region::new(r.tensor, &r.start, &r.size).unwrap(),
                    r.access,
                )
            })
            .collect();
        run(&reg, &s, name, &params, &list).unwrap_or_else(|e| panic!("task {t} ({name}): {e}"));
    }
    let chunk_tasks = exp
        .tasks
        .iter()
        .filter(|t| m.kernels[t.kernel as usize].name.name == "decode_chunk")
        .count();
    assert_eq!(chunk_tasks as i64, chunks.iter().sum::<i64>() * 8);
    let (q, k, v, od) = (get(&s, "Qd"), get(&s, "Kc"), get(&s, "Vc"), get(&s, "Od"));
    let (d, cap) = (128usize, 3 * 512usize);
    for (r, &len) in lens.iter().enumerate() {
        for h in 0..32 {
            let g = h / 4;
            let qh = &q[(r * 32 + h) * d..(r * 32 + h + 1) * d];
            let kv = (r * 8 + g) * cap * d;
            let rf = attend(
                qh,
                &k[kv..kv + cap * d],
                &v[kv..kv + cap * d],
                d,
                len as usize,
                1.0 / (d as f64).sqrt(),
            );
            let got = &od[(r * 32 + h) * d..(r * 32 + h + 1) * d];
            assert_close(
                &format!("request {r} head {h}"),
                got,
                &rf.o,
                &rf.mag,
                tol(DType::F16, 2.0 * F32_TOL),
            );
        }
    }
}

/// Causal attention in f64: query row `i` of `q` (`tq` rows) at position `n - tq + i` over key /
/// value rows `0 ..= n - tq + i`; (output, output scale `Σ_j p_j |v_j|`).
fn causal(q: &[f64], k: &[f64], v: &[f64], d: usize, n: usize, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let tq = q.len() / d;
    let (mut o, mut mag) = (Vec::new(), Vec::new());
    for i in 0..tq {
        let r = attend(&q[i * d..(i + 1) * d], k, v, d, n - tq + i + 1, scale);
        o.extend(r.o);
        mag.extend(r.mag);
    }
    (o, mag)
}

#[test]
fn causal_attention_matches_reference() {
    let reg = KernelRegistry::with_builtins();
    let combos = [
        ("f32", "f32", "f32"),
        ("f16", "f16", "f16"),
        ("bf16", "bf16", "f32"),
        ("f32", "f16", "bf16"),
    ];
    for (t, (tq_ty, kv_ty, o_ty)) in combos.into_iter().enumerate() {
        // (query rows, key rows, head dim, kv_len param)
        for (tq, s_rows, d, kv_len) in [
            (1, 1, 16, None),
            (4, 4, 32, None),
            (5, 37, 64, None),
            (8, 70, 128, Some(51)),
            (3, 9, 7, Some(3)),
        ] {
            for scale in [None, Some(0.2)] {
                let s = store(
                    &format!(
                        "tensor Q: {tq_ty}[{tq}, {d}];\ntensor K: {kv_ty}[{s_rows}, {d}];\n\
                         tensor V: {kv_ty}[{s_rows}, {d}];\ntensor O: {o_ty}[{tq}, {d}];"
                    ),
                    900 + t as u64 * 31 + tq as u64,
                );
                let list = [
                    whole(&s, "Q", Access::In),
                    whole(&s, "K", Access::In),
                    whole(&s, "V", Access::In),
                    whole(&s, "O", Access::Out),
                ];
                let mut params = Vec::new();
                if kv_len.is_some() || scale.is_some() {
                    params.push(i(kv_len.unwrap_or(s_rows as i64)));
                }
                params.extend(scale.map(f));
                run(&reg, &s, "attn_causal", &params, &list).unwrap();
                let sc = scale.unwrap_or(1.0 / (d as f64).sqrt()) as f32 as f64;
                let n = kv_len.unwrap_or(s_rows as i64) as usize;
                let (o, mag) = causal(&get(&s, "Q"), &get(&s, "K"), &get(&s, "V"), d, n, sc);
                assert_close(
                    &format!("causal {tq_ty}/{kv_ty}->{o_ty} tq {tq} s {s_rows} d {d} n {n}"),
                    &get(&s, "O"),
                    &o,
                    &mag,
                    tol(dtype(&s, "O"), F32_TOL),
                );
            }
        }
    }
}

#[test]
fn causal_attention_checks_shapes_and_kv_len() {
    const K: &str = "kernel `attn_causal`";
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor Q: f32[4, 8];\ntensor K: f32[6, 8];\ntensor V: f32[6, 8];\ntensor O: f32[4, 8];\n\
         tensor Vb: f32[5, 8];\ntensor Ob: f32[4, 7];",
        950,
    );
    let good = [
        whole(&s, "Q", Access::In),
        whole(&s, "K", Access::In),
        whole(&s, "V", Access::In),
        whole(&s, "O", Access::Out),
    ];
    let mut bad_v = good;
    bad_v[2] = whole(&s, "Vb", Access::In);
    expect_err(
        &reg,
        &s,
        "attn_causal",
        &[],
        &bad_v,
        &[K, "region 2", "6 x 8"],
    );
    let mut bad_o = good;
    bad_o[3] = whole(&s, "Ob", Access::Out);
    expect_err(
        &reg,
        &s,
        "attn_causal",
        &[],
        &bad_o,
        &[K, "region 3", "4 x 7"],
    );
    expect_err(
        &reg,
        &s,
        "attn_causal",
        &[i(3)],
        &good,
        &[K, "parameter 0", "kv_len 3"],
    );
    expect_err(
        &reg,
        &s,
        "attn_causal",
        &[i(7)],
        &good,
        &[K, "at most the 6"],
    );
    expect_err(
        &reg,
        &s,
        "attn_causal",
        &[i(6), f(f64::NAN)],
        &good,
        &[K, "parameter 1", "finite"],
    );
    let before = get(&s, "O");
    let _ = run(&reg, &s, "attn_causal", &[i(-1)], &good);
    assert_eq!(get(&s, "O"), before, "a refused task writes nothing");
}
