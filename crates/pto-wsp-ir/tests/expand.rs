//! Tests of the reference expander against independent computations.
//!
//! The expander is the oracle every back end is checked against, so it is checked here against
//! something simpler still: for each module, the expected task list (kernels, parameters,
//! regions, targets, streams, pools) and order edges are computed with plain nested Rust loops
//! in the test itself, and compared exactly.

use pto_wsp_ir::expand::{
    ExpandError, ExpandOptions, ExpandSink, ExpandedRegion, ExpandedTask, Expansion, OrderEdge,
    splitmix64,
};
use pto_wsp_ir::{
    Access, BindingError, Bindings, ExecPool, Loc, Module, ResolveError, Value, parse,
};
use std::ops::{ControlFlow, Range};

/// The module resolved (as a front end does once), then expanded: the reference expander reads
/// the resolved program.
fn expand(m: &Module, b: &Bindings, o: &ExpandOptions) -> Result<Expansion, ExpandError> {
    pto_wsp_ir::expand(&resolved(m)?, b, o)
}

/// `m` resolved, as a front end resolves it once.
fn resolved(m: &Module) -> Result<pto_wsp_ir::Resolved, ExpandError> {
    Ok(pto_wsp_ir::resolve(m, &Default::default())?)
}

/// [`expand`], each task to `f`.
fn expand_each(
    m: &Module,
    b: &Bindings,
    o: &ExpandOptions,
    f: impl FnMut(u32, &ExpandedTask),
) -> Result<pto_wsp_ir::ExpandSummary, ExpandError> {
    pto_wsp_ir::expand_each(&resolved(m)?, b, o, f)
}

/// [`expand`] into a sink.
fn expand_with(
    m: &Module,
    b: &Bindings,
    o: &ExpandOptions,
    sink: &mut impl ExpandSink,
) -> Result<pto_wsp_ir::ExpandSummary, ExpandError> {
    pto_wsp_ir::expand_with(&resolved(m)?, b, o, sink)
}

fn module(text: &str) -> Module {
    match parse(text) {
        Ok(m) => m,
        Err(e) => panic!("test module does not parse: {e}\n{text}"),
    }
}

fn run(m: &Module, b: &Bindings) -> Expansion {
    match expand(m, b, &ExpandOptions::default()) {
        Ok(x) => x,
        Err(e) => panic!("expansion failed: {e}"),
    }
}

/// The expansion's error, seen through its statement's place (`ExpandError::At`, checked by
/// `run_time_errors_are_placed_at_their_statement`).
fn run_err(m: &Module, b: &Bindings) -> ExpandError {
    match expand(m, b, &ExpandOptions::default()) {
        Ok(x) => panic!("expected an error, got {} tasks", x.tasks.len()),
        Err(ExpandError::At { error, .. }) => *error,
        Err(e) => e,
    }
}

#[test]
fn run_time_errors_are_placed_at_their_statement() {
    let text = "symbol n: i64; axis I = dense_dyn(n); axis J = dense(3); kernel k(x: i64);
         workload main() { parallel_for j in J { parallel_for i in I { task k(6 / (2 - j)); } } }";
    let m = module(text);
    let place = |b: &Bindings| match expand(&m, b, &ExpandOptions::default()) {
        Err(e) => {
            let loc = pto_wsp_ir::Diagnostic::loc(&e);
            assert!(loc.is_known(), "{e}");
            text[loc.start as usize..]
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        }
        Ok(_) => panic!("expected an error"),
    };
    // Division by zero in a task's argument: at the task.
    assert_eq!(place(&Bindings::new().symbol("n", 1i64)), "task");
    // A negative extent: at the loop over the axis.
    assert_eq!(place(&Bindings::new().symbol("n", -1i64)), "parallel_for");
}

fn kidx(m: &Module, name: &str) -> u32 {
    m.kernels.iter().position(|k| k.name.name == name).unwrap() as u32
}

fn tidx(m: &Module, name: &str) -> u32 {
    m.tensors.iter().position(|k| k.name.name == name).unwrap() as u32
}

fn reg(tensor: u32, access: Access, start: &[i64], size: &[i64]) -> ExpandedRegion {
    ExpandedRegion {
        tensor,
        access,
        start: start.to_vec(),
        size: size.to_vec(),
    }
}

fn edge(before: Range<u32>, after: Range<u32>) -> OrderEdge {
    OrderEdge { before, after }
}

fn sorted(mut v: Vec<OrderEdge>) -> Vec<(u32, u32, u32, u32)> {
    let mut out: Vec<_> = v
        .drain(..)
        .map(|e| (e.before.start, e.before.end, e.after.start, e.after.end))
        .collect();
    out.sort();
    out
}

/// Edges between consecutive non-empty ranges.
fn chain(ranges: &[Range<u32>]) -> Vec<OrderEdge> {
    let ne: Vec<_> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
    ne.windows(2)
        .map(|w| edge(w[0].clone(), w[1].clone()))
        .collect()
}

const NESTED: &str = "
symbol n: i64;
tensor A: f32[n, 64];
tensor B: f32[n, 64];
axis I = dense_dyn(n);
axis J = dense(4);
kernel k(in a: f32[1, 16], out b: f32[1, 16], j: i64) @vector;
workload main() {
    for_each i in I {
        parallel_for j in J {
            if i % 3 != 1 {
                task k(A[i, j * 16 +: 16], B[i, j * 16 +: 16], i * 10 + j);
            }
        }
    }
}
schedule for main {
    dispatch round_robin(3);
    streams 2;
}
";

#[test]
fn nested_dense_loops_with_for_each() {
    let m = module(NESTED);
    for n in [0i64, 1, 2, 5, 7] {
        let x = run(&m, &Bindings::new().symbol("n", n));
        let mut tasks = Vec::new();
        let mut iters = Vec::new();
        for i in 0..n {
            let start = tasks.len() as u32;
            for j in 0..4 {
                if i % 3 != 1 {
                    let idx = tasks.len() as u32;
                    tasks.push(ExpandedTask {
                        kernel: 0,
                        declared: 0,
                        params: vec![Value::I64(i * 10 + j)],
                        regions: vec![
                            reg(0, Access::In, &[i, j * 16], &[1, 16]),
                            reg(1, Access::Out, &[i, j * 16], &[1, 16]),
                        ],
                        pool: ExecPool::Vector,
                        target: Some(idx % 3),
                        stream: idx % 2,
                        priority: 0,
                        cost: None,
                        loc: pto_wsp_ir::Loc::NONE,
                    });
                }
            }
            iters.push(start..tasks.len() as u32);
        }
        assert_eq!(x.tasks, tasks, "n = {n}");
        assert_eq!(sorted(x.order.clone()), sorted(chain(&iters)), "n = {n}");
        assert_eq!((x.executors, x.streams, x.truncated), (3, 2, false));
    }
}

#[test]
fn ragged_loops() {
    let m = module(
        "
symbol rows: i64;
tensor LEN: i32[rows];
tensor X: f16[rows, 8];
axis R = ragged(rows, LEN);
kernel k(inout x: f16[1, 1], r: i64, p: i64);
workload main() {
    for_each r, p in R {
        task k(X[r, p], r, p);
    }
    parallel_for r, p in R {
        task k(X[r, p], r, p);
    }
}
",
    );
    let lens = [3i64, 0, 2, 1, 0];
    let b = Bindings::new()
        .symbol("rows", 4i64)
        .array("LEN", lens.to_vec());
    let x = run(&m, &b);
    let mut tasks = Vec::new();
    let mut iters = Vec::new();
    for pass in 0..2 {
        for r in 0..4 {
            for p in 0..lens[r as usize] {
                if pass == 0 {
                    iters.push(tasks.len() as u32..tasks.len() as u32 + 1);
                }
                tasks.push(ExpandedTask {
                    kernel: 0,
                    declared: 0,
                    params: vec![Value::I64(r), Value::I64(p)],
                    regions: vec![reg(1, Access::InOut, &[r, p], &[1, 1])],
                    pool: ExecPool::Any,
                    target: Some(0),
                    stream: 0,
                    priority: 0,
                    cost: None,
                    loc: pto_wsp_ir::Loc::NONE,
                });
            }
        }
    }
    assert_eq!(x.tasks, tasks);
    assert_eq!(sorted(x.order.clone()), sorted(chain(&iters)));
}

