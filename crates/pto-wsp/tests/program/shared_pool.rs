//! Programs on a shared worker pool, and where `execute` orchestrates: programs compiled with
//! `CompileOptions::pool` start no thread and compute what programs on their own pools compute;
//! a thread count other than the pool's is refused; `execute` orchestrates on the calling thread
//! for a module up to `CALLER_DEPTH` levels deep (with that depth fitting a small stack) and on
//! an orchestration thread beyond it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use pto_wsp::ir::{Bindings, parse};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CALLER_DEPTH, CompileError, CompileOptions, Program, WorkerPool, compile, lower};

/// Overlapping slices of two tensors through the built-in kernels, under every dependency mode.
fn module_text(deps: &str) -> String {
    format!(
        "tensor A: f32[4, 64];\ntensor B: f32[4, 64];\naxis I = dense(4);\naxis J = dense(6);\n\
         kernel inc(inout a: f32[1, ?]);\nkernel acc(in x: f32[1, ?], inout y: f32[1, ?]);\n\
         kernel cp(in x: f32[1, ?], out y: f32[1, ?]);\n\
         workload main() {{\n\
           parallel_for i in I {{\n\
             for_each j in J {{\n\
               task acc(A[i, j * 8 +: 8], B[(i + j) % 4, ((j + 1) % 6) * 8 +: 8]);\n\
               task inc(A[(i + 1) % 4, j * 8 +: 8]);\n\
               if j % 2 == 0 {{ task cp(B[i, j * 8 +: 8], A[(i + 2) % 4, ((j + 3) % 6) * 8 +: 8]); }} else {{ task inc(B[i, 16 +: 8]); }}\n\
             }}\n\
           }}\n\
         }}\n\
         schedule for main {{\n    task_window 5 stall;\n    task_graph {{ deps {deps}; }}\n}}\n"
    )
}

fn registry() -> KernelRegistry {
    let mut r = KernelRegistry::with_builtins();
    for (k, builtin) in [("inc", "counter"), ("acc", "accumulate"), ("cp", "copy")] {
        r.alias(k, builtin).unwrap();
    }
    r
}

fn program(text: &str, device_gen: bool, pool: Option<&Arc<WorkerPool>>) -> Program {
    let plan = lower(&parse(text).unwrap()).unwrap();
    compile(
        plan,
        CompileOptions {
            threads: 2,
            pool: pool.cloned(),
            kernels: registry(),
            device_gen,
            debug_checks: true,
            ..CompileOptions::default()
        },
    )
    .unwrap()
}

/// Every tensor's bytes after a run from the same random contents.
fn run(p: &mut Program) -> Vec<Vec<u8>> {
    let b = Bindings::new();
    p.tensors(&b).unwrap().as_mut().unwrap().fill_random(11);
    p.execute(&b).unwrap();
    let g = p.tensors(&b).unwrap();
    let s = g.as_ref().unwrap();
    (0..s.len() as u32).map(|t| s.bytes(t).to_vec()).collect()
}

/// Threads of this process (Linux: `/proc/self/task`).
fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn programs_on_a_shared_pool_start_no_thread_and_compute_what_their_own_pools_do() {
    let pool = Arc::new(WorkerPool::new(2).unwrap());
    let mut shared = Vec::new();
    let before = threads_now();
    for deps in ["exact", "overlap", "hybrid"] {
        for device_gen in [false, true] {
            shared.push(program(&module_text(deps), device_gen, Some(&pool)));
        }
    }
    assert_eq!(
        threads_now(),
        before,
        "compiling on a shared pool started threads"
    );
    assert_eq!(Arc::strong_count(&pool), 1 + shared.len());
    let mut k = 0;
    for deps in ["exact", "overlap", "hybrid"] {
        for device_gen in [false, true] {
            let mut own = program(&module_text(deps), device_gen, None);
            assert_eq!(
                threads_now(),
                before + 2,
                "a program's own pool has two threads"
            );
            let expect = run(&mut own);
            drop(own);
            let p = &mut shared[k];
            k += 1;
            assert_eq!(p.threads(), 2);
            // Twice: a program's second run on the shared pool starts from the same state.
            for _ in 0..2 {
                assert!(run(p) == expect, "{deps}, device generation {device_gen}");
                assert_eq!(
                    threads_now(),
                    before,
                    "a run on the shared pool started threads"
                );
            }
        }
    }
    drop(shared);
    assert_eq!(Arc::strong_count(&pool), 1);
}

