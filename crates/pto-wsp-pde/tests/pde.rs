//! Plan-Descriptor-Execute end to end: spaces, tiers, descriptors, the planner against a
//! brute-force search, dispatch exactly-once, every bad input as a named error, and the decode
//! attention flagship against an independent `f64` reference.

use pto_wsp_pde::decode::{DecodeBatch, decode_attention};
use pto_wsp_pde::*;
use std::sync::atomic::{AtomicU32, Ordering};

fn one_axis(n: u32) -> BoundSpace {
    Space::new("s")
        .axis("i", 0, End::Const(n))
        .bind(&[], &[])
        .unwrap()
}

fn two_tiers(ws: u32) -> Tiers {
    Tiers::new(
        "t",
        vec![Tier::upto("lo", 10, ws), Tier::default_tier("hi", ws)],
    )
    .unwrap()
}

fn desc(tier: u32, i: u32) -> Descriptor {
    Descriptor {
        tier,
        indices: [i, 0, 0],
        ..Descriptor::default()
    }
}

#[test]
fn tiles_split_an_axis_and_pad_last_keeps_the_full_size() {
    let s = Space::new("s")
        .axis("a", 2, End::Const(12))
        .axis("b", 0, End::Dynamic)
        .axis("c", 0, End::Dynamic)
        .tile("a", Tile::Size(4))
        .tile("b", Tile::PadLast(4))
        .tile("c", Tile::Auto)
        .bind(&[("b", 10), ("c", 7)], &[("c", 3)])
        .unwrap();
    // a: 2..12 by 4 -> [2,6) [6,10) [10,12); b: 0..10 by 4 padded -> [8,12); c: 0..7 by 3.
    assert_eq!(s.count(0), 3);
    assert_eq!(s.tile_bounds(0, 2), Some((10, 12)));
    assert_eq!(s.count(1), 3);
    assert_eq!(s.tile_bounds(1, 2), Some((8, 12)));
    assert_eq!(s.count(2), 3);
    assert_eq!(s.tile_bounds(2, 2), Some((6, 7)));
    assert_eq!(s.tile_bounds(2, 3), None);
}

#[test]
fn space_mistakes_are_errors_naming_the_space_and_axis() {
    let base = || {
        Space::new("sp")
            .axis("x", 0, End::Dynamic)
            .tile("x", Tile::Auto)
    };
    let cases: Vec<(Result<BoundSpace>, &str)> = vec![
        (
            base().bind(&[], &[("x", 4)]),
            "dynamic end of axis `x` is not bound",
        ),
        (
            base().bind(&[("x", 4)], &[]),
            "auto tile size of axis `x` is not bound",
        ),
        (
            base().bind(&[("x", 4), ("y", 1)], &[("x", 4)]),
            "unknown axis `y`",
        ),
        (
            base().bind(&[("x", 4), ("x", 5)], &[("x", 4)]),
            "given twice",
        ),
        (base().bind(&[("x", 4)], &[("x", 0)]), "at least 1"),
        (
            base()
                .axis("x", 0, End::Const(1))
                .bind(&[("x", 4)], &[("x", 1)]),
            "declared twice",
        ),
        (
            Space::new("sp").axis("a", 5, End::Const(2)).bind(&[], &[]),
            "ends at 2, before its start 5",
        ),
        (
            Space::new("sp")
                .axis("a", 0, End::Const(1))
                .axis("b", 0, End::Const(1))
                .axis("c", 0, End::Const(1))
                .axis("d", 0, End::Const(1))
                .bind(&[], &[]),
            "axis `d` is one too many",
        ),
        (
            Space::new("sp").tile("q", Tile::Size(2)).bind(&[], &[]),
            "axis `q`, which is not declared",
        ),
    ];
    for (r, want) in cases {
        let msg = r.unwrap_err().to_string();
        assert!(msg.starts_with("space `sp`: "), "{msg}");
        assert!(msg.contains(want), "`{msg}` should contain `{want}`");
    }
}

