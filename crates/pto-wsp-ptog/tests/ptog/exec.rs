//! Every instruction executed on the CPU simulation, each checked against what it must do
//! (values computed here, orders read from the trace's logical clock, placements from the
//! workers recorded).

use crate::common::*;
use pto_wsp_ptog::exec::Mask;
use pto_wsp_ptog::{CoreType, DeviceConfig};

fn ints(dev: &pto_wsp_ptog::Device, name: &str) -> Vec<i64> {
    dev.store()
        .read(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bit(w: u32) -> Mask {
    1u128 << w
}

#[test]
fn tg_begin_end_kernel_run_block_dim_instances_on_workers_of_their_core_type() {
    let text = "\
MC_ALLOC(A, 64, 64, GM, i64[8])
MC_ALLOC(B, 64, 64, GM, i64[8])
MC_ALLOC(C, 64, 64, GM, i64[8])
MC_ALLOC(D, 64, 64, GM, i64[8])
TG_BEGIN(G)
    TG_KERNEL(KA, put, 4, AIC, 0)
    TG_KERNEL(KB, put, 4, AIV, 0)
    TG_KERNEL(KC, put, 8, AIC_AIV, 0)
    TG_KERNEL(KD, put, 2, AICPU, 0)
    MC_BIND(KA, 0, A, 0, 0, out, ROWS)
    MC_BIND(KB, 0, B, 0, 0, out, ROWS)
    MC_BIND(KC, 0, C, 0, 0, out, ROWS)
    MC_BIND(KD, 0, D, 0, 0, out, ROWS)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(2, 3));
    // Instance b of n writes rows ⌊b·8/n⌋ .. ⌊(b+1)·8/n⌋ with 100·b.
    let rows = |n: i64| (0..8).map(|i| 100 * (i * n / 8)).collect::<Vec<i64>>();
    assert_eq!(ints(&dev, "A"), rows(4));
    assert_eq!(ints(&dev, "B"), rows(4));
    assert_eq!(ints(&dev, "C"), rows(8));
    assert_eq!(ints(&dev, "D"), rows(2));
    assert_eq!(r.instances, 4 + 4 + 8 + 2);
    let kinds = [
        (kernel(&dev, 0, "KA"), vec![CoreType::Aic]),
        (kernel(&dev, 0, "KB"), vec![CoreType::Aiv]),
        (kernel(&dev, 0, "KC"), vec![CoreType::Aic, CoreType::Aiv]),
        (kernel(&dev, 0, "KD"), vec![CoreType::Aicpu]),
    ];
    for (k, allowed) in kinds {
        let mut blocks: Vec<u32> = r
            .trace
            .iter()
            .filter(|t| t.kernel == k)
            .map(|t| t.block)
            .collect();
        blocks.sort_unstable();
        assert_eq!(
            blocks,
            (0..dev.checked().graphs[0].kernels[k].block_dim).collect::<Vec<_>>()
        );
        for t in r.trace.iter().filter(|t| t.kernel == k) {
            assert!(allowed.contains(&t.core), "{t:?}");
            let kind = if t.worker < 2 {
                CoreType::Aic
            } else if t.worker < 5 {
                CoreType::Aiv
            } else {
                CoreType::Aicpu
            };
            assert_eq!(kind, t.core);
        }
    }
}

#[test]
fn tg_depend_after_and_data_order_their_kernels() {
    let text = "\
MC_ALLOC(A, 32, 64, GM, i64[4])
MC_ALLOC(B, 32, 64, GM, i64[4])
MC_ALLOC(C, 32, 64, GM, i64[4])
TG_BEGIN(G)
    TG_KERNEL(P, put, 1, AIV, 0)
    TG_KERNEL(X, copy_i64, 1, AIV, 0)
    TG_KERNEL(Y, add1, 1, AIV, 0)
    TG_DEPEND(P, X, DATA, A)
    TG_DEPEND(X, Y, AFTER)
    MC_BIND(P, 0, A, 0, 0, out)
    MC_BIND(P, 1, -, 5)
    MC_BIND(X, 0, A, 0, 0, in)
    MC_BIND(X, 1, B, 0, 0, out)
    MC_BIND(Y, 0, C)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(1, 3));
    assert_eq!(ints(&dev, "B"), vec![5; 4]);
    assert_eq!(ints(&dev, "C"), vec![1; 4]);
    let (p, x, y) = (
        kernel(&dev, 0, "P"),
        kernel(&dev, 0, "X"),
        kernel(&dev, 0, "Y"),
    );
    assert!(span(&r, 0, x).0 > span(&r, 0, p).1);
    assert!(span(&r, 0, y).0 > span(&r, 0, x).1);
}

