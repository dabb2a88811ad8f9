//! The exact-key TensorMaps against a plain model, one access at a time.
//!
//! The model keeps, per key, the last writer and the readers since, in a `HashMap` and `Vec`s,
//! and applies the module promises of `tensor_map` literally: a read reports the last writer
//! (read after write), a write reports the last writer (write after write; read after write
//! for an inout) and every reader since (write after read), never the task itself. Retiring is
//! modelled as the bounded map's documentation states it: a bounded map more than half full
//! frees every key whose newest task has completed; every other map keeps every key. A map may
//! report a completed reader as [`TaskId::FORGOTTEN`] instead of by id (pruned reader lists):
//! every live predecessor must be reported by id, and ids plus forgotten ones must count the
//! model's predecessors exactly.
//!
//! Small capacities and keys packed into a few slot windows (tiles of one row share a window)
//! crowd the fixed map's table, so accesses probe past their home slot and retiring deletes keys
//! from the middle of probe runs. The counters (hits, misses, live keys, high water, capacity,
//! room) are compared with the model's after every access.

use proptest::prelude::*;
use pto_wsp_graph::tensor_map::{DynamicExactMap, FixedExactMap, MapStats, TensorMap};
use pto_wsp_graph::types::{Access, EdgeKind, Region, TaskId};
use std::collections::HashMap;

/// One key's history since it was (re)created: the last writer and the readers since.
#[derive(Clone, Debug, Default)]
struct KeyModel {
    writer: Option<u32>,
    readers: Vec<u32>,
}

impl KeyModel {
    /// The newest task recorded.
    fn newest(&self) -> u32 {
        match self.readers.last() {
            Some(&r) => r,
            None => self.writer.expect("a key holds a record"),
        }
    }
}

/// What the map is: bounded (frees keys at a retire when more than half full), growable
/// (doubles when the live keys reach its capacity) or unbounded without a capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Bounded,
    Growable,
    Dynamic,
}

struct Model {
    kind: Kind,
    capacity: usize,
    keys: HashMap<Region, KeyModel>,
    oldest: u32,
    stats: MapStats,
}

impl Model {
    fn new(kind: Kind, capacity: usize) -> Model {
        Model {
            kind,
            capacity: capacity.max(1),
            keys: HashMap::new(),
            oldest: 0,
            stats: MapStats::default(),
        }
    }

    fn has_room(&self, regions: usize) -> bool {
        self.kind != Kind::Bounded || self.keys.len() + regions <= self.capacity
    }

    /// The predecessors an access must report, sorted.
    fn access(&mut self, t: u32, region: Region, access: Access) -> Vec<(u32, EdgeKind)> {
        if self.kind == Kind::Growable && self.keys.len() >= self.capacity {
            self.capacity *= 2;
        }
        let hit = self.keys.contains_key(&region);
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        let key = self.keys.entry(region).or_default();
        let mut want = Vec::new();
        let writes = matches!(access, Access::Out | Access::InOut);
        let reads = matches!(access, Access::In | Access::InOut);
        if let Some(w) = key.writer.filter(|&w| w != t) {
            let kind = if reads { EdgeKind::Raw } else { EdgeKind::Waw };
            want.push((w, kind));
        }
        if writes {
            want.extend(
                key.readers
                    .iter()
                    .filter(|&&r| r != t)
                    .map(|&r| (r, EdgeKind::War)),
            );
            key.readers.clear();
            key.writer = Some(t);
        } else {
            key.readers.push(t);
        }
        self.stats.live = self.keys.len() as u64;
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
        want.sort_unstable_by_key(|&(p, k)| (p, k as u8));
        want
    }

    fn retire_before(&mut self, oldest: u32) {
        self.oldest = self.oldest.max(oldest);
        if self.kind == Kind::Bounded && self.keys.len() * 2 > self.capacity {
            let o = self.oldest;
            self.keys.retain(|_, k| k.newest() >= o);
            self.stats.live = self.keys.len() as u64;
        }
    }

    fn clear(&mut self) {
        *self = Model::new(self.kind, self.capacity);
    }
}

/// One step of a stream: an access by the next task, a retire with a lag behind it, or a clear.
#[derive(Clone, Debug)]
enum Step {
    Access(Region, Access),
    Retire(u32),
    Clear,
}

/// Keys packed into few slot windows: three tensors, four rows, sixteen column tiles of 4
/// (two windows of eight per row), so a small table is crowded and keys share windows.
fn key() -> impl Strategy<Value = Region> {
    (0u32..3, 0u32..4, 0u32..16).prop_map(|(t, r, c)| Region::new_2d(t, r * 2, 2, c * 4, 4))
}

