//! Host transfers: the blocks a shim-ended fifo streams, as one strided pattern.
//!
//! Why: the runtime sequence moves a host tensor to or from a fifo with one
//! `aiex.npu.dma_memcpy_nd(%t[offset][sizes][strides])` of at most four dimensions. The mapper
//! knows the fifo's objects as a sequence of blocks of the tensor (each a box, row-major); this
//! module finds the pattern that visits exactly those elements in that order, or says why none
//! exists.
//!
//! Promise: a returned pattern visits, in order, the elements of every block in turn, each block
//! row-major (checked against the blocks before it is returned), and obeys the shim DMA limits
//! of mlir-aie's `NpuDmaMemcpyNdOp` verifier (`lib/Dialect/AIEX/IR/AIEXDialect.cpp`): the
//! outermost size (a repeat count) at most 64, the two middle sizes at most 1023 when their
//! stride is not 0, an innermost stride of 1, an offset on a 4-byte boundary, strides of whole 4-byte words.

/// A fitted pattern: offset, sizes and strides (outermost first), in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Element offset into the flattened tensor.
    pub offset: u64,
    /// Sizes, outermost first.
    pub sizes: [u64; 4],
    /// Strides, outermost first.
    pub strides: [u64; 4],
}

/// The pattern streaming `blocks` (start, size per dimension; all of one size) of a tensor of
/// extents `shape` and elements of `elem_bytes` bytes.
pub fn fit(
    shape: &[u64],
    elem_bytes: u64,
    blocks: &[(Vec<u64>, Vec<u64>)],
) -> Result<Pattern, String> {
    let Some((first, size)) = blocks.first() else {
        return Err("no blocks".into());
    };
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let offset_of = |s: &[u64]| s.iter().zip(&strides).map(|(a, b)| a * b).sum::<u64>();
    let inner: Vec<(u64, u64)> = size.iter().copied().zip(strides.iter().copied()).collect();
    let offsets: Vec<u64> = blocks.iter().map(|(s, _)| offset_of(s)).collect();
    let outer = outer_dims(&offsets).ok_or_else(|| {
        format!(
            "the {} blocks streamed do not form one strided pattern (block offsets {})",
            blocks.len(),
            preview(&offsets)
        )
    })?;
    let dims = merge(
        outer
            .into_iter()
            .chain(inner)
            .filter(|d| d.0 != 1)
            .collect(),
    );
    if dims.len() > 4 {
        return Err(format!(
            "the blocks streamed need a pattern of {} dimensions; a shim transfer has at most 4",
            dims.len()
        ));
    }
    let mut sizes = [1u64; 4];
    let mut st = [0u64; 4];
    for (k, (s, t)) in dims.iter().enumerate() {
        sizes[4 - dims.len() + k] = *s;
        st[4 - dims.len() + k] = *t;
    }
    if dims.is_empty() {
        st[3] = 1;
    }
    let p = Pattern {
        offset: offset_of(first),
        sizes,
        strides: st,
    };
    limits(&p, elem_bytes)?;
    Ok(p)
}

/// Outer dimensions (size, stride) giving `offsets` relative to the first: none, one or two.
fn outer_dims(offsets: &[u64]) -> Option<Vec<(u64, u64)>> {
    let n = offsets.len() as u64;
    let o0 = offsets[0];
    let rel: Option<Vec<u64>> = offsets.iter().map(|o| o.checked_sub(o0)).collect();
    let rel = rel?;
    if n == 1 {
        return Some(Vec::new());
    }
    let try_two = |s2: u64| -> Option<Vec<(u64, u64)>> {
        let t2 = if s2 > 1 { rel[1] } else { 0 };
        let t3 = if s2 < n { rel[s2 as usize] } else { 0 };
        let ok = rel
            .iter()
            .enumerate()
            .all(|(k, &o)| o == (k as u64 / s2) * t3 + (k as u64 % s2) * t2);
        ok.then(|| vec![(n / s2, t3), (s2, t2)])
    };
    (1..=n)
        .filter(|s2| n.is_multiple_of(*s2))
        .rev()
        .find_map(try_two)
}

/// Drops size-1 dimensions and merges neighbours that are contiguous.
fn merge(dims: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, t) in dims.into_iter().rev() {
        if s == 1 {
            continue;
        }
        match out.last_mut() {
            Some(last) if t == last.0 * last.1 => last.0 *= s,
            _ => out.push((s, t)),
        }
    }
    out.reverse();
    out
}