#[test]
fn sparse_select() {
    let m = module(
        "
symbol rows: i64;
tensor PTR: i64[rows];
tensor IDX: i64[8];
tensor X: f16[4, 16];
axis S = sparse(rows, PTR, IDX);
kernel k(in x: f16[1, 1], r: i64, c: i64);
workload main() {
    select r, c in S {
        task k(X[r, c], r, c);
    }
}
",
    );
    let ptr = [0i64, 2, 2, 5];
    let idx = [7i64, 1, 3, 3, 0];
    let b = Bindings::new()
        .symbol("rows", 3i64)
        .array("PTR", ptr.to_vec())
        .array("IDX", idx.to_vec());
    let x = run(&m, &b);
    let mut expected = Vec::new();
    for r in 0..3 {
        for j in ptr[r]..ptr[r + 1] {
            expected.push((r as i64, idx[j as usize]));
        }
    }
    let got: Vec<_> = x
        .tasks
        .iter()
        .map(|t| match (t.params[0], t.params[1]) {
            (Value::I64(r), Value::I64(c)) => (r, c),
            other => panic!("unexpected params {other:?}"),
        })
        .collect();
    assert_eq!(got, expected);
    let starts: Vec<_> = x.tasks.iter().map(|t| t.regions[0].start.clone()).collect();
    let expected_starts: Vec<_> = expected.iter().map(|&(r, c)| vec![r, c]).collect();
    assert_eq!(starts, expected_starts);
    assert!(x.order.is_empty());
}

#[test]
fn if_on_symbols_and_slots_with_set_and_load() {
    let m = module(
        "
symbol big: bool;
symbol n: i64;
slot acc: i64;
slot seen: u64;
tensor T: i64[2, 3];
axis I = dense_dyn(n);
kernel k(a: i64, b: u64);
workload main() {
    parallel_for i in I {
        load acc = T[i % 2, i % 3];
        if big && acc > 4 {
            task k(acc, seen);
            set seen = seen + 1u;
        } else {
            if acc == 0 {
                set acc = 100;
            }
            task k(acc, seen);
        }
    }
}
",
    );
    let t = [[5i64, 0, 9], [2, 7, 0]];
    for big in [false, true] {
        let b = Bindings::new()
            .symbol("big", big)
            .symbol("n", 7i64)
            .slot("seen", 10u64)
            .array("T", t.iter().flatten().copied().collect::<Vec<_>>());
        let x = run(&m, &b);
        let mut seen = 10u64;
        let mut expected = Vec::new();
        for i in 0..7usize {
            let mut acc = t[i % 2][i % 3];
            if big && acc > 4 {
                expected.push((acc, seen));
                seen += 1;
            } else {
                if acc == 0 {
                    acc = 100;
                }
                expected.push((acc, seen));
            }
        }
        let got: Vec<_> = x
            .tasks
            .iter()
            .map(|t| match (t.params[0], t.params[1]) {
                (Value::I64(a), Value::U64(b)) => (a, b),
                other => panic!("unexpected params {other:?}"),
            })
            .collect();
        assert_eq!(got, expected, "big = {big}");
    }
}

#[test]
fn tiers_choose_variant_and_pool() {
    let m = module(
        "
symbol limit: i64;
axis I = dense(6);
kernel small(n: i64) @vector;
kernel mid(n: i64) @cube;
kernel large(n: i64);
kernel op(n: i64) @vector tiers { n < 2 => small, n < limit => mid, else => large };
workload main() {
    parallel_for i in I {
        task op(i);
    }
}
",
    );
    let x = run(&m, &Bindings::new().symbol("limit", 4i64));
    let op = kidx(&m, "op");
    for (i, t) in x.tasks.iter().enumerate() {
        let (k, pool) = if i < 2 {
            ("small", ExecPool::Vector)
        } else if i < 4 {
            ("mid", ExecPool::Cube)
        } else {
            ("large", ExecPool::Any)
        };
        assert_eq!(t.declared, op);
        assert_eq!(t.kernel, kidx(&m, k), "task {i}");
        assert_eq!(t.pool, pool, "task {i}");
        assert_eq!(t.params, vec![Value::I64(i as i64)]);
    }
    assert_eq!(x.tasks.len(), 6);
    assert_eq!(
        x.describe_task(&m, 3),
        "#3 op[mid] n=3 target 0 stream 0 pool cube"
    );
    let counts = x.kernel_counts();
    assert_eq!(counts.get(&kidx(&m, "small")), Some(&2));
    assert_eq!(counts.get(&kidx(&m, "mid")), Some(&2));
    assert_eq!(counts.get(&kidx(&m, "large")), Some(&2));
}

