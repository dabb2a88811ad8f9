//! Pipelines whose processes touch overlapping regions with no channel ordering them fail on
//! every run, whatever the kernels' length, naming the tensor, both regions and both
//! statements at `file:line:column`; pipelines whose accesses are all ordered never fail so.
//! The oracle is an explicit event graph built here by plain loops (program order, token
//! edges, the room a bounded channel's receive makes for a later send) searched for paths —
//! not the vector clocks under test.

use std::collections::HashSet;

use proptest::prelude::*;
use pto_wsp::cpu::CspError;
use pto_wsp::ir::SourceFile;
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, RunError, compile, lower};

use super::numeric::load;

/// Busy work of about a millisecond (a "heavy" kernel), never optimised away.
fn heavy_work() {
    let mut x = 1u64;
    for i in 0..400_000u64 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Every kernel of `text`'s module: a no-op, or busy work when `heavy`.
fn registry(text: &str, heavy: bool) -> KernelRegistry {
    let module = pto_wsp::ir::parse(text).unwrap();
    let mut reg = KernelRegistry::new();
    for k in &module.kernels {
        if heavy {
            reg.register(&k.name.name, |_| {
                heavy_work();
                Ok(())
            });
        } else {
            reg.register(&k.name.name, |_| Ok(()));
        }
    }
    reg
}

/// Runs `text` once on 2 threads.
fn run(text: &str, heavy: bool) -> Result<(), RunError> {
    let (module, b, _) = load(text, &[]);
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels: registry(text, heavy),
            ..CompileOptions::default()
        },
    )
    .unwrap();
    p.execute(&b).map(|_| ())
}

/// A producer fills buffer `t % nbuf` and sends `t`; the consumer reads the buffer of each
/// token it takes. Safe with `nbuf >= depth + 2`.
fn two_stage(depth: u64, nbuf: u64, ntiles: u64) -> String {
    format!(
        "tensor Buf: f32[{rows}, 4];
tensor Out: f32[{out}, 4];
axis T = dense({ntiles});
kernel fill(out b: f32[4, 4]);
kernel drain(in b: f32[4, 4], out o: f32[4, 4]);
pipeline p {{
    channel c[{depth}];
    process producer(produces c) {{
        for_each t in T {{
            task fill(Buf[t % {nbuf} * 4 +: 4, 0 +: 4]);
            send c(t);
        }}
    }}
    process consumer(consumes c) {{
        consume c as i {{
            task drain(Buf[i % {nbuf} * 4 +: 4, 0 +: 4], Out[i * 4 +: 4, 0 +: 4]);
        }}
    }}
}}
",
        rows = nbuf * 4,
        out = ntiles * 4
    )
}

/// One buffer too few: the producer's task for tile `depth + 1` overwrites buffer 0 while
/// nothing orders it after the consumer's read of tile 0. Found on every one of 20 runs with
/// light and with heavy kernels, always as the same pair, rendered at both statements.
#[test]
fn a_buffer_reused_one_token_early_is_found_on_every_run_with_light_and_heavy_kernels() {
    let text = two_stage(2, 3, 8);
    let source = SourceFile::new("race.wsp", text.clone());
    let want = "error: tensor `Buf`: process `producer`'s task #3 (kernel `fill`) \
                (out Buf[0..4, 0..4]) and process `consumer`'s task #0 (kernel `drain`) \
                (in Buf[0..4, 0..4]) overlap, one writing, and no channel orders them";
    for heavy in [false, true] {
        for run_no in 0..20 {
            let err = run(&text, heavy).expect_err("an unordered pair");
            assert!(
                matches!(&err, RunError::Pipeline(CspError::Race(_))),
                "heavy {heavy} run {run_no}: {err}"
            );
            let rendered = source.render(&err);
            assert!(rendered.starts_with(want), "{rendered}");
            assert!(
                rendered.contains(" --> race.wsp:10:13\n")
                    && rendered.contains(
                        "= note: process `consumer`'s task #0 (kernel `drain`): race.wsp:16:13\n"
                    ),
                "{rendered}"
            );
        }
    }
    // With the buffer the channel depth needs, never.
    for heavy in [false, true] {
        for _ in 0..5 {
            run(&two_stage(2, 4, 8), heavy).unwrap();
        }
    }
}

/// The three-stage example with one buffer too few (3 for channels of depth 2) fails on every
/// run, light or heavy; with its own 4 buffers it never does.
#[test]
fn the_pipeline_example_with_too_few_buffers_fails_every_run() {
    let text = super::numeric::source("csp_pipeline");
    let few = text.replace("//@ bind nbuf=4", "//@ bind nbuf=3");
    for heavy in [false, true] {
        for run_no in 0..20 {
            let err = run(&few, heavy).expect_err("an unordered pair");
            let RunError::Pipeline(CspError::Race(r)) = &err else {
                panic!("heavy {heavy} run {run_no}: {err}");
            };
            assert!(r.tensor == "Stage" || r.tensor == "Res", "{err}");
        }
        run(&text, heavy).unwrap();
    }
}

