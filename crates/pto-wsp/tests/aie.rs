//! The AIE back end's functional simulation against the CPU simulation: each example's placed
//! design runs on threads (one per core, DMA streams, links, host transfers) from the same seeded
//! inputs as `cpu_sim`, and every tensor the design writes to the host must equal the CPU
//! simulation's bit for bit (same kernels, same per-task arithmetic: only placement, routing and
//! data movement differ, which is what this checks). Each is also compared with an independent
//! `f64` reference (`y = 3x`, `silu`, `A @ B`), and the design's structure is checked: cores,
//! shared and DMA fifos, broadcasts and joins where the spatial map asks for them.

use half::bf16;
use pto_wsp::emitters::Input;
use pto_wsp::emitters::aie::design::{AieDesign, FifoKind};
use pto_wsp::emitters::aie::{map, model, sim};
use pto_wsp::ir::{Bindings, Module, parse};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::{CompileOptions, compile, lower};

fn load(name: &str) -> (Module, Bindings) {
    let path = format!(
        "{}/../../examples/aie/{name}.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let module = parse(&text).unwrap_or_else(|e| panic!("{e:?}"));
    let mut b = Bindings::new();
    for line in text.lines() {
        if let Some(spec) = line.strip_prefix("//@ bind ") {
            b.bind_str(&module, spec.trim()).unwrap();
        }
    }
    (module, b)
}

fn design(module: &Module, b: &Bindings) -> AieDesign {
    let plan = lower(module).unwrap();
    let input = Input {
        resolved: plan.resolved(),
        source: None,
        bindings: b,
    };
    map::map(&input).unwrap_or_else(|e| panic!("{e}"))
}

/// The seeded inputs, the CPU simulation's result and the AIE simulation's result.
fn both(
    name: &str,
    seed: u64,
) -> (
    AieDesign,
    TensorStore,
    TensorStore,
    TensorStore,
    sim::SimStats,
) {
    let (module, b) = load(name);
    let d = design(&module, &b);
    let mut input = TensorStore::new(&module, &b).unwrap();
    input.fill_random(seed);
    let mut kernels = KernelRegistry::with_builtins();
    pto_wsp::kernels::lang::register_bodies(&module, &mut kernels);
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    *p.tensors(&b).unwrap() = Some(input.clone());
    p.execute(&b).unwrap();
    let cpu = p.tensors(&b).unwrap().as_ref().unwrap().clone();
    let mut aie = input.clone();
    let stats = sim::simulate(&d, &module, &mut aie).unwrap_or_else(|e| panic!("{name}: {e}"));
    (d, input, cpu, aie, stats)
}

fn same_bits(cpu: &TensorStore, aie: &TensorStore, name: &str) {
    let t = cpu.index_of(name).unwrap();
    assert_eq!(
        cpu.bytes(t),
        aie.bytes(t),
        "tensor `{name}` differs between cpu_sim and the AIE simulation"
    );
}

fn f32s(s: &TensorStore, name: &str) -> Vec<f32> {
    s.read::<f32>(name).unwrap()
}

#[test]
fn aie_sim_vector_scalar_matches_cpu_sim_and_three_x() {
    let (d, input, cpu, aie, stats) = both("vector_scalar", 11);
    assert_eq!(d.cores.len(), 4);
    assert_eq!(stats.calls, 16);
    same_bits(&cpu, &aie, "Y");
    let x = f32s(&input, "X");
    let y = f32s(&aie, "Y");
    for (a, b) in x.iter().zip(&y) {
        let want = 3.0 * f64::from(*a);
        assert!(
            (f64::from(*b) - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{b} vs {want}"
        );
    }
}

#[test]
fn aie_sim_pipeline3_matches_cpu_sim_and_silu() {
    let (d, input, cpu, aie, stats) = both("pipeline3", 5);
    assert_eq!(d.cores.len(), 3);
    assert_eq!(stats.calls, 48);
    let shared = d
        .fifos
        .iter()
        .filter(|f| matches!(f.kind, FifoKind::Shared { .. }))
        .count();
    assert_eq!(
        shared, 2,
        "the two channels are shared-memory fifos between neighbours"
    );
    assert!(d.fifos.iter().any(|f| f.name == "loaded" && f.depth == 2));
    same_bits(&cpu, &aie, "Dst");
    let x = f32s(&input, "Src");
    let y = f32s(&aie, "Dst");
    for (a, b) in x.iter().zip(&y) {
        let a = f64::from(*a);
        let want = a / (1.0 + (-a).exp());
        assert!(
            (f64::from(*b) - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{b} vs {want}"
        );
    }
}

#[test]
fn aie_sim_gemm_4x4_matches_cpu_sim_and_a_times_b() {
    let (d, input, cpu, aie, stats) = both("gemm_4x4", 3);
    assert_eq!(d.cores.len(), 16);
    assert_eq!(stats.calls, 16 * 5);
    let bcast = d.fifos.iter().filter(|f| f.consumers.len() == 4).count();
    assert_eq!(
        bcast, 8,
        "A along each grid row and B down each grid column"
    );
    let joins = d.links.iter().filter(|l| l.ins.len() == 4).count();
    assert_eq!(joins, 4, "C joined per column in the memory tile");
    same_bits(&cpu, &aie, "C");
    let a: Vec<f64> = input
        .read::<bf16>("A")
        .unwrap()
        .iter()
        .map(|v| f64::from(v.to_f32()))
        .collect();
    let b: Vec<f64> = input
        .read::<bf16>("B")
        .unwrap()
        .iter()
        .map(|v| f64::from(v.to_f32()))
        .collect();
    let c = f32s(&aie, "C");
    for i in 0..128 {
        for j in 0..128 {
            let want: f64 = (0..128).map(|k| a[i * 128 + k] * b[k * 128 + j]).sum();
            let got = f64::from(c[i * 128 + j]);
            let mag: f64 = (0..128)
                .map(|k| (a[i * 128 + k] * b[k * 128 + j]).abs())
                .sum();
            assert!(
                (got - want).abs() <= 1e-5 * mag.max(1.0),
                "C[{i}, {j}] = {got}, want {want}"
            );
        }
    }
}

#[test]
fn the_model_names_the_slowest_stage() {
    let (module, b) = load("pipeline3");
    let d = design(&module, &b);
    let t = model::model(&d, &module);
    let slow = &t.actors[t.bottleneck];
    assert!(slow.name.contains("computer"), "{}", slow.name);
    // silu is the costliest of the three kernels; every stage sees 16 objects.
    for a in &t.actors {
        assert!(a.busy <= slow.busy);
    }
    let per: Vec<u64> = t.actors.iter().map(|a| a.per_item()).collect();
    // One chain: Src -> loader -> computer -> storer -> Dst.
    let chain: u64 = per.iter().sum();
    assert_eq!(t.total, slow.busy + chain - slow.per_item());
}