#[test]
fn call_with_args_and_sequential() {
    let m = module(
        "
tensor X: f32[16, 16];
axis I = dense(3);
axis J = dense(2);
kernel k(out x: f32[?, ?], tag: i64);
workload tile(r: i64, c: i64) {
    parallel_for j in J {
        task k(X[r +: 2, c + j], r * 100 + c * 10 + j);
    }
}
workload main() {
    sequential {
        parallel_for i in I {
            call tile(i * 2, 5);
        }
        combine { }
        if false {
            task k(X[0, 0], -1);
        }
        call tile(9, 1);
        task k(X[15, 15], 7);
    }
}
",
    );
    let x = run(&m, &Bindings::new());
    let mut expected = Vec::new();
    let mut children = Vec::new();
    let mut start = 0u32;
    for i in 0..3i64 {
        let r = i * 2;
        for j in 0..2 {
            expected.push((vec![r, 5 + j], vec![2, 1], r * 100 + 50 + j));
        }
    }
    children.push(start..expected.len() as u32);
    start = expected.len() as u32;
    children.push(start..start); // combine { }
    children.push(start..start); // if false
    for j in 0..2 {
        expected.push((vec![9, 1 + j], vec![2, 1], 910 + j));
    }
    children.push(start..expected.len() as u32);
    start = expected.len() as u32;
    expected.push((vec![15, 15], vec![1, 1], 7));
    children.push(start..expected.len() as u32);
    let got: Vec<_> = x
        .tasks
        .iter()
        .map(|t| {
            let Value::I64(tag) = t.params[0] else {
                panic!("tag is not i64")
            };
            (t.regions[0].start.clone(), t.regions[0].size.clone(), tag)
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(sorted(x.order.clone()), sorted(chain(&children)));
    assert_eq!(
        x.describe_task(&m, 1),
        "#1 k x=X[0+:2, 6] tag=51 target 0 stream 0 pool any"
    );
}

const PIPELINE: &str = "
symbol n: i64;
axis N = dense_dyn(n);
kernel fetch(i: i64);
kernel compute(v: i64);
kernel store(v: i64);
pipeline p {
    channel a[2];
    channel b[2];
    process sink(consumes b) {
        consume b as v {
            task store(v);
        }
    }
    process src(produces a) {
        parallel_for i in N {
            task fetch(i);
            send a(i * 3);
        }
    }
    process mid(consumes a; produces b) {
        consume a as v {
            task compute(v);
            send b(v + 1);
        }
    }
}
";

#[test]
fn csp_three_stage_pipeline() {
    let m = module(PIPELINE);
    let n = 4u32;
    let x = run(&m, &Bindings::new().symbol("n", i64::from(n)));
    // sink blocks at once; src runs to its end; mid then runs to its end; then sink.
    let mut expected = Vec::new();
    for i in 0..n {
        expected.push(("fetch", i64::from(i)));
    }
    for i in 0..n {
        expected.push(("compute", i64::from(i) * 3));
    }
    for i in 0..n {
        expected.push(("store", i64::from(i) * 3 + 1));
    }
    let got: Vec<_> = x
        .tasks
        .iter()
        .map(|t| (m.kernels[t.kernel as usize].name.name.as_str(), t.params[0]))
        .map(|(k, v)| match v {
            Value::I64(v) => (k, v),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(got, expected);
    let mut edges = Vec::new();
    for stage in 0..3 {
        for k in 0..n - 1 {
            let t = stage * n + k;
            edges.push(edge(t..t + 1, t + 1..t + 2));
        }
    }
    for k in 0..n {
        edges.push(edge(k..k + 1, n + k..n + k + 1)); // src's k-th send → mid's k-th iteration
        edges.push(edge(n + k..n + k + 1, 2 * n + k..2 * n + k + 1));
    }
    assert_eq!(sorted(x.order.clone()), sorted(edges));
}

#[test]
fn csp_deadlock_names_processes_and_channels() {
    let m = module(
        "
kernel k(v: i64);
pipeline p {
    channel x[1];
    channel y[1];
    process a(consumes y; produces x) {
        send x(0);
        consume y as v {
            task k(v);
        }
    }
    process b(consumes x; produces y) {
        consume x as v {
            task k(v);
            send y(v + 1);
        }
    }
}
",
    );
    let e = run_err(&m, &Bindings::new());
    assert_eq!(
        e,
        ExpandError::Deadlock {
            waiting: vec![("a".into(), "y".into()), ("b".into(), "x".into())]
        }
    );
    assert!(e.to_string().contains("process `a` waits on channel `y`"));
    // Before deadlocking, b's task (token 0) and a's task (token 1) were generated.
    let mut seen = Vec::new();
    let r = expand_each(&m, &Bindings::new(), &ExpandOptions::default(), |i, t| {
        seen.push((i, t.params[0]))
    });
    assert!(r.is_err());
    assert_eq!(seen, vec![(0, Value::I64(0)), (1, Value::I64(1))]);
}

/// A 10-task loop with the given schedule, returning (target, stream, pool) per task.
fn scheduled(schedule: &str, opts: &ExpandOptions) -> (Vec<(Option<u32>, u32, ExecPool)>, u64) {
    let text = format!(
        "
axis I = dense(10);
kernel k(i: i64) @vector;
workload main() {{
    parallel_for i in I {{
        task k(i);
    }}
}}
schedule for main {{
{schedule}
}}
"
    );
    let m = module(&text);
    let x = match expand(&m, &Bindings::new(), opts) {
        Ok(x) => x,
        Err(e) => panic!("{e}"),
    };
    (
        x.tasks
            .iter()
            .map(|t| (t.target, t.stream, t.pool))
            .collect(),
        x.executors,
    )
}

fn targets(schedule: &str) -> Vec<Option<u32>> {
    scheduled(schedule, &ExpandOptions::default())
        .0
        .into_iter()
        .map(|t| t.0)
        .collect()
}

#[test]
fn dispatch_policies() {
    let idx = 0..10i64;
    assert_eq!(
        targets("dispatch round_robin(3);"),
        idx.clone()
            .map(|i| Some((i % 3) as u32))
            .collect::<Vec<_>>()
    );
    // Affinity is Euclidean: negative keys map into 0..E.
    assert_eq!(
        targets("executors 4; dispatch affinity(i * 7 - 20);"),
        idx.clone()
            .map(|i| Some((i * 7 - 20).rem_euclid(4) as u32))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        targets("executors 5; dispatch hash(i - 3);"),
        idx.clone()
            .map(|i| Some((splitmix64((i - 3) as u64) % 5) as u32))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        targets(
            "executors 8; dispatch threshold(i) { below 3: round_robin(2), below 6: affinity(i + 1), else: work_steal };"
        ),
        idx.clone()
            .map(|i| if i < 3 {
                Some((i % 2) as u32)
            } else if i < 6 {
                Some((i + 1) as u32)
            } else {
                None
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(
        targets("dispatch static_partition(0, 4, 7);"),
        [0, 0, 0, 0, 1, 1, 1, 2, 2, 2].map(Some).to_vec()
    );
    assert_eq!(targets("dispatch work_steal;"), vec![None; 10]);
    // Default: one executor.
    assert_eq!(targets("streams 1;"), vec![Some(0); 10]);
    // executors override.
    let (t, e) = scheduled(
        "executors 4; dispatch affinity(i);",
        &ExpandOptions {
            executors: Some(3),
            ..ExpandOptions::default()
        },
    );
    assert_eq!(e, 3);
    assert_eq!(
        t.iter().map(|t| t.0).collect::<Vec<_>>(),
        idx.clone()
            .map(|i| Some((i % 3) as u32))
            .collect::<Vec<_>>()
    );
}

#[test]
fn splitmix64_reference_values() {
    // The first outputs of the reference SplitMix64 generator seeded with 0.
    assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
}

#[test]
fn streams_and_pool_routing() {
    let (t, _) = scheduled("streams 3;", &ExpandOptions::default());
    assert_eq!(
        t.iter().map(|t| t.1).collect::<Vec<_>>(),
        (0..10u32).map(|i| i % 3).collect::<Vec<_>>()
    );
    let (t, _) = scheduled("streams 4; stream_by 5 - i * 3;", &ExpandOptions::default());
    assert_eq!(
        t.iter().map(|t| t.1).collect::<Vec<_>>(),
        (0..10i64)
            .map(|i| (5 - i * 3).rem_euclid(4) as u32)
            .collect::<Vec<_>>()
    );
    let (t, _) = scheduled(
        "dispatch_threshold(i) { below 3: cube, below 7: any, else: cube };",
        &ExpandOptions::default(),
    );
    assert_eq!(
        t.iter().map(|t| t.2).collect::<Vec<_>>(),
        (0..10)
            .map(|i| if i < 3 {
                ExecPool::Cube
            } else if i < 7 {
                ExecPool::Any
            } else {
                ExecPool::Cube
            })
            .collect::<Vec<_>>()
    );
    let (t, _) = scheduled("streams 2;", &ExpandOptions::default());
    assert!(t.iter().all(|t| t.2 == ExecPool::Vector));
}

#[test]
fn limit_truncates_to_a_prefix_with_clipped_edges() {
    let m = module(NESTED);
    let b = Bindings::new().symbol("n", 6i64);
    let full = run(&m, &b);
    let total = full.tasks.len();
    for limit in 0..=total + 1 {
        let x = expand(
            &m,
            &b,
            &ExpandOptions {
                limit: Some(limit),
                ..ExpandOptions::default()
            },
        )
        .unwrap();
        let n = limit.min(total);
        assert_eq!(x.tasks, full.tasks[..n], "limit {limit}");
        assert_eq!(x.truncated, limit < total, "limit {limit}");
        let n = n as u32;
        let clip = |r: &Range<u32>| r.start.min(n)..r.end.min(n);
        let expected: Vec<_> = full
            .order
            .iter()
            .map(|e| edge(clip(&e.before), clip(&e.after)))
            .filter(|e| !e.before.is_empty() && !e.after.is_empty())
            .collect();
        assert_eq!(sorted(x.order.clone()), sorted(expected), "limit {limit}");
    }
}

#[test]
fn streaming_forms_agree_with_expand() {
    let m = module(PIPELINE);
    let b = Bindings::new().symbol("n", 5i64);
    let x = run(&m, &b);
    let mut tasks = Vec::new();
    let s = expand_each(&m, &b, &ExpandOptions::default(), |i, t| {
        assert_eq!(i as usize, tasks.len());
        tasks.push(t.clone());
    })
    .unwrap();
    assert_eq!(tasks, x.tasks);
    assert_eq!(s.tasks as usize, x.tasks.len());
    struct Sink(Vec<ExpandedTask>, Vec<OrderEdge>);
    impl ExpandSink for Sink {
        fn task(&mut self, _: u32, t: &ExpandedTask) -> ControlFlow<()> {
            self.0.push(t.clone());
            ControlFlow::Continue(())
        }
        fn order(&mut self, e: OrderEdge) {
            self.1.push(e);
        }
    }
    let mut sink = Sink(Vec::new(), Vec::new());
    expand_with(&m, &b, &ExpandOptions::default(), &mut sink).unwrap();
    assert_eq!(sink.0, x.tasks);
    assert_eq!(sink.1, x.order);
}

#[test]
fn counts_helpers() {
    let (t, _) = scheduled("dispatch round_robin(4);", &ExpandOptions::default());
    assert_eq!(t.len(), 10);
    let m = module(NESTED);
    let x = run(&m, &Bindings::new().symbol("n", 3i64));
    // Iterations 0 and 2 run (i % 3 != 1): 8 tasks over round_robin(3).
    let e = x.executor_counts();
    assert_eq!(
        e.into_iter().collect::<Vec<_>>(),
        vec![(Some(0), 3), (Some(1), 3), (Some(2), 2)]
    );
    assert_eq!(
        x.kernel_counts().into_iter().collect::<Vec<_>>(),
        vec![(0, 8)]
    );
    assert_eq!(
        x.describe_task(&m, 5),
        "#5 k a=A[2, 16+:16] b=B[2, 16+:16] j=21 target 2 stream 1 pool vector"
    );
    assert!(x.describe_task(&m, 99).contains("no such task"));
}

// ---------------------------------------------------------------------------------------------
// Streaming: order announcements (`order_begin`) and early stop.

/// One call a sink received.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Begin(Range<u32>, u32),
    Task(u32),
    Order(OrderEdge),
}

/// Records every call; stops (returns `Break`) at task `stop_at`.
#[derive(Default)]
struct Recorder {
    events: Vec<Event>,
    tasks: Vec<ExpandedTask>,
    stop_at: Option<u32>,
}

impl ExpandSink for Recorder {
    fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()> {
        self.events.push(Event::Task(index));
        self.tasks.push(task.clone());
        if self.stop_at == Some(index) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
    fn order(&mut self, edge: OrderEdge) {
        self.events.push(Event::Order(edge));
    }
    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        self.events.push(Event::Begin(before, after_start));
    }
}

fn record(m: &Module, b: &Bindings, opts: &ExpandOptions, stop_at: Option<u32>) -> Recorder {
    let mut r = Recorder {
        stop_at,
        ..Recorder::default()
    };
    let s = expand_with(m, b, opts, &mut r).unwrap();
    assert_eq!(s.tasks as usize, r.tasks.len());
    assert_eq!(
        s.stopped,
        stop_at.is_some_and(|k| (k as usize) < r.tasks.len())
    );
    r
}

/// Checks the `ExpandSink` contract on a recorded call sequence and returns the order edges:
/// tasks in index order; every `order` matches exactly one earlier, still open `order_begin`
/// with the same `before` and `after.start`, announced when exactly `after.start` tasks had been
/// emitted (so before task `after.start`) and closed when exactly `after.end` had (so the tasks
/// in between are exactly the `after` range); `before` lies before `after`. With `nested`, each
/// `order` closes the most recent open announcement; with `complete`, none is left open.
fn check_announcements(events: &[Event], nested: bool, complete: bool) -> Vec<OrderEdge> {
    let mut count = 0u32;
    let mut open: Vec<(Range<u32>, u32)> = Vec::new();
    let mut orders = Vec::new();
    for (at, ev) in events.iter().enumerate() {
        match ev {
            Event::Task(i) => {
                assert_eq!(*i, count, "event {at}: tasks out of order");
                count += 1;
            }
            Event::Begin(b, s) => {
                assert_eq!(*s, count, "event {at}: {ev:?} not right before task {s}");
                assert!(!b.is_empty() && b.end <= *s, "event {at}: {ev:?}");
                open.push((b.clone(), *s));
            }
            Event::Order(e) => {
                let key = (e.before.clone(), e.after.start);
                let Some(k) = open.iter().rposition(|o| *o == key) else {
                    panic!("event {at}: {e:?} was not announced (open: {open:?})");
                };
                if nested {
                    assert_eq!(
                        k,
                        open.len() - 1,
                        "event {at}: {e:?} closes out of LIFO order"
                    );
                }
                open.remove(k);
                assert!(!e.after.is_empty(), "event {at}: {e:?}");
                assert_eq!(
                    e.after.end, count,
                    "event {at}: {e:?} closed after {count} tasks"
                );
                orders.push(e.clone());
            }
        }
    }
    if complete {
        assert!(open.is_empty(), "announcements never closed: {open:?}");
    }
    orders
}

/// Checks the announcements of a full expansion and of some truncated ones against `expand`.
fn check_streaming(m: &Module, b: &Bindings, nested: bool) -> usize {
    let x = run(m, b);
    let r = record(m, b, &ExpandOptions::default(), None);
    assert_eq!(r.tasks, x.tasks);
    assert_eq!(check_announcements(&r.events, nested, true), x.order);
    let n = x.tasks.len();
    for limit in [0, 1, n / 3, n / 2, n.saturating_sub(1), n + 1] {
        let opts = ExpandOptions {
            limit: Some(limit),
            ..ExpandOptions::default()
        };
        let y = expand(m, b, &opts).unwrap();
        let r = record(m, b, &opts, None);
        assert_eq!(r.tasks, y.tasks);
        assert_eq!(
            check_announcements(&r.events, nested, true),
            y.order,
            "limit {limit}"
        );
    }
    n
}

/// Every example with its `//@ bind` defaults.
fn examples() -> Vec<(String, Module, Bindings)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wsp"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 7, "{paths:?}");
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let m = module(&text);
            let mut b = Bindings::new();
            for line in text.lines() {
                if let Some(spec) = line.trim_start().strip_prefix("//@ bind") {
                    b.bind_str(&m, spec.trim()).unwrap();
                }
            }
            (p.display().to_string(), m, b)
        })
        .collect()
}

#[test]
fn examples_announce_every_order_edge_before_its_later_range() {
    let mut edges = 0;
    for (name, m, b) in examples() {
        let csp = !m.pipelines.is_empty();
        let n = check_streaming(&m, &b, !csp);
        assert!(n > 0, "{name}");
        edges += run(&m, &b).order.len();
    }
    assert!(edges > 0);
}

#[test]
fn announcements_in_nested_loops_blocks_and_pipelines() {
    // Nested for_each with empty iterations, and sequential children that are empty.
    let m = module(NESTED);
    for n in [0i64, 1, 2, 5, 7] {
        check_streaming(&m, &Bindings::new().symbol("n", n), true);
    }
    let m = module(
        "
tensor X: f32[16, 16];
axis I = dense(3);
axis J = dense(2);
kernel k(out x: f32[?, ?], tag: i64);
workload main() {
    sequential {
        combine { }
        for_each i in I {
            sequential {
                for_each j in J {
                    if i != 1 { task k(X[i, j], 1); }
                }
                combine { }
                task k(X[i, 9], 2);
            }
        }
        if false { task k(X[0, 0], -1); }
        task k(X[15, 15], 7);
        for_each i in I { }
    }
}
",
    );
    let x = run(&m, &Bindings::new());
    assert_eq!(x.tasks.len(), 8);
    check_streaming(&m, &Bindings::new(), true);
    // A pipeline whose processes have for_each loops around sends and consumes.
    let m = module(
        "
symbol n: i64;
axis N = dense_dyn(n);
axis J = dense(2);
kernel k(v: i64);
pipeline p {
    channel a[2];
    process snk(consumes a) {
        for_each j in J {
            consume a as v { task k(v); task k(v + 100); }
            task k(-1);
        }
    }
    process src(produces a) {
        for_each i in N {
            task k(i);
            send a(i);
            parallel_for j in J { task k(i * 10 + j); }
        }
    }
}
",
    );
    for n in [0i64, 1, 3] {
        check_streaming(&m, &Bindings::new().symbol("n", n), false);
    }
    let m = module(PIPELINE);
    check_streaming(&m, &Bindings::new().symbol("n", 5i64), false);
}

/// Announcements of different processes need not nest: `p1` arms an edge and blocks, `p2`'s
/// first task announces it and `p2` arms its own and blocks, `p0`'s first task announces that
/// one; `p1` then closes the first before `p2` closes the second.
#[test]
fn announcements_of_different_processes_may_interleave() {
    let m = module(
        "
axis N = dense(2);
kernel k(v: i64);
pipeline p {
    channel c0[1];
    channel c1[1];
    process p1(consumes c0; produces c1) {
        sequential { task k(10); consume c0 as v { task k(11); send c1(v); } }
    }
    process p2(consumes c1) {
        sequential { task k(20); consume c1 as v { task k(21); } }
    }
    process p0(produces c0) {
        parallel_for i in N { task k(i); send c0(i); }
    }
}
",
    );
    let r = record(&m, &Bindings::new(), &ExpandOptions::default(), None);
    let orders = check_announcements(&r.events, false, true);
    assert_eq!(orders, run(&m, &Bindings::new()).order);
    let begins: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Begin(b, s) => Some((b.clone(), *s)),
            _ => None,
        })
        .collect();
    // p1's `task k(10)` is #0, p2's `task k(20)` #1: their edges open at #1 and #2.
    assert_eq!(begins[..2], [(0..1, 1), (1..2, 2)]);
    let closes: Vec<_> = orders
        .iter()
        .filter(|e| e.after.len() > 1)
        .map(|e| (e.before.clone(), e.after.clone()))
        .collect();
    assert_eq!(closes, [(0..1, 1..6), (1..2, 2..8)]);
    let nested = std::panic::catch_unwind(|| check_announcements(&r.events, true, true));
    assert!(nested.is_err(), "expected non-LIFO announcements");
}

#[test]
fn the_sink_can_stop_the_expansion() {
    let m = module(NESTED);
    let b = Bindings::new().symbol("n", 6i64);
    let full = run(&m, &b);
    for k in 0..full.tasks.len() as u32 {
        let r = record(&m, &b, &ExpandOptions::default(), Some(k));
        // Nothing after the task that said stop.
        assert_eq!(r.events.last(), Some(&Event::Task(k)));
        assert_eq!(r.tasks, full.tasks[..=k as usize]);
        check_announcements(&r.events, true, false);
        let mut sink = Recorder {
            stop_at: Some(k),
            ..Recorder::default()
        };
        let s = expand_with(&m, &b, &ExpandOptions::default(), &mut sink).unwrap();
        assert_eq!((s.tasks, s.stopped, s.truncated), (k + 1, true, false));
    }
    // A stop at the limit's last task is a stop; a limit alone is not.
    let opts = ExpandOptions {
        limit: Some(3),
        ..ExpandOptions::default()
    };
    let mut sink = Recorder {
        stop_at: Some(2),
        ..Recorder::default()
    };
    let s = expand_with(&m, &b, &opts, &mut sink).unwrap();
    assert_eq!((s.tasks, s.stopped, s.truncated), (3, true, false));
    let s = expand_with(&m, &b, &opts, &mut Recorder::default()).unwrap();
    assert_eq!((s.tasks, s.stopped, s.truncated), (3, false, true));
    // In a pipeline, mid-way through a CSP edge: the edge into the stopping task is announced
    // but never closed.
    let m = module(PIPELINE);
    let b = Bindings::new().symbol("n", 4i64);
    let r = record(&m, &b, &ExpandOptions::default(), Some(5));
    assert_eq!(r.events.last(), Some(&Event::Task(5)));
    assert!(matches!(r.events[r.events.len() - 2], Event::Begin(_, 5)));
    check_announcements(&r.events, false, false);
}

// ---------------------------------------------------------------------------------------------
// Errors: one test per ExpandError variant.

#[test]
fn error_no_entry_point() {
    let m = module("workload a() { } workload b() { }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::NoEntryPoint { .. })
    ));
    let mut m = module("workload a() { } schedule for a { }");
    m.schedule.as_mut().unwrap().target = "nothing".into();
    let e = run_err(&m, &Bindings::new());
    assert!(e.to_string().contains("`nothing`"), "{e}");
}

