//! Property tests of the text format: every printed module parses back to an equal module, and
//! printing is idempotent.
//!
//! The generated modules are syntactically representable but not necessarily valid (names need
//! not resolve): identifiers avoid reserved words but include contextual keywords (`f16`,
//! `dispatch`, `below`, ...), literals include the extremes, and schedules use every item kind
//! with nested dispatch thresholds.

use proptest::prelude::*;
use proptest::sample::select;
use pto_wsp_ir::parse::{is_reserved, parse_expr};
use pto_wsp_ir::*;

fn ident() -> impl Strategy<Value = Ident> + Clone {
    prop_oneof![
        select(&["a", "b", "x1", "_t", "seq", "Q", "row", "pos"][..]).prop_map(str::to_string),
        // Contextual keywords are ordinary identifiers.
        select(
            &[
                "f16",
                "bool",
                "i64",
                "u64",
                "vector",
                "cube",
                "any",
                "dispatch",
                "below",
                "threshold",
                "work_steal",
                "cycles",
                "none",
                "fifo",
                "immediate",
                "executors",
                "stream_by",
                "task_graph",
                "deps",
                "exact",
            ][..]
        )
        .prop_map(str::to_string),
        "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_filter("reserved", |s| !is_reserved(s)),
    ]
    .prop_map(Ident::new)
}

fn expr() -> impl Strategy<Value = Expr> + Clone {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Expr::Int),
        select(&[i64::MIN, i64::MAX, 0, -1, 1][..]).prop_map(Expr::Int),
        any::<u64>().prop_map(Expr::UInt),
        select(&[u64::MAX, 0][..]).prop_map(Expr::UInt),
        any::<bool>().prop_map(Expr::Bool),
        any::<f64>()
            .prop_filter("finite", |v| v.is_finite())
            .prop_map(Expr::from),
        select(&[0.0, -0.0, 1.0, -0.5, 1e-6, f64::MAX, f64::MIN_POSITIVE][..]).prop_map(Expr::from),
        ident().prop_map(Expr::Name),
        ident().prop_map(Expr::Name),
    ];
    leaf.prop_recursive(6, 40, 3, |inner| {
        prop_oneof![
            (select(&[UnOp::Neg, UnOp::Not][..]), inner.clone())
                .prop_map(|(op, e)| Expr::Unary(op, Box::new(e))),
            (select(BinOp::ALL), inner.clone(), inner.clone()).prop_map(|(op, a, b)| a.bin(op, b)),
            (select(BinOp::ALL), inner.clone(), inner.clone()).prop_map(|(op, a, b)| a.bin(op, b)),
            (inner.clone(), inner.clone(), inner).prop_map(|(c, a, b)| Expr::ternary(c, a, b)),
        ]
    })
}

fn small_expr() -> impl Strategy<Value = Expr> + Clone {
    prop_oneof![
        any::<i64>().prop_map(Expr::Int),
        ident().prop_map(Expr::Name),
        (ident(), any::<i64>()).prop_map(|(a, b)| Expr::name(a) * b),
        expr(),
    ]
}

fn region() -> impl Strategy<Value = Region> {
    let dim = (small_expr(), proptest::option::of(small_expr()))
        .prop_map(|(start, size)| RegionDim { start, size });
    (ident(), prop::collection::vec(dim, 0..4)).prop_map(|(tensor, dims)| Region { tensor, dims })
}