#[test]
fn tg_depend_barrier_orders_everything_before_its_source_before_everything_from_its_destination() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(A, nop, 2, AIV, 0)
    TG_KERNEL(B, nop, 2, AIV, 0)
    TG_KERNEL(C, nop, 2, AIV, 0)
    TG_KERNEL(D, nop, 2, AIV, 0)
    TG_DEPEND(B, C, BARRIER)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    for _ in 0..5 {
        let (dev, r) = run_text(text, traced(1, 4));
        let s = |n: &str| span(&r, 0, kernel(&dev, 0, n));
        let before = s("A").1.max(s("B").1);
        assert!(s("C").0 > before && s("D").0 > before, "{:?}", r.trace);
    }
}

#[test]
fn tg_depend_soft_is_a_hint_not_an_order() {
    // A waits for an event B signals: were SOFT an order, nothing could run.
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(A, nop, 1, AIV, 0)
    TG_KERNEL(B, nop, 1, AIV, 0)
    TG_DEPEND(A, B, SOFT)
    SY_WAIT(E, A)
    SY_SIGNAL(E, B)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(1, 2));
    assert!(span(&r, 0, kernel(&dev, 0, "A")).0 > span(&r, 0, kernel(&dev, 0, "B")).1);
    // The hint: with one worker, B runs right after A although X was ready before it.
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(A, nop, 1, AIC, 0)
    TG_KERNEL(X, nop, 1, AIC, 0)
    TG_KERNEL(B, nop, 1, AIC, 0)
    TG_DEPEND(A, B, SOFT)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let one = DeviceConfig {
        aic: 1,
        aiv: 0,
        aicpu: 0,
        trace: true,
        ..DeviceConfig::default()
    };
    let (dev, r) = run_text(text, one.clone());
    let order: Vec<String> = {
        let mut t = r.trace.clone();
        t.sort_by_key(|x| x.start);
        t.iter()
            .map(|x| dev.checked().graphs[0].kernels[x.kernel].name.clone())
            .collect()
    };
    assert_eq!(order, ["A", "B", "X"]);
    // Without the hint, the queue's order.
    let (dev, r) = run_text(&text.replace("    TG_DEPEND(A, B, SOFT)\n", ""), one);
    let mut t = r.trace.clone();
    t.sort_by_key(|x| x.start);
    let order: Vec<&str> = t
        .iter()
        .map(|x| dev.checked().graphs[0].kernels[x.kernel].name.as_str())
        .collect();
    assert_eq!(order, ["A", "X", "B"]);
}

/// Two graphs whose kernels wait for each other's events: they complete only when both run at
/// once.
const CROSSED: &str = "\
TG_BEGIN(G1)
    TG_KERNEL(A1, nop, 1, AIV, 0)
    TG_KERNEL(B1, nop, 1, AIV, 0)
    TG_DEPEND(A1, B1)
    SY_SIGNAL(E1, A1)
    SY_WAIT(E2, B1)
TG_END(G1)
TG_BEGIN(G2)
    TG_KERNEL(A2, nop, 1, AIV, 0)
    TG_KERNEL(B2, nop, 1, AIV, 0)
    TG_DEPEND(A2, B2)
    SY_SIGNAL(E2, A2)
    SY_WAIT(E1, B2)
TG_END(G2)
TG_LAUNCH(G1, S1)
TG_LAUNCH(G2, S2)
TG_SYNC(G1)
TG_SYNC(G2)
";

#[test]
fn tg_launch_runs_graphs_of_different_streams_at_the_same_time() {
    let (dev, r) = run_text(CROSSED, traced(1, 2));
    assert_eq!(r.launches, 2);
    assert_eq!(r.kernel_runs, 4);
    let s = |g: usize, n: &str| span(&r, g, kernel(&dev, g, n));
    assert!(s(0, "B1").0 > s(1, "A2").1 && s(1, "B2").0 > s(0, "A1").1);
}

