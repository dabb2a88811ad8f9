//! Taskflow's benchmark shapes as task-graph generators (for `pto-wsp bench`).
//!
//! Why: the per-task overhead of a runtime is measured with empty kernels on graphs whose shape,
//! not their work, is the load. These are the DAGs of Taskflow's micro-benchmarks, so the figures
//! can be set next to theirs, and the same shapes feed the same-process baselines of
//! [`crate::baseline`].
//!
//! | shape | text | tasks | edges |
//! |---|---|---|---|
//! | [`Shape::LinearChain`] | `chain:N` | `N` | `N - 1` |
//! | [`Shape::BinaryTree`] | `tree:LEVELS` | `2^LEVELS - 1` | `tasks - 1` |
//! | [`Shape::Independent`] | `independent:N` | `N` | 0 |
//! | [`Shape::Wavefront`] | `wavefront:SIDE` | `SIDE^2` | `2 SIDE (SIDE - 1)` |
//! | [`Shape::RandomLevels`] | `random:LEVELS:WIDTH[:SEED]` | `LEVELS * WIDTH` | 1 to 4 per task
//! past level 0 |
//!
//! Promises:
//! - Task ids are a topological order: every edge goes from a lower id to a higher one, so
//!   [`Shape::build`] submits tasks in id order and the builder never sees a forward dependency.
//! - [`Shape::tasks`] and [`Shape::edges`] are exact (the built graph has exactly that many tasks
//!   and distinct edges); both are O(1) except `edges` of [`Shape::RandomLevels`], which replays
//!   the generator's first draw per task (O(tasks), no allocation).
//! - The random shape is a pure function of `(levels, width, seed)`: the predecessors of a task
//!   depend only on the seed and the task's id, on every platform.
//! - `Display` and `FromStr` use one syntax (the `text` column above), so `s.to_string().parse()`
//!   gives `s` back. `FromStr` rejects shapes the builder cannot hold (more than
//!   [`MAX_TASKS`] tasks or possibly more than [`MAX_EDGES`] edges).
//! - [`Shape::preds`] is a deliberately naive adjacency (a `Vec` per task), written apart from
//!   [`Shape::build`] so tests can check one against the other.

use pto_wsp_graph::builder::BuildError;
#[cfg(doc)]
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::explicit::{ExplicitBuilder, ExplicitEdges, ExplicitTask};
use pto_wsp_graph::storage::TaskGraphStorage;
#[cfg(doc)]
use pto_wsp_graph::tensor_map::AnyTensorMap;
use pto_wsp_graph::types::TaskId;
#[cfg(doc)]
use pto_wsp_graph::types::{ExecDomain, ExecPool};
use pto_wsp_ir::expand::splitmix64;
use std::fmt;
use std::str::FromStr;

/// Most tasks a shape may have (the builder numbers tasks with `u32` ids below `u32::MAX`).
pub const MAX_TASKS: u64 = u32::MAX as u64 - 1;

/// Most edges a shape may have (the CSR fan-out is indexed by `u32`).
pub const MAX_EDGES: u64 = u32::MAX as u64;

/// Seed of [`Shape::RandomLevels`] when the text gives none (`random:LEVELS:WIDTH`).
pub const DEFAULT_SEED: u64 = 0x5EED;

/// Most predecessors a task of [`Shape::RandomLevels`] gets.
pub const MAX_RANDOM_PREDS: usize = 4;

