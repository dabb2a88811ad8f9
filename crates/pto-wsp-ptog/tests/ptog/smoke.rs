use crate::common::*;

#[test]
fn a_graph_runs_its_kernels_in_dependency_order() {
    let text = "\
MC_ALLOC(A, 32, 64, GM, i64[4])
MC_ALLOC(B, 32, 64, GM, i64[4])
TG_BEGIN(G)
    TG_KERNEL(P, put, 2, AIV, 0)
    TG_KERNEL(C, copy_i64, 1, AIC, 0)
    TG_DEPEND(P, C, DATA, A)
    MC_BIND(P, 0, A, 0, 0, out, ROWS)
    MC_BIND(P, 1, -, 7)
    MC_BIND(C, 0, A, 0, 0, in)
    MC_BIND(C, 1, B, 0, 0, out)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    let (dev, report) = run_text(text, traced(1, 2));
    let b: Vec<i64> = dev.store().read("B").unwrap();
    assert_eq!(b, vec![7, 7, 107, 107]);
    assert_eq!(report.instances, 3);
}