#[test]
fn tg_launch_on_one_stream_runs_graphs_one_after_the_other() {
    let one_stream = CROSSED.replace("TG_LAUNCH(G2, S2)", "TG_LAUNCH(G2, S1)");
    assert_eq!(
        run_error(&one_stream, traced(1, 2)),
        "deadlock: TG_SYNC(G1): nothing can run any more: kernel B1 of graph G1 waits for \
         event E2 (0 of 1 signal(s)); graph G2 is queued on stream S1"
    );
}

#[test]
fn tg_sync_waits_for_the_graph_before_the_control_code_reads_its_results() {
    let text = "\
MC_ALLOC(FLAG, 8, 64, GM, i64[1])
MC_ALLOC(OUT, 8, 64, GM, i64[1])
TG_BEGIN(SET)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, FLAG, 0, 0, out)
    MC_BIND(K, 1, -, 1)
TG_END(SET)
TG_BEGIN(USE)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, OUT, 0, 0, out)
    MC_BIND(K, 1, -, 42)
TG_END(USE)
TG_LAUNCH(SET, S)
TG_SYNC(SET)
CF_IF(FLAG)
    TG_LAUNCH(USE, S)
    TG_SYNC(USE)
CF_ENDIF
";
    for _ in 0..10 {
        let (dev, _) = run_text(text, traced(1, 2));
        assert_eq!(ints(&dev, "OUT"), vec![42]);
    }
}

#[test]
fn tg_invoke_binds_the_iteration_into_its_kernels_arguments() {
    let text = "\
MC_ALLOC(LOG, 40, 64, GM, i64[5, 1])
TG_BEGIN(G)
    TG_KERNEL(K, put_at, 1, AIV, 0)
    MC_BIND(K, 0, LOG)
    MC_BIND(K, 1, -, 1000)
TG_END(G)
CF_LOOP(4, i)
    TG_INVOKE(G, i)
CF_ENDLOOP
TG_SYNC(G)
TG_INVOKE(G, 4)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(1, 2));
    assert_eq!(ints(&dev, "LOG"), vec![1000, 1001, 1002, 1003, 1004]);
    assert_eq!(r.launches, 5);
}

#[test]
fn mc_alloc_gives_buffers_their_alignment_and_mc_free_lets_a_loop_allocate_again() {
    let text = "\
MC_ALLOC(A, 24, 4096, GM, i64[3])
MC_ALLOC(B, 100, 1024, L2)
CF_LOOP(3, i)
    MC_ALLOC(T, 16, 2048, HBM, i64[2])
    TG_BEGIN(G)
    TG_END(G)
    MC_FREE(T)
CF_ENDLOOP
";
    // A graph may not be defined in a loop; the allocation may be.
    assert!(pto_wsp_ptog::assemble(text).is_err());
    let text = "\
MC_ALLOC(A, 24, 4096, GM, i64[3])
MC_ALLOC(B, 100, 1024, L2)
TG_BEGIN(G)
    TG_KERNEL(K, add1, 1, AIV, 0)
    MC_BIND(K, 0, T)
TG_END(G)
CF_LOOP(3, i)
    MC_ALLOC(T, 16, 2048, HBM, i64[2])
    TG_LAUNCH(G, S)
    TG_SYNC(G)
    MC_FREE(T)
CF_ENDLOOP
";
    let (dev, r) = run_text(text, traced(1, 2));
    for (name, align) in [("A", 4096), ("B", 1024), ("T", 2048)] {
        let t = dev.store().index_of(name).unwrap();
        assert_eq!(dev.store().bytes(t).as_ptr() as usize % align, 0, "{name}");
        assert_eq!(dev.store().align(t), align);
    }
    // Freed memory is not cleared: three passes add three.
    assert_eq!(ints(&dev, "T"), vec![3, 3]);
    assert_eq!(r.launches, 3);
}

