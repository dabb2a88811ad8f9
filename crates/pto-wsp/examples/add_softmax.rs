//! A module built in Rust, compiled for the CPU simulation and run with inputs and outputs:
//! `C = A + B` row tile by row tile, then `D = softmax(C)` per tile, with built-in kernels.
//!
//! Run it with `cargo run --release -p pto-wsp --example add_softmax`.

use pto_wsp::ir::builder::{ModuleBuilder, e, region, span};
use pto_wsp::ir::{AxisKind, Bindings, DType, DepsMode, Dispatch, ScalarType};
use pto_wsp::{CompileOptions, compile, lower};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const COLS: i64 = 64;
    // Declarations: a runtime symbol, four tensors over it, an axis of 16-row tiles and the
    // two kernels (declared with the built-ins' names, so they run the built-ins).
    let mut m = ModuleBuilder::new();
    m.symbol("rows", ScalarType::I64);
    for t in ["A", "B", "C", "D"] {
        m.tensor(t, DType::F32, [e("rows"), COLS.into()]);
    }
    m.axis("T", AxisKind::DenseDyn(e("rows") / 16));
    m.kernel("add")
        .input("a", DType::F32, [Some(16), Some(64)])
        .input("b", DType::F32, [Some(16), Some(64)])
        .output("c", DType::F32, [Some(16), Some(64)]);
    m.kernel("softmax")
        .input("x", DType::F32, [Some(16), Some(64)])
        .output("y", DType::F32, [Some(16), Some(64)]);
    // The workload: per tile, an add then a softmax of its result. The dependency between
    // them is not written: it is inferred from the regions (C is written, then read).
    m.workload("main", |w| {
        w.parallel_for("t", "T", |w| {
            let tile = |name: &str| region(name, [span(e("t") * 16, 16), span(0, COLS)]).into();
            w.task("add", [tile("A"), tile("B"), tile("C")]);
            w.task("softmax", [tile("C"), tile("D")]);
        });
    });
    // The schedule: how the tasks run, not what they compute.
    m.schedule("main", |s| {
        s.dispatch(Dispatch::RoundRobin(2));
        s.deps(DepsMode::Exact);
    });
    let module = m.finish();

    // Validate and lower, compile for the CPU simulation (built-in kernels), bind, fill the
    // inputs, run.
    let mut program = compile(lower(&module)?, CompileOptions::default())?;
    let rows = 256usize;
    let bindings = Bindings::new().symbol("rows", rows as i64);
    let a: Vec<f32> = (0..rows * 64).map(|i| (i % 7) as f32 * 0.5).collect();
    let b: Vec<f32> = (0..rows * 64).map(|i| (i % 5) as f32 * -0.25).collect();
    {
        let mut tensors = program.tensors(&bindings)?;
        let store = tensors.as_mut().expect("allocated by tensors()");
        store.write("A", &a)?;
        store.write("B", &b)?;
    }
    let stats = program.execute(&bindings)?;
    let d: Vec<f32> = program
        .tensors(&bindings)?
        .as_ref()
        .expect("allocated")
        .read("D")?;

    // Check against a plain f64 computation.
    let mut worst = 0.0f64;
    for r in 0..rows {
        let c: Vec<f64> = (0..64)
            .map(|j| f64::from(a[r * 64 + j]) + f64::from(b[r * 64 + j]))
            .collect();
        let max = c.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = c.iter().map(|x| (x - max).exp()).sum();
        for j in 0..64 {
            let want = (c[j] - max).exp() / sum;
            worst = worst.max((f64::from(d[r * 64 + j]) - want).abs() / want);
        }
    }
    println!(
        "ran {} tasks on {} threads; softmax(A + B) against f64: max relative error {worst:.2e}",
        stats.tasks,
        program.threads()
    );
    if worst > 1e-5 {
        return Err(format!("relative error {worst:e} is above 1e-5").into());
    }
    Ok(())
}
