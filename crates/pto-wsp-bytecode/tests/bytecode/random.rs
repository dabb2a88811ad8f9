//! Random valid workloads and random bindings: every executor against the reference expander.
//!
//! The generator writes `.wsp` text (so a failure prints a readable module): a `main` workload
//! whose body is one outer loop binding `o` (so schedule keys are bound at every task) around a
//! random nest of dense / dense_dyn / ragged loops, sparse `select`s, `if`s, `sequential` and
//! `combine` blocks, `set` and `load` of a slot, calls of a helper workload, tasks of a plain and
//! a tiered kernel with region starts and sizes over the loop variables, the slot and a symbol
//! (always in bounds), scalar arguments using `?:`, `&&`, `||`, `min`, `%`. The schedule is
//! random: every dispatch policy (round robin, affinity on the outer variable or the slot, hash,
//! threshold, static partition, work stealing), executor and stream counts, `stream_by`,
//! `dispatch_threshold`. Each module is encoded once and checked under two random bindings of
//! the symbols, ragged lengths, sparse arrays and load data.

use super::common::check_program;
use super::common::encode;
use proptest::prelude::*;
use pto_wsp_bytecode::{EncodeOptions, Program};
use pto_wsp_ir::{Bindings, Value, parse, validate};

#[derive(Clone, Debug)]
enum G {
    /// `axis`: 0 `D2`, 1 `D3`, 2 `DN` (dense_dyn n0), 3 `R` (ragged).
    Loop {
        ordered: bool,
        axis: u8,
        body: Vec<G>,
    },
    Select(Vec<G>),
    If {
        cond: u8,
        then: Vec<G>,
        otherwise: Vec<G>,
    },
    Seq(Vec<G>),
    Combine(Vec<G>),
    Task {
        tiered: bool,
        start: u8,
        size: u8,
        x: u8,
    },
    Set(u8),
    Load,
    Call,
}

fn node() -> impl Strategy<Value = G> {
    let leaf = prop_oneof![
        4 => (any::<bool>(), 0u8..6, 0u8..4, 0u8..6)
            .prop_map(|(tiered, start, size, x)| G::Task { tiered, start, size, x }),
        1 => (0u8..3).prop_map(G::Set),
        1 => Just(G::Load),
        1 => Just(G::Call),
    ];
    leaf.prop_recursive(4, 40, 4, |inner| {
        let body = prop::collection::vec(inner.clone(), 0..4);
        prop_oneof![
            3 => (any::<bool>(), 0u8..4, body.clone())
                .prop_map(|(ordered, axis, body)| G::Loop { ordered, axis, body }),
            1 => body.clone().prop_map(G::Select),
            2 => (0u8..4, body.clone(), prop::collection::vec(inner, 0..2))
                .prop_map(|(cond, then, otherwise)| G::If { cond, then, otherwise }),
            1 => body.clone().prop_map(G::Seq),
            1 => body.prop_map(G::Combine),
        ]
    })
}

struct Writer {
    out: String,
    depth: usize,
}

impl Writer {
    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// `vars`: the loop variables in scope, innermost last (never empty: `o`).
    fn body(&mut self, nodes: &[G], vars: &mut Vec<String>) {
        for n in nodes {
            self.node(n, vars);
        }
    }

    fn block(&mut self, head: &str, nodes: &[G], vars: &mut Vec<String>) {
        self.line(&format!("{head} {{"));
        self.depth += 1;
        self.body(nodes, vars);
        self.depth -= 1;
        self.line("}");
    }