#[test]
fn mc_bind_binds_byte_ranges_boxes_and_scalars() {
    let text = "\
MC_ALLOC(M, 96, 64, GM, i64[3, 4])
MC_ALLOC(N, 96, 64, GM, i64[3, 4])
TG_BEGIN(G)
    TG_KERNEL(ROWS1, put, 1, AIV, 0)
    TG_KERNEL(BOX, put, 1, AIV, 0)
    MC_BIND(ROWS1, 0, M, 32, 32, out)
    MC_BIND(ROWS1, 1, -, 7)
    MC_BIND(BOX, 0, N, 0, 0, out, WHOLE, [1+:2, 2+:2])
    MC_BIND(BOX, 1, -, -3)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, _) = run_text(text, traced(1, 2));
    assert_eq!(
        ints(&dev, "M"),
        [vec![0; 4], vec![7; 4], vec![0; 4]].concat()
    );
    assert_eq!(
        ints(&dev, "N"),
        vec![0, 0, 0, 0, 0, 0, -3, -3, 0, 0, -3, -3]
    );
}

#[test]
fn mc_copy_copies_whole_rows_between_tensors_and_mc_fence_is_accepted() {
    let text = "\
MC_ALLOC(A, 32, 64, GM, i64[4])
MC_ALLOC(B, 64, 64, GM, i64[4, 2])
TG_BEGIN(G)
    TG_KERNEL(K, put, 4, AIV, 0)
    MC_BIND(K, 0, A, 0, 0, out, ROWS)
    MC_BIND(K, 1, -, 1)
    MC_FENCE(L2)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
MC_FENCE(DEVICE)
MC_COPY(A, B, 16, 8, 32)
MC_FENCE(GM)
";
    let (dev, _) = run_text(text, traced(1, 3));
    assert_eq!(ints(&dev, "A"), vec![1, 101, 201, 301]);
    assert_eq!(ints(&dev, "B"), vec![0, 0, 0, 0, 101, 201, 0, 0]);
}

#[test]
fn cf_if_else_choose_by_a_value_a_kernel_wrote_in_the_control_code_and_in_a_graph() {
    for flag in [0, 1] {
        let text = format!(
            "\
MC_ALLOC(F, 8, 64, GM, i64[1])
MC_ALLOC(OUT, 16, 64, GM, i64[2])
TG_BEGIN(SET)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, F, 0, 0, out)
    MC_BIND(K, 1, -, {flag})
TG_END(SET)
TG_BEGIN(YES)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, OUT, 0, 8, out)
    MC_BIND(K, 1, -, 11)
TG_END(YES)
TG_BEGIN(NO)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, OUT, 0, 8, out)
    MC_BIND(K, 1, -, 22)
TG_END(NO)
TG_BEGIN(INSIDE)
    TG_KERNEL(SETTER, put, 1, AIV, 0)
    CF_IF(F)
        TG_KERNEL(THEN, put, 1, AIV, 0)
    CF_ELSE
        TG_KERNEL(ELSE, put, 1, AIV, 0)
    CF_ENDIF
    TG_DEPEND(SETTER, THEN)
    TG_DEPEND(SETTER, ELSE)
    MC_BIND(SETTER, 0, F, 0, 0, out)
    MC_BIND(SETTER, 1, -, {flag})
    MC_BIND(THEN, 0, OUT, 8, 8, out)
    MC_BIND(THEN, 1, -, 33)
    MC_BIND(ELSE, 0, OUT, 8, 8, out)
    MC_BIND(ELSE, 1, -, 44)
TG_END(INSIDE)
TG_LAUNCH(SET, S)
TG_SYNC(SET)
CF_IF(F)
    TG_LAUNCH(YES, S)
CF_ELSE
    TG_LAUNCH(NO, S)
CF_ENDIF
TG_SYNC(YES)
TG_SYNC(NO)
MC_FREE(F)
MC_ALLOC(F, 8, 64, GM, i64[1])
TG_LAUNCH(INSIDE, S)
TG_SYNC(INSIDE)
"
        );
        let text = text.replace("MC_FREE(F)\nMC_ALLOC(F, 8, 64, GM, i64[1])\n", "");
        let (dev, r) = run_text(&text, traced(1, 2));
        let want = if flag == 1 {
            vec![11, 33]
        } else {
            vec![22, 44]
        };
        assert_eq!(ints(&dev, "OUT"), want, "flag {flag}");
        // The branch not taken runs nothing.
        assert_eq!(r.kernel_runs, 4);
    }
}