#[test]
fn a_thread_count_other_than_the_shared_pools_is_refused() {
    let pool = Arc::new(WorkerPool::new(2).unwrap());
    let plan = lower(&parse(&module_text("exact")).unwrap()).unwrap();
    let e = compile(
        plan,
        CompileOptions {
            threads: 3,
            pool: Some(Arc::clone(&pool)),
            kernels: registry(),
            ..CompileOptions::default()
        },
    )
    .err()
    .unwrap();
    assert!(matches!(
        e,
        CompileError::PoolThreads {
            threads: 3,
            pool: 2
        }
    ));
    assert_eq!(
        e.to_string(),
        "threads 3 does not match the shared worker pool's 2 threads (give 0, or 2)"
    );
    // 0 takes the pool's count.
    let plan = lower(&parse(&module_text("exact")).unwrap()).unwrap();
    let p = compile(
        plan,
        CompileOptions {
            threads: 0,
            pool: Some(pool),
            kernels: registry(),
            ..CompileOptions::default()
        },
    )
    .unwrap();
    assert_eq!(p.threads(), 2);
}

/// Whether an orchestration thread existed while the last `probe` task ran.
static ORCHESTRATOR_SEEN: AtomicBool = AtomicBool::new(false);

/// One task of kernel `probe` inside `depth` nested ifs: a module `depth` levels deep.
fn nested(depth: usize) -> String {
    format!(
        "tensor A: f32[4];\nkernel probe(out a: f32[4]);\nworkload main() {{ {}task probe(A[0 +: 4]);{} }}\n",
        "if true { ".repeat(depth),
        " }".repeat(depth)
    )
}

/// A kernel that looks for a thread named as the orchestration thread (the OS keeps 15 bytes
/// of a name) among this process's threads while it runs.
fn probe_registry() -> KernelRegistry {
    let mut r = KernelRegistry::new();
    r.register("probe", |_| {
        let seen = std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
            let comm = std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default();
            comm.trim_end() == "pto-wsp-orchest"
        });
        ORCHESTRATOR_SEEN.store(seen, Ordering::SeqCst);
        Ok(())
    });
    r
}

fn pool2() -> Arc<WorkerPool> {
    static P: OnceLock<Arc<WorkerPool>> = OnceLock::new();
    Arc::clone(P.get_or_init(|| Arc::new(WorkerPool::new(2).unwrap())))
}

/// Runs the `depth`-deep module (host run through the bytecode or the expander, or device
/// generation) on a thread of 512 KiB of stack; whether an orchestration thread ran it.
fn orchestrated_elsewhere(depth: usize, host_expander: bool, device_gen: bool) -> bool {
    let plan = lower(&parse(&nested(depth)).unwrap()).unwrap();
    let mut p = compile(
        plan,
        CompileOptions {
            pool: Some(pool2()),
            kernels: probe_registry(),
            host_expander,
            device_gen,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(move || {
            ORCHESTRATOR_SEEN.store(false, Ordering::SeqCst);
            let s = p.execute(&Bindings::new()).unwrap();
            assert_eq!(s.tasks, 1);
            ORCHESTRATOR_SEEN.load(Ordering::SeqCst)
        })
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn execute_orchestrates_on_the_caller_up_to_the_caller_depth() {
    for (host_expander, device_gen) in [(false, false), (true, false), (false, true)] {
        // At the bound, on a 512 KiB thread: the caller's stack holds the walk.
        assert!(
            !orchestrated_elsewhere(CALLER_DEPTH, host_expander, device_gen),
            "expander {host_expander}, device generation {device_gen}"
        );
        // One level deeper: an orchestration thread with the walk's stack.
        assert!(
            orchestrated_elsewhere(CALLER_DEPTH + 1, host_expander, device_gen),
            "expander {host_expander}, device generation {device_gen}"
        );
    }
}
