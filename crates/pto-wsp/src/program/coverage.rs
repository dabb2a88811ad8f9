//! Which elements of a program's output tensors its tasks wrote.
//!
//! Why: a workload whose tiles cover 64 of 70 rows (`n / 16` tiles of 16) runs and leaves six
//! rows of its output as they were; nothing fails, and the user reads stale memory as results.
//! After a host run, every *output* tensor that tasks only write (`out` regions; no task reads
//! it as `in` or as data, nor updates it in place with `inout` — so intermediates, caches and
//! accumulators are not checked) is checked to have had each of its elements written by some
//! task.
//!
//! Promise: [`Coverage::mark`] records a written box (a region as `(start, size)` per
//! dimension, clipped to the tensor) in a bitmap of one bit per element, row by row; the same
//! box twice in a row (the steps of a K loop) costs one comparison; marking allocates nothing
//! (regions have at most [`MAX_RANK`] dimensions; a deeper one is refused by the run and not
//! marked). [`Coverage::report`] lists,
//! per output tensor with unwritten elements, how many there are and the smallest box holding
//! them — exactly the unwritten elements when [`Unwritten::exact`] is set.

use pto_wsp_ir::plan::{GenKind, GenStmt};
use pto_wsp_ir::resolve::{Resolved, StmtKind, TaskArg};
use pto_wsp_ir::task_io::MAX_RANK;
use pto_wsp_ir::types::Access;
use pto_wsp_ir::{Arg, Module, ParamKind, TaskStmt};
use pto_wsp_kernels::TensorStore;

/// An output tensor with elements no task of the run wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwritten {
    /// The tensor's name.
    pub tensor: String,
    /// Its shape under the run's bindings.
    pub shape: Vec<u64>,
    /// Number of elements no task wrote.
    pub elements: u64,
    /// The smallest box holding them: `(start, end)` per dimension, `end` exclusive.
    pub bounds: Vec<(u64, u64)>,
    /// Whether every element of `bounds` is unwritten (then `bounds` is the unwritten region).
    pub exact: bool,
}

impl std::fmt::Display for Unwritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: u64 = self.shape.iter().product();
        let region = self
            .bounds
            .iter()
            .map(|(s, e)| format!("{s}:{e}"))
            .collect::<Vec<_>>()
            .join(", ");
        if self.exact {
            write!(
                f,
                "output tensor `{}` was not fully written: no task wrote its elements [{region}] \
                 ({} of {total}); they keep what the tensor held before the run",
                self.tensor, self.elements
            )
        } else {
            write!(
                f,
                "output tensor `{}` was not fully written: no task wrote {} of its {total} \
                 elements, all within [{region}]; they keep what the tensor held before the run",
                self.tensor, self.elements
            )
        }
    }
}

/// How a module's runnable part uses one tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorRole {
    /// Some task reads it (`in`), or the generator reads its contents (a ragged or sparse axis,
    /// `load`).
    pub read: bool,
    /// Some task writes it (`out` or `inout`).
    pub written: bool,
    /// Some task updates it in place (`inout`).
    pub updated: bool,
}

impl TensorRole {
    /// Written and never read by `in`: what the run produces (intermediates and caches are
    /// read too, so they are not outputs; an accumulator updated with `inout` is).
    pub fn output(&self) -> bool {
        self.written && !self.read
    }

    /// An output whose every element a run must write: written only by `out` regions (a
    /// tensor updated in place with `inout` may be updated in part, as the caller's array).
    pub fn checked(&self) -> bool {
        self.output() && !self.updated
    }
}

/// The role of every tensor (declaration order) in the resolved entry's tasks.
pub fn roles(r: &Resolved) -> Vec<TensorRole> {
    let n = r.module.tensors.len();
    let mut out = vec![TensorRole::default(); n];
    for (t, role) in out.iter_mut().enumerate() {
        role.read = r.arrays.get(t).copied().unwrap_or(false);
        role.written = r.written.get(t).copied().unwrap_or(false);
    }
    r.each_stmt(&mut |s| {
        if let StmtKind::Task(task) = &s.kind {
            for a in &task.args {
                if let TaskArg::Region { tensor, access, .. } = a {
                    match access {
                        Access::In => out[tensor.index()].read = true,
                        Access::InOut => out[tensor.index()].updated = true,
                        Access::Out => {}
                    }
                }
            }
        }
    });
    out
}