#[test]
fn cf_loop_repeats_in_the_control_code_and_in_a_graph_with_its_iterator_bound() {
    let text = "\
MC_ALLOC(N, 8, 64, GM, i64[1])
MC_ALLOC(C, 8, 64, GM, i64[1])
MC_ALLOC(LOG, 48, 64, GM, i64[6, 1])
TG_BEGIN(SETN)
    TG_KERNEL(K, put, 1, AIV, 0)
    MC_BIND(K, 0, N, 0, 0, out)
    MC_BIND(K, 1, -, 3)
TG_END(SETN)
TG_BEGIN(INC)
    TG_KERNEL(K, add1, 1, AIV, 0)
    MC_BIND(K, 0, C)
TG_END(INC)
TG_BEGIN(PASSES)
    CF_LOOP(N, j)
        TG_KERNEL(P, put_at, 1, AIV, 0)
        TG_KERNEL(Q, put_at, 1, AIV, 0)
    CF_ENDLOOP
    TG_DEPEND(P, Q)
    MC_BIND(P, 0, LOG)
    MC_BIND(P, 1, -, 100)
    MC_BIND(Q, 0, LOG, 24, 24)
    MC_BIND(Q, 1, -, 200)
TG_END(PASSES)
TG_LAUNCH(SETN, S)
TG_SYNC(SETN)
CF_LOOP(N, i)
    TG_LAUNCH(INC, S)
    TG_SYNC(INC)
CF_ENDLOOP
TG_LAUNCH(PASSES, S)
TG_SYNC(PASSES)
";
    let (dev, r) = run_text(text, traced(1, 2));
    assert_eq!(ints(&dev, "C"), vec![3]);
    // Pass j: P writes row j (100 + j) of LOG, Q row j of LOG[3..] (200 + j).
    assert_eq!(ints(&dev, "LOG"), vec![100, 101, 102, 200, 201, 202]);
    // Passes run one after the other: every instance of pass j ends before pass j+1 starts.
    let g = dev.checked().graph_index[&2];
    let mut spans: Vec<(u64, u64)> = r
        .trace
        .iter()
        .filter(|t| t.graph == g)
        .map(|t| (t.start, t.end))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(w[1].0 > w[0].1, "{spans:?}");
    }
}

#[test]
fn cf_break_leaves_its_loop_in_the_control_code_and_in_a_graph() {
    let text = "\
MC_ALLOC(C, 16, 64, GM, i64[2])
MC_ALLOC(D, 16, 64, GM, i64[2])
MC_ALLOC(AFTER, 8, 64, GM, i64[1])
TG_BEGIN(STEP)
    TG_KERNEL(K, inc_until, 1, AIV, 0)
    MC_BIND(K, 0, C)
    MC_BIND(K, 1, -, 3)
TG_END(STEP)
TG_BEGIN(INSIDE)
    CF_LOOP(100, i)
        TG_KERNEL(K, inc_until, 1, AIV, 0)
        CF_BREAK(D[1])
        TG_KERNEL(AFTER_BREAK, add1, 1, AIV, 0)
    CF_ENDLOOP
    MC_BIND(K, 0, D)
    MC_BIND(K, 1, -, 4)
    MC_BIND(AFTER_BREAK, 0, AFTER)
TG_END(INSIDE)
CF_WHILE(1)
    TG_LAUNCH(STEP, S)
    TG_SYNC(STEP)
    CF_BREAK(C[1])
CF_ENDWHILE
TG_LAUNCH(INSIDE, S)
TG_SYNC(INSIDE)
";
    let (dev, r) = run_text(text, traced(1, 2));
    assert_eq!(ints(&dev, "C"), vec![3, 1]);
    assert_eq!(ints(&dev, "D"), vec![4, 1]);
    // The kernel after the break ran in the three passes before it, not in the fourth.
    assert_eq!(ints(&dev, "AFTER"), vec![3]);
    assert_eq!(r.kernel_runs, 3 + 4 + 3);
}

