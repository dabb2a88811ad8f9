//! The declarative schedule as built: `order` decides the walk's order, `affinity` which dispatch
//! threads run a descriptor. Each effect is checked against a hand-written expectation.

use pto_wsp_pde::*;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::thread::ThreadId;

fn space(b: u32, c: u32) -> BoundSpace {
    Space::new("sched")
        .axis("batch", 0, End::Const(b))
        .axis("chunk", 0, End::Const(c))
        .bind(&[], &[])
        .unwrap()
}

fn points(s: &BoundSpace, orders: &[(&str, Order)]) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    walk(s, orders, |i| {
        v.push((i[0], i[1]));
        Ok(())
    })
    .unwrap();
    v
}

#[test]
fn interleaved_order_takes_groups_of_values_at_each_inner_point() {
    let s = space(6, 2);
    // The PDE specification's `PTO_ORDER` example: B0C0, B1C0, B2C0, B3C0, B0C1, ... for
    // interleaved(4) on the batch.
    let want = vec![
        (0, 0),
        (1, 0),
        (2, 0),
        (3, 0),
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 0),
        (5, 0),
        (4, 1),
        (5, 1),
    ];
    assert_eq!(points(&s, &[("batch", Order::Interleaved(4))]), want);
    let row_major: Vec<(u32, u32)> = (0..6).flat_map(|b| (0..2).map(move |c| (b, c))).collect();
    assert_eq!(points(&s, &[]), row_major);
    assert_eq!(
        points(
            &s,
            &[("batch", Order::Sequential), ("chunk", Order::Parallel)]
        ),
        row_major
    );
    // Interleaving the inner axis in groups of 1 is the row-major order again.
    assert_eq!(points(&s, &[("chunk", Order::Interleaved(1))]), row_major);
}

#[test]
fn order_mistakes_name_the_space_and_axis() {
    let s = space(2, 2);
    let cases: [(&[(&str, Order)], &str); 4] = [
        (
            &[("head", Order::Parallel)],
            "`order` names axis `head`, which is not declared",
        ),
        (
            &[("batch", Order::Parallel), ("batch", Order::Sequential)],
            "names axis `batch` twice",
        ),
        (
            &[("batch", Order::Interleaved(0))],
            "axis `batch`: interleaved(0) has no group",
        ),
        (
            &[
                ("batch", Order::Interleaved(2)),
                ("chunk", Order::Interleaved(2)),
            ],
            "axis `chunk`: only one axis can be interleaved",
        ),
    ];
    for (orders, want) in cases {
        let msg = walk(&s, orders, |_| Ok(())).unwrap_err().to_string();
        assert!(
            msg.starts_with("space `sched`: ") && msg.contains(want),
            "{msg}"
        );
    }
}

/// Runs every point of a 9 × 50 space under `affinity` on `threads` dispatch threads; returns
/// the threads each batch value ran on, and the number of descriptors run.
fn placement(threads: usize, affinity: Affinity) -> Result<(Vec<HashSet<ThreadId>>, u64)> {
    let s = space(9, 50);
    let tiers = Tiers::new("t", vec![Tier::default_tier("k", 0)]).unwrap();
    let seen: Mutex<HashMap<u32, HashSet<ThreadId>>> = Mutex::new(HashMap::new());
    let k = |d: &Descriptor| {
        seen.lock()
            .unwrap()
            .entry(d.indices[0])
            .or_default()
            .insert(std::thread::current().id());
        Ok(())
    };
    let stats = Launch::new(&s, &tiers)
        .kernel("k", &k)
        .dispatch_threads(threads)
        .queue_capacity(4)
        .affinity("batch", affinity)
        .run(|e| {
            let space = e.space();
            walk(space, &[], |i| {
                e.emit(Descriptor {
                    indices: i,
                    ..Descriptor::default()
                })
            })
        })?;
    let seen = seen.into_inner().unwrap();
    Ok((
        (0..9)
            .map(|v| seen.get(&v).cloned().unwrap_or_default())
            .collect(),
        stats.descriptors,
    ))
}

#[test]
fn core_local_affinity_runs_each_value_on_one_thread() {
    let (by_value, n) = placement(3, Affinity::CoreLocal).unwrap();
    assert_eq!(n, 450);
    for v in 0..9 {
        assert_eq!(by_value[v].len(), 1, "value {v} ran on {:?}", by_value[v]);
        // v and v + 3 share thread v mod 3; v and v + 1 do not.
        if v + 3 < 9 {
            assert_eq!(by_value[v], by_value[v + 3]);
        }
        if v + 1 < 9 && (v + 1) % 3 != 0 {
            assert!(by_value[v].is_disjoint(&by_value[v + 1]));
        }
    }
}

#[test]
fn core_group_affinity_keeps_each_value_within_its_group() {
    // 4 threads in groups of 2: even values on one pair of threads, odd values on the other.
    let (by_value, n) = placement(4, Affinity::CoreGroup(2)).unwrap();
    assert_eq!(n, 450);
    let even: HashSet<ThreadId> = by_value.iter().step_by(2).flatten().copied().collect();
    let odd: HashSet<ThreadId> = by_value
        .iter()
        .skip(1)
        .step_by(2)
        .flatten()
        .copied()
        .collect();
    assert!(even.len() <= 2 && odd.len() <= 2, "{even:?} {odd:?}");
    assert!(even.is_disjoint(&odd));
    let (_, n) = placement(2, Affinity::Spread).unwrap();
    assert_eq!(n, 450);
}