#[test]
fn select_tier_takes_the_first_tier_whose_bound_holds() {
    let bounds = [2048u32, 8192, 65536];
    let tiers = Tiers::new(
        "k",
        vec![
            Tier::upto("a", bounds[0], 0),
            Tier::upto("b", bounds[1], 0),
            Tier::upto("c", bounds[2], 0),
            Tier::default_tier("d", 0),
        ],
    )
    .unwrap();
    for v in [0, 1, 2047, 2048, 2049, 8192, 8193, 65536, 65537, u32::MAX] {
        let want = bounds.iter().filter(|&&b| v > b).count() as u32;
        assert_eq!(select_tier(&tiers, v), want, "value {v}");
    }
}

#[test]
fn malformed_tier_tables_are_refused_naming_the_tier() {
    let cases = [
        (vec![], "no tier"),
        (
            vec![Tier::upto("a", 1, 0)],
            "last tier `a` must be the default",
        ),
        (
            vec![Tier::default_tier("a", 0), Tier::default_tier("b", 0)],
            "tier `a` is a default but not the last",
        ),
        (
            vec![
                Tier::upto("a", 5, 0),
                Tier::upto("b", 5, 0),
                Tier::default_tier("c", 0),
            ],
            "tier `b` bound 5",
        ),
        (
            vec![Tier::upto("a", 5, 0), Tier::default_tier("a", 0)],
            "tier `a` is declared twice",
        ),
    ];
    for (tiers, want) in cases {
        let msg = Tiers::new("tt", tiers).unwrap_err().to_string();
        assert!(
            msg.starts_with("tiers `tt`: ") && msg.contains(want),
            "{msg}"
        );
    }
}

#[test]
fn fields_are_read_by_name_and_unknown_names_are_errors() {
    let l = Layout::new("sp", &["batch", "head"], &["num_chunks"]).unwrap();
    let d = Descriptor {
        tier: 3,
        indices: [7, 9, 0],
        start: 10,
        end: 20,
        workspace: 40,
        user: [5, 0],
    };
    let get = |n: &str| l.field(n).unwrap().get(&d);
    assert_eq!(
        [
            get("tier"),
            get("batch"),
            get("head"),
            get("start"),
            get("end"),
            get("workspace"),
            get("num_chunks")
        ],
        [3, 7, 9, 10, 20, 40, 5]
    );
    let msg = l.field("chunk").unwrap_err().to_string();
    assert!(
        msg.contains("space `sp`: the descriptor has no field `chunk`"),
        "{msg}"
    );
    assert!(
        Layout::new("sp", &["a"], &["a"])
            .unwrap_err()
            .to_string()
            .contains("`a` is named twice")
    );
    assert!(Layout::new("sp", &[], &["a", "b", "c"]).is_err());
}