#[test]
fn cf_while_converges_in_the_control_code_and_in_one_graph() {
    use pto_wsp_ptog::examples::converge::{IN_GRAPH, N, PROGRAM, TOLERANCE};
    // A diagonally dominant system and its reference: Jacobi in f64 until the largest update
    // is at most the tolerance, and the exact solution by Gaussian elimination.
    let a: Vec<f32> = (0..N * N)
        .map(|k| {
            let (i, j) = (k / N, k % N);
            if i == j {
                8.0
            } else {
                ((i * 7 + j * 3) % 5) as f32 * 0.05 - 0.1
            }
        })
        .collect();
    let b: Vec<f32> = (0..N).map(|i| (i % 9) as f32 - 4.0).collect();
    let mut x = vec![0.0f64; N];
    let mut steps = 0;
    loop {
        let mut delta = 0.0f64;
        let old = x.clone();
        for i in 0..N {
            let off: f64 = (0..N)
                .filter(|&j| j != i)
                .map(|j| a[i * N + j] as f64 * old[j])
                .sum();
            x[i] = (b[i] as f64 - off) / a[i * N + i] as f64;
            delta = delta.max((x[i] - old[i]).abs());
        }
        steps += 1;
        if delta <= TOLERANCE {
            break;
        }
    }
    let exact = {
        let mut m: Vec<Vec<f64>> = (0..N)
            .map(|i| {
                (0..=N)
                    .map(|j| {
                        if j < N {
                            a[i * N + j] as f64
                        } else {
                            b[i] as f64
                        }
                    })
                    .collect()
            })
            .collect();
        for c in 0..N {
            for r in c + 1..N {
                let f = m[r][c] / m[c][c];
                let pivot = m[c].clone();
                for (x, p) in m[r][c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
            }
        }
        let mut s = vec![0.0; N];
        for r in (0..N).rev() {
            s[r] = (m[r][N] - (r + 1..N).map(|k| m[r][k] * s[k]).sum::<f64>()) / m[r][r];
        }
        s
    };
    let lib = pto_wsp_ptog::examples::library(&pto_wsp::WorkloadNode::maker(1)).unwrap();
    for (program, passes_counted) in [(PROGRAM, steps), (IN_GRAPH, steps - 1)] {
        let checked = pto_wsp_ptog::assemble(program).unwrap_or_else(|e| panic!("{e}"));
        let mut dev = pto_wsp_ptog::Device::new(checked, traced(1, 2), &lib).unwrap();
        dev.store_mut().write("A", &a).unwrap();
        dev.store_mut().write("B", &b).unwrap();
        let r = dev.run().unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<f32> = dev.store().read("X").unwrap();
        for (g, e) in got.iter().zip(&exact) {
            assert!((*g as f64 - e).abs() < 1e-4, "{g} against {e}");
        }
        // The kernel's f32 steps may stop one step from the f64 reference's.
        let counted = ints(&dev, "STEPS")[0];
        assert!(
            (counted - passes_counted as i64).abs() <= 1,
            "{counted} against {passes_counted}"
        );
        assert_eq!(ints(&dev, "NOT_CONVERGED"), vec![0]);
        assert!(r.kernel_runs >= 2 * steps as u64 - 3);
    }
}

#[test]
fn ca_request_gives_kernels_disjoint_shares_of_the_device_scaled_to_it() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(L, nop, 8, AIV, 0)
    TG_KERNEL(R, nop, 8, AIV, 0)
    TG_KERNEL(C, nop, 4, AIC, 0)
    CA_REQUEST(L, 0, 24)
    CA_REQUEST(R, 0, 24)
    CA_REQUEST(C, 1, 0)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(2, 4));
    let m = dev.placement(0).to_vec();
    // Four vector workers (2..6): half each; the cube kernel one cube worker.
    assert_eq!(m[0], bit(2) | bit(3));
    assert_eq!(m[1], bit(4) | bit(5));
    assert_eq!(m[2], bit(0));
    for t in &r.trace {
        assert_ne!(m[t.kernel] & bit(t.worker), 0, "{t:?}");
    }
}

#[test]
fn ca_affinity_colocates_separates_and_shares_an_l2_group() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(A, nop, 4, AIV, 0)
    TG_KERNEL(B, nop, 4, AIC_AIV, 0)
    TG_KERNEL(C, nop, 4, AIV, 0)
    TG_KERNEL(D, nop, 4, AIV, 0)
    TG_KERNEL(E, nop, 4, AIC_AIV, 0)
    TG_KERNEL(F, nop, 4, AIC_AIV, 0)
    CA_REQUEST(A, 0, 2)
    CA_AFFINITY({A, B}, COLOCATE)
    CA_AFFINITY({C, D}, SEPARATE)
    CA_AFFINITY({E, F}, L2_SHARE)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(2, 4));
    let m = dev.placement(0).to_vec();
    assert_eq!(m[0], bit(2) | bit(3));
    assert_eq!(m[1], m[0]);
    assert_eq!(m[2] & m[3], 0);
    assert_eq!(m[2] | m[3], bit(2) | bit(3) | bit(4) | bit(5));
    // L2 group 0: cube worker 0, vector workers 2 and 3.
    let group0 = bit(0) | bit(2) | bit(3);
    assert_eq!(m[4], group0);
    assert_eq!(m[5], group0);
    for t in &r.trace {
        assert_ne!(m[t.kernel] & bit(t.worker), 0, "{t:?}");
    }
}

