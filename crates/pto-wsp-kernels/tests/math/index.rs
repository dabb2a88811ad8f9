//! `gather_rows`, `scatter_add_rows`, `bucket_by_index`, `add_scalar` against plain loops.

use super::*;

const T: &str = "tensor S: f32[6, 3];\ntensor I: i32[4];\ntensor J: i64[2, 4];\n\
                 tensor D: f32[4, 3];\ntensor C: i32[5];\ntensor L: i64[5, 4];";

#[test]
fn gather_and_scatter_move_rows_by_index() {
    let reg = KernelRegistry::with_builtins();
    let mut s = store(T, 7);
    let idx = [5i32, 0, 5, 2];
    s.write("I", &idx).unwrap();
    let src = get(&s, "S");
    run(
        &reg,
        &s,
        "gather_rows",
        &[],
        &[
            whole(&s, "S", Access::In),
            whole(&s, "I", Access::In),
            whole(&s, "D", Access::Out),
        ],
    )
    .unwrap();
    let d = get(&s, "D");
    for (r, &i) in idx.iter().enumerate() {
        for c in 0..3 {
            assert_eq!(d[r * 3 + c], src[i as usize * 3 + c]);
        }
    }
    // Scatter-add D back into S: repeated index 5 adds twice.
    let before = get(&s, "S");
    run(
        &reg,
        &s,
        "scatter_add_rows",
        &[],
        &[
            whole(&s, "D", Access::In),
            whole(&s, "I", Access::In),
            whole(&s, "S", Access::InOut),
        ],
    )
    .unwrap();
    let mut want = before.clone();
    for (r, &i) in idx.iter().enumerate() {
        for c in 0..3 {
            want[i as usize * 3 + c] =
                (want[i as usize * 3 + c] as f32 + d[r * 3 + c] as f32) as f64;
        }
    }
    assert_eq!(get(&s, "S"), want);
    // `out` instead of `inout`, and an index out of range, fail before writing.
    let e = run(
        &reg,
        &s,
        "scatter_add_rows",
        &[],
        &[
            whole(&s, "D", Access::In),
            whole(&s, "I", Access::In),
            whole(&s, "S", Access::Out),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("inout"), "{e}");
    s.write("I", &[0i32, 6, 1, 1]).unwrap();
    let before = get(&s, "D");
    let e = run(
        &reg,
        &s,
        "gather_rows",
        &[],
        &[
            whole(&s, "S", Access::In),
            whole(&s, "I", Access::In),
            whole(&s, "D", Access::Out),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("index 1 is 6"), "{e}");
    assert_eq!(get(&s, "D"), before);
}

#[test]
fn bucket_lists_rows_per_bucket_in_order() {
    let reg = KernelRegistry::with_builtins();
    let mut s = store(T, 1);
    // 2 rows of 4 bucket numbers each, 5 buckets.
    let j: [i64; 8] = [3, 1, 1, 0, 3, 4, 1, 3];
    s.write("J", &j).unwrap();
    let jio = part(&s, "J", &[0, 0], &[2, 4], Access::In);
    run(
        &reg,
        &s,
        "bucket_by_index",
        &[],
        &[
            jio,
            whole(&s, "C", Access::Out),
            whole(&s, "L", Access::Out),
        ],
    )
    .unwrap();
    let k = 4usize;
    let mut counts = [0i32; 5];
    let mut lists = vec![vec![]; 5];
    for (p, &b) in j.iter().enumerate() {
        counts[b as usize] += 1;
        lists[b as usize].push((p / k) as i64);
    }
    assert_eq!(s.read::<i32>("C").unwrap(), counts.to_vec());
    let l = s.read::<i64>("L").unwrap();
    for b in 0..5 {
        let mut want = lists[b].clone();
        want.resize(4, -1);
        assert_eq!(&l[b * 4..b * 4 + 4], &want[..], "bucket {b}");
    }
}

#[test]
fn add_scalar_adds_the_rounded_constant() {
    let reg = KernelRegistry::with_builtins();
    let s = store(T, 3);
    let src = get(&s, "S");
    let v = 0.1f64;
    run(
        &reg,
        &s,
        "add_scalar",
        &[v.to_bits()],
        &[
            part(&s, "S", &[0, 0], &[4, 3], Access::In),
            whole(&s, "D", Access::Out),
        ],
    )
    .unwrap();
    let d = get(&s, "D");
    for i in 0..12 {
        assert_eq!(d[i], (src[i] as f32 + v as f32) as f64);
    }
}
