//! The same-process baselines of `pto-wsp bench`: each [`Shape`] run without the runtime.
//!
//! Why: absolute times drift on shared machines, so the runtime's per-task overhead is reported
//! as a ratio against code doing the same work in the same process: a plain sequential loop (the
//! floor: no scheduling at all) and rayon (the usual way to write it in Rust).
//!
//! Promises:
//! - Every runner executes the task body once per task of the shape, after the bodies of all
//!   the task's predecessors have returned (with happens-before, for rayon), and returns the
//!   number of tasks it executed.
//! - The benchmark body is `std::hint::black_box(task)`: empty, but not deletable by the
//!   optimizer. The `for_each_*` forms take any body (tests record visits with it).
//! - Setup is not timed: [`Prepared::new`] computes everything a runner needs (the sequential
//!   order), so timing [`Prepared::run_sequential`] or [`Prepared::run_rayon`] times only the run.
//!
//! The rayon expression of each shape is the natural one, since rayon has no DAG:
//! - chain: a sequential loop inside `pool.install` (there is no parallelism to find);
//! - binary tree: recursive `rayon::join` on the two children after the parent's body;
//! - independent: one `par_iter` over every task;
//! - wavefront: one `par_iter` per anti-diagonal, diagonals in order (the blocks of a diagonal
//!   are independent and depend only on the diagonal before);
//! - random levels: one `par_iter` per level, levels in order. This is level-synchronous — a task
//!   waits for its whole previous level, not just its 1–4 predecessors — which is the fairest
//!   rayon expression of a DAG without building a dependency runtime on top of rayon.

use crate::shapes::Shape;
use rayon::prelude::*;
use std::hint::black_box;

/// A shape with everything its runners need computed in advance.
#[derive(Clone, Debug)]
pub struct Prepared {
    shape: Shape,
    /// A topological order for the sequential runner: task ids are one for every shape, so this
    /// is `0..tasks`, kept as a vector so the loop reads its tasks from memory like a scheduler's
    /// list would.
    order: Vec<u32>,
}

impl Prepared {
    /// Prepares `shape` (O(tasks) time and 4 bytes per task).
    ///
    /// # Panics
    /// If the shape does not [fit](Shape::fits).
    pub fn new(shape: Shape) -> Prepared {
        assert!(shape.fits(), "{shape}: too large");
        Prepared {
            shape,
            order: (0..shape.tasks() as u32).collect(),
        }
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Runs every task with the empty body in a plain loop over a precomputed topological order
    /// (computed by [`Prepared::new`], not here); returns the number of tasks run.
    pub fn run_sequential(&self) -> u64 {
        self.for_each_sequential(|t| {
            black_box(t);
        })
    }

    /// Runs every task with the empty body on `pool` with the rayon expression of the shape
    /// (see the module docs); returns the number of tasks run.
    pub fn run_rayon(&self, pool: &rayon::ThreadPool) -> u64 {
        self.for_each_rayon(pool, |t| {
            black_box(t);
        })
    }

    /// Like [`Prepared::run_sequential`] with `body(task)` as the task body.
    pub fn for_each_sequential<F: FnMut(u32)>(&self, mut body: F) -> u64 {
        let mut n = 0u64;
        for &t in &self.order {
            body(t);
            n += 1;
        }
        n
    }

    /// Like [`Prepared::run_rayon`] with `body(task)` as the task body.
    pub fn for_each_rayon<F: Fn(u32) + Sync>(&self, pool: &rayon::ThreadPool, body: F) -> u64 {
        let body = &body;
        let one = move |t: u32| {
            body(t);
            1u64
        };
        pool.install(|| match self.shape {
            Shape::LinearChain(n) => (0..n).map(one).sum(),
            Shape::BinaryTree(_) => {
                let n = self.shape.tasks() as u64;
                if n == 0 { 0 } else { tree(0, n, body) }
            }
            Shape::Independent(n) => (0..n).into_par_iter().map(one).sum(),
            Shape::Wavefront(side) => {
                let s = side as u64;
                (0..(2 * s).saturating_sub(1))
                    .map(|d| {
                        // Blocks (i, d - i) with both coordinates in 0..s.
                        let lo = d.saturating_sub(s - 1);
                        let hi = d.min(s - 1);
                        (lo..=hi)
                            .into_par_iter()
                            .map(|i| one((i * s + d - i) as u32))
                            .sum::<u64>()
                    })
                    .sum()
            }
            Shape::RandomLevels { levels, width, .. } => (0..levels)
                .map(|l| {
                    let first = l * width;
                    (first..first + width).into_par_iter().map(one).sum::<u64>()
                })
                .sum(),
        })
    }
}

/// Task `node` of a breadth-first binary tree of `n` tasks, then its two subtrees in parallel.
fn tree<F: Fn(u32) + Sync>(node: u64, n: u64, body: &F) -> u64 {
    body(node as u32);
    let left = 2 * node + 1;
    if left + 1 < n {
        let (a, b) = rayon::join(|| tree(left, n, body), || tree(left + 1, n, body));
        1 + a + b
    } else if left < n {
        1 + tree(left, n, body)
    } else {
        1
    }
}

/// Prepares `shape` and runs [`Prepared::run_sequential`] (setup included; time a [`Prepared`]
/// instead).
pub fn sequential(shape: Shape) -> u64 {
    Prepared::new(shape).run_sequential()
}

/// Prepares `shape` and runs [`Prepared::run_rayon`] on `pool` (setup included; time a
/// [`Prepared`] instead).
pub fn rayon(shape: Shape, pool: &rayon::ThreadPool) -> u64 {
    Prepared::new(shape).run_rayon(pool)
}
