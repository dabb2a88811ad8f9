//! The builder yields exactly the IR of the same program written by hand as IR structs, and
//! exactly what the text parser yields for the same program in text.

use pto_wsp_ir::builder::{ModuleBuilder, at, e, levels, region, span};
use pto_wsp_ir::{
    Access, Arg, AxisDecl, AxisKind, DType, DepsMode, Dispatch, ExecPool, Expr, GateScope, Ident,
    KernelDecl, KernelParam, LoopOrder, Module, ParamKind, PoolsPolicy, ReadyPolicy, Region,
    RegionDim, ScalarType, Schedule, ScheduleItem, ScheduleItemKind, StartPolicy, Stmt, StmtKind,
    SymbolDecl, TaskGraphItem, TaskStmt, TensorDecl, Timing, TracePolicy, WindowMode, Workload,
    parse,
};

fn parsed(text: &str) -> Module {
    match parse(text) {
        Ok(m) => m,
        Err(e) => panic!("does not parse: {e}\n{text}"),
    }
}

/// The attention example of `docs/FORMAT.md`, with a scalar parameter added.
fn attention_builder() -> Module {
    let mut m = ModuleBuilder::new();
    m.symbol("seq", ScalarType::I64);
    m.tensor("Q", DType::F16, [e("seq"), 4096.into()]);
    m.tensor("O", DType::F16, [e("seq"), 4096.into()]);
    m.dense_dyn("T", e("seq") / 32);
    m.dense("H", 32);
    m.kernel("attn")
        .input("q", DType::F16, [Some(32), Some(128)])
        .output("o", DType::F16, [Some(32), Some(128)])
        .scalar("n", ScalarType::I64)
        .pool(ExecPool::Vector);
    m.workload("main", |w| {
        w.parallel_for("t", "T", |w| {
            w.parallel_for("h", "H", |w| {
                let rows = span(e("t") * 32, 32);
                let cols = span(e("h") * 128, 128);
                w.task(
                    "attn",
                    [
                        region("Q", [rows.clone(), cols.clone()]).into(),
                        region("O", [rows, cols]).into(),
                        e("h").into(),
                    ],
                );
            });
        });
    });
    m.schedule("main", |s| {
        s.dispatch(Dispatch::Affinity(e("h")));
        s.deps(DepsMode::Exact);
        s.ready(ReadyPolicy::WorkSteal);
    });
    m.finish()
}

const ATTENTION: &str = "
symbol seq: i64;

tensor Q: f16[seq, 4096];
tensor O: f16[seq, 4096];

axis T = dense_dyn(seq / 32);
axis H = dense(32);

kernel attn(in q: f16[32, 128], out o: f16[32, 128], n: i64) @vector;

workload main() {
    parallel_for t in T {
        parallel_for h in H {
            task attn(Q[t * 32 +: 32, h * 128 +: 128], O[t * 32 +: 32, h * 128 +: 128], h);
        }
    }
}

schedule for main {
    dispatch affinity(h);
    task_graph {
        deps exact;
        ready work_steal;
    }
}
";