fn step() -> impl Strategy<Value = Step> {
    let access = prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)];
    prop_oneof![
        12 => (key(), access).prop_map(|(r, a)| Step::Access(r, a)),
        3 => (0u32..12).prop_map(Step::Retire),
        1 => Just(Step::Clear),
    ]
}

/// Runs `steps` through `map` and the model, comparing every access's predecessors and the
/// counters (and the capacity, where `capacity_of` gives one).
fn check<M: TensorMap>(
    mut map: M,
    mut model: Model,
    steps: &[Step],
    capacity_of: impl Fn(&M) -> Option<usize>,
) -> Result<(), TestCaseError> {
    let mut t = 0u32;
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Access(region, access) => {
                for k in 0..3 {
                    prop_assert_eq!(map.has_room(k).is_ok(), model.has_room(k), "step {}", i);
                }
                if !model.has_room(1) {
                    // Full: every earlier task completes, which frees every key.
                    map.retire_before(TaskId(t));
                    model.retire_before(t);
                    prop_assert!(model.has_room(1));
                }
                let mut got = Vec::new();
                map.access(TaskId(t), &region, access, &mut |p, kind| {
                    got.push((p.0, kind))
                });
                let want = model.access(t, region, access);
                let forgotten = got.iter().filter(|&&(p, _)| p == TaskId::FORGOTTEN.0);
                prop_assert!(forgotten.clone().all(|&(_, k)| k == EdgeKind::War));
                let forgotten = forgotten.count();
                got.retain(|&(p, _)| p != TaskId::FORGOTTEN.0);
                got.sort_unstable_by_key(|&(p, k)| (p, k as u8));
                for e in &got {
                    prop_assert!(
                        want.contains(e),
                        "step {} task {}: {:?} not in {:?}",
                        i,
                        t,
                        e,
                        want
                    );
                }
                for e in want.iter().filter(|&&(p, _)| p >= model.oldest) {
                    prop_assert!(
                        got.contains(e),
                        "step {} task {}: live {:?} missing",
                        i,
                        t,
                        e
                    );
                }
                prop_assert_eq!(got.len() + forgotten, want.len(), "step {} task {}", i, t);
                t += 1;
            }
            Step::Retire(lag) => {
                map.retire_before(TaskId(t.saturating_sub(lag)));
                model.retire_before(t.saturating_sub(lag));
            }
            Step::Clear => {
                map.clear();
                model.clear();
            }
        }
        let got = map.stats();
        let want = model.stats;
        prop_assert_eq!(
            (got.hits, got.misses, got.live, got.high_water),
            (want.hits, want.misses, want.live, want.high_water),
            "step {}",
            i
        );
        if let Some(c) = capacity_of(&map) {
            prop_assert_eq!(c, model.capacity, "step {}", i);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(64), ..ProptestConfig::default() })]

    /// The bounded map at capacities from one key to more than every key, with the default
    /// access log and with logs so short that retiring sweeps.
    #[test]
    fn the_bounded_map_follows_the_model(
        steps in prop::collection::vec(step(), 1..300),
        capacity in prop_oneof![Just(1usize), 2usize..24, Just(200)],
        log in prop_oneof![Just(None), (0usize..6).prop_map(Some)],
    ) {
        let map = match log {
            None => FixedExactMap::new(capacity),
            Some(n) => FixedExactMap::with_log_limit(capacity, n),
        };
        check(map, Model::new(Kind::Bounded, capacity), &steps, |m| Some(m.capacity()))?;
    }

    /// The growable map from one to a few keys up (doubling many times, retiring keeps every
    /// key) and the dynamic map.
    #[test]
    fn the_unbounded_maps_follow_the_model(
        steps in prop::collection::vec(step(), 1..300),
        initial in 1usize..5,
    ) {
        let model = Model::new(Kind::Growable, initial);
        check(FixedExactMap::growable(initial), model, &steps, |m| Some(m.capacity()))?;
        let model = Model::new(Kind::Dynamic, 1);
        check(DynamicExactMap::new(), model, &steps, |_| None)?;
    }
}