#[test]
fn affinity_mistakes_are_refused_before_anything_runs() {
    let msg = placement(4, Affinity::CoreGroup(0))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("affinity on axis `batch`: core_group(0) needs 1 to 4 threads"),
        "{msg}"
    );
    let msg = placement(2, Affinity::CoreGroup(3))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("core_group(3) needs 1 to 2 threads"), "{msg}");
    let s = space(2, 2);
    let tiers = Tiers::new("t", vec![Tier::default_tier("k", 0)]).unwrap();
    let k = |_: &Descriptor| Ok(());
    let msg = Launch::new(&s, &tiers)
        .kernel("k", &k)
        .affinity("head", Affinity::CoreLocal)
        .run(|_| Ok(()))
        .unwrap_err()
        .to_string();
    assert_eq!(msg, "space `sched`: no axis `head`");
}

/// The generated sequence of `space(b, c)` under `orders` and `prefetch(batch, depth)`: a work
/// descriptor as `(batch, chunk)`, a prefetch as `(batch + 100, 0)`.
fn with_prefetch(b: u32, c: u32, orders: &[(&str, Order)], depth: u32) -> Vec<(u32, u32)> {
    let s = space(b, c);
    let tiers = Tiers::new("t", vec![Tier::default_tier("k", 0)]).unwrap();
    let mut e = Emitter::new(&s, &tiers, 0, Vec::new());
    e.prefetch(0, depth).unwrap();
    walk(&s, orders, |i| {
        e.emit(Descriptor {
            indices: i,
            ..Descriptor::default()
        })
    })
    .unwrap();
    assert_eq!(e.emitted(), u64::from(b * c));
    let prefetches = e.prefetches();
    let v: Vec<(u32, u32)> = e
        .into_sink()
        .iter()
        .map(|d| {
            if d.tier == PREFETCH_TIER {
                assert_eq!((d.indices[1], d.workspace), (0, NO_WORKSPACE));
                (d.indices[0] + 100, 0)
            } else {
                (d.indices[0], d.indices[1])
            }
        })
        .collect();
    assert_eq!(prefetches, v.iter().filter(|p| p.0 >= 100).count() as u64);
    v
}

#[test]
fn prefetch_puts_the_fetch_of_value_v_plus_depth_just_before_the_first_descriptor_of_v() {
    let p = |v: u32| (v + 100, 0);
    // Sequential: P1 before batch 0, P2 before batch 1, ...; no batch 4 to fetch.
    assert_eq!(
        with_prefetch(4, 2, &[], 1),
        vec![
            p(1),
            (0, 0),
            (0, 1),
            p(2),
            (1, 0),
            (1, 1),
            p(3),
            (2, 0),
            (2, 1),
            (3, 0),
            (3, 1)
        ]
    );
    // Depth 2.
    assert_eq!(
        with_prefetch(4, 1, &[], 2),
        vec![p(2), (0, 0), p(3), (1, 0), (2, 0), (3, 0)]
    );
    // Interleaved(2): values revisited are fetched once, at their first visit.
    assert_eq!(
        with_prefetch(4, 2, &[("batch", Order::Interleaved(2))], 1),
        vec![
            p(1),
            (0, 0),
            p(2),
            (1, 0),
            (0, 1),
            (1, 1),
            p(3),
            (2, 0),
            (3, 0),
            (2, 1),
            (3, 1)
        ]
    );
}

#[test]
fn under_core_local_affinity_a_values_prefetch_runs_on_its_thread_before_its_descriptors() {
    let s = space(9, 50);
    let tiers = Tiers::new("t", vec![Tier::default_tier("k", 0)]).unwrap();
    // (prefetch?, batch value, thread), in the order each thread ran them.
    let log = Mutex::new(Vec::new());
    let work = |d: &Descriptor| {
        let t = std::thread::current().id();
        log.lock().unwrap().push((false, d.indices[0], t));
        Ok(())
    };
    let fetch = |d: &Descriptor| {
        let t = std::thread::current().id();
        log.lock().unwrap().push((true, d.indices[0], t));
        Ok(())
    };
    let stats = Launch::new(&s, &tiers)
        .kernel("k", &work)
        .dispatch_threads(3)
        .affinity("batch", Affinity::CoreLocal)
        .prefetch("batch", 1, &fetch)
        .queue_capacity(4)
        .run(|e| {
            walk(e.space(), &[], |i| {
                e.emit(Descriptor {
                    indices: i,
                    ..Descriptor::default()
                })
            })
        })
        .unwrap();
    assert_eq!(stats.descriptors, 450);
    assert_eq!(stats.per_thread.iter().sum::<u64>(), 450);
    assert_eq!(stats.prefetches, 8, "values 1 ..= 8");
    let log = log.into_inner().unwrap();
    for v in 1..9 {
        let fetched: Vec<usize> = (0..log.len())
            .filter(|&i| log[i].0 && log[i].1 == v)
            .collect();
        assert_eq!(fetched.len(), 1, "value {v} fetched once");
        let at = fetched[0];
        for (i, &(pre, value, thread)) in log.iter().enumerate() {
            if !pre && value == v {
                assert_eq!(thread, log[at].2, "value {v} runs where it was fetched");
                assert!(i > at, "value {v}: a descriptor ran before its prefetch");
            }
        }
    }
    // Mistakes name the space and axis.
    let k = |_: &Descriptor| Ok(());
    let msg = Launch::new(&s, &tiers)
        .kernel("k", &k)
        .prefetch("batch", 0, &k)
        .run(|_| Ok(()))
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "space `sched`: `prefetch(batch, 0)`: the depth must be at least 1"
    );
    let msg = Launch::new(&s, &tiers)
        .kernel("k", &k)
        .prefetch("head", 1, &k)
        .run(|_| Ok(()))
        .unwrap_err()
        .to_string();
    assert_eq!(msg, "space `sched`: no axis `head`");
}