#[test]
fn error_unknown_names() {
    let m = module("workload main() { task nope(); }");
    assert_eq!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::UnknownName {
            kind: "kernel",
            name: "nope".into(),
            context: "task `nope` in workload `main`".into(),
            loc: Loc::NONE,
        })
    );
    let m = module("kernel k(x: i64); workload main() { task k(y + 1); }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::UnknownName { kind: "name", name, .. }) if name == "y"
    ));
    let m = module("workload main() { parallel_for i in Nope { } }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::UnknownName { kind: "axis", .. })
    ));
    let m = module("workload main() { send c(1); }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::UnknownName {
            kind: "channel",
            ..
        })
    ));
    // A callee does not see its caller's loop variables.
    let m = module(
        "axis I = dense(2); kernel k(x: i64);
         workload w() { task k(i); }
         workload main() { parallel_for i in I { call w(); } }",
    );
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::UnknownName { kind: "name", name, .. }) if name == "i"
    ));
}

#[test]
fn error_malformed() {
    let m = module("kernel k(x: i64); workload main() { task k(1, 2); }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::Malformed { .. })
    ));
    let m = module("tensor T: f32[4]; kernel k(x: i64); workload main() { task k(T[0]); }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::Malformed { .. })
    ));
}

#[test]
fn error_recursion() {
    let m = module(
        "workload a() { call b(); } workload b() { call a(); } workload main() { call a(); }",
    );
    assert_eq!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::Recursion {
            chain: vec!["main".into(), "a".into(), "b".into(), "a".into()],
            loc: Loc::NONE,
        })
    );
}