fn arg() -> impl Strategy<Value = Arg> {
    prop_oneof![
        region().prop_map(Arg::Region),
        small_expr().prop_map(Arg::Scalar)
    ]
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        (ident(), prop::collection::vec(arg(), 0..4))
            .prop_map(|(kernel, args)| StmtKind::Task(TaskStmt { kernel, args })),
        (ident(), small_expr()).prop_map(|(slot, value)| StmtKind::SlotSet { slot, value }),
        (ident(), ident(), prop::collection::vec(small_expr(), 0..3)).prop_map(
            |(slot, tensor, index)| StmtKind::SlotLoad {
                slot,
                tensor,
                index
            }
        ),
        (ident(), prop::collection::vec(small_expr(), 0..3))
            .prop_map(|(workload, args)| StmtKind::Call { workload, args }),
        (ident(), small_expr()).prop_map(|(channel, value)| StmtKind::Send { channel, value }),
        small_expr().prop_map(|cond| StmtKind::Break { cond }),
    ]
    .prop_map(Stmt::new);
    leaf.prop_recursive(4, 24, 3, |inner| {
        let body = prop::collection::vec(inner, 0..3);
        let vars = prop::collection::vec(ident(), 1..3);
        prop_oneof![
            (
                select(&[LoopOrder::Parallel, LoopOrder::Sequential][..]),
                vars.clone(),
                ident(),
                body.clone()
            )
                .prop_map(|(order, vars, axis, body)| StmtKind::Loop {
                    order,
                    vars,
                    axis,
                    body
                }),
            (vars, ident(), body.clone()).prop_map(|(vars, axis, body)| StmtKind::Select {
                vars,
                axis,
                body
            }),
            (small_expr(), body.clone(), body.clone()).prop_map(|(cond, then_body, else_body)| {
                StmtKind::Cond {
                    cond,
                    then_body,
                    else_body,
                }
            }),
            (small_expr(), small_expr(), body.clone())
                .prop_map(|(cond, max, body)| StmtKind::While { cond, max, body }),
            body.clone().prop_map(StmtKind::Combine),
            body.clone().prop_map(StmtKind::Sequential),
            (ident(), ident(), body).prop_map(|(channel, var, body)| StmtKind::Consume {
                channel,
                var,
                body
            }),
        ]
        .prop_map(Stmt::new)
    })
}

fn body() -> impl Strategy<Value = Vec<Stmt>> {
    prop::collection::vec(stmt(), 0..4)
}

fn scalar_type() -> impl Strategy<Value = ScalarType> {
    select(ScalarType::ALL)
}

fn kernel() -> impl Strategy<Value = KernelDecl> {
    let tile = (
        select(&[Access::In, Access::Out, Access::InOut][..]),
        select(DType::ALL),
        prop::collection::vec(proptest::option::of(any::<u64>()), 0..3),
    )
        .prop_map(|(access, dtype, shape)| ParamKind::Tile {
            access,
            dtype,
            shape,
        });
    let param = (
        ident(),
        prop_oneof![tile, select(ParamType::ALL).prop_map(ParamKind::Scalar)],
    )
        .prop_map(|(name, kind)| KernelParam { name, kind });
    let tiers = (
        prop::collection::vec((small_expr(), ident()), 0..3),
        ident(),
    )
        .prop_map(|(cases, default)| Tiers { cases, default });
    (
        ident(),
        prop::collection::vec(param, 0..4),
        select(ExecPool::ALL),
        proptest::option::of(tiers),
    )
        .prop_map(|(name, params, pool, tiers)| KernelDecl {
            name,
            params,
            pool,
            tiers,
            body: None,
        })
}

fn axis_kind() -> impl Strategy<Value = AxisKind> {
    prop_oneof![
        small_expr().prop_map(AxisKind::Dense),
        small_expr().prop_map(AxisKind::DenseDyn),
        (small_expr(), ident(), proptest::option::of(small_expr())).prop_map(
            |(outer, lengths, per_row)| AxisKind::Ragged {
                outer,
                lengths,
                per_row
            }
        ),
        (small_expr(), ident(), ident()).prop_map(|(outer, indptr, indices)| AxisKind::Sparse {
            outer,
            indptr,
            indices
        }),
    ]
}

fn workload() -> impl Strategy<Value = Workload> {
    (
        ident(),
        prop::collection::vec((ident(), scalar_type()), 0..3),
        body(),
    )
        .prop_map(|(name, params, body)| Workload {
            name,
            params,
            body,
            loc: Loc::NONE,
        })
}

fn pipeline() -> impl Strategy<Value = Pipeline> {
    let channel = (ident(), any::<u64>()).prop_map(|(name, depth)| Channel { name, depth });
    let chans = prop::collection::vec(ident(), 0..3);
    let process =
        (ident(), chans.clone(), chans, body()).prop_map(|(name, consumes, produces, body)| {
            Process {
                name,
                consumes,
                produces,
                body,
                loc: Loc::NONE,
            }
        });
    (
        ident(),
        prop::collection::vec(channel, 0..3),
        prop::collection::vec(process, 0..3),
    )
        .prop_map(|(name, channels, processes)| Pipeline {
            name,
            channels,
            processes,
            loc: Loc::NONE,
        })
}