/// The role of every tensor in a module's plans (`space` / `tiers` / `plan`): the tiers' and
/// prefetches' calls, and the generators' `load`s (reads).
pub fn plan_roles(module: &Module) -> Vec<TensorRole> {
    let mut out = vec![TensorRole::default(); module.tensors.len()];
    let index = |name: &str| module.tensors.iter().position(|t| t.name.name == name);
    let call = |c: &TaskStmt, out: &mut [TensorRole]| {
        let Some(k) = module.kernels.iter().find(|k| k.name.name == c.kernel.name) else {
            return;
        };
        for (p, a) in k.params.iter().zip(&c.args) {
            if let (ParamKind::Tile { access, .. }, Arg::Region(reg)) = (&p.kind, a)
                && let Some(t) = index(&reg.tensor.name)
            {
                match access {
                    Access::In => out[t].read = true,
                    Access::InOut => {
                        out[t].written = true;
                        out[t].updated = true;
                    }
                    Access::Out => out[t].written = true,
                }
            }
        }
    };
    for p in &module.plans {
        for k in &p.kernels {
            call(&k.call, &mut out);
        }
        if let Some(f) = &p.prefetch {
            call(&f.call, &mut out);
        }
        each_load(&p.body, &mut |tensor| {
            if let Some(t) = index(tensor) {
                out[t].read = true;
            }
        });
    }
    out
}

/// Calls `f` with the tensor of every `load` of a generator body.
fn each_load(body: &[GenStmt], f: &mut impl FnMut(&str)) {
    for s in body {
        match &s.kind {
            GenKind::Load { tensor, .. } => f(&tensor.name),
            GenKind::For { body, .. } => each_load(body, f),
            GenKind::If {
                then_body,
                else_body,
                ..
            } => {
                each_load(then_body, f);
                each_load(else_body, f);
            }
            _ => {}
        }
    }
}

/// Per tensor: whether the resolved entry's runs must write all of it ([`TensorRole::checked`]).
pub(crate) fn outputs(r: &Resolved) -> Vec<bool> {
    roles(r).iter().map(TensorRole::checked).collect()
}

/// Per module kernel: whether a task running it may write a checked tensor (`checked` per
/// tensor), so the generating thread looks at the regions of those tasks only.
pub(crate) fn writers(r: &Resolved, checked: &[bool]) -> Vec<bool> {
    let mut out = vec![false; r.module.kernels.len()];
    r.each_stmt(&mut |s| {
        if let StmtKind::Task(task) = &s.kind {
            let writes = task.args.iter().any(|a| {
                matches!(a, TaskArg::Region { tensor, access, .. }
                    if *access != Access::In && checked.get(tensor.index()).copied().unwrap_or(false))
            });
            if writes {
                let k = task.kernel.index();
                out[k] = true;
                if let Some(Some(t)) = r.tiers.get(k) {
                    for (_, v) in &t.cases {
                        out[v.index()] = true;
                    }
                    out[t.default.index()] = true;
                }
            }
        }
    });
    out
}

/// One output tensor's bitmap.
struct Marks {
    shape: Vec<u64>,
    /// Row-major, one bit per element: a written element's bit is `!flip`'s.
    bits: Vec<u64>,
    /// 0 (a set bit is written) or `u64::MAX` (a clear bit is): after a run that wrote every
    /// element the next one starts from that bitmap with the meaning flipped, so it is emptied
    /// with no pass over it.
    flip: u64,
    /// The last box marked (start, size; unused dimensions 0).
    last: Option<([i64; MAX_RANK], [i64; MAX_RANK])>,
}

/// The written elements of the output tensors during one run (kept by the program and
/// [`reset`](Coverage::reset) before each of its runs).
pub(crate) struct Coverage {
    tensors: Vec<Option<Marks>>,
    /// Per module kernel: whether its tasks may write a tracked tensor ([`writers`]).
    kernels: Vec<bool>,
}

impl Coverage {
    /// Empty bitmaps for the tensors `outputs` marks, shaped as in `store`; `kernels`: per
    /// module kernel, whether its tasks may write one of them.
    pub(crate) fn new(outputs: &[bool], kernels: &[bool], store: &TensorStore) -> Coverage {
        let mut c = Coverage {
            tensors: Vec::new(),
            kernels: kernels.to_vec(),
        };
        c.reset(outputs, store);
        c
    }

