//! A count of resolutions, for the test that holds "a program is resolved once" (feature
//! `resolution-count`, turned on by the tests that read it).
//!
//! Why: the invariant is about calls, which no type can enforce; a test compiles and runs
//! programs through every path and checks that the count went up by one per program.

use std::sync::atomic::{AtomicU64, Ordering};

static RESOLUTIONS: AtomicU64 = AtomicU64::new(0);

/// Counts one call of [`super::resolve`].
pub(super) fn resolved() {
    RESOLUTIONS.fetch_add(1, Ordering::Relaxed);
}

/// How many times this process has resolved a module.
pub fn resolutions() -> u64 {
    RESOLUTIONS.load(Ordering::Relaxed)
}