    fn node(&mut self, n: &G, vars: &mut Vec<String>) {
        let v = vars.last().cloned().unwrap_or_else(|| "o".into());
        let d = vars.len();
        match n {
            G::Loop {
                ordered,
                axis,
                body,
            } => {
                let kw = if *ordered { "for_each" } else { "parallel_for" };
                let (head, new): (String, Vec<String>) = match axis {
                    0 => (format!("{kw} v{d} in D2"), vec![format!("v{d}")]),
                    1 => (format!("{kw} v{d} in D3"), vec![format!("v{d}")]),
                    2 => (format!("{kw} v{d} in DN"), vec![format!("v{d}")]),
                    _ => (
                        format!("{kw} r{d}, v{d} in R"),
                        vec![format!("r{d}"), format!("v{d}")],
                    ),
                };
                let n = new.len();
                vars.extend(new);
                self.block(&head, body, vars);
                vars.truncate(vars.len() - n);
            }
            G::Select(body) => {
                vars.push(format!("r{d}"));
                vars.push(format!("e{d}"));
                self.block(&format!("select r{d}, e{d} in S"), body, vars);
                vars.truncate(vars.len() - 2);
            }
            G::If {
                cond,
                then,
                otherwise,
            } => {
                let c = match cond {
                    0 => format!("{v} % 2 == 0"),
                    1 => format!("n0 > {v}"),
                    2 => format!("s0 < 3 || {v} == 1"),
                    _ => format!("!({v} == 0) && n1 >= 1"),
                };
                self.line(&format!("if {c} {{"));
                self.depth += 1;
                self.body(then, vars);
                self.depth -= 1;
                if otherwise.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.depth += 1;
                    self.body(otherwise, vars);
                    self.depth -= 1;
                    self.line("}");
                }
            }
            G::Seq(b) => self.block("sequential", b, vars),
            G::Combine(b) => self.block("combine", b, vars),
            G::Task {
                tiered,
                start,
                size,
                x,
            } => {
                // Starts stay below 40 and sizes below 6: always inside the 64 x 64 tensors.
                let s = match start {
                    0 => v.clone(),
                    1 => format!("{v} * 3 + 1"),
                    2 => "s0".into(),
                    3 => format!("min({v}, n0) + 2"),
                    4 => format!("{v} % 3"),
                    _ => format!("o * 4 + {v}"),
                };
                let z = match size {
                    0 => "1".to_string(),
                    1 => format!("{v} + 1"),
                    2 => "4".into(),
                    _ => format!("max({v}, 1)"),
                };
                let xe = match x {
                    0 => v.clone(),
                    1 => format!("{v} > 0 && n0 > 1 ? {v} : 5"),
                    2 => format!("{v} * 2 - n0"),
                    3 => "s0".into(),
                    4 => format!("{v} == 2 || o == 1 ? -3 : {v} / 2"),
                    _ => format!("o * 7 + {v}"),
                };
                let k = if *tiered { "kt" } else { "k" };
                self.line(&format!(
                    "task {k}(A[{s} +: {z}, 0 +: 2], B[{s}, {v}], {xe});"
                ));
            }
            G::Set(which) => {
                let e = match which {
                    0 => format!("{v} * 2 + 1"),
                    1 => "s0 % 5 + 1".to_string(),
                    _ => format!("min(s0 + {v}, 9)"),
                };
                self.line(&format!("set s0 = {e};"));
            }
            G::Load => self.line(&format!("load s0 = data[{v} % 8];")),
            G::Call => self.line(&format!("call helper(o, {v});")),
        }
    }
}

/// The schedule, by number.
fn schedule(
    kind: u8,
    executors: u8,
    streams: u8,
    stream_by: bool,
    pools: bool,
    a: u8,
    b: u8,
) -> String {
    let dispatch = match kind {
        0 => return String::new(),
        1 => format!("round_robin({})", a % 4 + 1),
        2 => "affinity(o)".to_string(),
        3 => "affinity(o * 5 + 1)".to_string(),
        4 => "hash(o)".to_string(),
        5 => "threshold(o) { below 1: affinity(o), else: round_robin(2) }".to_string(),
        6 => format!("static_partition(0, {}, {})", a + 1, a + b + 2),
        7 => "work_steal".to_string(),
        _ => "affinity(s0)".to_string(),
    };
    // A static partition's executor count is its number of starts.
    let mut s = if kind == 6 {
        format!("schedule for main {{\n    dispatch {dispatch};\n")
    } else {
        format!("schedule for main {{\n    executors {executors};\n    dispatch {dispatch};\n")
    };
    s.push_str(&format!("    streams {streams};\n"));
    if stream_by {
        s.push_str("    stream_by o + 1;\n");
    }
    if pools {
        s.push_str("    dispatch_threshold(o) { below 1: cube, else: vector };\n");
    }
    s.push_str("}\n");
    s
}