    /// Empties the bitmaps for a new run on `store` (tensors `outputs` marks): a tensor whose
    /// shape is the last run's keeps its words — when the last run wrote all of it, their
    /// meaning is flipped (no pass over them), else they are filled in place (no fresh pages,
    /// no allocation); one whose shape changed is resized in its own buffer.
    pub(crate) fn reset(&mut self, outputs: &[bool], store: &TensorStore) {
        self.tensors.resize_with(store.len(), || None);
        for (t, slot) in self.tensors.iter_mut().enumerate() {
            if !outputs.get(t).copied().unwrap_or(false) {
                *slot = None;
                continue;
            }
            let shape = &store.info(t as u32).shape;
            let m = slot.get_or_insert_with(|| Marks {
                shape: Vec::new(),
                bits: Vec::new(),
                flip: 0,
                last: None,
            });
            let n: u64 = shape.iter().product();
            if m.shape != *shape {
                m.shape.clone_from(shape);
                m.bits.clear();
                m.bits.resize(n.div_ceil(64) as usize, 0);
                m.flip = 0;
            } else if all_set(&m.bits, n, m.flip) {
                // Every element written: the same words, read the other way, are all unwritten.
                m.flip = !m.flip;
            } else {
                m.bits.fill(m.flip);
            }
            m.last = None;
        }
    }

    /// Whether tasks of module kernel `kernel` may write a tracked tensor.
    pub(crate) fn tracks(&self, kernel: u32) -> bool {
        self.kernels.get(kernel as usize).copied().unwrap_or(false)
    }

    /// Whether any tensor is tracked (else marking is skipped).
    pub(crate) fn any(&self) -> bool {
        self.tensors.iter().any(Option::is_some)
    }

    /// Records that a task wrote `tensor[start +: size]` (`access` out or inout).
    pub(crate) fn mark(&mut self, access: Access, tensor: u32, start: &[i64], size: &[i64]) {
        if access == Access::In {
            return;
        }
        let Some(Some(m)) = self.tensors.get_mut(tensor as usize) else {
            return;
        };
        let rank = start.len();
        if rank > MAX_RANK || size.len() != rank {
            return;
        }
        let mut region = ([0i64; MAX_RANK], [0i64; MAX_RANK]);
        region.0[..rank].copy_from_slice(start);
        region.1[..rank].copy_from_slice(size);
        if m.last == Some(region) {
            return;
        }
        m.last = Some(region);
        m.mark(start, size);
    }

    /// The output tensors with unwritten elements, in declaration order.
    pub(crate) fn report(&self, store: &TensorStore) -> Vec<Unwritten> {
        self.tensors
            .iter()
            .enumerate()
            .filter_map(|(t, m)| {
                let m = m.as_ref()?;
                m.unwritten(&store.info(t as u32).name)
            })
            .collect()
    }
}