#[test]
fn ca_partition_confines_a_graph_to_its_cores() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(K, nop, 16, AIC_AIV, 0)
    CA_PARTITION(P, 1, 1, 2, 2)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, r) = run_text(text, traced(2, 4));
    let m = dev.placement(0)[0];
    assert_eq!(m, bit(1) | bit(4) | bit(5));
    assert_eq!(r.instances, 16);
    for t in &r.trace {
        assert_ne!(m & bit(t.worker), 0, "{t:?}");
    }
    let err = pto_wsp_ptog::Device::new(
        pto_wsp_ptog::assemble(text).unwrap(),
        traced(1, 4),
        &library(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "graph G: partition 0 needs cube cores 1..2, the device has 1"
    );
}

#[test]
fn sy_signal_and_wait_order_kernels_of_different_graphs() {
    let text = "\
TG_BEGIN(FIRST)
    TG_KERNEL(P, nop, 2, AIV, 0)
    SY_SIGNAL(E, P)
TG_END(FIRST)
TG_BEGIN(SECOND)
    TG_KERNEL(W, nop, 2, AIV, 0)
    SY_WAIT(E, W)
TG_END(SECOND)
CF_LOOP(3, i)
    TG_LAUNCH(SECOND, S2)
    TG_LAUNCH(FIRST, S1)
CF_ENDLOOP
TG_SYNC(FIRST)
TG_SYNC(SECOND)
";
    let (_, r) = run_text(text, traced(1, 3));
    // The n-th run of W starts after the n-th completion of P.
    let runs = |g: usize| {
        let mut v: Vec<(u64, u64)> = Vec::new();
        for t in r.trace.iter().filter(|t| t.graph == g) {
            match v.iter_mut().find(|x| x.0 == t.launch) {
                Some(x) => x.1 = x.1.max(if g == 0 { t.end } else { t.start }),
                None => v.push((t.launch, if g == 0 { t.end } else { t.start })),
            }
        }
        v.sort_unstable();
        v.into_iter().map(|x| x.1).collect::<Vec<_>>()
    };
    let (ends, starts) = (runs(0), runs(1));
    assert_eq!(ends.len(), 3);
    for n in 0..3 {
        assert!(starts[n] > ends[n], "run {n}: {starts:?} {ends:?}");
    }
}

#[test]
fn sy_barrier_releases_its_kernels_together() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(SLOW, nop, 4, AIV, 0)
    TG_KERNEL(K1, nop, 1, AIV, 0)
    TG_KERNEL(K2, nop, 1, AIV, 0)
    TG_DEPEND(SLOW, K1)
    SY_BARRIER({K1, K2}, B0)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    for _ in 0..5 {
        let (dev, r) = run_text(text, traced(1, 3));
        let slow = span(&r, 0, kernel(&dev, 0, "SLOW")).1;
        assert!(span(&r, 0, kernel(&dev, 0, "K2")).0 > slow, "{:?}", r.trace);
    }
}

#[test]
fn sy_notify_and_wait_notify_alternate_two_devices() {
    use pto_wsp_ptog::examples::exchange::{DEVICE0, DEVICE1};
    let lib = pto_wsp_ptog::examples::library(&pto_wsp::WorkloadNode::maker(1)).unwrap();
    let load = |t: &str| {
        pto_wsp_ptog::Device::new(pto_wsp_ptog::assemble(t).unwrap(), traced(1, 1), &lib).unwrap()
    };
    let mut devices = vec![load(DEVICE0), load(DEVICE1)];
    let reports = pto_wsp_ptog::run_devices(&mut devices).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reports[0].launches, 3);
    assert_eq!(ints(&devices[0], "LOG"), vec![1, 3, 5]);
    assert_eq!(ints(&devices[1], "LOG"), vec![2, 4, 6]);
}