#[test]
fn builder_equals_hand_written_ir() {
    let id = Ident::new;
    let name = |s: &str| Expr::Name(Ident::new(s));
    let tile = |access, shape: [u64; 2]| ParamKind::Tile {
        access,
        dtype: DType::F16,
        shape: shape.iter().map(|d| Some(*d)).collect(),
    };
    let dims = || {
        vec![
            RegionDim {
                start: Expr::Binary(
                    pto_wsp_ir::BinOp::Mul,
                    Box::new(name("t")),
                    Box::new(Expr::Int(32)),
                ),
                size: Some(Expr::Int(32)),
            },
            RegionDim {
                start: Expr::Binary(
                    pto_wsp_ir::BinOp::Mul,
                    Box::new(name("h")),
                    Box::new(Expr::Int(128)),
                ),
                size: Some(Expr::Int(128)),
            },
        ]
    };
    let task = Stmt::new(StmtKind::Task(TaskStmt {
        kernel: id("attn"),
        args: vec![
            Arg::Region(Region {
                tensor: id("Q"),
                dims: dims(),
            }),
            Arg::Region(Region {
                tensor: id("O"),
                dims: dims(),
            }),
            Arg::Scalar(name("h")),
        ],
    }));
    let hand = Module {
        symbols: vec![SymbolDecl {
            name: id("seq"),
            ty: ScalarType::I64,
        }],
        slots: vec![],
        tensors: ["Q", "O"]
            .iter()
            .map(|t| TensorDecl {
                name: id(t),
                dtype: DType::F16,
                shape: vec![name("seq"), Expr::Int(4096)],
            })
            .collect(),
        axes: vec![
            AxisDecl {
                name: id("T"),
                kind: AxisKind::DenseDyn(Expr::Binary(
                    pto_wsp_ir::BinOp::Div,
                    Box::new(name("seq")),
                    Box::new(Expr::Int(32)),
                )),
            },
            AxisDecl {
                name: id("H"),
                kind: AxisKind::Dense(Expr::Int(32)),
            },
        ],
        kernels: vec![KernelDecl {
            name: id("attn"),
            params: vec![
                KernelParam {
                    name: id("q"),
                    kind: tile(Access::In, [32, 128]),
                },
                KernelParam {
                    name: id("o"),
                    kind: tile(Access::Out, [32, 128]),
                },
                KernelParam {
                    name: id("n"),
                    kind: ParamKind::Scalar(ScalarType::I64.into()),
                },
            ],
            pool: ExecPool::Vector,
            tiers: None,
            body: None,
        }],
        workloads: vec![Workload {
            name: id("main"),
            params: vec![],
            body: vec![Stmt::new(StmtKind::Loop {
                order: LoopOrder::Parallel,
                vars: vec![id("t")],
                axis: id("T"),
                body: vec![Stmt::new(StmtKind::Loop {
                    order: LoopOrder::Parallel,
                    vars: vec![id("h")],
                    axis: id("H"),
                    body: vec![task],
                })],
            })],
            loc: pto_wsp_ir::Loc::NONE,
        }],
        pipelines: vec![],
        schedule: Some(Schedule {
            target: id("main"),
            items: vec![
                ScheduleItem::new(ScheduleItemKind::Dispatch(Dispatch::Affinity(name("h")))),
                ScheduleItem::new(ScheduleItemKind::TaskGraph(vec![
                    TaskGraphItem::Deps(DepsMode::Exact),
                    TaskGraphItem::Ready(ReadyPolicy::WorkSteal),
                ])),
            ],
            loc: pto_wsp_ir::Loc::NONE,
        }),
        ..Module::default()
    };
    let built = attention_builder();
    assert_eq!(built, hand);
    // Every location is unknown.
    assert!(!built.workloads[0].loc.is_known());
    assert!(!built.symbols[0].name.loc.is_known());
}

#[test]
fn builder_equals_parser_attention() {
    assert_eq!(attention_builder(), parsed(ATTENTION));
}