#[test]
fn error_bad_schedule() {
    let m = module(
        "kernel k(); workload main() { task k(); } schedule for main { dispatch round_robin(0); }",
    );
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::BadSchedule { .. })
    ));
    let m = module("workload main() { }");
    let e = expand(
        &m,
        &Bindings::new(),
        &ExpandOptions {
            executors: Some(0),
            ..ExpandOptions::default()
        },
    );
    assert!(matches!(
        e,
        Err(ExpandError::Resolve(ResolveError::BadSchedule { .. }))
    ));
}

#[test]
fn error_bindings() {
    let m = module(NESTED);
    assert_eq!(
        run_err(&m, &Bindings::new()),
        ExpandError::Binding(BindingError::MissingSymbol { name: "n".into() })
    );
    assert_eq!(
        run_err(&m, &Bindings::new().symbol("n", true)),
        ExpandError::Binding(BindingError::BindingType {
            name: "n".into(),
            expected: pto_wsp_ir::ScalarType::I64,
            found: pto_wsp_ir::ScalarType::Bool
        })
    );
    let r = "symbol rows: i64; tensor LEN: i64[rows]; axis R = ragged(rows, LEN);
             kernel k(a: i64); workload main() { parallel_for r, p in R { task k(p); } }";
    let m = module(r);
    match run_err(&m, &Bindings::new().symbol("rows", 3i64)) {
        ExpandError::Binding(BindingError::MissingArray { tensor, loc }) => {
            assert_eq!(tensor, "LEN");
            // The read is the loop over the ragged axis.
            assert_eq!(
                &r[loc.start as usize..loc.start as usize + 12],
                "parallel_for"
            );
        }
        other => panic!("expected a missing array, got {other:?}"),
    }
    assert_eq!(
        run_err(
            &m,
            &Bindings::new()
                .symbol("rows", 3i64)
                .array("LEN", vec![1, 2])
        ),
        ExpandError::ArrayTooShort {
            tensor: "LEN".into(),
            needed: 3,
            len: 2
        }
    );
    let e = run_err(
        &m,
        &Bindings::new()
            .symbol("rows", 3i64)
            .array("LEN", vec![1, -2, 0]),
    );
    assert!(
        matches!(&e, ExpandError::NegativeLength { what, value: -2 } if what.contains("LEN[1]")),
        "{e}"
    );
    let e = run_err(
        &m,
        &Bindings::new().symbol("rows", -1i64).array("LEN", vec![]),
    );
    assert!(
        matches!(e, ExpandError::NegativeLength { value: -1, .. }),
        "{e}"
    );
}

#[test]
fn error_negative_extent() {
    let m = module(NESTED);
    let e = run_err(&m, &Bindings::new().symbol("n", -3i64));
    // The tensor dimension `n` is checked first.
    assert_eq!(
        e,
        ExpandError::NegativeLength {
            what: "dimension 0 of tensor `A`".into(),
            value: -3
        }
    );
    let m =
        module("symbol n: i64; axis I = dense_dyn(n); workload main() { parallel_for i in I { } }");
    let e = run_err(&m, &Bindings::new().symbol("n", -3i64));
    assert!(
        matches!(e, ExpandError::NegativeLength { value: -3, .. }),
        "{e}"
    );
}