/// One benchmark DAG over a problem size. Every task runs kernel 0, in
/// [`ExecDomain::HostCpu`], pool [`ExecPool::Any`], stream 0, with no affinity, regions or
/// params: only the edges matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// `n` tasks in a line: task `i` before task `i + 1` (Taskflow's `linear_chain`).
    LinearChain(u32),
    /// A complete fan-out tree of `levels` levels, `2^levels - 1` tasks numbered breadth first:
    /// task `i` before its children `2i + 1` and `2i + 2` (Taskflow's `binary_tree`).
    BinaryTree(u32),
    /// `n` tasks and no edge (Taskflow's `embarrassing_parallelism`).
    Independent(u32),
    /// A `side` × `side` grid of blocks, numbered row by row: block `(i, j)` (task
    /// `i * side + j`) after `(i - 1, j)` and `(i, j - 1)` (Taskflow's `wavefront`).
    Wavefront(u32),
    /// A random level graph like the one of Taskflow's `graph_traversal`: `levels` levels of
    /// `width` tasks (level `l` is tasks `l * width .. (l + 1) * width`); every task past level 0
    /// gets between 1 and `min(4, width)` distinct predecessors, drawn uniformly from the level
    /// before it by a SplitMix64 stream seeded from `seed` and the task's id. (Taskflow draws
    /// out-edges instead; drawing in-edges keeps every task reachable from level 0, so a level
    /// can only start after some of the previous one.)
    RandomLevels {
        /// Number of levels.
        levels: u32,
        /// Tasks per level.
        width: u32,
        /// Seed of the generator ([`DEFAULT_SEED`] unless the text gives one).
        seed: u64,
    },
}

/// How big [`Shape::standard`] makes its shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Size {
    /// About 20,000 tasks per shape: a smoke run of a second or so.
    Quick,
    /// About 1,000,000 tasks per shape: the figures worth reporting.
    #[default]
    Full,
}

impl Shape {
    /// The five shapes at `size`, in the order of the table above: about 1M tasks each for
    /// [`Size::Full`] (`chain:1000000 tree:20 independent:1000000 wavefront:1000
    /// random:1000:1000`), about 20K for [`Size::Quick`] (`chain:20000 tree:14 independent:20000
    /// wavefront:141 random:141:141`).
    pub fn standard(size: Size) -> Vec<Shape> {
        let (n, levels, side) = match size {
            Size::Quick => (20_000, 14, 141),
            Size::Full => (1_000_000, 20, 1000),
        };
        vec![
            Shape::LinearChain(n),
            Shape::BinaryTree(levels),
            Shape::Independent(n),
            Shape::Wavefront(side),
            Shape::RandomLevels {
                levels: side,
                width: side,
                seed: DEFAULT_SEED,
            },
        ]
    }

