//! Running every executor and checking it against the reference expander.

use pto_wsp_bytecode::{
    EncodeOptions, ExecutorConfig, Interpreter, Program, RunSummary, Task, TaskSink,
};
use pto_wsp_ir::{
    Bindings, ExpandError, ExpandOptions, ExpandedTask, Expansion, Module, OrderEdge,
};
use std::collections::BTreeSet;
use std::ops::{ControlFlow, Range};

/// What the tests encode from: `m` resolved (as a front end does once), then encoded; either
/// step's error as its message.
pub(crate) fn encode(m: &Module, options: &EncodeOptions) -> Result<Vec<u8>, String> {
    let resolved = pto_wsp_ir::resolve(m, &Default::default()).map_err(|e| e.to_string())?;
    pto_wsp_bytecode::encode(&resolved, options).map_err(|e| e.to_string())
}

/// The oracle: `m` resolved, then expanded by the reference expander.
pub(crate) fn expand(
    m: &Module,
    b: &Bindings,
    options: &ExpandOptions,
) -> Result<Expansion, ExpandError> {
    pto_wsp_ir::expand(&pto_wsp_ir::resolve(m, &Default::default())?, b, options)
}

/// Something an executor's sink saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Task(u32),
    Begin(Range<u32>, u32),
    Order(OrderEdge),
}

/// Everything one executor generated.
#[derive(Default, Debug)]
pub(crate) struct Recorded {
    pub(crate) tasks: Vec<(u32, ExpandedTask)>,
    pub(crate) events: Vec<Event>,
    /// Tasks handed out with their regions as boxes ([`check_boxes`]).
    pub(crate) boxed: usize,
}

/// The task's boxes ([`Task::io`]) are its regions, converted by the IR's own checked
/// constructor, in order; `None` only when some region could not be converted. Whether it gave
/// boxes.
pub(crate) fn check_boxes(task: &Task<'_>) -> bool {
    use pto_wsp_ir::task_io::{Region, TaskIo};
    let want: Result<Vec<TaskIo>, _> = task
        .regions()
        .map(|r| Region::new(r.tensor, r.start, r.size).map(|g| TaskIo::new(g, r.access)))
        .collect();
    match (task.io(), want) {
        (Some(io), Ok(want)) => {
            assert_eq!(io, &want[..], "the boxes of task #{}", task.index);
            true
        }
        (Some(io), Err(e)) => panic!(
            "task #{}: boxes {io:?} of a region that fails: {e}",
            task.index
        ),
        (None, _) => false,
    }
}

impl TaskSink for Recorded {
    fn wants_boxes(&self) -> bool {
        true
    }
    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()> {
        self.boxed += usize::from(check_boxes(task));
        self.tasks.push((task.index, task.to_expanded()));
        self.events.push(Event::Task(task.index));
        ControlFlow::Continue(())
    }
    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        self.events.push(Event::Begin(before, after_start));
    }
    fn order(&mut self, edge: OrderEdge) {
        self.events.push(Event::Order(edge));
    }
}

/// Runs executor `config` over `prog` with `bindings`.
pub(crate) fn run_one(
    prog: &Program,
    bindings: &Bindings,
    config: ExecutorConfig,
) -> Result<(Recorded, RunSummary), String> {
    let bound = prog.bind(bindings).map_err(|e| e.to_string())?;
    let mut interp = Interpreter::new(prog, &bound, config).map_err(|e| e.to_string())?;
    // A run for a sink that takes no boxes first (the interpreter then keeps only its
    // coordinates): the recorded run after it, on the same interpreter, must still hand out
    // every task's boxes right.
    let _ = interp.run(&mut |_: &Task<'_>| {});
    let mut rec = Recorded::default();
    let summary = interp.run(&mut rec).map_err(|e| e.to_string())?;
    Ok((rec, summary))
}

/// The owner of a task under `executors`.
pub(crate) fn owner(t: &ExpandedTask, index: u32, executors: u64) -> u32 {
    match t.target {
        Some(x) => (u64::from(x) % executors) as u32,
        None => (u64::from(index) % executors) as u32,
    }
}

/// Checks one executor's events against the expansion: the own tasks are the expander's tasks
/// of that owner in order; every announcement / edge is the expander's; every own task is inside
/// exactly the open announcements whose edge covers it.
pub(crate) fn check_executor(
    x: &Expansion,
    me: u32,
    executors: u64,
    rec: &Recorded,
) -> BTreeSet<(u32, u32, u32, u32)> {
    let expected: Vec<(u32, &ExpandedTask)> = x
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (i as u32, t))
        .filter(|(i, t)| owner(t, *i, executors) == me)
        .collect();
    assert_eq!(rec.tasks.len(), expected.len(), "executor {me}: task count");
    for ((gi, got), (ei, exp)) in rec.tasks.iter().zip(&expected) {
        assert_eq!(gi, ei, "executor {me}: index");
        assert_eq!(got, *exp, "executor {me}: task #{gi}");
    }
    let edges: BTreeSet<(u32, u32, u32, u32)> = x
        .order
        .iter()
        .map(|e| (e.before.start, e.before.end, e.after.start, e.after.end))
        .collect();
    let mut open: Vec<(Range<u32>, u32)> = Vec::new();
    let mut reported = BTreeSet::new();
    for ev in &rec.events {
        match ev {
            Event::Begin(b, s) => open.push((b.clone(), *s)),
            Event::Order(e) => {
                let key = (e.before.start, e.before.end, e.after.start, e.after.end);
                assert!(
                    edges.contains(&key),
                    "executor {me}: edge {e:?} is not the expander's"
                );
                let i = open
                    .iter()
                    .rposition(|(b, s)| *b == e.before && *s == e.after.start)
                    .unwrap_or_else(|| {
                        panic!("executor {me}: edge {e:?} closed without announcement")
                    });
                open.remove(i);
                reported.insert(key);
            }
            Event::Task(t) => {
                // Every open announcement covers t; every expander edge covering t is open.
                for (b, s) in &open {
                    let e = x
                        .order
                        .iter()
                        .find(|e| e.before == *b && e.after.start == *s)
                        .unwrap_or_else(|| {
                            panic!("executor {me}: announced {b:?}->{s} is not an edge")
                        });
                    assert!(
                        e.after.contains(t),
                        "executor {me}: task {t} outside open edge {e:?}"
                    );
                }
                for e in x.order.iter().filter(|e| e.after.contains(t)) {
                    assert!(
                        open.iter()
                            .any(|(b, s)| *b == e.before && *s == e.after.start),
                        "executor {me}: task {t} emitted without its edge {e:?} announced"
                    );
                }
            }
        }
    }
    assert!(
        open.is_empty(),
        "executor {me}: announcements left open: {open:?}"
    );
    // Every edge touching an own task is reported.
    let own: BTreeSet<u32> = rec.tasks.iter().map(|(i, _)| *i).collect();
    for e in &x.order {
        if own.range(e.before.clone()).next().is_some()
            || own.range(e.after.clone()).next().is_some()
        {
            let key = (e.before.start, e.before.end, e.after.start, e.after.end);
            assert!(
                reported.contains(&key),
                "executor {me}: edge {e:?} touches its tasks but was not reported"
            );
        }
    }
    reported
}