#[test]
fn error_bad_indptr() {
    let m = module(
        "tensor PTR: i64[4]; tensor IDX: i64[4]; axis S = sparse(3, PTR, IDX); kernel k(c: i64);
         workload main() { select r, c in S { task k(c); } }",
    );
    let b = |ptr: Vec<i64>| {
        Bindings::new()
            .array("PTR", ptr)
            .array("IDX", vec![0, 1, 2, 3])
    };
    for bad in [vec![0, 2, 1, 3], vec![0, 1, 2, 5], vec![-1, 0, 0, 0]] {
        let e = run_err(&m, &b(bad.clone()));
        assert!(
            matches!(&e, ExpandError::BadIndptr { tensor, .. } if tensor == "PTR"),
            "{bad:?}: {e}"
        );
    }
    assert!(matches!(
        run_err(&m, &b(vec![0, 1, 2])),
        ExpandError::ArrayTooShort { needed: 4, .. }
    ));
    assert_eq!(run(&m, &b(vec![1, 1, 3, 4])).tasks.len(), 3);
}

#[test]
fn error_region_out_of_bounds() {
    let m = module(
        "tensor X: f32[8, 8]; axis I = dense(5); kernel k(in x: f32[?, ?]);
         workload main() { parallel_for i in I { task k(X[1, i * 2 +: 2]); } }",
    );
    assert_eq!(
        run_err(&m, &Bindings::new()),
        ExpandError::RegionOutOfBounds {
            task: 4,
            kernel: "k".into(),
            param: "x".into(),
            tensor: "X".into(),
            dim: 1,
            start: 8,
            size: 2,
            extent: 8
        }
    );
    for region in ["X[-1, 0]", "X[0, 0 +: 0]", "X[0 +: 9, 0]"] {
        let m = module(&format!(
            "tensor X: f32[8, 8]; kernel k(in x: f32[?, ?]); workload main() {{ task k({region}); }}"
        ));
        assert!(
            matches!(
                run_err(&m, &Bindings::new()),
                ExpandError::RegionOutOfBounds { task: 0, .. }
            ),
            "{region}"
        );
    }
}

#[test]
fn error_load_out_of_bounds() {
    let m = module("slot s: i64; tensor T: i64[2, 3]; workload main() { load s = T[1, 3]; }");
    let e = run_err(&m, &Bindings::new().array("T", vec![0; 6]));
    assert!(
        matches!(
            &e,
            ExpandError::LoadOutOfBounds {
                tensor,
                dim: 1,
                index: 3,
                extent: 3,
                loc,
            } if tensor == "T" && loc.start == 52
        ),
        "{e:?}"
    );
    let m = module("slot s: i64; tensor T: i64[2, 3]; workload main() { load s = T[1, 2]; }");
    assert!(matches!(
        run_err(&m, &Bindings::new().array("T", vec![0; 5])),
        ExpandError::ArrayTooShort {
            needed: 6,
            len: 5,
            ..
        }
    ));
}

