//! A shared `f32` buffer that many dispatch threads write at disjoint offsets without `unsafe`:
//! each element is an `AtomicU32` holding the float's bits, stored and loaded `Relaxed` (plain
//! moves on x86_64). The plan gives every descriptor its own offsets; the end of a launch (its
//! threads joined) orders every write before any later read. Accesses are range-checked and
//! fail with an error naming the buffer.

use crate::error::{PdeError, Result};
use std::sync::atomic::{AtomicU32, Ordering};

/// A named, fixed-length `f32` buffer shared by kernels.
#[derive(Debug)]
pub struct Buffer {
    name: String,
    data: Box<[AtomicU32]>,
}

impl Buffer {
    /// `len` zeros called `name`.
    pub fn zeros(name: &str, len: usize) -> Buffer {
        Buffer {
            name: name.to_string(),
            data: (0..len).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn range(&self, offset: usize, n: usize) -> Result<&[AtomicU32]> {
        offset
            .checked_add(n)
            .and_then(|end| self.data.get(offset..end))
            .ok_or_else(|| PdeError::BufferRange {
                buffer: self.name.clone(),
                start: offset as u64,
                end: offset as u64 + n as u64,
                len: self.data.len() as u64,
            })
    }

    /// Writes `values` at `offset`.
    pub fn write(&self, offset: usize, values: &[f32]) -> Result<()> {
        for (cell, v) in self.range(offset, values.len())?.iter().zip(values) {
            cell.store(v.to_bits(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads `out.len()` elements from `offset`.
    pub fn read(&self, offset: usize, out: &mut [f32]) -> Result<()> {
        for (cell, v) in self.range(offset, out.len())?.iter().zip(out) {
            *v = f32::from_bits(cell.load(Ordering::Relaxed));
        }
        Ok(())
    }

    /// A copy of every element.
    pub fn to_vec(&self) -> Vec<f32> {
        self.data
            .iter()
            .map(|c| f32::from_bits(c.load(Ordering::Relaxed)))
            .collect()
    }
}
