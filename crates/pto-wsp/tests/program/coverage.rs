//! Coverage of output tensors and cancellation, through the Rust API: a workload whose tiles
//! cover 64 of 70 rows of its output is reported naming the six unwritten rows (and one that
//! covers all 64 is not); outputs updated in place, intermediates and inputs are not checked;
//! a run cancelled from another thread ends with `RunError::Cancelled` before its last task,
//! leaves each tile whole, and the program runs again; a program run twice reports what its
//! second run left unwritten, not what the first had written.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use pto_wsp::ir::{Bindings, parse};
use pto_wsp::kernels::{KernelRegistry, TaskContext};
use pto_wsp::{CompileOptions, RunError, compile, lower};

const RELU: &str = "
symbol n: i64;
tensor X: f32[n, 64];
tensor H: f32[n, 64];
tensor Y: f32[n, 64];
tensor A: f32[n, 64];
axis T = dense_dyn(n / 16);
kernel relu(in x: f32[16, 64], out y: f32[16, 64]);
kernel counter(inout a: f32[16, 64]);
workload main() {
    parallel_for t in T {
        task relu(X[t * 16 +: 16, 0 +: 64], H[t * 16 +: 16, 0 +: 64]);
        task relu(H[t * 16 +: 16, 0 +: 64], Y[t * 16 +: 16, 0 +: 64]);
        task counter(A[t * 16 +: 16, 0 +: 64]);
    }
}
";

fn program(n: i64, options: CompileOptions) -> (pto_wsp::Program, Bindings) {
    let module = parse(RELU).unwrap();
    let mut b = Bindings::new();
    b.bind_str(&module, &format!("n={n}")).unwrap();
    (compile(lower(&module).unwrap(), options).unwrap(), b)
}

#[test]
fn an_output_left_partly_unwritten_is_reported_with_its_unwritten_rows() {
    let (mut p, b) = program(70, CompileOptions::default());
    p.execute(&b).unwrap();
    let c = p.coverage();
    // Y only: X is an input, H an intermediate (read by the second relu), A updated in place.
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].tensor, "Y");
    assert_eq!(c[0].bounds, vec![(64, 70), (0, 64)]);
    assert_eq!((c[0].elements, c[0].exact), (6 * 64, true));
    assert!(
        c[0].to_string().contains("[64:70, 0:64] (384 of 4480)"),
        "{}",
        c[0]
    );
}

#[test]
fn a_fully_written_output_and_a_run_without_the_check_report_nothing() {
    let (mut p, b) = program(64, CompileOptions::default());
    p.execute(&b).unwrap();
    assert!(p.coverage().is_empty());
    let off = CompileOptions {
        coverage: false,
        ..CompileOptions::default()
    };
    let (mut p, b) = program(70, off);
    p.execute(&b).unwrap();
    assert!(p.coverage().is_empty());
}

/// `m / 16` tiles of 16 rows written into an output of `n` rows, so two runs of one program
/// have outputs of one shape and write more or fewer of its rows.
const PART: &str = "
symbol n: i64;
symbol m: i64;
tensor X: f32[n, 64];
tensor Y: f32[n, 64];
axis T = dense_dyn(m / 16);
kernel relu(in x: f32[16, 64], out y: f32[16, 64]);
workload main() {
    parallel_for t in T {
        task relu(X[t * 16 +: 16, 0 +: 64], Y[t * 16 +: 16, 0 +: 64]);
    }
}
";

#[test]
fn a_second_run_reports_what_it_left_unwritten_not_what_the_first_wrote() {
    let module = parse(PART).unwrap();
    let mut p = compile(lower(&module).unwrap(), CompileOptions::default()).unwrap();
    let bind = |m: i64| {
        let mut b = Bindings::new();
        b.bind_str(&module, "n=64").unwrap();
        b.bind_str(&module, &format!("m={m}")).unwrap();
        b
    };
    // Each case's unwritten rows, as the tiles leave them: rows `m .. 64`. A run after a full
    // one (48 after 64) and one after a partial one that wrote more (16 after 32).
    for m in [64, 48, 64, 32, 16] {
        p.execute(&bind(m)).unwrap();
        let c = p.coverage();
        if m == 64 {
            assert!(c.is_empty(), "m {m}: {c:?}");
            continue;
        }
        assert_eq!(c.len(), 1, "m {m}: {c:?}");
        assert_eq!(c[0].tensor, "Y");
        assert_eq!(c[0].bounds, vec![(m as u64, 64), (0, 64)], "m {m}");
        assert_eq!(((64 - m as u64) * 64, true), (c[0].elements, c[0].exact));
    }
}

#[test]
fn a_cancelled_run_stops_early_and_the_program_runs_again() {
    // A kernel whose first call meets the test at a barrier (the run is under way), then waits
    // at a second one until the test has cancelled; it counts the tasks that ran.
    let started = Arc::new(Barrier::new(2));
    let cancelled = Arc::new(Barrier::new(2));
    let ran = Arc::new(AtomicUsize::new(0));
    let mut kernels = KernelRegistry::with_builtins();
    {
        let (started, cancelled, ran) = (
            Arc::clone(&started),
            Arc::clone(&cancelled),
            Arc::clone(&ran),
        );
        kernels.register("relu", move |_: &TaskContext<'_>| {
            if ran.fetch_add(1, Ordering::SeqCst) == 0 {
                started.wait();
                cancelled.wait();
            }
            Ok(())
        });
    }
    let options = CompileOptions {
        threads: 1,
        kernels,
        ..CompileOptions::default()
    };
    let (mut p, b) = program(16 * 400, options);
    p.execute_async(&b).unwrap();
    started.wait();
    p.cancel();
    cancelled.wait();
    assert!(p.wait(Duration::from_secs(60)), "the cancelled run ended");
    let r = p.synchronize();
    assert!(matches!(r, Err(RunError::Cancelled)), "{r:?}");
    let done = ran.load(Ordering::SeqCst);
    assert!(
        done < 2 * 400,
        "the run stopped early ({done} of 800 relu tasks ran)"
    );
    // The next run is not cancelled: it runs every task.
    ran.store(1, Ordering::SeqCst);
    p.execute(&b).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1 + 2 * 400);
}