const HEADER: &str = "\
symbol n0: i64;
symbol n1: i64;
slot s0: i64;
tensor lens: i32[4];
tensor ip: i32[5];
tensor ix: i32[12];
tensor data: i32[8];
tensor A: f32[64, 64];
tensor B: f32[64, 64];
axis O = dense(3);
axis D2 = dense(2);
axis D3 = dense(3);
axis DN = dense_dyn(n0);
axis R = ragged(n1, lens);
axis S = sparse(n1, ip, ix);
kernel k(in a: f32[?, 2], out b: f32[1, 1], x: i64) @vector;
kernel ka(in a: f32[?, 2], out b: f32[1, 1], x: i64) @cube;
kernel kb(in a: f32[?, 2], out b: f32[1, 1], x: i64);
kernel kc(in a: f32[?, 2], out b: f32[1, 1], x: i64) @vector;
kernel kt(in a: f32[?, 2], out b: f32[1, 1], x: i64) tiers { x < 2 => ka, x < 5 => kb, else => kc };
workload helper(o: i64, p: i64) {
    parallel_for q in D2 {
        task k(A[p + q +: 2, 0 +: 2], B[q, p], p * 10 + q);
    }
}
";

fn module_text(nodes: &[G], outer_ordered: bool, sched: &str) -> String {
    let mut w = Writer {
        out: String::from(HEADER),
        depth: 0,
    };
    w.line("workload main() {");
    w.depth += 1;
    let kw = if outer_ordered {
        "for_each"
    } else {
        "parallel_for"
    };
    let mut vars = vec!["o".to_string()];
    // One task always, so that schedule keys name something bound at a task.
    let mut nodes = nodes.to_vec();
    nodes.push(G::Task {
        tiered: false,
        start: 0,
        size: 0,
        x: 0,
    });
    w.block(&format!("{kw} o in O"), &nodes, &mut vars);
    w.depth -= 1;
    w.line("}");
    w.out.push_str(sched);
    w.out
}

/// Random bindings: symbols 0..4, lengths 0..3, a CSR structure, load data 0..6.
fn bindings() -> impl Strategy<Value = Bindings> {
    (
        0i64..4,
        0i64..5,
        prop::collection::vec(0i64..3, 4),
        prop::collection::vec((0usize..4, prop::collection::vec(0i64..5, 0..3)), 4),
        prop::collection::vec(0i64..6, 8),
        0i64..4,
    )
        .prop_map(|(n0, n1, lens, rows, data, s0)| {
            let n1 = n1.min(4);
            let mut ip = vec![0i64];
            let mut ix = Vec::new();
            for (_, cols) in rows.iter().take(n1 as usize) {
                ix.extend(cols);
                ip.push(ix.len() as i64);
            }
            while ip.len() < 5 {
                ip.push(ix.len() as i64);
            }
            ix.resize(12, 0);
            Bindings::new()
                .symbol("n0", n0)
                .symbol("n1", n1)
                .slot("s0", Value::I64(s0))
                .array("lens", lens)
                .array("ip", ip)
                .array("ix", ix)
                .array("data", data)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(200)))]

    #[test]
    fn random_workloads_match_the_expander(
        nodes in prop::collection::vec(node(), 1..4),
        outer_ordered in any::<bool>(),
        sched in (0u8..9, 1u8..6, 1u8..4, any::<bool>(), any::<bool>(), 0u8..8, 0u8..8),
        b1 in bindings(),
        b2 in bindings(),
        executors_override in proptest::option::of(1u64..6),
    ) {
        let (kind, executors, streams, stream_by, pools, a, b) = sched;
        let text = module_text(&nodes, outer_ordered, &schedule(kind, executors, streams, stream_by, pools, a, b));
        let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        if let Err(errors) = validate(&m) {
            panic!("generated module is invalid: {:?}\n{text}", errors.iter().map(|e| e.to_string()).collect::<Vec<_>>());
        }
        let bytes = encode(&m, &EncodeOptions::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let prog = Program::decode(&bytes).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for b in [&b1, &b2] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_program(&prog, &m, b, executors_override);
            }));
            if let Err(e) = r {
                let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
                panic!("{msg}\nexecutors override: {executors_override:?}\nbindings: {b:?}\nmodule:\n{text}\n{}", prog.disassemble());
            }
        }
    }
}
