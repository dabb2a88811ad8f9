//! The one error type of Plan-Descriptor-Execute. Every mistake a caller can make — a space that
//! does not fit, a descriptor field out of range, a tier with no kernel, a workspace overflow, a
//! kernel that fails — is a variant that names the space, field or tier involved, so nothing in
//! this crate panics on bad input.

/// What went wrong while building, planning, generating or dispatching.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PdeError {
    /// A space was declared or bound inconsistently.
    #[error("space `{space}`: {problem}")]
    Space {
        /// The space.
        space: String,
        /// What is wrong, naming the axis.
        problem: String,
    },
    /// A tier table is malformed.
    #[error("tiers `{tiers}`: {problem}")]
    Tiers {
        /// The tier table.
        tiers: String,
        /// What is wrong, naming the tier.
        problem: String,
    },
    /// A descriptor's field does not fit its declared range.
    #[error(
        "space `{space}`: descriptor field `{field}` = {value} is out of range (must be below {limit})"
    )]
    FieldOutOfRange {
        /// The space the descriptor belongs to.
        space: String,
        /// The field (an axis name, `tier`, `end` or a user field).
        field: String,
        /// The value emitted.
        value: u64,
        /// The exclusive upper bound.
        limit: u64,
    },
    /// A kernel asked for a descriptor field the layout does not have.
    #[error("space `{space}`: the descriptor has no field `{field}` (fields: {known})")]
    UnknownField {
        /// The space.
        space: String,
        /// The field asked for.
        field: String,
        /// The fields it has.
        known: String,
    },
    /// A tier that descriptors may name has no kernel bound to it.
    #[error("space `{space}`: tier `{tier}` (index {index}) of `{tiers}` has no kernel")]
    NoKernel {
        /// The space.
        space: String,
        /// The tier table.
        tiers: String,
        /// The tier's name.
        tier: String,
        /// The tier's index.
        index: u32,
    },
    /// A launch was given more or fewer kernels than its tier table has tiers.
    #[error("space `{space}`: {given} kernels given for the {tiers} tiers of `{table}`")]
    KernelCount {
        /// The space.
        space: String,
        /// The tier table.
        table: String,
        /// Tiers in the table.
        tiers: usize,
        /// Kernels given.
        given: usize,
    },
    /// A workspace allocation does not fit the planned workspace.
    #[error(
        "space `{space}`: workspace overflow allocating {needed} elements for tier `{tier}` at \
         indices {indices:?}: {used} of {capacity} already used"
    )]
    WorkspaceOverflow {
        /// The space.
        space: String,
        /// The tier whose workspace size was asked for.
        tier: String,
        /// The descriptor indices the slot was for.
        indices: Vec<u32>,
        /// Elements asked for.
        needed: u64,
        /// Elements already allocated.
        used: u64,
        /// The workspace's capacity in elements.
        capacity: u64,
    },
    /// A buffer access fell outside the buffer.
    #[error("buffer `{buffer}`: elements {start}..{end} are outside its {len} elements")]
    BufferRange {
        /// The buffer.
        buffer: String,
        /// First element.
        start: u64,
        /// One past the last element.
        end: u64,
        /// The buffer's length.
        len: u64,
    },
    /// A kernel reported a failure for one descriptor.
    #[error(
        "space `{space}`: kernel of tier `{tier}` failed on descriptor {descriptor}: {message}"
    )]
    Kernel {
        /// The space.
        space: String,
        /// The tier whose kernel ran.
        tier: String,
        /// The descriptor (its `Debug` form).
        descriptor: String,
        /// The kernel's message.
        message: String,
    },
    /// The planner was given metadata it cannot plan for.
    #[error("planner: {0}")]
    Plan(String),
    /// A launch's configuration is unusable (no dispatch thread, an empty queue).
    #[error("space `{space}`: {problem}")]
    Launch {
        /// The space.
        space: String,
        /// What is wrong.
        problem: String,
    },
    /// The launch's admission check refused a descriptor before it was queued
    /// ([`crate::Launch::admit`]).
    #[error("{problem}")]
    Refused {
        /// The space.
        space: String,
        /// What the check found.
        problem: String,
    },
    /// A `core_group` affinity asks for more dispatch threads than the launch has (or none).
    #[error(
        "space `{space}`: affinity on axis `{axis}`: core_group({size}) needs 1 to {threads} \
         threads (the dispatch threads)"
    )]
    Affinity {
        /// The space.
        space: String,
        /// The axis the affinity is declared on.
        axis: String,
        /// The requested group size.
        size: u32,
        /// The launch's dispatch threads.
        threads: usize,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, PdeError>;