#[test]
fn a_notification_nobody_sends_is_a_deadlock_not_a_hang() {
    let lib = library();
    let load = |t: &str| {
        pto_wsp_ptog::Device::new(pto_wsp_ptog::assemble(t).unwrap(), traced(1, 1), &lib).unwrap()
    };
    let mut devices = vec![load("SY_WAIT_NOTIFY(1, 7)\n"), load("SY_NOTIFY(0, 8)\n")];
    let e = pto_wsp_ptog::run_devices(&mut devices).unwrap_err();
    assert_eq!(
        e.to_string(),
        "deadlock: devices wait for notifications nobody will send: device 0 waits for \
         notification 7 from device 1 (which has finished)"
    );
    let mut one = vec![load("SY_NOTIFY(3, 0)\n")];
    assert_eq!(
        pto_wsp_ptog::run_devices(&mut one).unwrap_err().to_string(),
        "SY_NOTIFY names device 3, but the run has 1 device(s)"
    );
}

#[test]
fn a_failing_kernel_stops_the_run_with_its_message() {
    let text = "\
TG_BEGIN(G)
    TG_KERNEL(K, fail, 2, AIV, 0)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let e = run_error(text, traced(1, 1));
    assert!(
        e == "kernel K of graph G, instance 0: this kernel always fails"
            || e == "kernel K of graph G, instance 1: this kernel always fails",
        "{e}"
    );
}

#[test]
fn the_tour_runs_every_instruction_with_built_in_kernels() {
    let text = include_str!("../../../../examples/ptog/tour.ptoasm");
    let checked = pto_wsp_ptog::assemble(text).unwrap_or_else(|e| panic!("{e}"));
    let used: std::collections::BTreeSet<_> =
        checked.program.insns.iter().map(|i| i.op()).collect();
    assert_eq!(used.len(), pto_wsp_ptog::Op::ALL.len());
    let lib = pto_wsp_ptog::Library::with_builtins();
    let mut dev = pto_wsp_ptog::Device::new(checked, traced(2, 4), &lib).unwrap();
    let r = dev.run().unwrap_or_else(|e| panic!("{e}"));
    let y: Vec<f32> = dev.store().read("Y").unwrap();
    let want: Vec<f32> = (0..64).map(|i| if i < 8 { 3.5 } else { 2.5 }).collect();
    assert_eq!(y, want);
    let tmp = dev
        .store()
        .bytes(dev.store().index_of("TMP").unwrap())
        .to_vec();
    let first_rows: Vec<u8> = want[..16].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(tmp, first_rows);
    // INIT, AFTER_WORK and two WORKs; NEVER, CLEAR and the loop's later passes never run.
    assert_eq!(r.launches, 4);
    assert_eq!(r.kernel_runs, 2 + 1 + 2 * 5);
}

#[test]
fn the_benchmark_shapes_run_every_node_after_its_predecessors() {
    use pto_wsp_cpu::shapes::Shape;
    for text in ["wavefront:8", "random:6:5", "chain:20", "independent:30"] {
        let shape: Shape = text.parse().unwrap();
        let checked =
            pto_wsp_ptog::check::check(pto_wsp_ptog::examples::shapes::program(&shape, 3)).unwrap();
        let lib = pto_wsp_ptog::examples::library(&pto_wsp::WorkloadNode::maker(1)).unwrap();
        let mut dev = pto_wsp_ptog::Device::new(checked, traced(1, 2), &lib).unwrap();
        let r = dev.run().unwrap();
        let n = shape.tasks();
        assert_eq!(r.kernel_runs, 3 * n as u64, "{text}");
        let preds = shape.preds();
        for launch in 0..3 {
            let at = |k: usize| {
                r.trace
                    .iter()
                    .find(|t| t.launch == launch && t.kernel == k)
                    .unwrap_or_else(|| panic!("{text}: node {k} of launch {launch} never ran"))
            };
            for (k, ps) in preds.iter().enumerate() {
                for &p in ps {
                    assert!(at(k).start > at(p as usize).end, "{text}: {p} -> {k}");
                }
            }
        }
    }
}