fn limits(p: &Pattern, elem_bytes: u64) -> Result<(), String> {
    if p.sizes[0] > 64 {
        return Err(format!(
            "the outermost size {} exceeds 64 (the shim DMA's repeat count)",
            p.sizes[0]
        ));
    }
    for d in [1, 2] {
        if p.strides[d] != 0 && p.sizes[d] > 1023 {
            return Err(format!(
                "size {} exceeds 1023 in dimension {d} of the shim transfer",
                p.sizes[d]
            ));
        }
    }
    if p.strides[3] != 1 {
        return Err(format!(
            "the innermost stride is {}; a shim transfer reads runs of consecutive elements",
            p.strides[3]
        ));
    }
    if !(p.offset * elem_bytes).is_multiple_of(4) {
        return Err(format!(
            "offset {} ({} bytes) is not on a 4-byte boundary",
            p.offset,
            p.offset * elem_bytes
        ));
    }
    if !(p.sizes[3] * elem_bytes).is_multiple_of(4) {
        return Err(format!(
            "the innermost run of {} elements is not a whole number of 4-byte words",
            p.sizes[3]
        ));
    }
    for d in 0..3 {
        if p.sizes[d] > 1 && !(p.strides[d] * elem_bytes).is_multiple_of(4) {
            return Err(format!(
                "stride {} of dimension {d} is not a whole number of 4-byte words",
                p.strides[d]
            ));
        }
    }
    Ok(())
}

fn preview(v: &[u64]) -> String {
    let mut s: Vec<String> = v.iter().take(6).map(u64::to_string).collect();
    if v.len() > 6 {
        s.push("...".into());
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The elements the pattern visits, and those of the blocks, row-major, must agree.
    fn visits(p: &Pattern) -> Vec<u64> {
        let mut v = Vec::new();
        for a in 0..p.sizes[0] {
            for b in 0..p.sizes[1] {
                for c in 0..p.sizes[2] {
                    for d in 0..p.sizes[3] {
                        v.push(
                            p.offset
                                + a * p.strides[0]
                                + b * p.strides[1]
                                + c * p.strides[2]
                                + d * p.strides[3],
                        );
                    }
                }
            }
        }
        v
    }

    fn blocks_visit(shape: &[u64], blocks: &[(Vec<u64>, Vec<u64>)]) -> Vec<u64> {
        let mut v = Vec::new();
        for (s, z) in blocks {
            for i in 0..z[0] {
                for j in 0..z[1] {
                    v.push((s[0] + i) * shape[1] + s[1] + j);
                }
            }
        }
        v
    }

    #[test]
    fn patterns_visit_exactly_the_blocks_in_order() {
        let shape = [128, 128];
        let cases: Vec<Vec<(Vec<u64>, Vec<u64>)>> = vec![
            (0..4).map(|k| (vec![32, 32 * k], vec![32, 32])).collect(),
            (0..4).map(|k| (vec![32 * k, 64], vec![32, 32])).collect(),
            (0..8)
                .map(|k| (vec![32 * (k / 4), 32 * (k % 4)], vec![32, 32]))
                .collect(),
            (0..3).map(|_| (vec![0, 0], vec![32, 32])).collect(),
        ];
        for blocks in cases {
            let p = fit(&shape, 4, &blocks).unwrap();
            assert_eq!(visits(&p), blocks_visit(&shape, &blocks), "{p:?}");
        }
        let rows: Vec<_> = (0..4).map(|r| (vec![4 + r, 0], vec![1, 1024])).collect();
        let p = fit(&[16, 1024], 4, &rows).unwrap();
        assert_eq!(
            (p.offset, p.sizes, p.strides),
            (4096, [1, 1, 1, 4096], [0, 0, 0, 1])
        );
    }

    #[test]
    fn irregular_blocks_and_limits_are_refused() {
        let blocks = vec![
            (vec![0, 0], vec![32, 32]),
            (vec![32, 0], vec![32, 32]),
            (vec![96, 0], vec![32, 32]),
        ];
        assert!(
            fit(&[128, 128], 4, &blocks)
                .unwrap_err()
                .contains("do not form one strided pattern")
        );
        let wide: Vec<_> = (0..2).map(|k| (vec![0, 8 * k], vec![2000, 4])).collect();
        assert_eq!(
            fit(&[2000, 4096], 4, &wide).unwrap_err(),
            "size 2000 exceeds 1023 in dimension 2 of the shim transfer"
        );
    }
}