/// Encodes `module`, decodes it, and checks every executor (and the all-tasks generator)
/// against the expander under `bindings`. Returns the expansion.
pub(crate) fn check_module(
    module: &Module,
    bindings: &Bindings,
    executors: Option<u64>,
) -> Expansion {
    let bytes = encode(module, &EncodeOptions::default()).unwrap_or_else(|e| panic!("encode: {e}"));
    let prog = Program::decode(&bytes).unwrap_or_else(|e| panic!("decode: {e}"));
    check_program(&prog, module, bindings, executors)
}

/// [`check_module`] on an already decoded program.
pub(crate) fn check_program(
    prog: &Program,
    module: &Module,
    bindings: &Bindings,
    executors: Option<u64>,
) -> Expansion {
    let x = expand(
        module,
        bindings,
        &ExpandOptions {
            limit: None,
            executors,
        },
    )
    .unwrap_or_else(|e| panic!("expand: {e}"));
    let e = x.executors;
    // All tasks from one generator.
    let (all, summary) = run_one(
        prog,
        bindings,
        ExecutorConfig {
            executor: None,
            executors,
            owners: None,
            max_steps: None,
        },
    )
    .unwrap_or_else(|err| panic!("all-tasks run: {err}"));
    assert_eq!(summary.total as usize, x.tasks.len());
    let got: Vec<&ExpandedTask> = all.tasks.iter().map(|(_, t)| t).collect();
    let want: Vec<&ExpandedTask> = x.tasks.iter().collect();
    assert_eq!(got, want, "all-tasks generator differs from the expander");
    let mut union = BTreeSet::new();
    let mut seen = 0usize;
    // Every executor (the first 64 when there are more).
    for me in 0..e.min(64) as u32 {
        let (rec, summary) = run_one(
            prog,
            bindings,
            ExecutorConfig {
                executor: Some(me),
                executors,
                owners: None,
                max_steps: None,
            },
        )
        .unwrap_or_else(|err| panic!("executor {me}: {err}"));
        assert_eq!(summary.tasks as usize, rec.tasks.len());
        assert_eq!(
            summary.total as usize,
            x.tasks.len(),
            "executor {me}: global count"
        );
        seen += rec.tasks.len();
        union.extend(check_executor(&x, me, e, &rec));
    }
    if e <= 64 {
        assert_eq!(seen, x.tasks.len(), "union of executors");
        let edges: BTreeSet<(u32, u32, u32, u32)> = x
            .order
            .iter()
            .map(|e| (e.before.start, e.before.end, e.after.start, e.after.end))
            .collect();
        assert_eq!(union, edges, "union of reported edges");
    }
    // Fewer generators than executors (`owners`: a device-generation run on 2 or 3 threads):
    // generator `me` gets the tasks whose target is `me` modulo the generators, targets still
    // computed over the executors; together they generate every task once.
    for owners in [2u32, 3] {
        let mut seen = 0usize;
        for me in 0..owners {
            let (rec, _) = run_one(
                prog,
                bindings,
                ExecutorConfig {
                    executor: Some(me),
                    executors,
                    owners: Some(owners),
                    max_steps: None,
                },
            )
            .unwrap_or_else(|err| panic!("generator {me} of {owners}: {err}"));
            seen += rec.tasks.len();
            check_executor(&x, me, u64::from(owners), &rec);
        }
        assert_eq!(seen, x.tasks.len(), "union of {owners} generators");
    }
    x
}
