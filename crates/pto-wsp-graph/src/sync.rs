//! The one door through which the runtime reaches atomics, so that `--cfg loom` builds swap in
//! loom's model-checked versions. Nothing else in the crate may name `std::sync::atomic` or
//! `std::sync::{Mutex, Condvar}` directly.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