/// A random chain of stages: stage 0 writes buffer `B0[t % n0]` and sends `t`; stage `s`
/// takes `x`, reads (or updates) `B{s-1}[x % n{s-1}]`, writes `B{s}[x % n{s}]` and sends `x`;
/// the last stage reads (or updates) its input buffer.
#[derive(Clone, Debug)]
struct Chain {
    ntiles: u64,
    /// Per stage but the last: its output channel's depth and buffer count.
    links: Vec<(u64, u64)>,
    /// Per stage but the first: whether it updates (`inout`) its input buffer.
    updates: Vec<bool>,
}

impl Chain {
    fn stages(&self) -> usize {
        self.links.len() + 1
    }

    fn text(&self) -> String {
        let mut t = String::new();
        for (s, &(_, n)) in self.links.iter().enumerate() {
            t += &format!("tensor B{s}: f32[{}, 4];\n", n * 4);
        }
        t += &format!("axis T = dense({});\n", self.ntiles);
        t += "kernel first(out b: f32[4, 4]);\n";
        t += "kernel mid_in(in a: f32[4, 4], out b: f32[4, 4]);\n";
        t += "kernel mid_up(inout a: f32[4, 4], out b: f32[4, 4]);\n";
        t += "kernel last_in(in a: f32[4, 4]);\nkernel last_up(inout a: f32[4, 4]);\n";
        t += "pipeline p {\n";
        for (s, &(d, _)) in self.links.iter().enumerate() {
            t += &format!("    channel c{s}[{d}];\n");
        }
        let slot = |b: usize, v: &str| format!("B{b}[{v} % {} * 4 +: 4, 0 +: 4]", self.links[b].1);
        t += &format!(
            "    process s0(produces c0) {{\n        for_each t in T {{\n            task first({});\n            send c0(t);\n        }}\n    }}\n",
            slot(0, "t")
        );
        for s in 1..self.stages() {
            let up = self.updates[s - 1];
            let last = s + 1 == self.stages();
            let ports = if last {
                format!("consumes c{}", s - 1)
            } else {
                format!("consumes c{}; produces c{s}", s - 1)
            };
            let body = if last {
                let k = if up { "last_up" } else { "last_in" };
                format!("task {k}({});", slot(s - 1, "x"))
            } else {
                let k = if up { "mid_up" } else { "mid_in" };
                format!(
                    "task {k}({}, {});\n            send c{s}(x);",
                    slot(s - 1, "x"),
                    slot(s, "x")
                )
            };
            t += &format!(
                "    process s{s}({ports}) {{\n        consume c{} as x {{\n            {body}\n        }}\n    }}\n",
                s - 1
            );
        }
        t + "}\n"
    }