/// Readers pile up on one key beyond the inline slots and several chunks, tasks retire as they
/// go, and a write then reports every reader: live ones by id, the pruned ones as a count.
#[test]
fn many_readers_of_one_key_are_all_reported_by_the_next_write() {
    for lag in [0u32, 1, 5, 20, 1000] {
        let steps: Vec<Step> = (0..200u32)
            .flat_map(|i| {
                let a = if i % 67 == 66 {
                    Access::Out
                } else {
                    Access::In
                };
                [
                    Step::Access(Region::new_2d(0, 0, 2, 0, 4), a),
                    Step::Retire(lag),
                ]
            })
            .collect();
        let fixed = |m: &FixedExactMap| Some(m.capacity());
        let runs = [
            check(
                FixedExactMap::new(4),
                Model::new(Kind::Bounded, 4),
                &steps,
                fixed,
            ),
            check(
                FixedExactMap::growable(1),
                Model::new(Kind::Growable, 1),
                &steps,
                fixed,
            ),
            check(
                DynamicExactMap::new(),
                Model::new(Kind::Dynamic, 1),
                &steps,
                |_| None,
            ),
        ];
        for (r, map) in runs.into_iter().zip(["bounded", "growable", "dynamic"]) {
            r.unwrap_or_else(|e| panic!("{map} map, lag {lag}: {e}"));
        }
    }
}

/// The fixed map counts probe steps past a key's home slot: none for one key; some for 64 keys
/// of one column (each in a window and place of its own hash) in a table of 128 slots, where
/// two keys sharing a home slot is all but certain.
#[test]
fn the_fixed_map_counts_probe_steps() {
    let mut one = FixedExactMap::new(64);
    one.access(
        TaskId(0),
        &Region::new_2d(0, 0, 2, 0, 4),
        Access::Out,
        &mut |_, _| {},
    );
    one.access(
        TaskId(1),
        &Region::new_2d(0, 0, 2, 0, 4),
        Access::In,
        &mut |_, _| {},
    );
    assert_eq!(one.stats().probes, 0);
    let mut m = FixedExactMap::new(64);
    for pass in 0..2 {
        for r in 0..64u32 {
            let region = Region::new_2d(0, r * 2, 2, 0, 4);
            m.access(TaskId(pass * 64 + r), &region, Access::Out, &mut |_, _| {});
        }
    }
    let s = m.stats();
    assert_eq!((s.hits, s.misses, s.live), (64, 64, 64));
    assert!(s.probes > 0, "{s:?}");
}

/// Two distinct keys whose slot hashes share their low 32 bits (the fixed map's slot tag), so
/// they share a home slot and a tag: found by a birthday search over one-row regions (2^16
/// keys make a match likely, 2^19 all but certain). The map must still tell them apart by key.
#[test]
fn keys_with_the_same_slot_tag_stay_apart() {
    let mut seen = HashMap::new();
    let (a, b) = (0..1u32 << 19)
        .map(|r| Region::new_2d(0, r, 1, 0, 1))
        .find_map(|k| seen.insert(k.slot_hash() as u32, k).map(|old| (old, k)))
        .expect("a 32-bit tag shared by two of 2^19 keys");
    assert_ne!(a, b);
    assert_eq!(a.slot_hash() as u32, b.slot_hash() as u32);
    for capacity in [2usize, 64, 1 << 20] {
        let mut m = FixedExactMap::new(capacity);
        let mut got = Vec::new();
        m.access(TaskId(0), &a, Access::Out, &mut |p, k| {
            got.push((p.0, 0, k))
        });
        m.access(TaskId(1), &b, Access::Out, &mut |p, k| {
            got.push((p.0, 1, k))
        });
        m.access(TaskId(2), &a, Access::In, &mut |p, k| got.push((p.0, 2, k)));
        m.access(TaskId(3), &b, Access::In, &mut |p, k| got.push((p.0, 3, k)));
        assert_eq!(
            got,
            [(0, 2, EdgeKind::Raw), (1, 3, EdgeKind::Raw)],
            "capacity {capacity}"
        );
        let s = m.stats();
        assert_eq!((s.hits, s.misses, s.live), (2, 2, 2), "capacity {capacity}");
    }
}

/// The `skip`-th one-row region whose home slot in a table of 8 slots is `home`.
fn key_at(home: u64, skip: usize) -> Region {
    (0..)
        .map(|r| Region::new_2d(1, r, 1, 0, 1))
        .filter(|k| k.slot_hash() & 7 == home)
        .nth(skip)
        .expect("a key for every home slot")
}