fn levels<T: std::fmt::Debug + Clone>(
    choice: impl Strategy<Value = T> + Clone,
) -> impl Strategy<Value = Levels<T>> {
    (
        small_expr(),
        prop::collection::vec((any::<i64>(), choice.clone()), 0..3),
        choice,
    )
        .prop_map(|(metric, levels, otherwise)| Levels {
            metric,
            levels,
            otherwise: Box::new(otherwise),
        })
}

fn dispatch() -> impl Strategy<Value = Dispatch> {
    let leaf = prop_oneof![
        any::<u64>().prop_map(Dispatch::RoundRobin),
        small_expr().prop_map(Dispatch::Affinity),
        small_expr().prop_map(Dispatch::Hash),
        prop::collection::vec(any::<u64>(), 0..4).prop_map(Dispatch::StaticPartition),
        Just(Dispatch::WorkSteal),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        levels(inner).prop_map(Dispatch::Threshold)
    })
}

fn task_graph_item() -> impl Strategy<Value = TaskGraphItem> {
    prop_oneof![
        select(
            &[
                DepsMode::Exact,
                DepsMode::Overlap,
                DepsMode::Explicit,
                DepsMode::Hybrid
            ][..]
        )
        .prop_map(TaskGraphItem::Deps),
        prop_oneof![
            Just(ReadyPolicy::Fifo),
            Just(ReadyPolicy::WorkSteal),
            small_expr().prop_map(ReadyPolicy::Priority),
        ]
        .prop_map(TaskGraphItem::Ready),
        prop_oneof![
            Just(StartPolicy::AfterOrchestration),
            Just(StartPolicy::Immediate),
            any::<u64>().prop_map(StartPolicy::Threshold),
        ]
        .prop_map(TaskGraphItem::Start),
        prop_oneof![
            Just(TracePolicy::None),
            Just(TracePolicy::Wall),
            (
                proptest::option::of(small_expr()),
                proptest::option::of(Just(Ident::new("ascend910b")))
            )
                .prop_map(|(e, m)| TracePolicy::Cycles(e, m)),
        ]
        .prop_map(TaskGraphItem::Trace),
        select(&[PoolsPolicy::Single, PoolsPolicy::ByExecUnit][..]).prop_map(TaskGraphItem::Pools),
    ]
}

fn schedule_item() -> impl Strategy<Value = ScheduleItemKind> {
    prop_oneof![
        any::<u64>().prop_map(ScheduleItemKind::Executors),
        dispatch().prop_map(ScheduleItemKind::Dispatch),
        dispatch().prop_map(ScheduleItemKind::Dispatch),
        any::<u64>().prop_map(ScheduleItemKind::Streams),
        small_expr().prop_map(ScheduleItemKind::StreamBy),
        prop_oneof![
            Just(Timing::Immediate),
            any::<u64>().prop_map(Timing::Batched),
            any::<u64>().prop_map(Timing::Interleaved),
            any::<u64>().prop_map(Timing::RateLimit),
        ]
        .prop_map(ScheduleItemKind::Timing),
        prop::collection::vec(task_graph_item(), 0..6).prop_map(ScheduleItemKind::TaskGraph),
        (
            any::<u64>(),
            select(&[WindowMode::Stall, WindowMode::Abort, WindowMode::Benchmark][..])
        )
            .prop_map(|(n, m)| ScheduleItemKind::TaskWindow(n, m)),
        (
            any::<u64>(),
            select(&[GateScope::Global, GateScope::PerStream, GateScope::PerPool][..])
        )
            .prop_map(|(n, s)| ScheduleItemKind::PipelineDepth(n, s)),
        any::<u64>().prop_map(ScheduleItemKind::BatchDeps),
        levels(select(ExecPool::ALL)).prop_map(ScheduleItemKind::DispatchThreshold),
    ]
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        ident(),
        prop::collection::vec(schedule_item().prop_map(ScheduleItem::new), 0..8),
    )
        .prop_map(|(target, items)| Schedule {
            target,
            items,
            loc: Loc::NONE,
        })
}