#[test]
fn builder_equals_parser_statements() {
    let text = "
symbol rows: i64;
symbol on: bool;
slot acc: i64;
tensor LEN: i32[rows];
tensor PTR: i64[5];
tensor IDX: i64[16];
tensor X: f32[rows, 64];
axis R = ragged(rows, LEN);
axis S = sparse(4, PTR, IDX);
axis B = dense(2);
kernel small(inout x: f32[?, 8], n: i64) @cube;
kernel big(inout x: f32[?, 8], n: i64) @cube;
kernel k(inout x: f32[?, 8], n: i64) @cube tiers { n < 4 => small, else => big };
workload part(r: i64, flag: bool) {
    if flag && r > 0 {
        task k(X[r, 0 +: 8], -3);
    } else {
        set acc = acc + 1;
    }
}
workload main() {
    sequential {
        for_each r, p in R {
            load acc = LEN[r];
            task k(X[r +: 1, p * 8 +: 8], min(acc, 7));
        }
        combine {
            select r, c in S {
                call part(r, on);
            }
        }
    }
    parallel_for b in B {
        if b == 0 {
            task k(X[b, 0], max(b, 1) % 2);
        }
    }
}
";
    let mut m = ModuleBuilder::new();
    m.symbol("rows", ScalarType::I64)
        .symbol("on", ScalarType::Bool)
        .slot("acc", ScalarType::I64);
    m.tensor("LEN", DType::I32, [e("rows")])
        .tensor("PTR", DType::I64, [5.into()])
        .tensor("IDX", DType::I64, [16.into()])
        .tensor("X", DType::F32, [e("rows"), 64.into()]);
    m.ragged("R", e("rows"), "LEN")
        .sparse("S", 4, "PTR", "IDX")
        .dense("B", 2);
    for name in ["small", "big"] {
        m.kernel(name)
            .inout("x", DType::F32, [None, Some(8)])
            .scalar("n", ScalarType::I64)
            .pool(ExecPool::Cube);
    }
    m.kernel("k")
        .inout("x", DType::F32, [None, Some(8)])
        .scalar("n", ScalarType::I64)
        .pool(ExecPool::Cube)
        .tiers([(e("n").lt(4), "small")], "big");
    m.workload_with_params(
        "part",
        [("r", ScalarType::I64), ("flag", ScalarType::Bool)],
        |w| {
            w.if_else(
                e("flag").bin(pto_wsp_ir::BinOp::And, e("r").gt(0)),
                |w| {
                    w.task(
                        "k",
                        [region("X", [at(e("r")), span(0, 8)]).into(), Arg::from(-3)],
                    );
                },
                |w| {
                    w.set("acc", e("acc") + 1);
                },
            );
        },
    );
    m.workload("main", |w| {
        w.sequential(|w| {
            w.for_each(("r", "p"), "R", |w| {
                w.load("acc", "LEN", [e("r")]);
                w.task(
                    "k",
                    [
                        region("X", [span(e("r"), 1), span(e("p") * 8, 8)]).into(),
                        Expr::min(e("acc"), 7).into(),
                    ],
                );
            });
            w.combine(|w| {
                w.select(["r", "c"], "S", |w| {
                    w.call("part", [e("r"), e("on")]);
                });
            });
        });
        w.parallel_for("b", "B", |w| {
            w.if_then(e("b").eq_(0), |w| {
                w.task(
                    "k",
                    [
                        region("X", [at(e("b")), at(0)]).into(),
                        (Expr::max(e("b"), 1) % 2).into(),
                    ],
                );
            });
        });
    });
    assert_eq!(m.finish(), parsed(text));
}

#[test]
fn builder_equals_parser_pipeline() {
    let text = "
symbol n: i64;
axis N = dense_dyn(n);
kernel produce(i: i64);
kernel work(v: i64);
pipeline p {
    channel a[2];
    channel b[4];
    process src(produces a) {
        parallel_for i in N {
            task produce(i);
            send a(i * 3);
        }
    }
    process mid(consumes a; produces b) {
        consume a as v {
            task work(v);
            send b(v + 1);
        }
    }
    process sink(consumes b) {
        consume b as v {
            task work(v);
        }
    }
    process idle() {
    }
}
schedule for p {
    streams 2;
}
";
    let mut m = ModuleBuilder::new();
    m.symbol("n", ScalarType::I64);
    m.dense_dyn("N", e("n"));
    m.kernel("produce").scalar("i", ScalarType::I64);
    m.kernel("work").scalar("v", ScalarType::I64);
    m.pipeline("p", |p| {
        p.channel("a", 2).channel("b", 4);
        p.process("src", [], ["a"], |w| {
            w.parallel_for("i", "N", |w| {
                w.task("produce", [e("i").into()]);
                w.send("a", e("i") * 3);
            });
        });
        p.process("mid", ["a"], ["b"], |w| {
            w.consume("a", "v", |w| {
                w.task("work", [e("v").into()]);
                w.send("b", e("v") + 1);
            });
        });
        p.process("sink", ["b"], [], |w| {
            w.consume("b", "v", |w| {
                w.task("work", [e("v").into()]);
            });
        });
        p.process("idle", [], [], |_| {});
    });
    m.schedule("p", |s| {
        s.streams(2);
    });
    assert_eq!(m.finish(), parsed(text));
}

