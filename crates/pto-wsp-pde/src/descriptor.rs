//! The work descriptor (the PDE specification's `WorkDescriptor`): what one unit of work is, in a
//! fixed `#[repr(C)]` layout of 36 bytes known at compile time — the tier, the iteration indices,
//! the bounds, the workspace offset and a few user fields, no pointers. A task of the task-graph
//! runtime carries a 44-byte `TaskNode` plus a 44-byte `TaskIo` per region and 8 bytes per scalar
//! param: 324 bytes for the decode chunk (6 regions, 2 params), 9× more (`docs/BENCHMARKS.md`).
//! Kernels read fields as scalars, either directly or by name through a [`Layout`] resolved once
//! before the run.

use crate::error::{PdeError, Result};

/// Most axes a space (and so a descriptor) has.
pub const MAX_AXES: usize = 3;
/// Number of user fields in a descriptor.
pub const MAX_USER: usize = 2;

/// One unit of work. `Copy`, 4-byte aligned, [`Descriptor::BYTES`] bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// Tier index into the launch's tier table: which kernel runs.
    pub tier: u32,
    /// Iteration index per axis of the space (unused axes 0).
    pub indices: [u32; MAX_AXES],
    /// First element of the work's range (e.g. the first KV position of a chunk).
    pub start: u32,
    /// One past its last element.
    pub end: u32,
    /// Offset of the work's workspace slot, in elements ([`NO_WORKSPACE`]: none).
    pub workspace: u32,
    /// User fields, named by the launch's [`Layout`].
    pub user: [u32; MAX_USER],
}

/// `Descriptor::workspace` of work that has no workspace slot.
pub const NO_WORKSPACE: u32 = u32::MAX;

/// `Descriptor::tier` of a prefetch descriptor (`prefetch(axis, depth)`,
/// [`crate::Emitter::prefetch`]): not a tier of any table; the launch runs its prefetch hook.
pub const PREFETCH_TIER: u32 = u32::MAX;

impl Descriptor {
    /// Size in bytes, fixed at compile time.
    pub const BYTES: usize = std::mem::size_of::<Descriptor>();
}

/// Which scalar a [`Layout`] field name stands for, resolved once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `tier`.
    Tier,
    /// An axis index, by axis position.
    Index(usize),
    /// `start`.
    Start,
    /// `end`.
    End,
    /// `workspace`.
    Workspace,
    /// A user field, by position.
    User(usize),
}

impl Field {
    /// This field of `d`.
    #[inline]
    pub fn get(self, d: &Descriptor) -> u32 {
        match self {
            Field::Tier => d.tier,
            Field::Index(k) => d.indices[k],
            Field::Start => d.start,
            Field::End => d.end,
            Field::Workspace => d.workspace,
            Field::User(k) => d.user[k],
        }
    }
}

/// The names of a descriptor's fields in one space: its axes and its user fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    space: String,
    axes: Vec<String>,
    user: Vec<String>,
}

impl Layout {
    /// The layout of space `space` with axes `axes` and user fields `user` (at most
    /// [`MAX_USER`], names distinct from the axes' and the fixed fields').
    pub fn new(space: &str, axes: &[&str], user: &[&str]) -> Result<Layout> {
        let err = |problem: String| PdeError::Space {
            space: space.to_string(),
            problem,
        };
        if axes.len() > MAX_AXES {
            return Err(err(format!(
                "a descriptor holds at most {MAX_AXES} indices"
            )));
        }
        if user.len() > MAX_USER {
            return Err(err(format!(
                "a descriptor holds at most {MAX_USER} user fields, {} given",
                user.len()
            )));
        }
        let fixed = ["tier", "start", "end", "workspace"];
        let all: Vec<&str> = fixed.iter().chain(axes).chain(user).copied().collect();
        for (i, n) in all.iter().enumerate() {
            if all[..i].contains(n) {
                return Err(err(format!("descriptor field `{n}` is named twice")));
            }
        }
        Ok(Layout {
            space: space.to_string(),
            axes: axes.iter().map(|s| s.to_string()).collect(),
            user: user.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// The field called `name`; an error listing the fields if there is none.
    pub fn field(&self, name: &str) -> Result<Field> {
        let f = match name {
            "tier" => Some(Field::Tier),
            "start" => Some(Field::Start),
            "end" => Some(Field::End),
            "workspace" => Some(Field::Workspace),
            _ => self
                .axes
                .iter()
                .position(|a| a == name)
                .map(Field::Index)
                .or_else(|| self.user.iter().position(|u| u == name).map(Field::User)),
        };
        f.ok_or_else(|| PdeError::UnknownField {
            space: self.space.clone(),
            field: name.to_string(),
            known: ["tier", "start", "end", "workspace"]
                .into_iter()
                .chain(self.axes.iter().map(String::as_str))
                .chain(self.user.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The name of user field `k`.
    pub fn user_name(&self, k: usize) -> Option<&str> {
        self.user.get(k).map(String::as_str)
    }
}