#[test]
fn error_evaluation_with_context() {
    let m = module(
        "axis I = dense(3); kernel k(x: i64);
         workload main() { parallel_for i in I { task k(6 / (2 - i)); } }",
    );
    let e = run_err(&m, &Bindings::new());
    assert!(
        matches!(
            &e,
            ExpandError::Eval { context, source: pto_wsp_ir::eval::EvalError::DivisionByZero { .. } }
                if context.contains("task #2") && context.contains("argument `x`")
        ),
        "{e}"
    );
    // Ill-typed expressions are caught when the entry is resolved, before anything runs.
    let m = module("slot s: i64; workload main() { set s = true; }");
    assert!(matches!(
        run_err(&m, &Bindings::new()),
        ExpandError::Resolve(ResolveError::Type { context, .. }) if context.contains("`set s`")
    ));
    let m = module("symbol n: i64; workload main() { if n { } }");
    assert!(matches!(
        run_err(&m, &Bindings::new().symbol("n", 1i64)),
        ExpandError::Resolve(ResolveError::Type { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Bindings from strings.

#[test]
fn bind_str() {
    let m = module(
        "symbol n: i64; symbol flag: bool; symbol u: u64; slot s: i64;
         tensor LEN: i32[n]; tensor SMALL: u8[3]; tensor F: f32[4]; axis A = dense(1);",
    );
    let mut b = Bindings::new();
    b.bind_str(&m, "n=-3").unwrap();
    b.bind_str(&m, " flag = true ").unwrap();
    b.bind_str(&m, "u=7").unwrap();
    b.bind_str(&m, "s=12").unwrap();
    b.bind_str(&m, "LEN=3,5,2").unwrap();
    b.bind_str(&m, "SMALL=[1, 255, 0]").unwrap();
    assert_eq!(b.symbols["n"], Value::I64(-3));
    assert_eq!(b.symbols["flag"], Value::Bool(true));
    assert_eq!(b.symbols["u"], Value::U64(7));
    assert_eq!(b.slots["s"], Value::I64(12));
    assert_eq!(b.arrays["LEN"], vec![3, 5, 2]);
    assert_eq!(b.arrays["SMALL"], vec![1, 255, 0]);
    b.bind_str(&m, "LEN=[]").unwrap();
    assert!(b.arrays["LEN"].is_empty());
    b.bind_str(&m, "u=8u").unwrap();
    assert_eq!(b.symbols["u"], Value::U64(8));

    use pto_wsp_ir::value::BindError;
    let err = |s: &str| Bindings::new().bind_str(&m, s).unwrap_err();
    assert!(matches!(err("n"), BindError::Syntax { .. }));
    assert!(matches!(err("nope=1"), BindError::UnknownName { name } if name == "nope"));
    assert!(matches!(err("F=1,2"), BindError::NotBindable { .. }));
    assert!(matches!(err("A=1"), BindError::NotBindable { .. }));
    for bad in [
        "n=true",
        "n=1.5",
        "flag=1",
        "u=-1",
        "n=",
        "SMALL=1,256",
        "LEN=1,,2",
        "LEN=x",
    ] {
        let e = err(bad);
        assert!(matches!(e, BindError::BadValue { .. }), "{bad}: {e:?}");
        let name = bad.split('=').next().unwrap();
        assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
    }
    assert_eq!(
        err("n=true").to_string(),
        "cannot bind `n` to `true`: expected an i64 (symbol `n: i64`)"
    );
    assert_eq!(
        err("flag=1").to_string(),
        "cannot bind `flag` to `1`: expected a bool (symbol `flag: bool`)"
    );
}

// ---------------------------------------------------------------------------------------------
// Property: random nests of dense loops / for_each / sequential / if, checked against a recursive
// walker; random pipelines of such nests with sends and consumes, checked for the streaming
// contract.

mod random_nests {
    use super::*;
    use proptest::prelude::*;
    use pto_wsp_ir::builder::{Body, ModuleBuilder, e};
    use pto_wsp_ir::{BinOp, Expr, ScalarType};

    #[derive(Clone, Debug)]
    enum Node {
        Loop {
            ordered: bool,
            extent: i64,
            body: Vec<Node>,
        },
        /// `if v{depth-1} % m == r` (`true` at depth 0).
        If {
            m: i64,
            r: i64,
            then: Vec<Node>,
            otherwise: Vec<Node>,
        },
        /// `sequential { .. }`.
        Seq(Vec<Node>),
        /// A task statement with its id (numbered in pre-order after generation).
        Task(i64),
        /// `send` on the process's output channel (a task where there is none).
        Send,
        /// `consume` of the process's input channel (`combine` where there is none).
        Consume(Vec<Node>),
    }

    fn node() -> impl Strategy<Value = Node> {
        nest(false)
    }

    /// Random nests; with `csp`, also sends and consumes.
    fn nest(csp: bool) -> impl Strategy<Value = Node> {
        let leaf = if csp {
            prop_oneof![3 => Just(Node::Task(0)), 1 => Just(Node::Send)].boxed()
        } else {
            Just(Node::Task(0)).boxed()
        };
        leaf.prop_recursive(5, 48, 4, move |inner| {
            let consume = if csp {
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(Node::Consume)
                    .boxed()
            } else {
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(Node::Seq)
                    .boxed()
            };
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Node::Seq),
                consume,
                (
                    any::<bool>(),
                    0i64..4,
                    prop::collection::vec(inner.clone(), 0..3)
                )
                    .prop_map(|(ordered, extent, body)| Node::Loop {
                        ordered,
                        extent,
                        body
                    }),
                (
                    1i64..3,
                    0i64..2,
                    prop::collection::vec(inner.clone(), 0..3),
                    prop::collection::vec(inner, 0..2)
                )
                    .prop_map(|(m, r, then, otherwise)| Node::If {
                        m,
                        r,
                        then,
                        otherwise
                    }),
            ]
        })
    }

    fn number(nodes: &mut [Node], next: &mut i64) {
        for n in nodes {
            match n {
                Node::Loop { body, .. } | Node::Seq(body) | Node::Consume(body) => {
                    number(body, next)
                }
                Node::Send => {}
                Node::If {
                    then, otherwise, ..
                } => {
                    number(then, next);
                    number(otherwise, next);
                }
                Node::Task(id) => {
                    *id = *next;
                    *next += 1;
                }
            }
        }
    }

    /// Builds the module: a loop `d` deep binds `v{d}` over axis `A{extent}`; every task passes
    /// its statement id and a base-5 code of the enclosing loop variables.
    fn build(nodes: &[Node]) -> Module {
        let mut m = module_with_kernel();
        m.workload("main", |w| body(w, nodes, 0, None, None));
        m.finish()
    }

    /// Axes `A0..A3` and the kernel `k(id, code)`.
    fn module_with_kernel() -> ModuleBuilder {
        let mut m = ModuleBuilder::new();
        for x in 0..4 {
            m.dense(&format!("A{x}"), x);
        }
        m.kernel("k")
            .scalar("id", ScalarType::I64)
            .scalar("code", ScalarType::I64);
        m
    }

    /// A pipeline `p0 -> c0 -> p1 -> c1 -> p2` of three processes with these bodies, declared
    /// in a random order.
    fn build_pipeline(bodies: &[Vec<Node>; 3], order: [usize; 3]) -> Module {
        let mut m = module_with_kernel();
        m.pipeline("p", |p| {
            p.channel("c0", 1).channel("c1", 1);
            for i in order {
                let consumes = (i > 0).then(|| format!("c{}", i - 1));
                let produces = (i < 2).then(|| format!("c{i}"));
                p.process(
                    &format!("p{i}"),
                    consumes.as_deref(),
                    produces.as_deref(),
                    |w| body(w, &bodies[i], 0, produces.as_deref(), consumes.as_deref()),
                );
            }
        });
        m.finish()
    }

    fn body(
        w: &mut Body,
        nodes: &[Node],
        depth: usize,
        produces: Option<&str>,
        consumes: Option<&str>,
    ) {
        for n in nodes {
            match n {
                Node::Loop {
                    ordered,
                    extent,
                    body: b,
                } => {
                    let var = format!("v{depth}");
                    let axis = format!("A{extent}");
                    let f = |w: &mut Body| body(w, b, depth + 1, produces, consumes);
                    if *ordered {
                        w.for_each(var.as_str(), &axis, f);
                    } else {
                        w.parallel_for(var.as_str(), &axis, f);
                    }
                }
                Node::If {
                    m,
                    r,
                    then,
                    otherwise,
                } => {
                    let cond = if depth == 0 {
                        Expr::Bool(true)
                    } else {
                        (e(&format!("v{}", depth - 1)) % *m).bin(BinOp::Eq, *r)
                    };
                    w.if_else(
                        cond,
                        |w| body(w, then, depth, produces, consumes),
                        |w| body(w, otherwise, depth, produces, consumes),
                    );
                }
                Node::Seq(b) => {
                    w.sequential(|w| body(w, b, depth, produces, consumes));
                }
                Node::Send => match produces {
                    Some(c) => {
                        w.send(c, Expr::Int(1));
                    }
                    None => {
                        w.task("k", [Expr::Int(-1).into(), Expr::Int(0).into()]);
                    }
                },
                Node::Consume(b) => match consumes {
                    Some(c) => {
                        let var = format!("v{depth}");
                        w.consume(c, &var, |w| body(w, b, depth + 1, produces, consumes));
                    }
                    None => {
                        w.combine(|w| body(w, b, depth, produces, consumes));
                    }
                },
                Node::Task(id) => {
                    let mut code = Expr::Int(0);
                    for d in 0..depth {
                        code = code * 5 + e(&format!("v{d}"));
                    }
                    w.task("k", [Expr::Int(*id).into(), code.into()]);
                }
            }
        }
    }

    /// The expected (id, code) list and `for_each` edges, by direct recursion.
    fn walk(
        nodes: &[Node],
        vars: &mut Vec<i64>,
        out: &mut Vec<(i64, i64)>,
        edges: &mut Vec<OrderEdge>,
    ) {
        for n in nodes {
            match n {
                Node::Loop {
                    ordered,
                    extent,
                    body,
                } => {
                    let mut ranges = Vec::new();
                    for i in 0..*extent {
                        let start = out.len() as u32;
                        vars.push(i);
                        walk(body, vars, out, edges);
                        vars.pop();
                        ranges.push(start..out.len() as u32);
                    }
                    if *ordered {
                        edges.extend(chain(&ranges));
                    }
                }
                Node::If {
                    m,
                    r,
                    then,
                    otherwise,
                } => {
                    let holds = vars.last().is_none_or(|v| v % m == *r);
                    walk(if holds { then } else { otherwise }, vars, out, edges);
                }
                Node::Seq(children) => {
                    let mut ranges = Vec::new();
                    for c in children {
                        let start = out.len() as u32;
                        walk(std::slice::from_ref(c), vars, out, edges);
                        ranges.push(start..out.len() as u32);
                    }
                    edges.extend(chain(&ranges));
                }
                Node::Send | Node::Consume(_) => unreachable!("not generated for workloads"),
                Node::Task(id) => {
                    let code = vars.iter().fold(0, |c, v| c * 5 + v);
                    out.push((*id, code));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(300)))]

        #[test]
        fn expansion_matches_direct_recursion(
            mut nodes in prop::collection::vec(node(), 1..5),
            limit_frac in 0.0f64..1.2,
        ) {
            number(&mut nodes, &mut 0);
            let m = build(&nodes);
            let x = expand(&m, &Bindings::new(), &ExpandOptions::default()).unwrap();
            let mut expected = Vec::new();
            let mut edges = Vec::new();
            walk(&nodes, &mut Vec::new(), &mut expected, &mut edges);
            let got: Vec<(i64, i64)> = x.tasks.iter().map(|t| match (t.params[0], t.params[1]) {
                (Value::I64(a), Value::I64(b)) => (a, b),
                other => panic!("{other:?}"),
            }).collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(sorted(x.order.clone()), sorted(edges));

            let limit = (expected.len() as f64 * limit_frac) as usize;
            let y = expand(&m, &Bindings::new(), &ExpandOptions { limit: Some(limit), executors: None }).unwrap();
            let n = limit.min(expected.len());
            prop_assert_eq!(&y.tasks[..], &x.tasks[..n]);
            prop_assert_eq!(y.truncated, limit < expected.len());

            // Streaming: every edge announced, nested, and closed (also when truncated).
            let r = record(&m, &Bindings::new(), &ExpandOptions::default(), None);
            prop_assert_eq!(check_announcements(&r.events, true, true), x.order);
            let opts = ExpandOptions { limit: Some(limit), executors: None };
            let r = record(&m, &Bindings::new(), &opts, None);
            prop_assert_eq!(check_announcements(&r.events, true, true), y.order);
        }

        #[test]
        fn pipelines_announce_every_edge(
            bodies in [
                prop::collection::vec(nest(true), 1..4),
                prop::collection::vec(nest(true), 1..4),
                prop::collection::vec(nest(true), 1..4),
            ],
            order in Just([0usize, 1, 2]).prop_shuffle(),
            limit_frac in 0.0f64..1.2,
            stop_frac in 0.0f64..1.2,
        ) {
            let order = [order[0], order[1], order[2]];
            let m = build_pipeline(&bodies, order);
            let x = expand(&m, &Bindings::new(), &ExpandOptions::default()).unwrap();
            let r = record(&m, &Bindings::new(), &ExpandOptions::default(), None);
            prop_assert_eq!(&r.tasks, &x.tasks);
            prop_assert_eq!(check_announcements(&r.events, false, true), x.order);
            let n = x.tasks.len();
            let limit = (n as f64 * limit_frac) as usize;
            let opts = ExpandOptions { limit: Some(limit), executors: None };
            let y = expand(&m, &Bindings::new(), &opts).unwrap();
            let r = record(&m, &Bindings::new(), &opts, None);
            prop_assert_eq!(check_announcements(&r.events, false, true), y.order);
            let stop = (n as f64 * stop_frac) as u32;
            let r = record(&m, &Bindings::new(), &ExpandOptions::default(), Some(stop));
            prop_assert_eq!(r.tasks.len(), n.min(stop as usize + 1));
            check_announcements(&r.events, false, (stop as usize) >= n);
        }
    }
}

#[test]
fn region_helper_indices_are_module_indices() {
    let m = module(NESTED);
    assert_eq!(tidx(&m, "B"), 1);
}

#[test]
fn priority_and_cycles_keys_are_evaluated_per_task() {
    let m = module(
        "
symbol n: i64;
tensor X: f32[n, 4];
axis I = dense_dyn(n);
axis J = dense(4);
kernel k(out x: f32[1, 1]);
workload main() {
    parallel_for i in I {
        parallel_for j in J {
            task k(X[i, j]);
        }
    }
}
schedule for main {
    task_graph {
        ready priority(i * 10 - j);
        trace cycles(j - 1);
    }
}
",
    );
    let x = run(&m, &Bindings::new().symbol("n", 3i64));
    let got: Vec<(i64, Option<u64>)> = x.tasks.iter().map(|t| (t.priority, t.cost)).collect();
    let mut want = Vec::new();
    for i in 0..3i64 {
        for j in 0..4i64 {
            // Negative costs count as zero.
            want.push((i * 10 - j, Some((j - 1).max(0) as u64)));
        }
    }
    assert_eq!(got, want);
    // Without those policies: priority 0, no cost.
    let plain = module(
        &m.to_string()
            .replace("ready priority(i * 10 - j);", "")
            .replace("trace cycles(j - 1);", ""),
    );
    let x = run(&plain, &Bindings::new().symbol("n", 2i64));
    assert!(x.tasks.iter().all(|t| t.priority == 0 && t.cost.is_none()));
}

/// A channel port with unbounded queues, for running processes one after another.
struct Queues(std::rc::Rc<std::cell::RefCell<Vec<std::collections::VecDeque<Value>>>>);

impl pto_wsp_ir::ChannelPort for Queues {
    fn send(&mut self, channel: u32, value: Value) -> ControlFlow<()> {
        self.0.borrow_mut()[channel as usize].push_back(value);
        ControlFlow::Continue(())
    }
    fn recv(&mut self, channel: u32) -> ControlFlow<(), Option<Value>> {
        // Producers ran to their end first: an empty queue is a closed channel.
        ControlFlow::Continue(self.0.borrow_mut()[channel as usize].pop_front())
    }
}

/// `expand_process` runs one process alone: for a pipeline whose processes feed only later
/// ones, running them in declaration order through unbounded queues gives, per process, a
/// subsequence of the Kahn expansion, and together exactly its tasks.
#[test]
fn processes_run_alone_generate_the_pipelines_tasks() {
    let (_, m, b) = examples()
        .into_iter()
        .find(|(p, _, _)| p.ends_with("csp_pipeline.wsp"))
        .expect("the pipeline example");
    let whole = run(&m, &b);
    let queues = std::rc::Rc::new(std::cell::RefCell::new(vec![
        std::collections::VecDeque::new(
        );
        2
    ]));
    let mut all = Vec::new();
    for p in 0..3 {
        let mut mine = Vec::new();
        let summary = pto_wsp_ir::expand_process(
            &resolved(&m).unwrap(),
            &b,
            &ExpandOptions::default(),
            p,
            &mut Queues(std::rc::Rc::clone(&queues)),
            &mut Collect(&mut mine),
        )
        .unwrap();
        assert_eq!(summary.tasks as usize, mine.len());
        assert_eq!(mine.len(), 16, "process {p}");
        // A subsequence of the whole expansion, in order.
        let mut at = whole.tasks.iter();
        for t in &mine {
            assert!(at.any(|w| w == t), "process {p}: {t:?} out of order");
        }
        all.extend(mine);
    }
    let key = |t: &ExpandedTask| format!("{t:?}");
    let mut got: Vec<String> = all.iter().map(key).collect();
    let mut want: Vec<String> = whole.tasks.iter().map(key).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // An out-of-range process is an error, not a panic.
    let err = pto_wsp_ir::expand_process(
        &resolved(&m).unwrap(),
        &b,
        &ExpandOptions::default(),
        3,
        &mut Queues(queues),
        &mut Collect(&mut Vec::new()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("process index 3"), "{err}");
}

struct Collect<'a>(&'a mut Vec<ExpandedTask>);

impl ExpandSink for Collect<'_> {
    fn task(&mut self, _index: u32, task: &ExpandedTask) -> ControlFlow<()> {
        self.0.push(task.clone());
        ControlFlow::Continue(())
    }
    fn order(&mut self, _edge: OrderEdge) {}
}

/// `ragged(ROWS, LENGTHS, EXPR)`: each request's chunk count is `ceil(kv_len / 512)`, derived
/// from the bound lengths by the axis's expression. Checked against the same
/// nested loops written with `div_ceil` here, and against printing and reparsing.
#[test]
fn ragged_lengths_by_expression() {
    let src = "
symbol batch: i64;
symbol chunk: i64;
tensor kv_lens: i32[batch];
tensor K: f32[batch, 4096];
axis C = ragged(batch, kv_lens, (kv_lens + chunk - 1) / chunk);
kernel attn(in k: f32[1, 512], b: i64, c: i64);
workload main() {
    parallel_for b, c in C {
        task attn(K[b, c * 512 +: 512], b, c);
    }
}
";
    let m = module(src);
    pto_wsp_ir::validate(&m).unwrap();
    assert_eq!(module(&m.to_string()), m);
    let kv = [1000i64, 0, 512, 513, 4096, 1];
    let b = Bindings::new()
        .symbol("batch", kv.len() as i64)
        .symbol("chunk", 512i64)
        .array("kv_lens", kv.to_vec());
    let x = run(&m, &b);
    let mut tasks = Vec::new();
    for (r, &len) in kv.iter().enumerate() {
        let r = r as i64;
        for c in 0..(len as u64).div_ceil(512) as i64 {
            tasks.push(ExpandedTask {
                kernel: 0,
                declared: 0,
                params: vec![Value::I64(r), Value::I64(c)],
                regions: vec![reg(1, Access::In, &[r, c * 512], &[1, 512])],
                pool: ExecPool::Any,
                target: Some(0),
                stream: 0,
                priority: 0,
                cost: None,
                loc: pto_wsp_ir::Loc::NONE,
            });
        }
    }
    assert_eq!(tasks.len(), 2 + 1 + 2 + 8 + 1);
    assert_eq!(x.tasks, tasks);

    // A negative computed length is an error naming the row.
    let m = module(&src.replace("(kv_lens + chunk - 1) / chunk", "kv_lens - chunk"));
    let b = Bindings::new()
        .symbol("batch", 2i64)
        .symbol("chunk", 1001i64)
        .array("kv_lens", vec![1001i64, 1000]);
    let e = run_err(&m, &b).to_string();
    assert!(e.contains("kv_lens[1]") && e.contains("-1"), "{e}");
}