#[test]
fn every_descriptor_runs_exactly_once_on_any_number_of_dispatch_threads() {
    let n = 5000u32;
    let space = one_axis(n);
    let tiers = two_tiers(0);
    for threads in [1, 2, 3] {
        for cap in [1, 4, 1024] {
            let seen: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            let wrong_tier = AtomicU32::new(0);
            let lo = |d: &Descriptor| {
                seen[d.indices[0] as usize].fetch_add(1, Ordering::Relaxed);
                if d.indices[0] > 10 {
                    wrong_tier.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            };
            let hi = |d: &Descriptor| {
                seen[d.indices[0] as usize].fetch_add(1, Ordering::Relaxed);
                if d.indices[0] <= 10 {
                    wrong_tier.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            };
            let stats = Launch::new(&space, &tiers)
                .kernel("lo", &lo)
                .kernel("hi", &hi)
                .dispatch_threads(threads)
                .queue_capacity(cap)
                .run(|e| {
                    for i in 0..n {
                        e.emit(desc(select_tier(e.tiers(), i), i))?;
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(stats.descriptors, u64::from(n));
            assert_eq!(stats.per_thread.len(), threads);
            assert_eq!(stats.per_thread.iter().sum::<u64>(), u64::from(n));
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
            assert_eq!(wrong_tier.load(Ordering::Relaxed), 0);
        }
    }
}

#[test]
fn bad_descriptors_are_errors_naming_the_space_and_field() {
    let space = Space::new("sp")
        .axis("row", 0, End::Const(4))
        .bind(&[], &[])
        .unwrap();
    let tiers = two_tiers(0);
    let ok = |_: &Descriptor| Ok(());
    let run = |d: Descriptor| {
        Launch::new(&space, &tiers)
            .kernel("lo", &ok)
            .kernel("hi", &ok)
            .queue_capacity(1)
            .run(|e| {
                e.emit(desc(0, 0))?;
                e.emit(d)
            })
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        run(desc(0, 4)),
        "space `sp`: descriptor field `row` = 4 is out of range (must be below 4)"
    );
    assert_eq!(
        run(desc(2, 0)),
        "space `sp`: descriptor field `tier` = 2 is out of range (must be below 2)"
    );
    let mut d = desc(0, 0);
    d.indices[1] = 1;
    assert!(run(d).contains("field `indices[1] (no such axis)` = 1"));
    let mut d = desc(0, 0);
    (d.start, d.end) = (5, 3);
    assert!(run(d).contains("field `start` = 5 is out of range (must be below 4)"));
}

#[test]
fn a_tier_with_no_kernel_is_refused_before_anything_runs() {
    let space = one_axis(3);
    let tiers = two_tiers(0);
    let ran = AtomicU32::new(0);
    let k = |_: &Descriptor| {
        ran.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let err = Launch::new(&space, &tiers)
        .kernel("lo", &k)
        .run(|e| e.emit(desc(0, 0)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "space `s`: tier `hi` (index 1) of `t` has no kernel"
    );
    assert_eq!(ran.load(Ordering::Relaxed), 0);
    let err = Launch::new(&space, &tiers)
        .kernel("mid", &k)
        .run(|_| Ok(()))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("tier `mid`, which is not in the table"),
        "{err}"
    );
    let err = Launch::new(&space, &tiers)
        .kernel("lo", &k)
        .kernel("hi", &k)
        .dispatch_threads(0)
        .run(|_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("dispatch threads"), "{err}");
}

#[test]
fn workspace_is_allocated_in_order_and_an_overflow_names_the_tier_and_indices() {
    let space = one_axis(10);
    let tiers = two_tiers(6);
    let (descs, used) = generate_vec(&space, &tiers, 18, 4, |e| {
        for i in 0..3 {
            let w = e.alloc_workspace(0, &[i])?;
            e.emit(Descriptor {
                workspace: w,
                ..desc(0, i)
            })?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(
        descs.iter().map(|d| d.workspace).collect::<Vec<_>>(),
        [0, 6, 12]
    );
    assert_eq!(used, 18);
    let err = generate_vec(&space, &tiers, 17, 4, |e| {
        for i in 0..3 {
            e.alloc_workspace(1, &[i])?;
        }
        Ok(())
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "space `s`: workspace overflow allocating 6 elements for tier `hi` at indices [2]: \
         12 of 17 already used"
    );
    let none = Tiers::new("z", vec![Tier::default_tier("z0", 0)]).unwrap();
    let (_, used) = generate_vec(&space, &none, 0, 1, |e| {
        assert_eq!(e.alloc_workspace(0, &[0])?, NO_WORKSPACE);
        Ok(())
    })
    .unwrap();
    assert_eq!(used, 0);
}

fn emit_all<S: Sink>(e: &mut Emitter<'_, S>) -> Result<()> {
    for i in 0..100_000 {
        e.emit(desc(0, i))?;
    }
    Ok(())
}

#[test]
// The closure is not redundant: it lets the call take any lifetime of the launch's sink.
#[allow(clippy::redundant_closure)]
fn a_failing_or_panicking_kernel_or_generator_stops_the_launch_with_an_error() {
    let space = one_axis(100_000);
    let tiers = two_tiers(0);
    let ok = |_: &Descriptor| Ok(());
    let fails = |d: &Descriptor| {
        if d.indices[0] == 7 {
            Err("bad row".to_string())
        } else {
            Ok(())
        }
    };
    let panics = |d: &Descriptor| {
        if d.indices[0] == 7 {
            panic!("boom");
        }
        Ok(())
    };
    for (k, want) in [
        (&fails as &Kernel<'_>, "bad row"),
        (&panics, "the kernel panicked"),
    ] {
        for threads in [1, 2] {
            let err = Launch::new(&space, &tiers)
                .kernel("lo", k)
                .kernel("hi", &ok)
                .dispatch_threads(threads)
                .queue_capacity(8)
                .run(|e| emit_all(e))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("space `s`: kernel of tier `lo` failed on descriptor"),
                "{err}"
            );
            assert!(err.ends_with(want), "{err}");
        }
    }
    let err = Launch::new(&space, &tiers)
        .kernel("lo", &ok)
        .kernel("hi", &ok)
        .run(|e| {
            e.emit(desc(0, 0))?;
            panic!("generator bug")
        })
        .unwrap_err();
    assert!(err.to_string().contains("the generator panicked"), "{err}");
}

/// The smallest chunk in `min..=max_len` whose blocks fit, by trying every size.
fn brute_chunk(lens: &[u32], heads: u32, budget: u64, min: u32) -> Option<u32> {
    let max_len = lens.iter().copied().max().unwrap().max(1);
    (min..=max_len.max(min)).find(|&c| {
        lens.iter()
            .map(|&l| u64::from(l.max(1).div_ceil(c)))
            .sum::<u64>()
            * u64::from(heads)
            <= budget
    })
}

#[test]
fn the_planner_finds_the_smallest_chunk_that_fits_the_budget() {
    let mut state = 0x1234_5678_u64;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    for _ in 0..300 {
        let batch = 1 + next(12) as usize;
        let lens: Vec<u32> = (0..batch).map(|_| next(3000) as u32).collect();
        let heads = 1 + next(4) as u32;
        let executors = 1 + next(8) as u32;
        let opts = PlanOptions {
            min_chunk: 1 + next(300) as u32,
            blocks_per_executor: 1 + next(8) as u32,
        };
        let plan = plan_kv_chunk(&lens, heads, executors, opts).unwrap();
        let max_len = lens.iter().copied().max().unwrap().max(1);
        let whole = batch as u64 * u64::from(heads);
        let budget = whole + u64::from(executors * opts.blocks_per_executor);
        assert_eq!(plan.budget, budget);
        assert_eq!(plan.blocks, blocks_for(&lens, heads, plan.chunk));
        let c = brute_chunk(&lens, heads, budget, opts.min_chunk).unwrap();
        let c_blocks = blocks_for(&lens, heads, c);
        if c_blocks == whole {
            assert_eq!((plan.chunk, plan.split), (max_len, false), "{lens:?}");
        } else {
            assert_eq!(
                (plan.chunk, plan.split),
                (c, true),
                "{lens:?} {heads} {budget}"
            );
            assert!(plan.blocks <= budget);
        }
    }
}

#[test]
fn the_planner_splits_one_long_request_among_more_short_ones_than_executors() {
    let mut lens = vec![512u32; 31];
    lens.insert(15, 32768);
    let plan = plan_kv_chunk(&lens, 8, 24, PlanOptions::default()).unwrap();
    // 256 unsplit blocks + 24 x 8 extra: the long request's 8 heads get 1 + 192 / 8 = 25
    // chunks each, so the chunk is the smallest with ceil(32768 / chunk) <= 25.
    assert_eq!(plan.budget, 256 + 192);
    assert!(plan.split);
    assert_eq!(plan.chunk, 32768u32.div_ceil(25));
    assert_eq!(plan.blocks, 31 * 8 + 25 * 8);
}

#[test]
fn the_planner_refuses_metadata_it_cannot_plan_for() {
    let o = PlanOptions::default();
    assert!(
        plan_kv_chunk(&[], 1, 1, o)
            .unwrap_err()
            .to_string()
            .contains("batch size")
    );
    assert!(
        plan_kv_chunk(&[1], 0, 1, o)
            .unwrap_err()
            .to_string()
            .contains("KV heads")
    );
    assert!(
        plan_kv_chunk(&[1], 1, 0, o)
            .unwrap_err()
            .to_string()
            .contains("executors")
    );
    let z = PlanOptions { min_chunk: 0, ..o };
    assert!(
        plan_kv_chunk(&[1], 1, 1, z)
            .unwrap_err()
            .to_string()
            .contains("min_chunk")
    );
}

/// Softmax attention in `f64`, computed directly from the inputs.
fn reference(b: &DecodeBatch) -> Vec<f64> {
    let (hk, g, d) = (b.kv_heads as usize, b.group as usize, b.dim as usize);
    let mut out = vec![0f64; b.q.len()];
    for (r, &len) in b.kv_lens.iter().enumerate() {
        let len = len as usize;
        for h in 0..hk {
            for gi in 0..g {
                let q0 = ((r * hk + h) * g + gi) * d;
                let q = &b.q[q0..q0 + d];
                let scores: Vec<f64> = (0..len)
                    .map(|j| {
                        let k = &b.k[r][(h * len + j) * d..(h * len + j + 1) * d];
                        q.iter()
                            .zip(k)
                            .map(|(&x, &y)| f64::from(x) * f64::from(y))
                            .sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = w.iter().sum();
                for (j, wj) in w.iter().enumerate() {
                    let v = &b.v[r][(h * len + j) * d..(h * len + j + 1) * d];
                    for c in 0..d {
                        out[q0 + c] += wj / z * f64::from(v[c]);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn planned_decode_attention_matches_an_f64_reference_on_every_length_mix() {
    let mut long_mix = vec![40u32; 15];
    long_mix.insert(5, 3000);
    let mixes: [(&str, Vec<u32>); 4] = [
        ("uniform", vec![600; 8]),
        ("one long among short", long_mix),
        ("all short", vec![3, 17, 1, 64, 30, 9]),
        ("with an empty request", vec![0, 900, 5]),
    ];
    let opts = PlanOptions {
        min_chunk: 64,
        blocks_per_executor: 8,
    };
    let mut merged_somewhere = false;
    for (name, lens) in mixes {
        let batch = DecodeBatch::synthetic(&lens, 2, 4, 32, lens.len() as u64);
        let want = reference(&batch);
        let plan = plan_kv_chunk(&lens, 2, 4, opts).unwrap();
        for chunk in [plan.chunk, 256, 1024] {
            for threads in [1, 2] {
                let run = decode_attention(&batch, chunk, threads).unwrap();
                let split = lens.iter().any(|&l| l.div_ceil(chunk) > 1);
                assert_eq!(run.merges.is_some(), split, "{name}");
                merged_somewhere |= split;
                let expect_desc: u64 = lens
                    .iter()
                    .map(|&l| u64::from(l.div_ceil(chunk).max(1)) * 2)
                    .sum();
                assert_eq!(run.chunks.descriptors, expect_desc);
                for (i, (&got, &w)) in run.out.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - w).abs() <= 2e-5 * (1.0 + w.abs()),
                        "{name}, chunk {chunk}, {threads} threads, element {i}: {got} vs {w}"
                    );
                }
            }
        }
    }
    assert!(merged_somewhere);
}

#[test]
fn decode_inputs_that_do_not_match_their_lengths_are_refused() {
    let mut batch = DecodeBatch::synthetic(&[10, 20], 2, 2, 8, 1);
    batch.k[1].pop();
    let err = decode_attention(&batch, 8, 1).unwrap_err().to_string();
    assert_eq!(err, "space `decode_attention`: k[1] must hold 320 elements");
    let err = pto_wsp_pde::decode::decode_tiers(1 << 20, 1 << 20).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "tiers `decode_kernel`: a partial of group 1048576 x (dim 1048576 + 1) exceeds"
        ),
        "{err}"
    );
}