#[test]
fn builder_equals_parser_every_schedule_item() {
    let text = "
axis I = dense(4);
kernel k(i: i64);
workload main() {
    parallel_for i in I {
        task k(i);
    }
}
schedule for main {
    executors 8;
    dispatch threshold(i) { below 2: round_robin(2), below 3: hash(i), else: threshold(i * 2) { below 7: static_partition(0, 2, 5), else: work_steal } };
    streams 3;
    stream_by i / 2;
    timing batched(16);
    task_graph {
        deps overlap;
        ready priority(0 - i);
        start threshold(32);
        trace cycles(i + 100);
        pools by_exec_unit;
    }
    task_window 64 abort;
    pipeline_depth 4 per_stream;
    batch_deps 8;
    dispatch_threshold(i) { below 2: vector, else: cube };
}
";
    let mut m = ModuleBuilder::new();
    m.dense("I", 4);
    m.kernel("k").scalar("i", ScalarType::I64);
    m.workload("main", |w| {
        w.parallel_for("i", "I", |w| {
            w.task("k", [e("i").into()]);
        });
    });
    m.schedule("main", |s| {
        s.executors(8);
        s.dispatch(Dispatch::Threshold(levels(
            e("i"),
            [(2, Dispatch::RoundRobin(2)), (3, Dispatch::Hash(e("i")))],
            Dispatch::Threshold(levels(
                e("i") * 2,
                [(7, Dispatch::StaticPartition(vec![0, 2, 5]))],
                Dispatch::WorkSteal,
            )),
        )));
        s.streams(3).stream_by(e("i") / 2);
        s.timing(Timing::Batched(16));
        s.task_graph(|g| {
            g.deps(DepsMode::Overlap)
                .ready(ReadyPolicy::Priority(Expr::from(0) - e("i")))
                .start(StartPolicy::Threshold(32))
                .trace(TracePolicy::Cycles(Some(e("i") + 100), None))
                .pools(PoolsPolicy::ByExecUnit);
        });
        s.task_window(64, WindowMode::Abort);
        s.pipeline_depth(4, GateScope::PerStream);
        s.batch_deps(8);
        s.dispatch_threshold(levels(e("i"), [(2, ExecPool::Vector)], ExecPool::Cube));
    });
    assert_eq!(m.finish(), parsed(text));
}

#[test]
fn schedule_shortcuts_join_one_task_graph_block() {
    let mut m = ModuleBuilder::new();
    m.workload("main", |_| {});
    m.schedule("main", |s| {
        s.deps(DepsMode::Hybrid);
        s.streams(2);
        s.trace(TracePolicy::Wall);
        s.start(StartPolicy::AfterOrchestration);
        s.pools(PoolsPolicy::Single);
    });
    let text = "
workload main() {
}
schedule for main {
    task_graph {
        deps hybrid;
        trace wall;
        start after_orchestration;
        pools single;
    }
    streams 2;
}
";
    assert_eq!(m.finish(), parsed(text));
}

#[test]
fn builder_module_round_trips_through_text() {
    // Printing a built module and parsing it back gives the same module.
    let built = attention_builder();
    assert_eq!(parsed(&built.to_string()), built);
    assert_eq!(
        ModuleBuilder::new().module(),
        &Module::default(),
        "an empty builder is an empty module"
    );
    assert_eq!(
        ModuleBuilder::new().finish(),
        parsed(""),
        "the empty program"
    );
}

#[test]
fn builder_ragged_by_equals_parser() {
    let text = "
symbol n: i64;
tensor L: i32[n];
axis C = ragged(n, L, (L + 511) / 512);
";
    let mut m = ModuleBuilder::new();
    m.symbol("n", ScalarType::I64);
    m.tensor("L", DType::I32, [e("n")]);
    m.ragged_by("C", e("n"), "L", (e("L") + 511) / 512);
    assert_eq!(m.finish(), parsed(text));
}