impl Marks {
    /// Sets the bits of the box, clipped to the shape (a region past the end was refused when
    /// its task ran; the part inside is what it could have written).
    fn mark(&mut self, start: &[i64], size: &[i64]) {
        let rank = self.shape.len();
        if rank == 0 || rank > MAX_RANK || start.len() != rank || size.len() != rank {
            return;
        }
        let (mut lo, mut hi) = ([0u64; MAX_RANK], [0u64; MAX_RANK]);
        for d in 0..rank {
            let s = start[d].max(0) as u64;
            let e = (start[d].saturating_add(size[d].max(0))).max(0) as u64;
            lo[d] = s.min(self.shape[d]);
            hi[d] = e.min(self.shape[d]);
            if lo[d] >= hi[d] {
                return;
            }
        }
        // Row-major strides; the last dimension is a run of bits.
        let mut stride = [1u64; MAX_RANK];
        for d in (0..rank - 1).rev() {
            stride[d] = stride[d + 1] * self.shape[d + 1];
        }
        let mut idx = lo;
        loop {
            let base: u64 = (0..rank - 1).map(|d| idx[d] * stride[d]).sum();
            set_bits(
                &mut self.bits,
                base + lo[rank - 1],
                base + hi[rank - 1],
                self.flip,
            );
            // Next row of the box (odometer over the outer dimensions).
            let mut d = rank - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < hi[d] {
                    break;
                }
                idx[d] = lo[d];
            }
        }
    }

    /// The unwritten elements: counted a word at a time, row by row (the last dimension), the
    /// row's outer index stepped as an odometer, so the cost is one pass over the bitmap's words
    /// plus a few operations per row, however many elements are missing.
    fn unwritten(&self, name: &str) -> Option<Unwritten> {
        let rank = self.shape.len();
        let total: u64 = self.shape.iter().product();
        if rank == 0 || total == 0 || all_set(&self.bits, total, self.flip) {
            return None;
        }
        let row = self.shape[rank - 1];
        let mut elements = 0u64;
        let mut lo = self.shape.clone();
        let mut hi = vec![0u64; rank];
        let mut outer = vec![0u64; rank - 1];
        for r in 0..total / row {
            let (n, first, last) = missing_in(&self.bits, r * row, (r + 1) * row, self.flip);
            if n > 0 {
                elements += n;
                lo[rank - 1] = lo[rank - 1].min(first - r * row);
                hi[rank - 1] = hi[rank - 1].max(last - r * row + 1);
                for (d, &i) in outer.iter().enumerate() {
                    lo[d] = lo[d].min(i);
                    hi[d] = hi[d].max(i + 1);
                }
            }
            for d in (0..rank - 1).rev() {
                outer[d] += 1;
                if outer[d] < self.shape[d] {
                    break;
                }
                outer[d] = 0;
            }
        }
        if elements == 0 {
            return None;
        }
        let volume: u64 = lo.iter().zip(&hi).map(|(l, h)| h - l).product();
        Some(Unwritten {
            tensor: name.to_string(),
            shape: self.shape.clone(),
            elements,
            bounds: lo.into_iter().zip(hi).collect(),
            exact: volume == elements,
        })
    }
}

/// Whether bits `0 .. n` of `bits` are all set: the whole words and-ed together with no early
/// exit (a loop the compiler vectorises, a fraction of an operation per word), then the partial
/// last word masked. The usual outcome of a run, so the row-by-row count runs only when
/// something is missing.
fn all_set(bits: &[u64], n: u64, flip: u64) -> bool {
    let (whole, rest) = ((n / 64) as usize, n % 64);
    let Some((words, tail)) = bits.split_at_checked(whole) else {
        return false;
    };
    let full = words.iter().fold(u64::MAX, |a, &w| a & (w ^ flip)) == u64::MAX;
    let mask = (1u64 << rest).wrapping_sub(1);
    full && (rest == 0 || tail.first().is_some_and(|&w| (w ^ flip) & mask == mask))
}

/// The clear bits of `bits` in `from .. to` (`from < to`): how many, the first and the last
/// (meaningless when there are none). One masked test per word, so a written row costs a few
/// operations per 64 elements.
fn missing_in(bits: &[u64], from: u64, to: u64, flip: u64) -> (u64, u64, u64) {
    let (mut n, mut first, mut last) = (0u64, u64::MAX, 0u64);
    let (w0, w1) = ((from / 64) as usize, ((to - 1) / 64) as usize);
    let (head, tail) = (u64::MAX << (from % 64), u64::MAX >> (63 - (to - 1) % 64));
    for (w, &word) in bits[w0..=w1].iter().enumerate() {
        let w = w0 + w;
        let mut mask = u64::MAX;
        if w == w0 {
            mask &= head;
        }
        if w == w1 {
            mask &= tail;
        }
        let missing = !(word ^ flip) & mask;
        if missing != 0 {
            let base = w as u64 * 64;
            n += u64::from(missing.count_ones());
            first = first.min(base + u64::from(missing.trailing_zeros()));
            last = base + 63 - u64::from(missing.leading_zeros());
        }
    }
    (n, first, last)
}

/// Sets bits `from .. to` of `bits`: the partial first and last words masked, the words
/// between filled whole.
fn set_bits(bits: &mut [u64], from: u64, to: u64, flip: u64) {
    if from >= to {
        return;
    }
    let (first, last) = ((from / 64) as usize, ((to - 1) / 64) as usize);
    let head = u64::MAX << (from % 64);
    let tail = u64::MAX >> (63 - (to - 1) % 64);
    // Written bits are `!flip`'s: or-ed in, or cleared when the meaning is flipped. One branch
    // on the direction, so each loop stores a constant (a `memset` for the whole words).
    if flip == 0 {
        set_bits_as::<true>(bits, first, last, head, tail);
    } else {
        set_bits_as::<false>(bits, first, last, head, tail);
    }
}