/// Deleting a key whose probe run wraps from the table's last slot to its first. A bounded map
/// of capacity 4 has 8 slots, probed 0, 1, …, 7 and back to 0 (one window of 8). Keys are
/// chosen by home slot and written by tasks 0, 1, … in turn (each lands on the first free slot
/// from its home on); retiring task 0 frees the first key (the map is more than half full),
/// and every other key must still be found: read by a new task, it reports its writer.
#[test]
fn deleting_from_a_probe_run_that_wraps_keeps_every_key() {
    let scenarios: [&[(u64, usize)]; 4] = [
        // Homes 7, 7, 7, 0: the run 7, 0, 1, 2 wraps; the later keys move back one by one.
        &[(7, 0), (7, 1), (7, 2), (0, 0)],
        // Homes 7, 0, 3: the key at slot 0 is at its home and must stay there.
        &[(7, 0), (0, 0), (3, 0)],
        // Homes 5, 6, 7, 6: the last key wrapped to slot 0 from home 6, which comes after the
        // freed slot 5 in probe order: it must stay.
        &[(5, 0), (6, 0), (7, 0), (6, 1)],
        // Homes 6, 7, 6: the key wrapped to slot 0 from home 6, the freed slot: it moves.
        &[(6, 0), (7, 0), (6, 1)],
    ];
    for keys in scenarios {
        let keys: Vec<Region> = keys
            .iter()
            .map(|&(home, skip)| key_at(home, skip))
            .collect();
        let mut m = FixedExactMap::new(4);
        for (t, k) in keys.iter().enumerate() {
            m.access(TaskId(t as u32), k, Access::Out, &mut |p, _| {
                panic!("{keys:?}: a first write of a key reported {p:?}")
            });
        }
        m.retire_before(TaskId(1));
        assert_eq!(m.stats().live, keys.len() as u64 - 1, "{keys:?}");
        for (t, k) in keys.iter().enumerate().skip(1) {
            let mut got = Vec::new();
            m.access(TaskId(10 + t as u32), k, Access::In, &mut |p, kind| {
                got.push((p.0, kind))
            });
            assert_eq!(got, [(t as u32, EdgeKind::Raw)], "{keys:?}: key {t}");
        }
        let s = m.stats();
        assert_eq!(
            (s.hits, s.misses),
            (keys.len() as u64 - 1, keys.len() as u64),
            "{keys:?}"
        );
    }
}

/// A key's newest task is its newest reader even when the readers spill from the entry into
/// a chunk: a bounded map more than half full keeps a key whose chunked readers are live when
/// a retire frees the keys of completed tasks, and the next write reports those readers.
#[test]
fn a_key_with_live_readers_in_a_chunk_survives_a_retire() {
    for readers in [4u32, 5, 13, 14, 15, 17] {
        let (key, other) = (Region::new_2d(0, 0, 2, 0, 4), Region::new_2d(0, 2, 2, 0, 4));
        let mut m = FixedExactMap::new(3);
        m.access(TaskId(0), &other, Access::Out, &mut |_, _| {});
        // Readers 1..=readers of `key`; the first ones complete with task 0.
        for t in 1..=readers {
            m.access(TaskId(t), &key, Access::In, &mut |p, _| panic!("{p:?}"));
        }
        // Two keys of three: more than half full. Tasks before `readers` completed, so `other`
        // goes and `key` (newest reader `readers`) stays.
        m.retire_before(TaskId(readers));
        assert_eq!(m.stats().live, 1, "{readers} readers");
        let mut got = Vec::new();
        m.access(TaskId(100), &key, Access::Out, &mut |p, k| {
            got.push((p.0, k))
        });
        got.sort_unstable_by_key(|&(p, _)| p);
        let want: Vec<(u32, EdgeKind)> = (1..=readers).map(|r| (r, EdgeKind::War)).collect();
        assert_eq!(got, want, "{readers} readers");
    }
}

/// Maps whose slot table and entries are megabytes follow the model like small ones: a bounded
/// map of 2^17 keys (more than half full, so retires free keys) and a growable one doubling
/// from 64 to 2^17, over a pseudo-random stream of 257,000 accesses to about 100,000 distinct
/// keys (of 262,144 possible) before and again after a clear, with retires.
#[test]
fn maps_of_megabytes_follow_the_model() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let steps: Vec<Step> = (0..260_000u32)
        .map(|i| {
            let r = next();
            if i == 130_000 {
                Step::Clear
            } else if r % 97 == 0 {
                Step::Retire((r >> 8) as u32 % 5000)
            } else {
                let (t, row, col) = (r as u32 % 4, (r >> 16) as u32 % 1024, (r >> 32) as u32 % 64);
                let a = [Access::In, Access::Out, Access::InOut][(r >> 48) as usize % 3];
                Step::Access(Region::new_2d(t, row * 2, 2, col * 4, 4), a)
            }
        })
        .collect();
    let fixed = |m: &FixedExactMap| Some(m.capacity());
    let runs = [
        check(
            FixedExactMap::new(1 << 17),
            Model::new(Kind::Bounded, 1 << 17),
            &steps,
            fixed,
        ),
        check(
            FixedExactMap::growable(64),
            Model::new(Kind::Growable, 64),
            &steps,
            fixed,
        ),
    ];
    for (r, map) in runs.into_iter().zip(["bounded", "growable"]) {
        r.unwrap_or_else(|e| panic!("{map} map: {e}"));
    }
}