fn module() -> impl Strategy<Value = Module> {
    (
        prop::collection::vec((ident(), scalar_type()), 0..3),
        prop::collection::vec((ident(), scalar_type()), 0..3),
        prop::collection::vec(
            (
                ident(),
                select(DType::ALL),
                prop::collection::vec(small_expr(), 0..3),
            ),
            0..3,
        ),
        prop::collection::vec((ident(), axis_kind()), 0..3),
        prop::collection::vec(kernel(), 0..3),
        prop::collection::vec(workload(), 0..3),
        prop::collection::vec(pipeline(), 0..2),
        proptest::option::of(schedule()),
    )
        .prop_map(
            |(symbols, slots, tensors, axes, kernels, workloads, pipelines, schedule)| Module {
                symbols: symbols
                    .into_iter()
                    .map(|(name, ty)| SymbolDecl { name, ty })
                    .collect(),
                slots: slots
                    .into_iter()
                    .map(|(name, ty)| SlotDecl { name, ty })
                    .collect(),
                tensors: tensors
                    .into_iter()
                    .map(|(name, dtype, shape)| TensorDecl { name, dtype, shape })
                    .collect(),
                axes: axes
                    .into_iter()
                    .map(|(name, kind)| AxisDecl { name, kind })
                    .collect(),
                kernels,
                workloads,
                pipelines,
                schedule,
                ..Module::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(1500)))]

    #[test]
    fn printed_modules_parse_back_equal(m in module()) {
        let text = m.to_string();
        match parse(&text) {
            Ok(back) => prop_assert_eq!(back, m, "printed text:\n{}", text),
            Err(e) => prop_assert!(false, "{}\nprinted text:\n{}", e, text),
        }
    }

    #[test]
    fn printing_is_idempotent(m in module()) {
        let once = m.to_string();
        let back = parse(&once).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back.to_string(), once);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(3000)))]

    #[test]
    fn printed_expressions_parse_back_equal(e in expr()) {
        let text = e.to_string();
        prop_assert_eq!(parse_expr(&text), Ok(e), "printed text: {}", text);
    }
}

/// Token soup: sequences of words, literals and punctuation of the format, so that random input
/// gets past the lexer and deep into the parser.
fn token_soup() -> impl Strategy<Value = String> {
    let token = select(
        &[
            "symbol",
            "slot",
            "tensor",
            "axis",
            "kernel",
            "workload",
            "pipeline",
            "channel",
            "process",
            "schedule",
            "for",
            "in",
            "out",
            "tiers",
            "else",
            "if",
            "parallel_for",
            "for_each",
            "select",
            "combine",
            "sequential",
            "task",
            "set",
            "load",
            "call",
            "send",
            "consume",
            "as",
            "consumes",
            "produces",
            "true",
            "min",
            "dense",
            "ragged",
            "sparse",
            "f16",
            "i64",
            "bool",
            "vector",
            "dispatch",
            "threshold",
            "below",
            "task_graph",
            "deps",
            "exact",
            "ready",
            "priority",
            "trace",
            "cycles",
            "round_robin",
            "a",
            "b",
            "0",
            "7u",
            "9223372036854775808",
            "-",
            "!",
            "+",
            "*",
            "<",
            "==",
            "&&",
            "||",
            "?",
            ":",
            "+:",
            "=>",
            "=",
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            ",",
            ";",
            "@",
        ][..],
    );
    prop::collection::vec(token, 0..60).prop_map(|t| t.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(2000)))]

    #[test]
    fn any_token_soup_parses_or_fails_cleanly(text in token_soup()) {
        match parse(&text) {
            Ok(m) => prop_assert_eq!(parse(&m.to_string()), Ok(m)),
            // Errors point inside the text, at a character boundary.
            Err(e) => {
                let (start, end) = (e.loc.start as usize, e.loc.end as usize);
                prop_assert!(start <= end && end <= text.len(), "{:?} in {:?}", e, text);
                prop_assert!(text.is_char_boundary(start) && text.is_char_boundary(end));
                prop_assert!(!e.message.is_empty());
            }
        }
    }
}