    /// Every unordered conflicting pair, as (tensor, first process, its access, second
    /// process, its access) in the run's words, found on the explicit event graph.
    fn races(&self) -> HashSet<(String, String, String, String, String)> {
        #[derive(Clone)]
        enum Ev {
            Task(Vec<(usize, u64, bool)>), // (buffer, slot, writes)
            Send(usize, u64),
            Recv(usize, u64),
        }
        let n = self.stages();
        let mut procs: Vec<Vec<Ev>> = vec![Vec::new(); n];
        for x in 0..self.ntiles {
            let slot = |b: usize| x % self.links[b].1;
            procs[0].push(Ev::Task(vec![(0, slot(0), true)]));
            procs[0].push(Ev::Send(0, x));
            for (s, p) in procs.iter_mut().enumerate().skip(1) {
                p.push(Ev::Recv(s - 1, x));
                let mut acc = vec![(s - 1, slot(s - 1), self.updates[s - 1])];
                if s + 1 < n {
                    acc.push((s, slot(s), true));
                }
                p.push(Ev::Task(acc));
                if s + 1 < n {
                    p.push(Ev::Send(s, x));
                }
            }
        }
        // Nodes: (process, position); edges by plain search.
        let id =
            |p: usize, i: usize| -> usize { procs[..p].iter().map(Vec::len).sum::<usize>() + i };
        let total: usize = procs.iter().map(Vec::len).sum();
        let mut succ = vec![Vec::new(); total];
        let mut sends = std::collections::HashMap::new();
        let mut recvs = std::collections::HashMap::new();
        for (p, evs) in procs.iter().enumerate() {
            for (i, e) in evs.iter().enumerate() {
                if i + 1 < evs.len() {
                    succ[id(p, i)].push(id(p, i + 1));
                }
                match e {
                    Ev::Send(c, k) => {
                        sends.insert((*c, *k), id(p, i));
                    }
                    Ev::Recv(c, k) => {
                        recvs.insert((*c, *k), id(p, i));
                    }
                    Ev::Task(_) => {}
                }
            }
        }
        for (&(c, k), &s) in &sends {
            succ[s].push(recvs[&(c, k)]);
            if let Some(&later) = sends.get(&(c, k + self.links[c].0)) {
                succ[recvs[&(c, k)]].push(later);
            }
        }
        let reach = |from: usize, to: usize| {
            let mut seen = vec![false; total];
            let mut stack = vec![from];
            while let Some(v) = stack.pop() {
                if v == to {
                    return true;
                }
                for &w in &succ[v] {
                    if !seen[w] {
                        seen[w] = true;
                        stack.push(w);
                    }
                }
            }
            false
        };
        let kernel = |s: usize| -> String {
            if s == 0 {
                "first".into()
            } else if s + 1 == n {
                if self.updates[s - 1] {
                    "last_up"
                } else {
                    "last_in"
                }
                .into()
            } else if self.updates[s - 1] {
                "mid_up".into()
            } else {
                "mid_in".into()
            }
        };
        let mut tasks = Vec::new();
        for (p, evs) in procs.iter().enumerate() {
            let mut k = 0;
            for (i, e) in evs.iter().enumerate() {
                if let Ev::Task(acc) = e {
                    tasks.push((p, k, id(p, i), acc.clone()));
                    k += 1;
                }
            }
        }
        let mut out = HashSet::new();
        for a in &tasks {
            for b in &tasks {
                if a.0 >= b.0 {
                    continue;
                }
                for &(ba, sa, wa) in &a.3 {
                    for &(bb, sb, wb) in &b.3 {
                        if ba == bb
                            && sa == sb
                            && (wa || wb)
                            && !reach(a.2, b.2)
                            && !reach(b.2, a.2)
                        {
                            let side = |p: usize, k: u32, w: bool, up: bool| {
                                let access = if !w {
                                    "in"
                                } else if up {
                                    "inout"
                                } else {
                                    "out"
                                };
                                (
                                    format!("process `s{p}`'s task #{k} (kernel `{}`)", kernel(p)),
                                    format!("{access} B{ba}[{}..{}, 0..4]", sa * 4, sa * 4 + 4),
                                )
                            };
                            // Stage s updates its input buffer (s - 1) when `updates`.
                            let up =
                                |p: usize, buf: usize| p > 0 && buf + 1 == p && self.updates[p - 1];
                            let (f, fa) = side(a.0, a.1, wa, up(a.0, ba));
                            let (s, sa2) = side(b.0, b.1, wb, up(b.0, bb));
                            out.insert((format!("B{ba}"), f, fa, s, sa2));
                        }
                    }
                }
            }
        }
        out
    }
}

/// The oracle agrees with the buffer rule worked out by hand: two stages, a buffer reused every
/// `n` tokens on a channel of depth `d`, race exactly when `n < d + 2` (given enough tiles).
#[test]
fn the_event_graph_oracle_follows_the_buffer_rule() {
    for d in 1..=3 {
        for n in 1..=6 {
            let c = Chain {
                ntiles: 10,
                links: vec![(d, n)],
                updates: vec![false],
            };
            assert_eq!(!c.races().is_empty(), n < d + 2, "depth {d}, {n} buffers");
        }
    }
}

fn chain() -> impl Strategy<Value = Chain> {
    (2usize..=3, 1u64..=6)
        .prop_flat_map(|(stages, ntiles)| {
            (
                Just(ntiles),
                proptest::collection::vec((1u64..=3, 1u64..=5), stages - 1),
                proptest::collection::vec(any::<bool>(), stages - 1),
            )
        })
        .prop_map(|(ntiles, links, updates)| Chain {
            ntiles,
            links,
            updates,
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: pto_wsp::ir::soak::cases(64),
        ..ProptestConfig::default()
    })]

    /// A random chain fails with an unordered pair exactly when the event graph has one, and
    /// the pair it names is one of them.
    #[test]
    fn a_chain_fails_exactly_when_the_event_graph_has_an_unordered_pair(c in chain()) {
        let text = c.text();
        let races = c.races();
        match run(&text, false) {
            Ok(()) => prop_assert!(races.is_empty(), "missed {races:?} in\n{text}"),
            Err(RunError::Pipeline(CspError::Race(r))) => {
                let key = (
                    r.tensor.clone(),
                    r.first.to_string(),
                    r.first.access.clone(),
                    r.second.to_string(),
                    r.second.access.clone(),
                );
                prop_assert!(races.contains(&key), "{key:?} not in {races:?}\n{text}");
            }
            Err(e) => prop_assert!(false, "{e}\n{text}"),
        }
    }
}