/// [`set_bits`] in one direction: `SET` or-s the masks in, else clears them.
#[inline(always)]
fn set_bits_as<const SET: bool>(bits: &mut [u64], first: usize, last: usize, head: u64, tail: u64) {
    let put = |w: &mut u64, m: u64| {
        if SET {
            *w |= m;
        } else {
            *w &= !m;
        }
    };
    if first == last {
        put(&mut bits[first], head & tail);
        return;
    }
    put(&mut bits[first], head);
    bits[first + 1..last].fill(if SET { u64::MAX } else { 0 });
    put(&mut bits[last], tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(shape: &[u64]) -> Marks {
        let n: u64 = shape.iter().product();
        Marks {
            shape: shape.to_vec(),
            bits: vec![0; n.div_ceil(64) as usize],
            flip: 0,
            last: None,
        }
    }

    #[test]
    fn tiles_covering_64_of_70_rows_leave_the_last_six_rows_unwritten() {
        let mut m = marks(&[70, 64]);
        for i in 0..4 {
            m.mark(&[i * 16, 0], &[16, 64]);
        }
        let u = m.unwritten("Y").unwrap();
        assert_eq!(u.elements, 6 * 64);
        assert_eq!(u.bounds, vec![(64, 70), (0, 64)]);
        assert!(u.exact);
        assert!(u.to_string().contains("[64:70, 0:64] (384 of 4480)"), "{u}");
    }

    #[test]
    fn a_full_cover_reports_nothing_and_boxes_are_clipped() {
        let mut m = marks(&[3, 5, 7]);
        m.mark(&[0, 0, 0], &[3, 5, 4]);
        m.mark(&[0, 0, 4], &[3, 5, 100]);
        assert_eq!(m.unwritten("X"), None);
    }

    #[test]
    fn scattered_holes_give_their_bounding_box_not_exact() {
        let mut m = marks(&[4, 4]);
        m.mark(&[0, 0], &[4, 4]);
        m.bits[0] &= !(1 << 1); // (0, 1)
        m.bits[0] &= !(1 << 14); // (3, 2)
        let u = m.unwritten("Z").unwrap();
        assert_eq!((u.elements, u.exact), (2, false));
        assert_eq!(u.bounds, vec![(0, 4), (1, 3)]);
    }

    /// A deterministic stream of draws in `0 .. n` (xorshift) from `seed`, for the reference
    /// tests.
    fn draws(seed: u64) -> impl FnMut(u64) -> i64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1)) as i64
        }
    }

    /// Marked bits against a per-element reference: element `e` is set exactly when some box
    /// (clipped to the shape) holds its multi-index; boxes start before, inside and past the
    /// shape, with rows shorter than, equal to and longer than a word.
    #[test]
    fn marked_bits_match_a_per_element_reference() {
        let shapes: [&[u64]; 5] = [&[5, 3, 7], &[9, 64], &[3, 130], &[200], &[2, 3, 2, 70]];
        for shape in shapes {
            let total: u64 = shape.iter().product();
            for seed in 0..30u64 {
                let mut m = marks(shape);
                let mut next = draws(seed);
                let mut boxes = Vec::new();
                for _ in 0..(1 + seed % 4) {
                    let start: Vec<i64> = shape.iter().map(|&d| next(d + 4) - 2).collect();
                    let size: Vec<i64> = shape.iter().map(|&d| next(d + 2)).collect();
                    m.mark(&start, &size);
                    boxes.push((start, size));
                }
                for e in 0..total {
                    let mut flat = e;
                    let mut index = vec![0i64; shape.len()];
                    for d in (0..shape.len()).rev() {
                        index[d] = (flat % shape[d]) as i64;
                        flat /= shape[d];
                    }
                    let inside = boxes.iter().any(|(s, z)| {
                        (0..shape.len()).all(|d| s[d] <= index[d] && index[d] < s[d] + z[d])
                    });
                    let set = m.bits[(e / 64) as usize] >> (e % 64) & 1 == 1;
                    assert_eq!(
                        set, inside,
                        "shape {shape:?} element {index:?} boxes {boxes:?}"
                    );
                }
            }
        }
    }

    /// The word-at-a-time count against a per-element reference, on boxes and holes of several
    /// shapes (rows shorter than, equal to and longer than a word, crossing words).
    #[test]
    fn unwritten_matches_a_per_element_reference() {
        let shapes: [&[u64]; 5] = [&[5, 3, 7], &[9, 64], &[3, 130], &[200], &[4, 1, 33]];
        for shape in shapes {
            let total: u64 = shape.iter().product();
            for seed in 0..20u64 {
                let mut m = marks(shape);
                let mut next = draws(seed);
                for _ in 0..(seed % 5) {
                    let start: Vec<i64> = shape.iter().map(|&d| next(d)).collect();
                    let size: Vec<i64> = shape.iter().map(|&d| 1 + next(d)).collect();
                    m.mark(&start, &size);
                }
                // The reference: every clear bit, its multi-index by division.
                let mut elements = 0u64;
                let mut lo = shape.to_vec();
                let mut hi = vec![0u64; shape.len()];
                for e in 0..total {
                    if m.bits[(e / 64) as usize] >> (e % 64) & 1 == 1 {
                        continue;
                    }
                    elements += 1;
                    let mut flat = e;
                    for d in (0..shape.len()).rev() {
                        let i = flat % shape[d];
                        flat /= shape[d];
                        lo[d] = lo[d].min(i);
                        hi[d] = hi[d].max(i + 1);
                    }
                }
                let got = m.unwritten("T");
                if elements == 0 {
                    assert_eq!(got, None, "{shape:?} seed {seed}");
                } else {
                    let u = got.unwrap_or_else(|| panic!("{shape:?} seed {seed}"));
                    assert_eq!(u.elements, elements, "{shape:?} seed {seed}");
                    let bounds: Vec<(u64, u64)> = lo.into_iter().zip(hi).collect();
                    assert_eq!(u.bounds, bounds, "{shape:?} seed {seed}");
                }
            }
        }
    }

    /// A bitmap read the other way (`flip`, as a run after a full one starts) marks and reports
    /// as a plain one: its words are the plain one's complement after the same boxes.
    #[test]
    fn a_flipped_bitmap_marks_and_reports_as_a_plain_one() {
        let shapes: [&[u64]; 4] = [&[5, 3, 7], &[9, 64], &[3, 130], &[200]];
        for shape in shapes {
            for seed in 0..20u64 {
                let (mut plain, mut flipped) = (marks(shape), marks(shape));
                flipped.flip = u64::MAX;
                flipped.bits.fill(u64::MAX);
                let mut next = draws(seed);
                for _ in 0..(seed % 6) {
                    let start: Vec<i64> = shape.iter().map(|&d| next(d + 4) - 2).collect();
                    let size: Vec<i64> = shape.iter().map(|&d| next(d + 2)).collect();
                    plain.mark(&start, &size);
                    flipped.mark(&start, &size);
                }
                let complement: Vec<u64> = flipped.bits.iter().map(|w| !w).collect();
                assert_eq!(plain.bits, complement, "{shape:?} seed {seed}");
                assert_eq!(plain.unwritten("T"), flipped.unwritten("T"));
            }
        }
    }

    #[test]
    fn all_set_agrees_with_counting_the_missing_bits() {
        let mut draw = draws(7);
        for case in 0..400u64 {
            let n = 1 + draw(300) as u64;
            let mut bits = vec![u64::MAX; n.div_ceil(64) as usize];
            // Bits past `n` are never read: set or clear them at random.
            if let Some(last) = bits.last_mut()
                && draw(2) == 0
            {
                *last &= u64::MAX >> (63 - (n - 1) % 64);
            }
            // Half the cases clear one or two bits below `n`.
            if case % 2 == 1 {
                for _ in 0..1 + draw(2) {
                    let b = draw(n) as u64;
                    bits[(b / 64) as usize] &= !(1 << (b % 64));
                }
            }
            let missing = missing_in(&bits, 0, n, 0).0;
            assert_eq!(all_set(&bits, n, 0), missing == 0, "n {n}, case {case}");
        }
        assert!(!all_set(&[], 5, 0), "too few words");
    }

    #[test]
    fn set_bits_crosses_words() {
        let mut b = vec![0u64; 3];
        set_bits(&mut b, 60, 130, 0);
        assert_eq!(b[0], 0xF << 60);
        assert_eq!(b[1], u64::MAX);
        assert_eq!(b[2], 0b11);
    }
}