    /// The shape's keyword in the text syntax (`chain`, `tree`, `independent`, `wavefront`,
    /// `random`).
    pub fn kind(&self) -> &'static str {
        match self {
            Shape::LinearChain(_) => "chain",
            Shape::BinaryTree(_) => "tree",
            Shape::Independent(_) => "independent",
            Shape::Wavefront(_) => "wavefront",
            Shape::RandomLevels { .. } => "random",
        }
    }

    /// Number of tasks (saturating at `u64::MAX` for absurd trees).
    pub fn tasks_u64(&self) -> u64 {
        match *self {
            Shape::LinearChain(n) | Shape::Independent(n) => n as u64,
            Shape::BinaryTree(levels) => match levels {
                0 => 0,
                1..64 => (1u64 << levels) - 1,
                _ => u64::MAX,
            },
            Shape::Wavefront(side) => side as u64 * side as u64,
            Shape::RandomLevels { levels, width, .. } => levels as u64 * width as u64,
        }
    }

    /// Number of tasks.
    pub fn tasks(&self) -> usize {
        usize::try_from(self.tasks_u64()).unwrap_or(usize::MAX)
    }

    /// Number of edges, exactly (O(tasks) for [`Shape::RandomLevels`], O(1) otherwise).
    pub fn edges(&self) -> usize {
        let e = match *self {
            Shape::LinearChain(n) => (n as u64).saturating_sub(1),
            Shape::BinaryTree(_) => self.tasks_u64().saturating_sub(1),
            Shape::Independent(_) => 0,
            Shape::Wavefront(side) => 2 * side as u64 * (side as u64).saturating_sub(1),
            Shape::RandomLevels {
                levels,
                width,
                seed,
            } => {
                let first = width as u64;
                let end = levels as u64 * width as u64;
                (first..end)
                    .map(|t| random_pred_count(seed, width, t) as u64)
                    .sum()
            }
        };
        usize::try_from(e).unwrap_or(usize::MAX)
    }

    /// An upper bound of [`Shape::edges`] in O(1).
    fn edges_bound(&self) -> u64 {
        match *self {
            Shape::RandomLevels { levels, width, .. } => {
                (levels as u64).saturating_sub(1)
                    * width as u64
                    * (width as u64).min(MAX_RANDOM_PREDS as u64)
            }
            _ => self.edges() as u64,
        }
    }

    /// Whether the builder can hold the shape (at most [`MAX_TASKS`] tasks and [`MAX_EDGES`]
    /// edges; for the random shape, at most [`MAX_EDGES`] edges in the worst case of 4 per
    /// task).
    pub fn fits(&self) -> bool {
        self.tasks_u64() <= MAX_TASKS && self.edges_bound() <= MAX_EDGES
    }

    /// Emits every task into `b`, in id order (a topological order), each with its
    /// predecessors as explicit dependencies: kernel 0 on a host CPU thread of any pool, stream
    /// 0, no affinity ([`ExplicitTask::host`]). Task ids are offset by the tasks `b` already
    /// holds, so the shape can follow other tasks (it does not depend on them).
    ///
    /// Generic in the builder: the general [`GraphBuilder`] (any map and sink; the map sees no
    /// region, so [`AnyTensorMap::None`] is the cheapest) or the [`ExplicitBuilder`], which is
    /// made for this and is what [`Shape::storage`] and a streamed run of a shape use.
    ///
    /// # Errors
    /// Only what the builder reports; with predecessors always earlier, none is expected. On an
    /// error the task being built is dropped.
    ///
    /// # Panics
    /// If a task is open in `b`, or if the builder would exceed `u32::MAX - 1` tasks (see
    /// [`Shape::fits`]).
    pub fn build<B: ExplicitEdges>(&self, b: &mut B) -> Result<(), BuildError> {
        let base = u32::try_from(b.tasks_added()).expect("builder holds fewer than 2^32 tasks");
        let t = |i: u32| TaskId(base + i);
        match *self {
            Shape::LinearChain(n) => {
                for i in 0..n {
                    match i {
                        0 => emit(b, &[])?,
                        _ => emit(b, &[t(i - 1)])?,
                    }
                }
            }
            Shape::BinaryTree(_) => {
                let n = u32::try_from(self.tasks_u64()).expect("tree of fewer than 2^32 tasks");
                for i in 0..n {
                    match i {
                        0 => emit(b, &[])?,
                        _ => emit(b, &[t((i - 1) / 2)])?,
                    }
                }
            }
            Shape::Independent(n) => {
                for _ in 0..n {
                    emit(b, &[])?;
                }
            }
            Shape::Wavefront(side) => {
                let mut id = 0;
                for i in 0..side {
                    for j in 0..side {
                        match (i > 0, j > 0) {
                            (false, false) => emit(b, &[])?,
                            (false, true) => emit(b, &[t(id - 1)])?,
                            (true, false) => emit(b, &[t(id - side)])?,
                            (true, true) => emit(b, &[t(id - side), t(id - 1)])?,
                        }
                        id += 1;
                    }
                }
            }
            Shape::RandomLevels {
                levels,
                width,
                seed,
            } => {
                let mut picks = [0u32; MAX_RANDOM_PREDS];
                let mut preds = [TaskId(0); MAX_RANDOM_PREDS];
                let first = if levels > 0 { width } else { 0 };
                for _ in 0..first {
                    emit(b, &[])?;
                }
                for l in 1..levels {
                    let prev = base + (l - 1) * width;
                    for k in 0..width {
                        let task = l as u64 * width as u64 + k as u64;
                        let n = random_preds(seed, width, task, &mut picks);
                        for (p, &q) in preds.iter_mut().zip(&picks[..n]) {
                            *p = TaskId(q + prev);
                        }
                        emit(b, &preds[..n])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The shape as a finished [`TaskGraphStorage`]: [`Shape::build`] into an
    /// [`ExplicitBuilder`], then `finish` (CSR fan-out). The same graph as building it into a
    /// [`GraphBuilder`] with no TensorMap and finishing that.
    ///
    /// # Panics
    /// If the shape does not [fit](Shape::fits).
    pub fn storage(&self) -> TaskGraphStorage {
        let mut b = ExplicitBuilder::new();
        b.reserve(self.tasks());
        self.build(&mut b)
            .expect("explicit dependencies on earlier tasks never fail");
        b.finish()
    }

    /// The predecessors of every task, sorted, as plain vectors: a naive reference adjacency for
    /// tests, computed apart from [`Shape::build`] (only the random draw is shared).
    pub fn preds(&self) -> Vec<Vec<u32>> {
        let n = self.tasks();
        let mut preds = vec![Vec::new(); n];
        match *self {
            Shape::LinearChain(_) => {
                for (i, p) in preds.iter_mut().enumerate().skip(1) {
                    p.push(i as u32 - 1);
                }
            }
            Shape::BinaryTree(_) => {
                for parent in 0..n {
                    for child in [2 * parent + 1, 2 * parent + 2] {
                        if child < n {
                            preds[child].push(parent as u32);
                        }
                    }
                }
            }
            Shape::Independent(_) => {}
            Shape::Wavefront(side) => {
                let s = side as usize;
                let at = |i: usize, j: usize| (i * s + j) as u32;
                for i in 0..s {
                    for j in 0..s {
                        let p = &mut preds[i * s + j];
                        if i > 0 {
                            p.push(at(i - 1, j));
                        }
                        if j > 0 {
                            p.push(at(i, j - 1));
                        }
                        p.sort_unstable();
                    }
                }
            }
            Shape::RandomLevels { width, seed, .. } => {
                let w = width as usize;
                let mut picks = [0u32; MAX_RANDOM_PREDS];
                for (t, p) in preds.iter_mut().enumerate().skip(w) {
                    let level = t / w;
                    let k = random_preds(seed, width, t as u64, &mut picks);
                    p.extend(picks[..k].iter().map(|&q| ((level - 1) * w) as u32 + q));
                    p.sort_unstable();
                }
            }
        }
        preds
    }
}

/// One task of a shape (kernel 0, host CPU, any pool), after `preds`.
#[inline]
fn emit<B: ExplicitEdges>(b: &mut B, preds: &[TaskId]) -> Result<(), BuildError> {
    const TASK: ExplicitTask = ExplicitTask::host(0);
    b.add_explicit(&TASK, preds).map(|_| ())
}

/// The generator state of task `t` of a random level graph (SplitMix64: the state advances by
/// the golden-ratio increment, each output is [`splitmix64`] of it).
struct Draws(u64);

impl Draws {
    #[inline]
    fn new(seed: u64, t: u64) -> Draws {
        Draws(splitmix64(seed ^ splitmix64(t)))
    }

    #[inline]
    fn next(&mut self) -> u64 {
        let r = splitmix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        r
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for `n < 2^32`).
    #[inline]
    fn below(&mut self, n: u32) -> u32 {
        ((self.next() as u128 * n as u128) >> 64) as u32
    }
}

/// How many predecessors task `t` (past level 0) of a random level graph gets.
#[inline]
fn random_pred_count(seed: u64, width: u32, t: u64) -> usize {
    Draws::new(seed, t).below(width.min(MAX_RANDOM_PREDS as u32)) as usize + 1
}

/// Task `t`'s predecessors as distinct positions `0..width` in the previous level, written to
/// `out`; returns how many (Floyd's sampling: `k` draws for `k` distinct picks). The first draw
/// is the count, as in [`random_pred_count`].
#[inline]
fn random_preds(seed: u64, width: u32, t: u64, out: &mut [u32; MAX_RANDOM_PREDS]) -> usize {
    let mut d = Draws::new(seed, t);
    let k = d.below(width.min(MAX_RANDOM_PREDS as u32)) + 1;
    for (n, j) in (width - k..width).enumerate() {
        let r = d.below(j + 1);
        out[n] = if out[..n].contains(&r) { j } else { r };
    }
    k as usize
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Shape::LinearChain(n) | Shape::Independent(n) => write!(f, "{}:{n}", self.kind()),
            Shape::BinaryTree(levels) => write!(f, "tree:{levels}"),
            Shape::Wavefront(side) => write!(f, "wavefront:{side}"),
            Shape::RandomLevels {
                levels,
                width,
                seed,
            } => {
                write!(f, "random:{levels}:{width}")?;
                if seed != DEFAULT_SEED {
                    write!(f, ":{seed}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why a shape's text did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseShapeError {
    /// Not one of the five keywords.
    #[error(
        "unknown shape `{0}`; expected chain:N, tree:LEVELS, independent:N, wavefront:SIDE or \
         random:LEVELS:WIDTH[:SEED]"
    )]
    UnknownKind(String),
    /// The wrong number of `:`-separated numbers.
    #[error("`{text}`: expected {expected}")]
    Arity {
        /// The text.
        text: String,
        /// The syntax of that shape.
        expected: &'static str,
    },
    /// A field that is not a decimal number of the right range.
    #[error("`{text}`: `{field}` is not a number in 0..={max}")]
    Number {
        /// The text.
        text: String,
        /// The field.
        field: String,
        /// The largest value allowed.
        max: u64,
    },
    /// More tasks or edges than the builder can number.
    #[error("`{text}`: more than {MAX_TASKS} tasks or {MAX_EDGES} edges")]
    TooLarge {
        /// The text.
        text: String,
    },
}

impl FromStr for Shape {
    type Err = ParseShapeError;

    /// Parses the `Display` syntax: `chain:N`, `tree:LEVELS`, `independent:N`,
    /// `wavefront:SIDE`, `random:LEVELS:WIDTH` or `random:LEVELS:WIDTH:SEED` (decimal numbers;
    /// zero is allowed and gives an empty graph).
    fn from_str(text: &str) -> Result<Shape, ParseShapeError> {
        let mut fields = text.split(':');
        let kind = fields.next().unwrap_or_default();
        let nums: Vec<&str> = fields.collect();
        let num = |field: &str, max: u64| -> Result<u64, ParseShapeError> {
            field
                .parse::<u64>()
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| ParseShapeError::Number {
                    text: text.to_string(),
                    field: field.to_string(),
                    max,
                })
        };
        let arity = |expected: &'static str| ParseShapeError::Arity {
            text: text.to_string(),
            expected,
        };
        let u = u32::MAX as u64;
        let shape = match (kind, nums.as_slice()) {
            ("chain", [n]) => Shape::LinearChain(num(n, u)? as u32),
            ("chain", _) => return Err(arity("chain:N")),
            ("tree", [l]) => Shape::BinaryTree(num(l, 63)? as u32),
            ("tree", _) => return Err(arity("tree:LEVELS")),
            ("independent", [n]) => Shape::Independent(num(n, u)? as u32),
            ("independent", _) => return Err(arity("independent:N")),
            ("wavefront", [s]) => Shape::Wavefront(num(s, u)? as u32),
            ("wavefront", _) => return Err(arity("wavefront:SIDE")),
            ("random", [l, w]) | ("random", [l, w, _]) => Shape::RandomLevels {
                levels: num(l, u)? as u32,
                width: num(w, u)? as u32,
                seed: match nums.get(2) {
                    Some(s) => num(s, u64::MAX)?,
                    None => DEFAULT_SEED,
                },
            },
            ("random", _) => return Err(arity("random:LEVELS:WIDTH[:SEED]")),
            _ => return Err(ParseShapeError::UnknownKind(kind.to_string())),
        };
        if !shape.fits() {
            return Err(ParseShapeError::TooLarge {
                text: text.to_string(),
            });
        }
        Ok(shape)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Size::Quick => "quick",
            Size::Full => "full",
        })
    }
}

impl FromStr for Size {
    type Err = String;

    /// `quick` or `full`.
    fn from_str(s: &str) -> Result<Size, String> {
        match s {
            "quick" => Ok(Size::Quick),
            "full" => Ok(Size::Full),
            _ => Err(format!("unknown size `{s}`; expected quick or full")),
        }
    }
}
